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

// ProxyDir holds the host proxy's state: its control socket, the sockets
// instances reach it through, its log, the instance secrets and its CA.
func ProxyDir(home string) string {
	return filepath.Join(StateDir(home), "proxy")
}

// AccountsPath is accounts.yaml, the credentials the host proxy injects.
func AccountsPath(home string) string {
	return filepath.Join(Dir(home), "accounts.yaml")
}
