package action

import (
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/expr"
	"github.com/incusspawn/isx/internal/coded"
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
	coded.Base
	Path string
}

func newError(code, path, message string, cause error) *Error {
	return &Error{Base: coded.Base{Code: code, Message: message, Err: cause}, Path: path}
}

// Error is the path, then the message; the cause stays out of it, since the
// message already says what it said.
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

func badRequest(path, format string, args ...any) *Error {
	return newError(CodeBadRequest, path, fmt.Sprintf(format, args...), nil)
}

func wrapped(code, path string, err error) *Error {
	return newError(code, path, err.Error(), err)
}
