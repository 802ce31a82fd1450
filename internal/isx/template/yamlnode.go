package template

import (
	"github.com/incusspawn/isx/internal/isx/yamltree"
)

// fromTree gives a problem yamltree found in a definition this package's
// error type and code.
func fromTree(e *yamltree.Error) error {
	e.Code = CodeInvalid
	return &Error{*e}
}
