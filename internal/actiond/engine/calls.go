// Package engine runs tool calls beneath an MCP request: actions of kind
// cel, graphql and tool (Starlark), and the native tools (native.go). Each
// call is recorded as a child execution with its effective input, its output
// or error, and the rows it wrote (or would have written, in a preview), and
// runs under the request's policy layers narrowed by the tool's own. It owns
// what a call is and what it answers (call.go); the MCP endpoint hands calls
// over and renders what they answer, and this package never imports it.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/starlark"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
)

// Registry reads committed actions: by the names a tool's own references
// give, and by ID for invoke.
type Registry interface {
	Resolver(account string) action.Resolver
	// Action reads an action at version (0: its latest); a missing one
	// wraps action.ErrNotFound.
	Action(ctx context.Context, account, id string, version int) (action.Target, error)
}

// IDs makes execution IDs.
type IDs interface{ New() string }

// Runner runs calls. It is the endpoint's runner.
type Runner struct {
	GraphQL  GraphQL
	Registry Registry
	Compiled *action.Cache
	IDs      IDs
	Clock    clock.Clock
	// Random feeds uuid.New() in the native cel tool.
	Random io.Reader
	// Tasks starts, reads and cancels tasks (StartTask, get_task,
	// cancel_task); nil runs none.
	Tasks Tasks
	// Starlark bounds every Starlark run, a program's and a tool's: its
	// memory budget and the gate that bounds the runs of the process at
	// once (zero: the package's defaults, and no gate).
	Starlark starlark.Limits

	celPrograms celCache
}

func (r *Runner) clock() clock.Clock {
	if r.Clock == nil {
		return clock.Real{}
	}
	return r.Clock
}

func (r *Runner) random() io.Reader {
	if r.Random == nil {
		return rand.Reader
	}
	return r.Random
}

// Call runs one tools/call beneath a request, and answers with every
// execution it recorded (Outcome.Recorded), each call's after the calls
// beneath it. A program that passed the request's deadline records nothing
// (seed: "nothing it did is recorded"): the request fails with
// mcp_request_deadline instead.
func (r *Runner) Call(ctx context.Context, c *Call) Outcome {
	run := &request{runner: r, call: c}
	at := scope{parent: c.ParentID, work: c.Work, layers: c.Layers, preview: c.Preview, fromJSON: true}
	out := run.run(ctx, target{action: c.Target, compiled: c.Compiled}, c.Input, at)
	outcome := Outcome{ExecutionID: out.id, Output: out.output, Failure: out.failure, Task: run.task}
	if !(c.Target.Native && c.Target.Definition.Name == action.NativeProgram && errors.Is(ctx.Err(), context.DeadlineExceeded)) {
		outcome.Recorded = out.recorded
	}
	if out.failure == nil {
		outcome.Used = run.used
	}
	return outcome
}

// request is the state one tools/call shares with the calls beneath it.
type request struct {
	runner *Runner
	call   *Call
	// used lists the executions whose output the answer carries.
	used []string
	// task is the task an invoke of an agent started.
	task *Task
}

type target struct {
	action   action.Target
	compiled *action.Compiled // nil for a native tool
	// draft is the unpublished definition that runs, its references
	// resolved, as the execution records it; nil for a stored version.
	draft json.RawMessage
}

func (t target) isDraft() bool { return t.draft != nil }

// scope is where a call runs: beneath which execution, in which unit of
// work, under which policy layers, and whether it previews.
type scope struct {
	parent  string
	work    *store.Work
	layers  []policy.Layer
	preview bool
	// fromJSON says the call's input was decoded from JSON (the request's
	// arguments, a model's tool use) rather than handed over by a script,
	// whose integers are integers already.
	fromJSON bool
}

type result struct {
	id      string
	output  any
	failure *Failure
	// recorded lists the executions of the call and everything beneath it,
	// the call's own last, so that a failure can mark them rolled back.
	recorded []*store.Execution
}

// run runs one call as a child execution of at.parent: nested in the
// parent's work (merged only on success, and never when the call previews
// what it runs), under the parent's layers narrowed by the tool's own
// policies, bounded by the tool's own response timeout.
func (q *request) run(ctx context.Context, t target, input map[string]any, at scope) result {
	r := q.runner
	exec := q.execution(t, input, at)
	res := result{id: exec.ID}
	work := at.work.Nested()
	layers := at.layers
	if policies := t.action.Definition.Policies; !t.action.Native && len(policies) > 0 {
		layers = append(append([]policy.Layer{}, layers...), policy.Layer{Name: policy.LayerTool, Policies: policies, ActionID: t.action.ID})
	}
	callCtx := ctx
	if !t.action.Native {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, t.action.Definition.ResponseTimeout())
		defer cancel()
	}
	env := &callEnv{request: q, target: t, id: exec.ID, work: work, layers: layers, input: input, preview: at.preview, fromJSON: at.fromJSON}
	output, failure := env.run(callCtx)
	if failure == nil && t.compiled != nil {
		if err := t.compiled.ValidateOutput(output); err != nil {
			failure = NewFailure(CodeOutputInvalid, "The tool answered with output that does not match its output schema.",
				"Ask the tool's owner to fix the tool or its outputSchema.").WithDetail(err.Error())
		}
	}
	if failure == nil && callCtx.Err() != nil && ctx.Err() == nil {
		failure = timeoutFailure(t)
	}
	exec.EndedAt = r.clock().Now()
	exec.WriteSet = work.Writes()
	exec.Preview = env.preview
	res.recorded = append(env.recorded, exec)
	if failure != nil {
		if ctx.Err() == nil && callCtx.Err() != nil && failure.Code != CodeOutputInvalid {
			failure = timeoutFailure(t)
		}
		if failure.Hint == "" {
			failure.Hint = defaultHint(failure.Code)
		}
		exec.Status = store.Failed
		exec.Error, _ = json.Marshal(map[string]any{"code": failure.Code, "message": failure.Message, "hint": failure.Hint, "detail": failure.Detail})
		for _, beneath := range env.recorded {
			if beneath.RolledBackBy == "" {
				beneath.RolledBackBy = exec.ID
			}
		}
		res.failure = failure
	} else {
		if !env.discard {
			at.work.Merge(work)
		}
		exec.Status = store.Succeeded
		exec.Output, _ = json.Marshal(output)
		res.output = output
	}
	return res
}

