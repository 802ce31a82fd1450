package task

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/incusspawn/isx/internal/isx/incus"
)

// Code is the machine-readable reason of an Error, named as isx mcp's
// refusals name them (_meta["dev.incusspawn/error"].code).
type Code string

const (
	// CodeInvalidArgument: the call asked for something malformed (a task
	// id, idempotency key, env name or working directory), or repeated a
	// key for a different kind of task. Retrying unchanged fails again.
	CodeInvalidArgument Code = "invalid_argument"
	// CodeNotFound: the instance, or the task's record in it, does not exist.
	CodeNotFound Code = "not_found"
	// CodeWrongState: the task or instance is not in a state that allows the
	// call (a result while running, an exec into a stopped instance).
	CodeWrongState Code = "wrong_state"
	// CodeBusy: another call is working on the same thing; retry shortly.
	CodeBusy Code = "busy"
	// CodeUnavailable: Incus or the instance cannot do it now (daemon down,
	// no agent user, no way to start a process); retrying may succeed.
	CodeUnavailable Code = "unavailable"
	// CodeInternal: something inside the instance answered in a way isx
	// does not understand.
	CodeInternal Code = "internal"
)

// Error is a failed task operation: a code, and a sentence a person can act
// on.
type Error struct {
	Code     Code
	Instance string
	TaskID   string // empty when the failure concerns no single task
	Message  string
	Err      error // the underlying failure, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the code of the first *Error in err's chain, or "" when
// there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func newError(code Code, instance, taskID, format string, args ...any) *Error {
	return &Error{Code: code, Instance: instance, TaskID: taskID, Message: fmt.Sprintf(format, args...)}
}

// execError classifies a failure to run a script in the instance.
func execError(instance, taskID string, err error) error {
	var apiErr *incus.Error
	switch {
	case errors.Is(err, incus.ErrUnavailable):
		return &Error{Code: CodeUnavailable, Instance: instance, TaskID: taskID,
			Message: "Incus is not answering, so the task cannot be reached; start the daemon and retry", Err: err}
	case errors.Is(err, incus.ErrNotFound):
		return &Error{Code: CodeNotFound, Instance: instance, TaskID: taskID,
			Message: fmt.Sprintf("instance %q does not exist", instance), Err: err}
	case errors.As(err, &apiErr) && strings.Contains(apiErr.Message, "not running"):
		return &Error{Code: CodeWrongState, Instance: instance, TaskID: taskID,
			Message: fmt.Sprintf("instance %q is not running; start it and retry", instance), Err: err}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &Error{Code: CodeUnavailable, Instance: instance, TaskID: taskID,
			Message: fmt.Sprintf("the call was interrupted before instance %q answered; retry", instance), Err: err}
	}
	return &Error{Code: CodeInternal, Instance: instance, TaskID: taskID,
		Message: fmt.Sprintf("running the task script in instance %q failed", instance), Err: err}
}
