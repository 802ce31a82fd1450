// Package coded is the one way both programs carry an error that a program
// can branch on: a machine-readable code, a sentence a person can act on, an
// optional hint saying what to do next, and the cause it wraps.
//
// Each domain keeps its own codes (build's step_failed, config's
// config_invalid, the engine's action_input_invalid …) as constants of its
// own. A domain that needs more facts on its errors (a file and line, an
// instance, a task) embeds Base, the same type under a name that leaves the
// domain type free to have an Error method of its own, and gets Unwrap, Is,
// ErrorCode and ErrorHint from it; CodeOf finds the code of either anywhere
// in a chain.
package coded

import (
	"errors"
	"fmt"
)

// Error is a coded error.
type Error struct {
	// Code is stable and machine-readable; what a program branches on.
	Code string
	// Message is one sentence a person can act on.
	Message string
	// Hint, when set, says what to do next.
	Hint string
	// Err is the cause, kept for errors.Is and errors.As.
	Err error
}

// Base is Error under the name a domain type embeds it by: embedding Error
// itself would make a field named Error, which clashes with the domain
// type's Error method.
type Base = Error

// New makes a coded error whose message is formatted from format and args.
func New(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap makes a coded error caused by err.
func Wrap(code string, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// WithHint sets the hint and returns the error, for chaining.
func (e *Error) WithHint(hint string) *Error {
	e.Hint = hint
	return e
}

// Error is the message, then the cause's own message.
func (e *Error) Error() string {
	if e.Err == nil {
		return e.Message
	}
	if e.Message == "" {
		return e.Err.Error()
	}
	return e.Message + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorCode is the code; it is what CodeOf looks for, so a domain type that
// embeds Error is found too.
func (e *Error) ErrorCode() string { return e.Code }

// Is matches any coded error with the same non-empty code, so a sentinel
// such as &Error{Code: "expired"} works with errors.Is.
func (e *Error) Is(target error) bool {
	t, ok := target.(interface{ ErrorCode() string })
	return ok && e.Code != "" && t.ErrorCode() == e.Code
}

// CodeOf returns the code of the first coded error in err's chain, or "".
func CodeOf(err error) string {
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return ""
}

// HintOf returns the hint of the first coded error in err's chain that has
// one, or "".
func HintOf(err error) string {
	for err != nil {
		if h, ok := err.(interface{ ErrorHint() string }); ok && h.ErrorHint() != "" {
			return h.ErrorHint()
		}
		err = errors.Unwrap(err)
	}
	return ""
}

// ErrorHint is the hint; see HintOf.
func (e *Error) ErrorHint() string { return e.Hint }
