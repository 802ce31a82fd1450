// Package config reads and writes isx's own settings:
// ~/.config/incus-spawn/config.yaml, read by every command and written by
// `isx init`, and ~/.config/incus-spawn/mcp.yaml, which approves templates
// and sets the limits of `isx mcp` and which only `isx init` (or the user)
// ever writes. The home directory is always passed in, never read from the
// environment here.
package config

import "path/filepath"

// Dir is isx's configuration directory.
func Dir(home string) string {
	return filepath.Join(home, ".config", "incus-spawn")
}

// StateDir holds isx's state, such as the MCP audit log.
func StateDir(home string) string {
	return filepath.Join(home, ".local", "state", "incus-spawn")
}

// ConfigPath is config.yaml.
func ConfigPath(home string) string {
	return filepath.Join(Dir(home), "config.yaml")
}

// MCPPath is mcp.yaml.
func MCPPath(home string) string {
	return filepath.Join(Dir(home), "mcp.yaml")
}
