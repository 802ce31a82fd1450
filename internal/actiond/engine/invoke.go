package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// The native tool invoke runs one of your tools or callable agents on an
// input the external agent chooses: a stored version, a disabled one, or
// an unpublished draft, previewed (the default) or, for a published and
// enabled version, committed (seed 004, "Invoking an action"). A tool runs
// at once, as the invoke call's own call; an agent starts as a task.

// invokeArgs are the native invoke tool's arguments. The stated intent is
// the server's to add, as for every tool.
type invokeArgs struct {
	ActionID string         `json:"action_id" jsonschema:"The ID of the tool or callable agent to run." pattern:"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"`
	Version  int            `json:"version,omitempty" jsonschema:"A stored version to run; the latest when left out. For a tool this server lists, only the version its reference runs." minimum:"1"`
	Input    map[string]any `json:"input,omitempty" jsonschema:"The action's input; {} when left out."`
	Commit   bool           `json:"commit,omitempty" jsonschema:"true runs a published, enabled version for real, committing its writes; false, the default, previews: nothing it writes commits."`
	Draft    map[string]any `json:"draft,omitempty" jsonschema:"An unpublished definition of the action, in createAction's input form, to preview instead of a stored version. It keeps the action's kind."`
}

// invokeResult is what invoke answers. For a tool: its execution, status,
// output or error, and for a preview its direct calls and the rows it
// would write; for an agent, the task it started. It describes the schema;
// the answer is built as a map.
type invokeResult struct {
	ExecutionID      string         `json:"execution_id,omitempty" jsonschema:"The invoked tool's execution; its whole call tree is readable by it."`
	Status           string         `json:"status" jsonschema:"SUCCEEDED or FAILED for a tool; working for an agent's task." enum:"SUCCEEDED|FAILED|working"`
	Output           any            `json:"output,omitempty" jsonschema:"A tool's output, when it succeeded."`
	Error            *invokeError   `json:"error,omitempty" jsonschema:"Why the tool failed."`
	Calls            []invokeCall   `json:"calls,omitempty" jsonschema:"A preview's direct calls of the tool, in order."`
	Writes           []previewWrite `json:"writes,omitempty" jsonschema:"A preview's rows the tool would write that you may read: table, key and new value."`
	UnreadableWrites int            `json:"unreadable_writes,omitempty" jsonschema:"A preview's rows left out of writes because you may not read them, or because they are deleted." minimum:"0"`
	OmittedWrites    int            `json:"omitted_writes,omitempty" jsonschema:"A preview's rows left out of writes because the result reached its size limit." minimum:"0"`
	TaskID           string         `json:"task_id,omitempty" jsonschema:"An agent's task."`
	PollIntervalMs   int64          `json:"poll_interval_ms,omitempty" jsonschema:"How long to wait before reading the task, in milliseconds."`
	Hint             string         `json:"hint,omitempty" jsonschema:"How to read the task."`
}

type invokeError struct {
	Code    string `json:"code" jsonschema:"The failure's code."`
	Message string `json:"message" jsonschema:"What went wrong; for a Starlark tool led by the traceback of its own source."`
	Hint    string `json:"hint,omitempty" jsonschema:"What to do about it."`
}

// invokeCall is one direct call of an invoked tool.
type invokeCall struct {
	Name        string       `json:"name" jsonschema:"The tool called."`
	Status      string       `json:"status" jsonschema:"How the call ended." enum:"SUCCEEDED|FAILED|CANCELLED"`
	ExecutionID string       `json:"execution_id" jsonschema:"The call's execution."`
	Error       *invokeError `json:"error,omitempty" jsonschema:"Why the call failed."`
	RolledBack  bool         `json:"rolled_back,omitempty" jsonschema:"True when the tool's failure discarded the call's writes."`
}

var invokeTool = mcpkit.NewTool[invokeArgs, invokeResult](mcpkit.Spec{
	Name: action.NativeInvoke,
	Description: "Runs one of your tools or callable agents on an input you choose, to check what you built before anything depends on it. " +
		"Pass action_id, input, and draft (an unpublished definition, createAction's input) or version to run something other than " +
		"the latest version. commit: false, the default, previews: a stored, disabled or draft version runs and nothing it writes commits; " +
		"the answer has its execution_id, status, output or error, its calls and the rows it would write. commit: true runs a published, " +
		"enabled version for real. A callable agent starts as a task, in both modes: read it with get_task or tasks/get.",
	Types: []mcpkit.TypeSchema{jsonObject},
})

// Codes of a refused invocation.
const (
	CodeActionNotFound = "action_not_found"
)

// What invoke answers about a task.
const (
	TaskHint        = "It runs on its own. Read it with get_task, passing task_id, every poll_interval_ms, or with tasks/get when your client has the Tasks extension."
	TaskPreviewHint = "It runs on its own, and nothing it does is committed. Read it with get_task, passing task_id, every poll_interval_ms, or with tasks/get when your client has the Tasks extension."
)

