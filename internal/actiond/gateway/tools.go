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
)

// Runner runs one tool call beneath a request: it records the call (and the
// calls beneath it) through Call.Record and returns what it answered.
type Runner interface {
	Call(ctx context.Context, call *engine.Call) engine.Outcome
}

func (h *Handler) listTools(ctx context.Context, ex *exchange) (*mcp.ListToolsResult, error) {
	res := &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	offered := []map[string]any{}
	for _, t := range ex.server.Tools {
		if t.Unavailable != nil {
			continue
		}
		tool := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Annotations: t.Annotations}
		if t.OutputSchema != nil {
			tool.OutputSchema = t.OutputSchema
		}
		res.Tools = append(res.Tools, tool)
		offered = append(offered, map[string]any{"name": t.Name, "actionId": t.Target.ID, "version": t.Target.Version, "native": t.Target.Native})
	}
	ex.setInvocation("tools", offered)
	res.TTLMs, res.CacheScope = 60_000, "private"
	return res, nil
}

func (s *Server) tool(name string) *Tool {
	for _, t := range s.Tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func (h *Handler) callTool(ctx context.Context, ex *exchange, params *mcp.CallToolParamsRaw) (*mcp.CallToolResult, error) {
	if params == nil {
		rerr := newError(codeInvalidParams, errBadRequest, http.StatusBadRequest, nil)
		ex.fail(rerr)
		return nil, rerr.jsonrpc()
	}
	tool := ex.server.tool(params.Name)
	if tool == nil {
		rerr := newError(codeInvalidParams, errToolNotDeclared, http.StatusBadRequest, map[string]any{"tool": params.Name})
		ex.fail(rerr)
		return nil, rerr.jsonrpc()
	}
	result := h.runTool(ctx, ex, tool, params.Arguments)
	if ctx.Err() == context.DeadlineExceeded {
		return nil, ctx.Err() // the middleware answers mcp_request_deadline
	}
	output := map[string]any{"isError": result.IsError}
	if failure, ok := toolErrors.Of(result); ok {
		// Why the external agent got a tool error, also when no call ran
		// (a missing intent, a closed session).
		output["error"] = map[string]any{"code": failure.Code, "message": failure.Message}
	}
	ex.setInvocation("output", output)
	return result, nil
}

func (h *Handler) runTool(ctx context.Context, ex *exchange, tool *Tool, rawArgs json.RawMessage) *mcp.CallToolResult {
	if tool.Unavailable != nil {
		return failureResult(tool.Unavailable)
	}
	args := map[string]any{}
	if len(rawArgs) > 0 && string(rawArgs) != "null" {
		if err := json.Unmarshal(rawArgs, &args); err != nil {
			return toolError(errInputInvalid, "The arguments must be a JSON object.", "Pass the tool's arguments as an object.")
		}
	}
	args, failure := ex.takeIntent(args)
	if failure != nil {
		return failureResult(failure)
	}
	args, failure = ex.applyFixed(ctx, tool, args)
	if failure != nil {
		return failureResult(failure)
	}
	ex.ensureWork(h)
	call := &engine.Call{
		Account: ex.account, Who: ex.who, Layers: ex.server.Layers, Target: tool.Target, Compiled: tool.Compiled, Input: args,
		ParentID: ex.executionID, Work: ex.work, Preview: ex.server.Preview, Record: ex.recordCall,
	}
	out := h.opts.Runner.Call(ctx, call)
	if out.Failure != nil {
		return failureResult(out.Failure)
	}
	ex.addUse(store.Use{Kind: store.UseTool, Ref: out.ExecutionID})
	return toolResult(out.Output)
}

// takeIntent removes the stated intent from the arguments and keeps it for
// the request's record; under REQUIRED a call without one is refused.
func (ex *exchange) takeIntent(args map[string]any) (map[string]any, *engine.Failure) {
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
		return nil, engine.NewFailure(code, message, "Add an intent argument of 1 to 1,024 characters saying why you make this call, and call again.")
	}
	if intent != "" {
		ex.setInvocation("intent", intent)
	}
	return rest, nil
}

// applyFixed evaluates the reference's fixed input, whose values replace
// whatever the agent sent.
func (ex *exchange) applyFixed(ctx context.Context, tool *Tool, args map[string]any) (map[string]any, *engine.Failure) {
	var sessionInput map[string]any
	json.Unmarshal(ex.sessionInput, &sessionInput)
	scope := action.Scope{Request: ex.requestRecord(), SessionID: ex.session.ID, SessionInput: sessionInput}
	out, err := ex.server.Compiled.ApplyFixedInput(ctx, tool.Ref, scope, args)
	if err != nil {
		return nil, engine.NewFailure(engine.CodeCELEvaluation, "The server's fixed input for this tool could not be evaluated.",
			"Ask the server's owner to fix the tool reference's fixed input.").WithDetail(err.Error())
	}
	return out, nil
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
