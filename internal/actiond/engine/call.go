package engine

import (
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
	// Record keeps an execution for the request's completion transaction.
	Record func(*store.Execution)
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
