package starlark

import (
	"context"
	"errors"
	"fmt"
	"strings"

	star "go.starlark.net/starlark"

	"github.com/incusspawn/isx/internal/coded"
)

// Error codes of script failures. A tool error keeps its own code.
const (
	// CodeActionFailure is an error of the script itself: fail(...), a
	// runtime error, a result that is not JSON.
	CodeActionFailure = "action_failure"
	// CodeInputInvalid is a script refused before it ran: a syntax error, no
	// run(event), a load statement.
	CodeInputInvalid = "action_input_invalid"
	// CodeToolNotDeclared is a tools.<name>, graphql() or cel() the host does
	// not offer.
	CodeToolNotDeclared = "tool_not_declared"
	// CodeLimitExceeded is a script past one of its Limits; the message names it.
	CodeLimitExceeded = "limit_exceeded"
	// CodeDeadlineExceeded and CodeCancelled are a script stopped by its
	// context; Err holds the context's cause, so errors.Is(err,
	// context.DeadlineExceeded) holds for a passed deadline.
	CodeDeadlineExceeded = "deadline_exceeded"
	CodeCancelled        = "cancelled"
)

// Error is a failed script, or a tool error a Host reports.
//
// For a failure at run time Message is led by the traceback of the script's
// own source, as Starlark prints it, then the error line:
//
//	Traceback (most recent call last):
//	  program.star:9:22: in run
//	  program.star:3:15: in ratio
//	Error: floored division by zero
//
// An unhandled tool error keeps the tool's code and hint, its message is the
// error line ("Error in tools.get_account: …"), and Err is the error the Host
// returned, so the caller can record it in full.
type Error struct {
	coded.Base
}

// Error is the code, then the message; the cause stays in Err, for the
// record.
func (e *Error) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return e.Code + ": " + e.Message
}

const builtinFile = "<builtin>"

// maxMessageBytes bounds an error line: fail(x) of a large x would
// otherwise be recorded and answered whole.
const maxMessageBytes = 16 << 10

// traceback renders the frames of the script's own file, outermost first,
// and the error line. Frames of builtins called in between (sorted, map…)
// are left out; the builtin that raised the error is named on the error line.
func traceback(file string, stack star.CallStack, message string) string {
	var b strings.Builder
	var raisedIn string
	if n := len(stack); n > 0 && stack[n-1].Pos.Filename() == builtinFile {
		raisedIn = stack[n-1].Name
		// fail's message repeats its name; "Error in fail: x" says it once.
		message = strings.TrimPrefix(message, raisedIn+": ")
		if strings.HasPrefix(raisedIn, "$") {
			// An operator the rewrite measures, which the script wrote as
			// an operator.
			raisedIn = ""
		}
	}
	if len(message) > maxMessageBytes {
		message = message[:maxMessageBytes] + fmt.Sprintf("… (%d bytes in all)", len(message))
	}
	first := true
	for _, frame := range stack {
		if frame.Pos.Filename() != file {
			continue
		}
		if first {
			b.WriteString("Traceback (most recent call last):\n")
			first = false
		}
		fmt.Fprintf(&b, "  %s: in %s\n", frame.Pos, frame.Name)
	}
	b.WriteString("Error")
	if raisedIn != "" {
		b.WriteString(" in ")
		b.WriteString(raisedIn)
	}
	b.WriteString(": ")
	b.WriteString(message)
	return b.String()
}

// failure turns an error out of the interpreter into what Run returns.
func (r *run) failure(err error) error {
	var stack star.CallStack
	message, cause := err.Error(), err
	var eval *star.EvalError
	if errors.As(err, &eval) {
		stack, message = eval.CallStack, eval.Msg
		if inner := eval.Unwrap(); inner != nil {
			cause = inner
		}
	}
	switch {
	case r.ctx.Err() != nil:
		return stopped(r.ctx, traceback(r.file, stack, "the script was stopped: "+context.Cause(r.ctx).Error()))
	case r.hostErr != nil:
		return fmt.Errorf("starlark %s: host failed: %w", r.file, r.hostErr)
	case r.stepsExceeded:
		return &Error{Base: coded.Base{
			Code:    CodeLimitExceeded,
			Message: traceback(r.file, stack, fmt.Sprintf("the script exceeded its limit of %d execution steps", r.limits.MaxSteps)),
			Hint:    "Do less work in one script: loop over fewer items, or split the work across several calls.",
		}}
	}
	var raised *Error
	if errors.As(err, &raised) {
		code := raised.Code
		if code == "" {
			code = CodeActionFailure
		}
		return &Error{Base: coded.Base{Code: code, Message: traceback(r.file, stack, raised.Message), Hint: raised.Hint, Err: cause}}
	}
	return &Error{Base: coded.Base{
		Code:    CodeActionFailure,
		Message: traceback(r.file, stack, message),
		Hint:    "The traceback names the line of the script that failed.",
		Err:     cause,
	}}
}

func stopped(ctx context.Context, message string) *Error {
	code := CodeCancelled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		code = CodeDeadlineExceeded
	}
	return &Error{Base: coded.Base{
		Code:    code,
		Message: message,
		Hint:    "The script ran past its deadline or its request was cancelled; make it do less, or make fewer calls.",
		Err:     contextErr(ctx),
	}}
}

// contextErr keeps ctx.Err() in the chain even when a custom cause replaces it.
func contextErr(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return errors.Join(err, cause)
}
