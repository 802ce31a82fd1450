package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// Runner runs one tool call beneath a request, and answers with what it
// answered and every execution it recorded (Outcome.Recorded); or, for a
// callable agent, starts it as a task.
type Runner interface {
	Call(ctx context.Context, call *engine.Call) engine.Outcome
	StartTask(ctx context.Context, call *engine.Call) (engine.Task, *engine.Failure)
}

func (h *Handler) listTools(ex *exchange, rec *record) mcp.Result {
	res := &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	rec.invocation.Tools = []offeredTool{}
	for _, t := range ex.server.Tools {
		if t.Unavailable != nil {
			continue
		}
		tool := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Annotations: t.Annotations}
		if t.OutputSchema != nil {
			tool.OutputSchema = t.OutputSchema
		}
		res.Tools = append(res.Tools, tool)
		rec.invocation.Tools = append(rec.invocation.Tools, offeredTool{Name: t.Name, ActionID: t.Target.ID, Version: t.Target.Version, Native: t.Target.Native})
	}
	res.TTLMs, res.CacheScope = 60_000, "private"
	return ex.complete(res)
}

func (s *Server) tool(name string) *Tool {
	for _, t := range s.Tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// callTool answers tools/call: the tool's call, a callable agent's task,
// or a tool error.
func (h *Handler) callTool(ctx context.Context, ex *exchange, rec *record) (mcp.Result, *rpcError) {
	name := ex.req.param("name")
	tool := ex.server.tool(name)
	if tool == nil {
		return nil, rec.fail(newError(codeInvalidParams, errToolNotDeclared, http.StatusBadRequest, map[string]any{"tool": name}))
	}
	arguments := ex.req.params["arguments"]
	if tool.Unavailable == nil && tool.Target.Definition.IsCallableAgent() {
		return h.callAgent(ctx, ex, rec, tool, arguments)
	}
	result, task := h.runTool(ctx, ex, rec, tool, arguments)
	if ctx.Err() == context.DeadlineExceeded {
		return nil, rec.fail(ex.deadlineError())
	}
	if task == nil {
		rec.invocation.Output = callOutput(result, "")
		return ex.callResult(result), nil
	}
	// An invoke of an agent started a task: a client with the Tasks
	// extension gets the task itself, one without the invoke's answer
	// naming it (ACT-445, ACT-447).
	rec.invocation.Output = callOutput(result, task.ID)
	if ex.req.hasExtension(mcpkit.TasksExtension) {
		return mcpkit.NewCreateTaskResult(task.Wire()), nil
	}
	return ex.callResult(result), nil
}

// callResult is a tools/call result as the request's revision sends it:
// 2026-07-28 requires resultType on every tools/call result.
func (ex *exchange) callResult(res *mcp.CallToolResult) mcp.Result {
	return ex.complete(res)
}

// toolOutput is what the request's invocation keeps of a tools/call's
// answer: whether the external agent got a tool error and why, also when
// no call ran (a missing intent, a closed session), and the task a call
// started.
type toolOutput struct {
	Error   *toolOutputError `json:"error,omitempty"`
	IsError bool             `json:"isError"`
	Task    string           `json:"task,omitempty"`
}

type toolOutputError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func callOutput(result *mcp.CallToolResult, task string) toolOutput {
	output := toolOutput{IsError: result != nil && result.IsError, Task: task}
	if failure, ok := toolErrors.Of(result); ok {
		output.Error = &toolOutputError{Code: failure.Code, Message: failure.Message}
	}
	return output
}

// runTool runs one call, and says which task it started, if any: an
// invoke of a callable agent starts one.
func (h *Handler) runTool(ctx context.Context, ex *exchange, rec *record, tool *Tool, arguments any) (*mcp.CallToolResult, *engine.Task) {
	if tool.Unavailable != nil {
		return failureResult(tool.Unavailable), nil
	}
	args, failure := ex.arguments(ctx, rec, tool, arguments)
	if failure != nil {
		return failureResult(failure), nil
	}
	out := h.opts.Runner.Call(ctx, ex.newCall(rec, tool, args))
	rec.addCalls(out.Recorded)
	if out.Task != nil {
		rec.tasks = append(rec.tasks, out.Task.ID)
	}
	if out.Failure != nil {
		return failureResult(out.Failure), nil
	}
	rec.addUse(store.Use{Kind: store.UseTool, Ref: out.ExecutionID})
	for _, used := range out.Used {
		rec.addUse(store.Use{Kind: store.UseTool, Ref: used})
	}
	return toolResult(out.Output), out.Task
}

// arguments are a call's effective arguments: stated intent taken out and
// recorded, fixed input applied, in one copy of what the agent sent.
func (ex *exchange) arguments(ctx context.Context, rec *record, tool *Tool, arguments any) (map[string]any, *engine.Failure) {
	args, ok := arguments.(map[string]any)
	if arguments != nil && !ok {
		return nil, engine.NewFailure(errInputInvalid, "The arguments must be a JSON object.", "Pass the tool's arguments as an object.")
	}
	if args == nil {
		args = map[string]any{}
	}
	intent, rest, failure := ex.takeIntent(args)
	if failure != nil {
		return nil, failure
	}
	if intent != "" {
		rec.invocation.Intent = intent
	}
	return ex.applyFixed(ctx, tool, rest)
}

// newCall is a call of tool beneath the request.
func (ex *exchange) newCall(rec *record, tool *Tool, args map[string]any) *engine.Call {
	if rec.work == nil {
		rec.work = ex.h.opts.Store.NewWork(ex.account)
	}
	return &engine.Call{
		Account: ex.account, Who: ex.who, Layers: ex.server.Layers, Target: tool.Target, Compiled: tool.Compiled, Input: args,
		ParentID: ex.executionID, Work: rec.work, Preview: ex.server.Preview,
		Server:    engine.ServerRef{ID: ex.server.ActionID, Version: ex.server.Version, Name: ex.server.Name},
		SessionID: ex.session.ID,
		Offer:     offer{ex},
		// What a client can read decides whether invoke may start an agent.
		TasksExtension: ex.req.hasExtension(mcpkit.TasksExtension),
		TaskTools:      ex.server.offersTaskTools(),
		Tasks:          ex.tasks,
	}
}

// offer is the request's server as the calls beneath the request reach it:
// a program's tools, and the reference an invoke goes through.
type offer struct{ ex *exchange }

func offered(t *Tool) engine.Offered {
	return engine.Offered{Name: t.Name, Ref: t.Ref, Target: t.Target, Compiled: t.Compiled}
}

func (o offer) Tool(name string) (engine.Offered, bool) {
	t := o.ex.server.tool(name)
	if t == nil || t.Unavailable != nil {
		return engine.Offered{}, false
	}
	return offered(t), true
}

func (o offer) ToolFor(id string) (engine.Offered, bool) {
	for _, t := range o.ex.server.Tools {
		if !t.Target.Native && t.Target.ID == id && t.Unavailable == nil {
			return offered(t), true
		}
	}
	return engine.Offered{}, false
}

func (o offer) FixedInput(ctx context.Context, ref int, arguments map[string]any) (map[string]any, error) {
	return o.ex.server.Compiled.ApplyFixedInput(ctx, ref, o.ex.fixedScope(), arguments)
}

// callAgent starts a callable agent as a task (ACT-135, ACT-136): to a
// client with the Tasks extension it answers with the task; to one without,
// on a server that lists get_task and cancel_task, with a tool result
// naming the task; anywhere else it is refused with -32021 and starts
// nothing. The request records no call and no use.
func (h *Handler) callAgent(ctx context.Context, ex *exchange, rec *record, tool *Tool, arguments any) (mcp.Result, *rpcError) {
	extension := ex.req.hasExtension(mcpkit.TasksExtension)
	if !extension && !ex.server.offersTaskTools() {
		return nil, rec.fail(newError(codeMissingCapability, errTaskRequired, http.StatusBadRequest, map[string]any{"requiredCapabilities": mcpkit.RequiredTasks()}))
	}
	args, failure := ex.arguments(ctx, rec, tool, arguments)
	if failure == nil {
		var task engine.Task
		task, failure = h.opts.Runner.StartTask(ctx, ex.newCall(rec, tool, args))
		if failure == nil {
			rec.tasks = append(rec.tasks, task.ID)
			if extension {
				rec.invocation.Output = callOutput(nil, task.ID)
				return mcpkit.NewCreateTaskResult(task.Wire()), nil
			}
			result := taskText(task, ex.server.Preview)
			rec.invocation.Output = callOutput(result, task.ID)
			return ex.callResult(result), nil
		}
	}
	if failure.Code == engine.CodeFailure {
		h.opts.Logger.Error("start task", "execution", ex.executionID, "tool", tool.Name, "detail", failure.Detail)
	}
	result := failureResult(failure)
	rec.invocation.Output = callOutput(result, "")
	return ex.callResult(result), nil
}

// taskText is a started task told to a client without the Tasks extension.
func taskText(task engine.Task, preview bool) *mcp.CallToolResult {
	hint := "It runs on its own. Read it with get_task, passing task_id, every poll_interval_ms, or with tasks/get when your client has the Tasks extension."
	if preview {
		hint = "It runs on its own, and nothing it does is committed. Read it with get_task, passing task_id, every poll_interval_ms, or with tasks/get when your client has the Tasks extension."
	}
	body, _ := json.Marshal(map[string]any{"task_id": task.ID, "status": string(task.WireStatus()), "poll_interval_ms": engine.TaskPollInterval.Milliseconds(), "hint": hint})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}}
}

