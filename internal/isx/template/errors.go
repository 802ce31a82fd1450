package template

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Codes carried by Error. They are machine-readable and stable: callers
// (the CLI, the MCP server) branch on them, people read Message.
const (
	// CodeInvalid: a definition file is malformed YAML, has an unknown key
	// or a value isx does not accept.
	CodeInvalid = "invalid_template"
	// CodeUnreadable: a definition file or source directory cannot be read.
	CodeUnreadable = "unreadable"
	// CodeDuplicate: two files of the same source define the same name.
	CodeDuplicate = "duplicate_template"
	// CodeNotFound: no source defines the requested template.
	CodeNotFound = "not_found"
	// CodeMissingParent: a definition names a parent no source defines.
	CodeMissingParent = "missing_parent"
	// CodeCycle: following parents leads back to a template already seen.
	CodeCycle = "parent_cycle"
	// CodeNoRootImage: the chain's first definition names no image.
	CodeNoRootImage = "no_root_image"
	// CodeNotApproved: the template may never be used through MCP.
	CodeNotApproved = "not_approved"
	// CodeBadOptions: Load was called with options it cannot use.
	CodeBadOptions = "invalid_options"
)

// Error is every failure this package reports. File and Line locate the
// problem (Line is 0 when no single line is at fault), Field names the
// setting in the definition (like "run[2].user"), Message says what is
// wrong and how to fix it.
type Error struct {
	Code    string
	File    string
	Line    int
	Field   string
	Message string
	// Err is the underlying cause, when there is one (an I/O error, say).
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":")
			b.WriteString(strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error by code alone, so that
// errors.Is(err, &template.Error{Code: template.CodeNotApproved}) works.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code != "" && t.Code == e.Code
}

// CodeOf returns the code of the first *Error in err's chain, or "" when
// err is nil or carries none.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func invalidf(file string, line int, field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, File: file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)}
}
