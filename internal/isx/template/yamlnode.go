package template

import "github.com/incusspawn/isx/internal/isx/yamltree"

// fromTree gives a problem yamltree found in a definition this package's
// error type and code.
func fromTree(e *yamltree.Error) error {
	return &Error{Code: CodeInvalid, File: e.File, Line: e.Line, Field: e.Key, Message: e.Message, Err: e.Err}
}
