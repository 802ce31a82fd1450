package config

import (
	"fmt"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/yamltree"
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
	coded.Base
	File string
	Line int
	Key  string
}

func (e *Error) Error() string { return yamltree.Locate(e.File, e.Line, e.Key, e.Message) }

func invalidf(file string, line int, key, format string, args ...any) *Error {
	return &Error{Base: coded.Base{Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}, File: file, Line: line, Key: key}
}

// unusable is a settings file that cannot be read or written at all.
func unusable(path, what string, err error) *Error {
	return &Error{Base: coded.Base{Code: CodeInvalid, Message: what + ": " + err.Error(), Err: err}, File: path}
}
