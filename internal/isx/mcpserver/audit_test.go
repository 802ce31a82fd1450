package mcpserver

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/isx/audit"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
)

func readAudit(t *testing.T, path string) []audit.Entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Entry
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var entry audit.Entry
		if err := json.Unmarshal(scanner.Bytes(), &entry); err != nil {
			t.Fatalf("audit line %q: %v", scanner.Text(), err)
		}
		out = append(out, entry)
	}
	return out
}

// Every call is logged, with its arguments and outcome, to
// ~/.local/state/incus-spawn/mcp.log (0600), and credentials are scrubbed
// from arguments and from the output logged.
//
// ISX-276, ISX-277.
func TestAuditLogISX276(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\n")
	s := e.start(sessionOptions{})
	token := "ghp_" + strings.Repeat("Ab1", 12)
	apiKey := "sk-ant-api03-" + strings.Repeat("xY7", 10)
	var made CreateInstanceResult
	s.ok("list_templates", map[string]any{}, nil)
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox", "purpose": "audit"}, &made)
	var run ExecResult
	s.ok("exec", map[string]any{
		"instance": made.Instance,
		"command":  "echo using " + token + "; echo \"$ANTHROPIC_API_KEY\"",
		"env":      map[string]any{"ANTHROPIC_API_KEY": apiKey},
	}, &run)
	if !strings.Contains(*run.Stdout, token) || !strings.Contains(*run.Stdout, apiKey) {
		t.Fatalf("the command did not echo its secrets: %q", *run.Stdout)
	}
	s.refused("exec", map[string]any{"instance": made.Instance, "command": "true", "max_turns": 1}, CodeInvalidArgument)
	s.ok("list_instances", map[string]any{}, nil)
	s.close()

	data, err := os.ReadFile(e.auditLog())
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{token, apiKey, "Ab1Ab1Ab1", "xY7xY7xY7"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("the audit log holds a secret (%s):\n%s", secret, data)
		}
	}
	entries := readAudit(t, e.auditLog())
	var tools []string
	for _, entry := range entries {
		tools = append(tools, entry.Tool)
		if entry.Session != s.sessionID() || entry.Time.IsZero() {
			t.Errorf("entry %+v", entry)
		}
	}
	want := []string{"list_templates", "create_instance", "exec", "exec", "list_instances"}
	if strings.Join(tools, ",") != strings.Join(want, ",") {
		t.Fatalf("logged %v, want %v", tools, want)
	}
	execEntry := entries[2]
	if execEntry.Outcome != audit.OutcomeOK || execEntry.Instance != made.Instance || !strings.Contains(string(execEntry.Arguments), "echo using") ||
		!strings.Contains(string(execEntry.Result), `"exit_code":0`) || !strings.Contains(string(execEntry.Result), audit.Redacted) {
		t.Errorf("exec entry = %+v", execEntry)
	}
	if refusal := entries[3]; refusal.Outcome != audit.OutcomeRefused || refusal.Code != "invalid_argument" || refusal.Message == "" {
		t.Errorf("refusal entry = %+v", refusal)
	}
	info, err := os.Stat(e.auditLog())
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mcp.log mode %v", info.Mode().Perm())
	}
}
