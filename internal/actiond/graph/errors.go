package graph

import (
	"context"
	"errors"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/expr"
	"github.com/incusspawn/isx/internal/actiond/graph/model"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
)

// Error codes a response's errors carry in extensions.code.
const (
	CodeAccessDenied     = "ACCESS_DENIED"
	CodeAlreadyExists    = "ALREADY_EXISTS"
	CodeBadRequest       = "BAD_REQUEST"
	CodeNotFound         = "NOT_FOUND"
	CodeCELEvaluation    = "CEL_EVALUATION_ERROR"
	CodeValidationFailed = "GRAPHQL_VALIDATION_FAILED"
	// CodeConflict: a row the request wrote changed since the request read
	// it, or the database was too busy; nothing was applied, and the request
	// can be retried (extensions.retryable is true).
	CodeConflict = "CONFLICT"
	CodeInternal = "INTERNAL"
)

// Error is a refused request or field: its code, the input field at fault
// when there is one, a message a person can act on, and a hint.
type Error struct {
	coded.Base
	Field string
}

func newError(code, field, message string, cause error) *Error {
	return &Error{Base: coded.Base{Code: code, Message: message, Err: cause}, Field: field}
}

// Error is the field, then the message; the cause is for the log.
func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func badRequest(field, format string, args ...any) *Error {
	return newError(CodeBadRequest, field, fmt.Sprintf(format, args...), nil)
}

// classify reads the code, field and hint of any error a resolver returns.
func classify(err error) *Error {
	var (
		own       *Error
		scalar    *model.InputError
		actionErr *action.Error
		regErr    *registry.Error
		denied    *policy.Denied
		invalid   *policy.InvalidError
		celErr    *expr.Error
	)
	switch {
	case errors.As(err, &own):
		return own
	case errors.As(err, &scalar):
		return newError(scalar.Code, "", scalar.Message, err)
	case errors.As(err, &actionErr):
		out := newError(actionErr.Code, actionErr.Path, actionErr.Message, err)
		if errors.As(err, &denied) {
			out.Hint = denied.Hint()
		}
		return out
	case errors.As(err, &regErr):
		return newError(regErr.Code, regErr.Field, regErr.Message, err)
	case errors.As(err, &denied):
		out := newError(CodeAccessDenied, "", denied.Error(), err)
		out.Hint = denied.Hint()
		return out
	case errors.As(err, &invalid):
		return newError(CodeBadRequest, "policies"+invalid.Path(), invalid.Message, err)
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrContention):
		out := newError(CodeConflict, "", "the request's writes conflicted with another request's, and nothing was applied: "+err.Error(), err)
		out.Hint = "Send the request again."
		return out
	case errors.As(err, &celErr):
		return newError(celErr.Code, "", err.Error(), err)
	}
	return newError(CodeInternal, "", "actiond failed to serve the request: "+err.Error(), err)
}

// defaultHints are the hints of errors whose cause gave none: every code's
// hint is a sentence a person can act on.
var defaultHints = map[string]string{
	CodeAccessDenied:     "Ask an administrator for the permission the message names, or do something that does not need it.",
	CodeAlreadyExists:    "Choose another ID or name, or change the existing one with updateAction.",
	CodeBadRequest:       "Fix the field the message names and send the request again.",
	CodeNotFound:         "Check the ID or name; list what exists with actions { list } or the matching query.",
	CodeCELEvaluation:    "Fix the expression or the values it reads.",
	CodeValidationFailed: "Fix the document at the line and column the message gives; the schema is served by introspection.",
	CodeConflict:         "Send the request again.",
	CodeInternal:         "Send the request again; if it keeps failing, ask the operator to read actiond's log.",
	"UNAUTHENTICATED":    "Send a bearer token whose aud is this GraphQL endpoint, or call from loopback while actiond listens there.",
}

// hintFor is a code's default hint.
func hintFor(code string) string {
	if hint, ok := defaultHints[code]; ok {
		return hint
	}
	return "Read the message for what went wrong, fix it, and send the request again."
}

// gqlError turns an error into a response error with its extensions.
func gqlError(path ast.Path, err error) *gqlerror.Error {
	e := classify(err)
	if e.Hint == "" {
		e.Hint = hintFor(e.Code)
	}
	out := &gqlerror.Error{Message: e.Error(), Err: err, Extensions: map[string]any{"code": e.Code}}
	if path != nil {
		out.Path = path
	}
	if e.Field != "" {
		out.Extensions["field"] = e.Field
	}
	if e.Hint != "" {
		out.Extensions["hint"] = e.Hint
	}
	if e.Code == CodeConflict {
		out.Extensions["retryable"] = true
	}
	return out
}

// present is the executor's error presenter: a resolver's error gets its
// code; a document's error from gqlparser or gqlgen keeps its own, with a
// parse failure reported as a validation failure.
func present(ctx context.Context, err error) *gqlerror.Error {
	if err == nil {
		return nil
	}
	var gqlErr *gqlerror.Error
	if errors.As(err, &gqlErr) {
		if gqlErr.Err != nil && gqlErr.Extensions["code"] == nil {
			// A resolver error gqlgen wrapped with its path.
			out := gqlError(gqlErr.Path, gqlErr.Err)
			out.Locations = gqlErr.Locations
			return out
		}
		normalize(gqlErr)
		return gqlErr
	}
	return gqlError(graphql.GetPath(ctx), err)
}

// normalize gives a document-level error its code: what gqlparser and
// gqlgen report about a document or its variables is a validation failure.
func normalize(e *gqlerror.Error) {
	if e.Extensions == nil {
		e.Extensions = map[string]any{}
	}
	switch e.Extensions["code"] {
	case nil, errcode.ParseFailed:
		e.Extensions["code"] = CodeValidationFailed
	}
	if hint, _ := e.Extensions["hint"].(string); hint == "" {
		code, _ := e.Extensions["code"].(string)
		e.Extensions["hint"] = hintFor(code)
	}
}

// recoverPanic turns a resolver's panic into an INTERNAL error.
func recoverPanic(ctx context.Context, v any) error {
	return newError(CodeInternal, "", fmt.Sprintf("actiond failed to serve the request: %v", v), nil)
}
