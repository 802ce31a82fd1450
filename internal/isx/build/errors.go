package build

import (
	"fmt"

	"github.com/incusspawn/isx/internal/coded"
)

// Codes carried by Error: machine-readable and stable.
const (
	// CodeImageNotFound: the root image alias is not in Incus's image store.
	CodeImageNotFound = "image_not_found"
	// CodeImageUnreadable: a local image tarball cannot be read.
	CodeImageUnreadable = "image_unreadable"
	// CodeStepFailed: a build step exited non-zero; see StepError.
	CodeStepFailed = "step_failed"
	// CodeNeedsNetwork: the template lists packages, and the build
	// instance has no network to fetch them with.
	CodeNeedsNetwork = "needs_network"
	// CodeNameTaken: an instance that is not a built template has the
	// template's name.
	CodeNameTaken = "name_taken"
	// CodeParentNotBuilt: a parent template has no built instance.
	CodeParentNotBuilt = "parent_not_built"
	// CodeBuildFailed: something other than a step failed while building.
	CodeBuildFailed = "build_failed"
	// CodeToolFailed: an agent tool of the template cannot be installed
	// (not in the npm cache and not fetchable, or it does not run here).
	CodeToolFailed = "tool_failed"
	// CodeInvalidRequest: the build request itself is wrong.
	CodeInvalidRequest = "invalid_request"
)

// Error is a build failure with a code and a sentence a person can act on,
// about the template named.
type Error struct {
	coded.Base
	Template string
}

func (e *Error) Error() string {
	msg := e.Base.Error()
	if e.Template != "" {
		msg = "template " + e.Template + ": " + msg
	}
	return msg
}

func failure(code, template string, err error, format string, args ...any) *Error {
	return &Error{Base: coded.Base{Code: code, Message: fmt.Sprintf(format, args...), Err: err}, Template: template}
}

// StepError is a build step that failed: which one, how, and what it
// printed, with the code CodeStepFailed. The build instance has been
// deleted by the time it is returned.
type StepError struct {
	coded.Base
	Template string
	Step     string // the step's name, or a description of it
	Index    int    // 1-based among the template's run steps; 0 for isx's own steps
	ExitCode int
	TimedOut bool
	Stdout   []byte
	Stderr   []byte
	// Shown says the output was already shown as it was printed
	// (Builder.Verbose), so it need not be shown again.
	Shown bool
}

func (e *StepError) Error() string {
	how := fmt.Sprintf("exited with code %d", e.ExitCode)
	if e.TimedOut {
		how = "timed out"
	}
	return fmt.Sprintf("template %s: step %q %s; nothing was left behind (the template instance, if there was one, is unchanged)", e.Template, e.Step, how)
}
