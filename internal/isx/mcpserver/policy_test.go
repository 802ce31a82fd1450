package mcpserver

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// Every way mcp.yaml can be unusable refuses every call, naming mcp.yaml
// and what is wrong; the fix applies to the very next call of the same
// server process. mcp.yaml is never written.
//
// ISX-002, ISX-003, ISX-004, ISX-005, ISX-006, ISX-007, ISX-008, ISX-009, ISX-023.
func TestMCPYAMLFailureModes(t *testing.T) {
	e := offlineEnv(t)
	s := e.startOffline(sessionOptions{})
	pid := s.cmd.Process.Pid

	// ISX-002: missing approves nothing; nothing is created.
	var list ListTemplatesResult
	s.ok("list_templates", map[string]any{}, &list)
	if len(list.Templates) != 0 || list.MaxInstances != 8 || list.MaxConcurrentTasks != 8 || list.OrphanGraceHours != 24 {
		t.Errorf("without mcp.yaml: %+v", list)
	}
	s.refused("create_instance", map[string]any{"template": "tpl-test-busybox"}, CodeNotApproved)
	if _, err := os.Stat(e.mcpPath()); err == nil {
		t.Fatal("isx mcp created mcp.yaml")
	}
	// ISX-003: empty approves nothing.
	e.writeMCP("")
	s.ok("list_templates", map[string]any{}, &list)
	if len(list.Templates) != 0 {
		t.Errorf("empty mcp.yaml approves %v", list.Templates)
	}
	s.refused("create_instance", map[string]any{"template": "tpl-test-busybox"}, CodeNotApproved)

	cases := []struct {
		name, content string
		want          []string
	}{
		{"unknown key (ISX-008)", "templates: []\nmax-instancs: 3\n", []string{"max-instancs"}},
		{"bad value (ISX-009)", "max-instances: lots\n", []string{"max-instances"}},
		{"negative value (ISX-009)", "max-instances: -1\n", []string{"max-instances"}},
		{"bad mode", "delegate-permission-mode: yolo\n", []string{"delegate-permission-mode"}},
		{"malformed (ISX-007)", "templates: [tpl-a\n", nil},
		{"retired turn limit (ISX-023)", "templates: []\ndelegate-max-turns: 200\n", []string{"delegate-max-turns"}},
	}
	for _, c := range cases {
		e.writeMCP(c.content)
		for _, tool := range []string{"list_templates", "list_instances", "create_instance"} {
			meta := s.refused(tool, e.argsFor(tool), CodeRefused)
			msg := meta["message"].(string)
			if !strings.Contains(msg, "mcp.yaml") {
				t.Errorf("%s, %s: the refusal does not name mcp.yaml: %s", c.name, tool, msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s, %s: the refusal does not name %s: %s", c.name, tool, w, msg)
				}
			}
		}
	}
	// ISX-006: unreadable (root reads any mode, so a directory stands in).
	if err := os.Remove(e.mcpPath()); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(e.mcpPath(), 0o700); err != nil {
		t.Fatal(err)
	}
	meta := s.refused("list_templates", map[string]any{}, CodeRefused)
	if msg := meta["message"].(string); !strings.Contains(msg, "mcp.yaml") {
		t.Errorf("unreadable: %s", msg)
	}
	if err := os.Remove(e.mcpPath()); err != nil {
		t.Fatal(err)
	}
	// ISX-004: the fix applies to the next call of the same process.
	e.writeMCP("max-instances: 3\n")
	s.ok("list_templates", map[string]any{}, &list)
	if list.MaxInstances != 3 || s.cmd.Process.Pid != pid {
		t.Errorf("after the fix: %+v", list)
	}
}

func (e *env) argsFor(tool string) map[string]any {
	if tool == "create_instance" {
		return map[string]any{"template": "tpl-a"}
	}
	return map[string]any{}
}

// The retired mcp: section of config.yaml: alone it refuses everything and
// is never read as a fallback; beside mcp.yaml it only brings a reminder.
//
// ISX-020, ISX-021, ISX-022.
func TestOldMCPSectionISX021(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox, buildtest.BusyBoxChild)
	configYAML := "project: " + e.client.ProjectName() + "\ntemplate-paths: [" + buildtest.Dir(t) + "]\nmcp:\n  templates: [tpl-test-busybox-child]\n  max-instances: 2\n"
	if err := os.WriteFile(config.ConfigPath(e.home), []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	s := e.start(sessionOptions{})
	for _, tool := range []string{"list_templates", "create_instance", "list_instances"} {
		meta := s.refused(tool, e.argsFor(tool), CodeRefused)
		if msg := meta["message"].(string); !strings.Contains(msg, "config.yaml") || !strings.Contains(msg, "mcp:") {
			t.Errorf("%s: the refusal does not point at the old section: %s", tool, msg)
		}
	}
	// ISX-020, ISX-022: with mcp.yaml, only mcp.yaml counts, and the user
	// is reminded to delete the section.
	e.writeMCP("templates: [tpl-test-busybox]\n")
	res := s.call("list_templates", map[string]any{})
	if res.IsError {
		t.Fatalf("refused with mcp.yaml present: %s", resultText(res))
	}
	var list ListTemplatesResult
	s.ok("list_templates", map[string]any{}, &list)
	if len(list.Templates) != 1 || list.Templates[0].Template != "tpl-test-busybox" || list.MaxInstances != 8 {
		t.Errorf("the old section was read: %+v", list)
	}
	if text := resultText(res); !strings.Contains(text, "config.yaml") || !strings.Contains(text, "delete the section") {
		t.Errorf("no reminder in the result: %s", text)
	}
	incustest.WaitFor(t, "the reminder on stderr", 10*time.Second, func() bool {
		return strings.Contains(s.stderr.String(), "still has an `mcp:` section")
	})
}

// ISX-005: calling every kind of tool leaves mcp.yaml exactly as it was.
func TestMCPYAMLNeverWrittenISX005(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("# the user's comment\ntemplates: [tpl-test-busybox]   # approved\n")
	before, err := os.ReadFile(e.mcpPath())
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(e.mcpPath())
	if err != nil {
		t.Fatal(err)
	}
	s := e.start(sessionOptions{})
	var made CreateInstanceResult
	s.ok("list_templates", map[string]any{}, nil)
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &made)
	s.ok("exec", map[string]any{"instance": made.Instance, "command": "true"}, nil)
	s.ok("keep_instance", map[string]any{"instance": made.Instance}, nil)
	s.ok("list_instances", map[string]any{}, nil)
	s.close()
	after, err := os.ReadFile(e.mcpPath())
	if err != nil {
		t.Fatal(err)
	}
	info2, err := os.Stat(e.mcpPath())
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(before) != sha256.Sum256(after) || !info.ModTime().Equal(info2.ModTime()) {
		t.Errorf("mcp.yaml changed:\n%s\n---\n%s", before, after)
	}
	entries, err := os.ReadDir(filepath.Dir(e.mcpPath()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, entry := range entries {
		names = append(names, entry.Name())
	}
	if !slices.Equal(names, []string{"config.yaml", "mcp.yaml"}) {
		t.Errorf("the config directory holds %v", names)
	}
	if !bytes.Contains(after, []byte("# approved")) {
		t.Error("comment lost")
	}
}
