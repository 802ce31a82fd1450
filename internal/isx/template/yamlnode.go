package template

import (
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/yamltree"
)

// fromTree gives a problem yamltree found in a definition this package's
// error type and code.
func fromTree(e *yamltree.Error) error {
	return &Error{Base: coded.Base{Code: CodeInvalid, Message: e.Message, Err: e.Err}, File: e.File, Line: e.Line, Field: e.Key}
}
