package template

import (
	"fmt"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/yamltree"
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
// wrong and how to fix it, and Err is the underlying cause, when there is
// one (an I/O error, say). It matches another coded error by code alone,
// so that errors.Is(err, &coded.Error{Code: template.CodeNotApproved})
// works.
type Error struct {
	coded.Base
	File  string
	Line  int
	Field string
}

func (e *Error) Error() string { return yamltree.Locate(e.File, e.Line, e.Field, e.Message) }

func invalidf(file string, line int, field, format string, args ...any) *Error {
	return &Error{Base: coded.Base{Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}, File: file, Line: line, Field: field}
}

// unreadable is a file or directory that cannot be read at all.
func unreadable(path, what string, err error) *Error {
	return &Error{Base: coded.Base{Code: CodeUnreadable, Message: what + ": " + err.Error(), Err: err}, File: path}
}
