package engine

import (
	"context"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
)

// Call is one tool call beneath a request, as the endpoint hands it over.
type Call struct {
	Account string
	Who     *auth.Identity
	// Layers are the principal's policies then the server's: the call runs
	// under them, narrowed by its tool's own.
	Layers []policy.Layer
	// Target is the tool the reference resolved to; Compiled its compiled
	// definition, nil for a native tool.
	Target   action.Target
	Compiled *action.Compiled
	// Input is the effective input: intent removed, fixed input applied.
	Input map[string]any
	// ParentID is the request's execution.
	ParentID string
	// Server is the MCP server the request was made to, and SessionID the
	// request's session: the scope of the tasks the call starts or reads.
	Server    ServerRef
	SessionID string
	// Work holds the request's writes; each call's work is nested in it and
	// merged when the call succeeds.
	Work    *store.Work
	Preview bool
	// Offer is what the request's server lists, which program and invoke
	// reach; nil for a call beneath a task, where neither runs.
	Offer Offer
	// TasksExtension says the client declared the Tasks extension, and
	// TaskTools that the server lists get_task and cancel_task: an invoke
	// of an agent starts a task only for a client that can then read it.
	TasksExtension bool
	TaskTools      bool
	// Tasks, when set, takes the runner's place for the tasks the call
	// starts, reads and cancels: a replay's, which starts and cancels
	// nothing.
	Tasks Tasks
}

// tasks is where the call's task starts, reads and cancels go.
func (c *Call) tasks(r *Runner) Tasks {
	if c.Tasks != nil {
		return c.Tasks
	}
	return r.Tasks
}

// Offer is what an MCP server lists, as the calls beneath one of its
// requests reach it: a program calls the server's tools by the names the
// external agent sees, and an invoke of an action the server lists, or a
// draft's call of one, goes through the server's reference (ACT-390,
// ACT-402). The endpoint implements it for each request.
type Offer interface {
	// Tool is the available tool the server lists under name.
	Tool(name string) (Offered, bool)
	// ToolFor is the available tool the server lists whose action is id.
	ToolFor(id string) (Offered, bool)
	// FixedInput applies the fixed input of the server's reference ref to
	// arguments; its values replace the arguments'.
	FixedInput(ctx context.Context, ref int, arguments map[string]any) (map[string]any, error)
}

// Offered is one tool a server lists, resolved for the request.
type Offered struct {
	Name string
	// Ref is the reference's index in the server's tools.
	Ref    int
	Target action.Target
	// Compiled is nil for a native tool.
	Compiled *action.Compiled
}

// lists says whether the server lists the native tool name.
func lists(offer Offer, name string) bool {
	if offer == nil {
		return false
	}
	t, ok := offer.Tool(name)
	return ok && t.Target.Native
}

// Outcome is what a call answered.
type Outcome struct {
	ExecutionID string
	Output      any
	Failure     *Failure
	// Used lists further executions whose output the answer carries: the
	// agent's, when get_task returns a task's result. Each is a TOOL use of
	// the request, besides the call's own.
	Used []string
	// Task is the task an invoke of a callable agent started: a client
	// with the Tasks extension is answered with it rather than Output.
	Task *Task
	// Recorded are the executions of the call and of every call beneath
	// it, each after the calls beneath it, for the caller to commit with
	// its own record.
	Recorded []*store.Execution
}

// Failure is a call error the external agent sees as a tool result with
// isError: a code, a message and a hint; Detail stays in the record.
type Failure struct {
	coded.Base
	Detail any
}

// NewFailure is a failure without detail.
func NewFailure(code, message, hint string) *Failure {
	return &Failure{Base: coded.Base{Code: code, Message: message, Hint: hint}}
}

// WithDetail sets the detail the record keeps and returns the failure.
func (f *Failure) WithDetail(detail any) *Failure {
	f.Detail = detail
	return f
}

func (f *Failure) Error() string { return f.Code + ": " + f.Message }

// Codes of a call's failure, in the tool error's _meta and the record.
const (
	CodeInputInvalid    = "action_input_invalid"
	CodeOutputInvalid   = "action_output_invalid"
	CodeTimeout         = "action_timeout"
	CodeFailure         = "action_failure"
	CodeNotRunnable     = "action_not_runnable"
	CodeToolNotDeclared = "tool_not_declared"
	CodeCELEvaluation   = "CEL_EVALUATION_ERROR"
)
