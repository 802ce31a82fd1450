package config

import (
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

// Error is every failure this package reports: where (File is the full
// path of the file at fault, Line its line or 0, Key the setting, like
// "codex.sandbox-mode") and what is wrong and what to do.
type Error struct{ yamltree.Located }

func invalidf(file string, line int, key, format string, args ...any) *Error {
	return &Error{yamltree.Problem(CodeInvalid, yamltree.Place{File: file, Line: line, Key: key}, nil, format, args...)}
}

// unusable is a settings file that cannot be read or written at all.
func unusable(path, what string, err error) *Error {
	return &Error{yamltree.Problem(CodeInvalid, yamltree.Place{File: path}, err, "%s: %v", what, err)}
}
