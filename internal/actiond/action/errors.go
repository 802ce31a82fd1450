package action

import (
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/expr"
)

// Codes of a rejected definition write, for GraphQL's extensions.code.
const (
	CodeBadRequest    = "BAD_REQUEST"
	CodeAccessDenied  = "ACCESS_DENIED"
	CodeNotFound      = "NOT_FOUND"
	CodeCELEvaluation = expr.CodeEvaluation
)

// Error is a rejected definition, or a failed fixed-input or session
// evaluation. Path names the field, such as "tools[3].input.requested_by".
type Error struct {
	Code    string
	Path    string
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

func badRequest(path, format string, args ...any) *Error {
	return &Error{Code: CodeBadRequest, Path: path, Message: fmt.Sprintf(format, args...)}
}

func wrapped(code, path string, err error) *Error {
	return &Error{Code: code, Path: path, Message: err.Error(), Err: err}
}
