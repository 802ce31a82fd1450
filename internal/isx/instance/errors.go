package instance

import (
	"github.com/incusspawn/isx/internal/coded"
)

// Codes of this package's failures (NewError): machine-readable and stable.
const (
	// CodeInvalid: an argument isx does not accept (a name, a network mode).
	CodeInvalid = "invalid_argument"
	// CodeNotFound: no instance of that name in the project.
	CodeNotFound = "not_found"
	// CodeExists: the name is taken.
	CodeExists = "exists"
	// CodeNotManaged: the instance was not made by isx (it has no
	// user.isx.type stamp), so isx leaves it alone.
	CodeNotManaged = "not_managed"
	// CodeIsTemplate: the instance is a built template and the caller did
	// not say it meant one.
	CodeIsTemplate = "is_template"
	// CodeRunning: the instance runs, and the caller did not say it may
	// be stopped.
	CodeRunning = "running"
	// CodeNotBuilt: the named template has no built instance.
	CodeNotBuilt = "not_built"
	// CodeBranchFailed: Incus could not make or start the new instance;
	// nothing of it is left.
	CodeBranchFailed = "branch_failed"
	// CodePrepareFailed: the host proxy could not write an instance's
	// secret and CA into it at a start.
	CodePrepareFailed = "prepare_failed"
)

// NewError is a failure with a code and a sentence a person can act on,
// about the instance named (About "instance"); err is the cause, when
// there is one.
func NewError(code, instance string, err error, format string, args ...any) *coded.Error {
	return coded.Wrap(code, err, format, args...).On("instance", instance)
}
