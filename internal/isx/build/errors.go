package build

import (
	"errors"
	"fmt"
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
	// CodeInvalidRequest: the build request itself is wrong.
	CodeInvalidRequest = "invalid_request"
)

// Error is a build failure with a code and a sentence a person can act on.
type Error struct {
	Code     string
	Template string
	Message  string
	Err      error
}

func (e *Error) Error() string {
	msg := e.Message
	if e.Template != "" {
		msg = "template " + e.Template + ": " + msg
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
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

// CodeOf returns the code of the first *Error or *StepError in err's
// chain, or "".
func CodeOf(err error) string {
	var step *StepError
	if errors.As(err, &step) {
		return CodeStepFailed
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// StepError is a build step that failed: which one, how, and what it
// printed. The build instance has been deleted by the time it is returned.
type StepError struct {
	Template string
	Step     string // the step's name, or a description of it
	Index    int    // 1-based among the template's run steps; 0 for isx's own steps
	ExitCode int
	TimedOut bool
	Stdout   []byte
	Stderr   []byte
}

func (e *StepError) Error() string {
	how := fmt.Sprintf("exited with code %d", e.ExitCode)
	if e.TimedOut {
		how = "timed out"
	}
	return fmt.Sprintf("template %s: step %q %s; nothing was left behind (the template instance, if there was one, is unchanged)", e.Template, e.Step, how)
}