// invocation is what an invoke runs, once every rule allowed it.
type invocation struct {
	target target
	input  map[string]any
	// listed is the server's reference the invocation goes through, when
	// the server lists the action.
	listed *Offered
	// through is, for a draft agent, the server's references its tools go
	// through.
	through map[string]Through
}

func (e *callEnv) nativeInvoke(ctx context.Context, input map[string]any) (any, *Failure) {
	args, failure := decode(invokeTool, input)
	if failure != nil {
		return nil, failure
	}
	if e.request.call.Offer == nil {
		return nil, NewFailure(CodeNotRunnable, "invoke runs only as a call of an MCP server's request.", "Call invoke through an MCP server that lists it.")
	}
	if !args.Commit {
		e.preview, e.discard = true, true
	}
	run, failure := e.planInvoke(ctx, args)
	if failure != nil {
		return nil, failure
	}
	if run.target.action.Definition.IsCallableAgent() {
		return e.invokeAgent(ctx, run)
	}
	out := e.request.run(ctx, run.target, run.input, e.beneath())
	e.recorded = append(e.recorded, out.recorded...)
	answer := map[string]any{"execution_id": out.id}
	if out.failure != nil {
		answer["status"] = store.Failed
		answer["error"] = errorOf(out.failure.Code, out.failure.Message, out.failure.Hint)
	} else {
		answer["status"] = store.Succeeded
		if out.output != nil {
			answer["output"] = out.output
		}
	}
	if args.Commit {
		return answer, nil
	}
	answer["calls"] = directCalls(out)
	answer["writes"], answer["unreadable_writes"], answer["omitted_writes"] = e.previewWrites(ctx)
	return answer, nil
}

func errorOf(code, message, hint string) map[string]any {
	out := map[string]any{"code": code, "message": message}
	if hint != "" {
		out["hint"] = hint
	}
	return out
}

// directCalls lists the invoked execution's own calls, in order.
func directCalls(out result) []map[string]any {
	calls := []map[string]any{}
	for _, e := range out.recorded {
		if e.ParentID != out.id {
			continue
		}
		call := map[string]any{"name": e.ActionName, "status": e.Status, "execution_id": e.ID}
		if e.Status == store.Failed {
			var failed struct{ Code, Message, Hint string }
			if err := json.Unmarshal(e.Error, &failed); err != nil || failed.Code == "" {
				failed.Code, failed.Message, failed.Hint = CodeFailure, "The call failed.", "Read the call's execution, by its execution_id, for why."
			}
			call["error"] = errorOf(failed.Code, failed.Message, failed.Hint)
		}
		if e.RolledBackBy != "" {
			call["rolled_back"] = true
		}
		calls = append(calls, call)
	}
	return calls
}

// invokeAgent starts a callable agent as a task beneath the request, in
// both modes (ACT-388, ACT-444): only for a client that can then read it.
func (e *callEnv) invokeAgent(ctx context.Context, run invocation) (any, *Failure) {
	c := e.request.call
	if !c.TasksExtension && !c.TaskTools {
		return nil, NewFailure(CodeTaskRequired, "An agent runs as a task, and this client cannot read one: invoke did not start it.",
			"Connect with a client that declares the Tasks extension (io.modelcontextprotocol/tasks), or through a server that lists get_task and cancel_task.")
	}
	start := *c
	start.Target, start.Compiled, start.Input, start.Preview = run.target.action, run.target.compiled, run.input, e.preview
	task, failure := e.request.runner.startTask(ctx, &start, run.target.draft, run.through)
	if failure != nil {
		return nil, failure
	}
	e.request.task = &task
	hint := TaskHint
	if e.preview {
		hint = TaskPreviewHint
	}
	return map[string]any{"task_id": task.ID, "status": string(task.WireStatus()), "poll_interval_ms": TaskPollInterval.Milliseconds(), "hint": hint}, nil
}

// notFound is the refusal of an action that does not exist and of one the
// principal or the server may not read, word for word the same (ACT-399).
func notFound(id string) *Failure {
	return NewFailure(CodeActionNotFound, fmt.Sprintf("No action with ID %s exists that you can read.", id),
		"Pass the ID of a tool or callable agent you can read, such as one createAction returned.")
}

