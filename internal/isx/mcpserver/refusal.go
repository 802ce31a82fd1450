package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
	"github.com/incusspawn/isx/internal/isx/template"
)

// Code is a refusal's reason, in _meta["dev.incusspawn/error"].code. Only
// CodeBusy and CodeUnavailable may succeed when the same call is repeated
// unchanged.
type Code string

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
// isError, no structuredContent and the code in _meta.
type Refusal struct {
	Code     Code
	Message  string
	Instance string
	TaskID   string
	Err      error
}

func (r *Refusal) Error() string {
	if r.Err != nil {
		return fmt.Sprintf("%s: %s: %v", r.Code, r.Message, r.Err)
	}
	return fmt.Sprintf("%s: %s", r.Code, r.Message)
}

func (r *Refusal) Unwrap() error { return r.Err }

func refusef(code Code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...)}
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

// text is what the model reads.
func (r *Refusal) text() string {
	msg := r.Message
	if r.Err != nil {
		msg += ": " + r.Err.Error()
	}
	return fmt.Sprintf("Refused (%s): %s", r.Code, msg)
}

// result is the refusal as a tool result.
func (r *Refusal) result() *mcp.CallToolResult {
	meta := map[string]any{"code": string(r.Code), "message": r.Message}
	if r.Err != nil {
		meta["message"] = r.Message + ": " + r.Err.Error()
	}
	if r.Instance != "" {
		meta["instance"] = r.Instance
	}
	if r.TaskID != "" {
		meta["task_id"] = r.TaskID
	}
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: r.text()}},
		Meta:    mcp.Meta{ErrorMetaKey: meta},
	}
}

// asRefusal turns any failure into a refusal with the code a program can
// branch on.
func asRefusal(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	var taskErr *task.Error
	if errors.As(err, &taskErr) {
		code := map[string]Code{
			task.CodeInvalidArgument: CodeInvalidArgument,
			task.CodeNotFound:        CodeNotFound,
			task.CodeWrongState:      CodeWrongState,
			task.CodeBusy:            CodeBusy,
			task.CodeUnavailable:     CodeUnavailable,
		}[taskErr.Code]
		if code == "" {
			code = CodeInternal
		}
		return &Refusal{Code: code, Message: taskErr.Message, Instance: taskErr.Instance, TaskID: taskErr.TaskID, Err: taskErr.Err}
	}
	var cfgErr *config.Error
	if errors.As(err, &cfgErr) {
		return &Refusal{Code: CodeRefused, Message: cfgErr.Error()}
	}
	var tplErr *template.Error
	if errors.As(err, &tplErr) {
		if tplErr.Code == template.CodeNotApproved {
			return &Refusal{Code: CodeNotApproved, Message: tplErr.Message}
		}
		return &Refusal{Code: CodeRefused, Message: "the template definitions cannot be read, so isx cannot tell which templates may be used; the user must fix: " + tplErr.Error()}
	}
	var instErr *instance.Error
	if errors.As(err, &instErr) {
		code := map[string]Code{
			instance.CodeInvalid:  CodeInvalidArgument,
			instance.CodeNotFound: CodeNotFound,
			instance.CodeExists:   CodeBusy,
			instance.CodeNotBuilt: CodeNotApproved,
			// Incus could not make or start the copy, and nothing of it
			// is left: a retry may well succeed.
			instance.CodeBranchFailed: CodeUnavailable,
		}[instErr.Code]
		if code == "" {
			code = CodeInternal
		}
		if errors.Is(instErr.Err, incus.ErrUnavailable) {
			code = CodeUnavailable
		}
		return &Refusal{Code: code, Message: instErr.Message, Instance: instErr.Instance, Err: instErr.Err}
	}
	switch {
	case instanceBusy(err):
		return &Refusal{Code: CodeBusy, Message: "Incus is running another operation on the instance; retry shortly", Err: err}
	case errors.Is(err, incus.ErrUnavailable):
		return &Refusal{Code: CodeUnavailable, Message: "Incus does not answer, so isx cannot reach the instances; ask the user to start the Incus daemon", Err: err}
	case errors.Is(err, incus.ErrNotFound):
		return &Refusal{Code: CodeNotFound, Message: "Incus has no such instance", Err: err}
	case errors.Is(err, incus.ErrConflict):
		return &Refusal{Code: CodeBusy, Message: "the instance changed while isx was working on it; retry", Err: err}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Refusal{Code: CodeUnavailable, Message: "the call was interrupted before it finished; retry", Err: err}
	}
	return &Refusal{Code: CodeInternal, Message: "isx failed unexpectedly", Err: err}
}
