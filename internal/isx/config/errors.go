package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Codes carried by Error.
const (
	// CodeInvalid: config.yaml or mcp.yaml cannot be used: unreadable,
	// malformed, an unknown key or a value isx does not accept. isx mcp
	// refuses every call that depends on the file until it is fixed.
	CodeInvalid = "config_invalid"
	// CodeOldMCPSection: config.yaml still has the retired `mcp:` section
	// and mcp.yaml does not exist, so isx mcp refuses everything rather
	// than quietly replace the old limits with defaults.
	CodeOldMCPSection = "old_mcp_section"
	// CodeSandboxModeRequired: Codex was asked for on a template whose
	// Claude permission mode is restricted, and mcp.yaml gives no Codex
	// sandbox mode that applies to it.
	CodeSandboxModeRequired = "sandbox_mode_required"
)

// Error is every failure this package reports. File is the full path of
// the file at fault, Line its line (0 when no single line is), Key the
// setting (like "codex.sandbox-mode"), Message what is wrong and what to do.
type Error struct {
	Code    string
	File    string
	Line    int
	Key     string
	Message string
	Err     error
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
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
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

func invalidf(file string, line int, key, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, File: file, Line: line, Key: key, Message: fmt.Sprintf(format, args...)}
}
