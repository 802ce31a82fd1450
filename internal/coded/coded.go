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
// in a chain. What an error concerns (an instance, a task, a field) is
// recorded in About with On, so that the one translation at a wire (a tool
// refusal, a GraphQL error) reads code, message and facts with Of, CodeOf
// and AboutOf, knowing no domain's types.
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
	// About names what the error concerns, by kind ("instance",
	// "task_id", "field"): the facts a wire reports beside the code, so
	// that it needs no type of the domain to find them. Set it with On.
	About map[string]string
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

// On records that the error concerns name, a thing of kind what, unless
// it names one of that kind already or name is empty; it returns e.
func (e *Error) On(what, name string) *Error {
	if name == "" || e.About[what] != "" {
		return e
	}
	if e.About == nil {
		e.About = map[string]string{}
	}
	e.About[what] = name
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

// CodeOf returns the code of the first coded error in err's chain that
// has one, or "": a coded error that only says what a failure concerns
// (On, no code) leaves the code to its cause.
func CodeOf(err error) string {
	code := ""
	walk(err, func(e error) bool {
		if c, ok := e.(interface{ ErrorCode() string }); ok {
			code = c.ErrorCode()
		}
		return code != ""
	})
	return code
}

// Of returns the first coded error in err's chain that has a code (the
// Base a domain type embeds included), or nil. The wire reads the code
// and message from it.
func Of(err error) *Error {
	var out *Error
	walk(err, func(e error) bool {
		if b, ok := e.(interface{ codedBase() *Error }); ok && b.codedBase().Code != "" {
			out = b.codedBase()
		}
		return out != nil
	})
	return out
}

// AboutOf returns the thing of kind what that err concerns: the one the
// innermost coded error in its chain that names one names, since a fact,
// once an error says it, is not replaced by what its callers add (as On
// does not replace it either).
func AboutOf(err error, what string) string {
	name := ""
	walk(err, func(e error) bool {
		if b, ok := e.(interface{ codedBase() *Error }); ok && b.codedBase().About[what] != "" {
			name = b.codedBase().About[what]
		}
		return false
	})
	return name
}

// codedBase finds the Error a domain type embeds.
func (e *Error) codedBase() *Error { return e }

// walk visits err's chain, depth first (the errors errors.Join joined in
// order), until visit returns true.
func walk(err error, visit func(error) bool) bool {
	for err != nil {
		if visit(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if walk(inner, visit) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return false
		}
	}
	return false
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
