package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzLoadMCP: LoadMCP never panics, every failure is a *Error with code
// config_invalid naming mcp.yaml's full path, and every success has values
// within their documented bounds.
func FuzzLoadMCP(f *testing.F) {
	f.Add([]byte(seedMCP))
	f.Add([]byte(""))
	f.Add([]byte("templates: [tpl-a\n"))
	f.Add([]byte("max-instances: -1\n"))
	f.Add([]byte("delegate-max-turns: 200\n"))
	f.Add([]byte("codex: {sandbox-modes: {tpl-a: read-only}}\n"))
	f.Add([]byte("a: &x [*x]\n"))
	home := f.TempDir()
	path := writeMCP(f, home, "")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := LoadMCP(home)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if ce.Code != CodeInvalid || ce.File != path || !strings.Contains(err.Error(), "mcp.yaml") || ce.Message == "" {
				t.Fatalf("incomplete error %+v", ce)
			}
			return
		}
		if m.Path != path || m.MaxInstances < 0 || m.MaxInstances > MaxCount || m.MaxConcurrentTasks < 0 || m.MaxConcurrentTasks > MaxCount {
			t.Fatalf("counts out of bounds: %+v", m)
		}
		for _, h := range []int{m.OrphanGraceHours, m.DormantAfterHours, m.DormantGraceHours} {
			if h < MinHours || h > MaxHours {
				t.Fatalf("hours out of bounds: %+v", m)
			}
		}
		if !contains(ClaudePermissionModes, m.DelegatePermissionMode) || !contains(CodexSandboxModes, m.Codex.SandboxMode) {
			t.Fatalf("modes: %+v", m)
		}
		for _, name := range m.Templates {
			if !m.Approves(name) {
				t.Fatalf("listed %s but does not approve it", name)
			}
			_, _ = m.CodexSandboxMode(name)
		}
	})
}