// offersTaskTools says whether the server lists both get_task and
// cancel_task, so that a client without the Tasks extension can read and
// cancel what it starts.
func (s *Server) offersTaskTools() bool {
	for _, name := range []string{action.NativeGetTask, action.NativeCancelTask} {
		if t := s.tool(name); t == nil || t.Unavailable != nil {
			return false
		}
	}
	return true
}

// takeIntent removes the stated intent from the arguments, in a copy;
// under REQUIRED a call without one is refused.
func (ex *exchange) takeIntent(args map[string]any) (string, map[string]any, *engine.Failure) {
	intent, rest, err := action.SplitIntent(args, ex.server.Intent)
	if err != nil {
		code := errIntentInvalid
		if _, present := args[action.IntentProperty]; !present {
			code = errIntentRequired
		}
		var aerr *action.Error
		message := err.Error()
		if errors.As(err, &aerr) {
			message = aerr.Message
		}
		return "", nil, engine.NewFailure(code, message, "Add an intent argument of 1 to 1,024 characters saying why you make this call, and call again.")
	}
	return intent, rest, nil
}

// applyFixed evaluates the reference's fixed input, whose values replace
// whatever the agent sent.
func (ex *exchange) applyFixed(ctx context.Context, tool *Tool, args map[string]any) (map[string]any, *engine.Failure) {
	out, err := ex.server.Compiled.ApplyFixedInput(ctx, tool.Ref, ex.fixedScope(), args)
	if err != nil {
		return nil, engine.NewFailure(engine.CodeCELEvaluation, "The server's fixed input for this tool could not be evaluated.",
			"Ask the server's owner to fix the tool reference's fixed input.").WithDetail(err.Error())
	}
	return out, nil
}

// fixedScope is what the server's fixed input reads: the request, and the
// session's id and input.
func (ex *exchange) fixedScope() action.Scope {
	return action.Scope{Request: ex.input, SessionID: ex.session.ID, SessionInput: ex.sessionValues}
}

// toolResult renders a call's output: an object as structuredContent, and
// always as text for the model.
func toolResult(output any) *mcp.CallToolResult {
	res := &mcp.CallToolResult{}
	text, isString := output.(string)
	if !isString {
		b, _ := json.Marshal(output)
		text = string(b)
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	if _, isObject := output.(map[string]any); isObject {
		res.StructuredContent = output
	}
	return res
}

// failureResult renders a call's failure as a tool error.
func failureResult(f *engine.Failure) *mcp.CallToolResult {
	return toolError(f.Code, f.Message, f.Hint)
}
