package instance

import "errors"

// Codes carried by Error: machine-readable and stable.
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
	// CodeNotBuilt: the named template has no built instance.
	CodeNotBuilt = "not_built"
	// CodeBranchFailed: Incus could not make or start the new instance;
	// nothing of it is left.
	CodeBranchFailed = "branch_failed"
)

// Error is a failure with a code and a sentence a person can act on; Err
// is the cause, when there is one.
type Error struct {
	Code     string
	Instance string
	Message  string
	Err      error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error by code alone.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code != "" && t.Code == e.Code
}

// CodeOf returns the code of the first *Error in err's chain, or "".
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