// planInvoke applies every rule of what may be invoked, and how, before
// anything runs: a refusal is a tool error, recorded as the invoke call's
// failure.
func (e *callEnv) planInvoke(ctx context.Context, args invokeArgs) (invocation, *Failure) {
	c := e.request.call
	r := e.request.runner
	stored, failure := e.readable(ctx, args.ActionID, 0)
	if failure != nil {
		return invocation{}, failure
	}
	if args.Draft != nil && args.Version != 0 {
		return invocation{}, NewFailure(CodeInputInvalid, "Pass a draft or a version, not both: a draft runs instead of every stored version.",
			"Leave out version to preview the draft.")
	}
	run := invocation{}
	if listed, ok := c.Offer.ToolFor(args.ActionID); ok {
		if args.Version != 0 && args.Version != listed.Target.Version {
			return invocation{}, NewFailure(CodeInputInvalid,
				fmt.Sprintf("This server lists %s and runs its version %d: invoke goes through the server's reference, so it cannot run version %d.", listed.Name, listed.Target.Version, args.Version),
				"Leave out version, or pass a draft to preview a change.")
		}
		run.listed = &listed
		run.target = target{action: listed.Target, compiled: listed.Compiled}
	} else {
		version := stored
		if args.Version != 0 && args.Version != stored.Version {
			if version, failure = e.readable(ctx, args.ActionID, args.Version); failure != nil {
				return invocation{}, failure
			}
		}
		compiled, err := r.Compiled.Get(version.ID, version.Version, version.Definition)
		if err != nil {
			return invocation{}, NewFailure(CodeNotRunnable, "The action's stored definition cannot run: "+err.Error(), "Preview a draft that fixes it.")
		}
		run.target = target{action: version, compiled: compiled}
	}
	if failure := invokable(run.target.action.Definition); failure != nil {
		return invocation{}, failure
	}
	if failure := e.mayInvoke(ctx, action.Document(run.target.action)); failure != nil {
		return invocation{}, failure
	}
	if args.Draft != nil {
		if args.Commit {
			return invocation{}, NewFailure(CodeInputInvalid, "commit: true runs only a published version, and a draft is not one.",
				"Preview the draft (commit: false), then publish it with updateAction and invoke it with commit: true.")
		}
		drafted, through, failure := e.planDraft(ctx, stored, args.Draft)
		if failure != nil {
			return invocation{}, failure
		}
		run.target, run.through = drafted, through
	}
	if args.Commit && !run.target.action.Enabled {
		return invocation{}, NewFailure(CodeInputInvalid, fmt.Sprintf("%s is disabled at version %d, and commit: true runs only an enabled version.", run.target.action.Definition.Name, run.target.action.Version),
			"Preview it (commit: false), or enable it with updateAction and enabled: true, then invoke it with commit: true.")
	}
	run.input = args.Input
	if run.input == nil {
		run.input = map[string]any{}
	}
	if run.listed != nil {
		input, err := c.Offer.FixedInput(ctx, run.listed.Ref, run.input)
		if err != nil {
			return invocation{}, NewFailure(CodeCELEvaluation, "The server's fixed input for this action could not be evaluated.",
				"Ask the server's owner to fix the tool reference's fixed input.").WithDetail(err.Error())
		}
		run.input = input
	}
	return run, nil
}

// readable reads an action (at version, or its latest), refusing one that
// does not exist, is deleted, or that the principal or the server may not
// read, in the same words.
func (e *callEnv) readable(ctx context.Context, id string, version int) (action.Target, *Failure) {
	c := e.request.call
	t, err := e.request.runner.Registry.Action(ctx, c.Account, id, version)
	if errors.Is(err, action.ErrNotFound) || err == nil && t.Deleted {
		return action.Target{}, notFound(id)
	}
	if err != nil {
		return action.Target{}, NewFailure(CodeFailure, "The action could not be read.", "Call again in a moment.").WithDetail(err.Error())
	}
	read := policy.Request{Operation: policy.Select, Resource: action.ResourceAction, Claims: c.Who.Claims, Document: action.Document(t)}
	if policy.Check(ctx, read, c.Layers...) != nil {
		return action.Target{}, notFound(id)
	}
	return t, nil
}

// mayInvoke: the principal and the server may read and INVOKE the action
// as document describes it (ACT-395, ACT-396, ACT-401).
func (e *callEnv) mayInvoke(ctx context.Context, document map[string]any) *Failure {
	c := e.request.call
	request := policy.Request{Resource: action.ResourceAction, Claims: c.Who.Claims, Document: document}
	for _, operation := range []string{policy.Select, policy.Invoke} {
		request.Operation = operation
		if err := policy.Check(ctx, request, c.Layers...); err != nil {
			return asFailure(err)
		}
	}
	return nil
}

// invokable refuses what invoke cannot run (ACT-389): it runs a tool,
// graphql or cel action in the request, and a callable agent as a task.
func invokable(def action.Definition) *Failure {
	hint := "Invoke a tool (kind tool, graphql or cel) or a callable agent (kind agent with a tool block)."
	switch def.Kind {
	case action.KindTool:
		if def.Session != nil {
			return NewFailure(CodeNotRunnable, fmt.Sprintf("%s has a session, so it runs only when its endpoint serves a request and cannot be invoked.", def.Name), hint)
		}
		return nil
	case action.KindGraphQL, action.KindCEL:
		return nil
	case action.KindAgent:
		if def.IsCallableAgent() {
			return nil
		}
		return NewFailure(CodeNotRunnable, fmt.Sprintf("%s is an agent without a tool block, which cannot be invoked.", def.Name), hint)
	}
	return NewFailure(CodeNotRunnable, fmt.Sprintf("%s is of kind %s, which cannot be invoked.", def.Name, def.Kind), hint)
}