func timeoutFailure(t target) *Failure {
	return NewFailure(CodeTimeout, "The tool passed its own response timeout.",
		"Make the call do less, or ask the tool's owner to raise its execution.responseTimeout.").
		WithDetail(map[string]any{"responseTimeoutSeconds": int(t.action.Definition.ResponseTimeout().Seconds())})
}

func (q *request) execution(t target, input map[string]any, at scope) *store.Execution {
	c := q.call
	actionID, name := t.action.ID, t.action.Definition.Name
	if t.action.Native {
		actionID = "native:" + name
	}
	inputJSON, _ := json.Marshal(input)
	return &store.Execution{
		ID:            q.runner.IDs.New(),
		Account:       c.Account,
		ActionID:      actionID,
		ActionVersion: int64(t.action.Version),
		ActionName:    name,
		EventType:     "tool.call",
		Role:          store.RoleCall,
		ParentID:      at.parent,
		SessionID:     "",
		Status:        store.Running,
		Caller:        c.Who.Principal,
		Subject:       c.Who.Subject,
		Client:        c.Who.Client,
		Input:         inputJSON,
		Preview:       at.preview,
		Draft:         t.draft,
		StartedAt:     q.runner.clock().Now(),
	}
}

// callEnv is one running call: what its kind needs to run, and what its
// nested calls reach.
type callEnv struct {
	request  *request
	target   target
	id       string
	work     *store.Work
	layers   []policy.Layer
	input    map[string]any
	recorded []*store.Execution
	// preview marks the call and the calls beneath it as previews; a
	// native tool that previews what it runs sets it, and discard, which
	// keeps the call's work from its parent's even when it succeeds.
	preview, discard bool
	fromJSON         bool
}

// beneath is the scope of the calls this call makes.
func (e *callEnv) beneath() scope {
	return scope{parent: e.id, work: e.work, layers: e.layers, preview: e.preview}
}

func (e *callEnv) run(ctx context.Context) (any, *Failure) {
	t := e.target
	if t.compiled != nil {
		if err := t.compiled.ValidateInput(e.input); err != nil {
			return nil, inputInvalid(err)
		}
	}
	if t.action.Native {
		n, ok := natives[t.action.Definition.Name]
		if !ok {
			return nil, NewFailure(CodeToolNotDeclared, "This native tool is not available on this server.", "Call tools/list for the tools this server offers.")
		}
		return n.run(e, ctx, e.input)
	}
	switch t.action.Definition.Kind {
	case action.KindCEL:
		return e.celAction(ctx)
	case action.KindGraphQL:
		return e.graphQLAction(ctx)
	case action.KindTool:
		return e.starlark(ctx)
	}
	if t.action.Definition.IsCallableAgent() {
		return nil, NewFailure(CodeNotRunnable, "A callable agent runs only as a task, so it cannot be called from here.",
			"Call it as a tool of an MCP server, which starts it as a task, and read it with get_task or tasks/get.")
	}
	return nil, NewFailure(CodeNotRunnable, fmt.Sprintf("Actions of kind %s cannot be called as tools.", t.action.Definition.Kind),
		"Call a tool, a graphql or cel action, or a callable agent instead.")
}

// defaultHint is the hint of a failure whose cause gave none: every code's
// hint is a sentence a person can act on.
func defaultHint(code string) string {
	switch code {
	case CodeInputInvalid:
		return "Call the tool with arguments that match its inputSchema (see tools/list)."
	case CodeOutputInvalid:
		return "Ask the tool's owner to fix the tool or its outputSchema."
	case CodeTimeout:
		return "Make the call do less, or ask the tool's owner to raise its execution.responseTimeout."
	case CodeToolNotDeclared:
		return "Call only the tools the calling tool declares, or ask its owner to declare this one."
	case CodeCELEvaluation:
		return "Fix the expression or the values it reads."
	}
	return "Read the call's execution for what went wrong, fix the cause, and call again."
}

// inputInvalid is a call refused because its input does not match the
// tool's inputSchema.
func inputInvalid(err error) *Failure {
	return NewFailure(CodeInputInvalid, inputMessage(err), "Call the tool with arguments that match its inputSchema (see tools/list).")
}

func inputMessage(err error) string {
	var aerr *action.Error
	if errors.As(err, &aerr) {
		return aerr.Message
	}
	return err.Error()
}

// Failing is an error that carries a tool failure's code, message and hint.
type Failing interface {
	error
	ToolFailure() *Failure
}

func asFailure(err error) *Failure {
	var f Failing
	if errors.As(err, &f) {
		return f.ToolFailure()
	}
	var denied *policy.Denied
	if errors.As(err, &denied) {
		return NewFailure(denied.ErrorCode(), denied.Error(), denied.Hint()).WithDetail(denied.Detail())
	}
	return NewFailure(CodeFailure, err.Error(), "Read the call's execution for what went wrong, fix the cause, and call again.")
}
