package template

import (
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

// Error is every failure this package reports: where (Key names the
// setting in the definition, like "run[2].user"), what is wrong and how to
// fix it, and the underlying cause, when there is one (an I/O error, say).
// It matches another coded error by code alone, so that
// errors.Is(err, &coded.Error{Code: template.CodeNotApproved}) works.
type Error struct{ yamltree.Located }

func invalidf(file string, line int, key, format string, args ...any) *Error {
	return &Error{yamltree.Problem(CodeInvalid, yamltree.Place{File: file, Line: line, Key: key}, nil, format, args...)}
}

// unreadable is a file or directory that cannot be read at all.
func unreadable(path, what string, err error) *Error {
	return &Error{yamltree.Problem(CodeUnreadable, yamltree.Place{File: path}, err, "%s: %v", what, err)}
}
