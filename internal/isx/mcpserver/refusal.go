package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// Code is a refusal's reason, in _meta["dev.incusspawn/error"].code. Only
// CodeBusy and CodeUnavailable may succeed when the same call is repeated
// unchanged. It is a string, as coded.Base carries it.
type Code = string

const (
	// CodeInvalidArgument: the arguments are malformed, name something
	// that no longer exists as an argument (max_turns), or repeat an
	// idempotency key for something else.
	CodeInvalidArgument Code = "invalid_argument"
	// CodeNotApproved: the template may not be used by an agent: mcp.yaml
	// does not approve it, it is project-local or untrusted, or it is not
	// built (the user must run isx build).
	CodeNotApproved Code = "not_approved"
	// CodeNotFound: no MCP instance or task of that name.
	CodeNotFound Code = "not_found"
	// CodeNotHeld: this session does not hold the instance (another
	// session does, or it is an orphan): adopt_instance first.
	CodeNotHeld Code = "not_held"
	// CodeWrongState: the instance or task is not in a state that allows
	// the call (stopped, still running, kept, held by a live session).
	CodeWrongState Code = "wrong_state"
	// CodeBusy: something else is working on the same thing right now.
	CodeBusy Code = "busy"
	// CodeLimit: mcp.yaml's max-instances or max-concurrent-tasks is
	// reached for this host user.
	CodeLimit Code = "limit"
	// CodeUnavailable: Incus or the instance cannot answer now.
	CodeUnavailable Code = "unavailable"
	// CodeTaskFailed: a background task was asked for but its command
	// could not be started in the instance.
	CodeTaskFailed Code = "task_failed"
	// CodeRefused: host policy refuses the call: mcp.yaml cannot be used,
	// the old mcp: section of config.yaml, another host user's instance.
	CodeRefused Code = "refused"
	// CodeInternal: something isx did not expect, or the audit log cannot
	// be written (no call runs unrecorded).
	CodeInternal Code = "internal"
)

// Codes lists every refusal code.
var Codes = []Code{CodeInvalidArgument, CodeNotApproved, CodeNotFound, CodeNotHeld, CodeWrongState,
	CodeBusy, CodeLimit, CodeUnavailable, CodeTaskFailed, CodeRefused, CodeInternal}

// ErrorMetaKey is the _meta key of a refusal's details.
const ErrorMetaKey = "dev.incusspawn/error"

// Refusal is a tool call that did not do what was asked: a result with
// isError, no structuredContent and the code in _meta, with the instance
// and task it concerns when there are.
type Refusal struct {
	coded.Base
	Instance string
	TaskID   string
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Base.Error() }

func refusef(code Code, format string, args ...any) *Refusal {
	return refuseWith(code, nil, format, args...)
}

// refuseWith is a refusal caused by err, whose message ends the sentence.
func refuseWith(code Code, err error, format string, args ...any) *Refusal {
	return &Refusal{Base: coded.Base{Code: code, Message: fmt.Sprintf(format, args...), Err: err}}
}

// on names the instance (and task) the refusal concerns.
func (r *Refusal) on(instance, taskID string) *Refusal {
	if r.Instance == "" {
		r.Instance = instance
	}
	if r.TaskID == "" {
		r.TaskID = taskID
	}
	return r
}

// refusalStyle is how a refusal reads: "Refused (<code>): <message>" for
// the model, the details under ErrorMetaKey for a program.
var refusalStyle = mcpkit.ErrorStyle{
	MetaKey: ErrorMetaKey,
	Text:    func(e mcpkit.ToolError) string { return "Refused (" + e.Code + "): " + e.Message },
}

// result is the refusal as a tool result.
func (r *Refusal) result() *mcp.CallToolResult {
	facts := map[string]any{}
	if r.Instance != "" {
		facts["instance"] = r.Instance
	}
	if r.TaskID != "" {
		facts["task_id"] = r.TaskID
	}
	return refusalStyle.Result(mcpkit.ToolError{Code: r.Code, Message: r.Base.Error(), Facts: facts})
}

// taskCodes and instanceCodes are the refusal codes of the task and
// instance packages' codes; any other is CodeInternal.
var (
	taskCodes = map[string]Code{
		task.CodeInvalidArgument: CodeInvalidArgument,
		task.CodeNotFound:        CodeNotFound,
		task.CodeWrongState:      CodeWrongState,
		task.CodeBusy:            CodeBusy,
		task.CodeUnavailable:     CodeUnavailable,
	}
	instanceCodes = map[string]Code{
		instance.CodeInvalid:  CodeInvalidArgument,
		instance.CodeNotFound: CodeNotFound,
		instance.CodeExists:   CodeBusy,
		instance.CodeNotBuilt: CodeNotApproved,
		// Incus could not make or start the copy, and nothing of it is
		// left: a retry may well succeed.
		instance.CodeBranchFailed: CodeUnavailable,
	}
)

func codeFrom(codes map[string]Code, code string) Code {
	if refusal, ok := codes[code]; ok {
		return refusal
	}
	return CodeInternal
}

// asRefusal turns any failure into a refusal with the code a program can
// branch on.
func asRefusal(err error) *Refusal {
	var (
		r       *Refusal
		taskErr *task.Error
		cfgErr  *config.Error
		tplErr  *template.Error
		instErr *instance.Error
	)
	switch {
	case errors.As(err, &r):
		return r
	case errors.As(err, &taskErr):
		return refuseWith(codeFrom(taskCodes, taskErr.Code), taskErr.Err, "%s", taskErr.Message).on(taskErr.Instance, taskErr.TaskID)
	case errors.As(err, &cfgErr):
		return refusef(CodeRefused, "%s", cfgErr.Error())
	case errors.As(err, &tplErr) && tplErr.Code == template.CodeNotApproved:
		return refusef(CodeNotApproved, "%s", tplErr.Message)
	case tplErr != nil:
		return refusef(CodeRefused, "the template definitions cannot be read, so isx cannot tell which templates may be used; the user must fix: %s", tplErr.Error())
	case errors.As(err, &instErr):
		code := codeFrom(instanceCodes, instErr.Code)
		if errors.Is(instErr.Err, incus.ErrUnavailable) {
			code = CodeUnavailable
		}
		return refuseWith(code, instErr.Err, "%s", instErr.Message).on(instErr.Instance, "")
	}
	return incusRefusal(err)
}

// incusRefusal is a failure Incus reported, or one isx did not expect.
func incusRefusal(err error) *Refusal {
	switch {
	case instanceBusy(err):
		return refuseWith(CodeBusy, err, "Incus is running another operation on the instance; retry shortly")
	case errors.Is(err, incus.ErrUnavailable):
		return refuseWith(CodeUnavailable, err, "Incus does not answer, so isx cannot reach the instances; ask the user to start the Incus daemon")
	case errors.Is(err, incus.ErrNotFound):
		return refuseWith(CodeNotFound, err, "Incus has no such instance")
	case errors.Is(err, incus.ErrConflict):
		return refuseWith(CodeBusy, err, "the instance changed while isx was working on it; retry")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return refuseWith(CodeUnavailable, err, "the call was interrupted before it finished; retry")
	}
	return refuseWith(CodeInternal, err, "isx failed unexpectedly")
}
