package task

import (
	"context"
	"errors"
	"strings"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/incus"
)

// Codes of this package's failures: machine-readable reasons, named as isx mcp's
// refusals name them (_meta["dev.incusspawn/error"].code).
const (
	// CodeInvalidArgument: the call asked for something malformed (a task
	// id, idempotency key, env name or working directory), or repeated a
	// key for a different kind of task. Retrying unchanged fails again.
	CodeInvalidArgument = "invalid_argument"
	// CodeNotFound: the instance, or the task's record in it, does not exist.
	CodeNotFound = "not_found"
	// CodeWrongState: the task or instance is not in a state that allows the
	// call (a result while running, an exec into a stopped instance).
	CodeWrongState = "wrong_state"
	// CodeBusy: another call is working on the same thing; retry shortly.
	CodeBusy = "busy"
	// CodeUnavailable: Incus or the instance cannot do it now (daemon down,
	// no agent user, no way to start a process); retrying may succeed.
	CodeUnavailable = "unavailable"
	// CodeInternal: something inside the instance answered in a way isx
	// does not understand.
	CodeInternal = "internal"
)

// Failures are coded errors (internal/coded) with one of the codes above,
// a sentence a person can act on, and the instance and task they concern
// (About "instance" and "task_id"; no task when the failure concerns none).

func newError(code, instance, taskID, format string, args ...any) *coded.Error {
	return wrapError(code, instance, taskID, nil, format, args...)
}

func wrapError(code, instance, taskID string, err error, format string, args ...any) *coded.Error {
	return coded.Wrap(code, err, format, args...).On("instance", instance).On("task_id", taskID)
}

// execError classifies a failure to run a script in the instance.
func execError(instance, taskID string, err error) error {
	var apiErr *incus.Error
	switch {
	case errors.Is(err, incus.ErrUnavailable):
		return wrapError(CodeUnavailable, instance, taskID, err, "Incus is not answering, so the task cannot be reached; start the daemon and retry")
	case errors.Is(err, incus.ErrNotFound):
		return wrapError(CodeNotFound, instance, taskID, err, "instance %q does not exist", instance)
	case errors.As(err, &apiErr) && strings.Contains(apiErr.Message, "not running"):
		return wrapError(CodeWrongState, instance, taskID, err, "instance %q is not running; start it and retry", instance)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return wrapError(CodeUnavailable, instance, taskID, err, "the call was interrupted before instance %q answered; retry", instance)
	}
	return wrapError(CodeInternal, instance, taskID, err, "running the task script in instance %q failed", instance)
}
