package config

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/coded"
)

// seedMCP is seed 001's example, less the delegate-max-turns line seed 000
// retires (kept as the comment it is there).
const seedMCP = `templates: [tpl-java, tpl-dev]   # the only templates an agent may branch from
max-instances: 8                 # per host user, across sessions (default 8)
max-concurrent-tasks: 8          # background commands and delegated agents, per host user, across sessions (default 8)
# delegate-max-turns: 200        # optional Claude turn ceiling; Codex is refused while this is set
delegate-permission-mode: bypassPermissions   # Claude's --permission-mode (default shown)
delegate-permission-modes:       # per-template overrides, e.g. a reviewer that only plans
  tpl-review: plan
codex:
  sandbox-mode: danger-full-access  # Codex always runs with approval_policy=never
  sandbox-modes:
    tpl-codex-review: read-only
orphan-grace-hours: 24           # how long an instance outlives its session (default 24)
dormant-after-hours: 24          # past that, one kept only for a delegate showing no activity
                                 # this long is stopped instead (default 24)
dormant-grace-hours: 168         # and destroyed this long after (default 168)
summary-model: haiku             # answers the tools' ` + "`ask`" + ` inside the instance (default haiku)
`

func writeMCP(t testing.TB, home, content string) string {
	t.Helper()
	path := MCPPath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustLoadMCP(t *testing.T, home string) *MCP {
	t.Helper()
	m, err := LoadMCP(home)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ISX-001: approvals and limits come from mcp.yaml beside config.yaml.
func TestISX001LoadMCPSeedExample(t *testing.T) {
	home := t.TempDir()
	path := writeMCP(t, home, seedMCP)
	if path != filepath.Join(home, ".config", "incus-spawn", "mcp.yaml") || filepath.Dir(path) != filepath.Dir(ConfigPath(home)) {
		t.Fatalf("mcp.yaml at %s", path)
	}
	m := mustLoadMCP(t, home)
	want := &MCP{
		Path: path, State: FilePresent,
		Templates:    []string{"tpl-java", "tpl-dev"},
		MaxInstances: 8, MaxConcurrentTasks: 8,
		DelegatePermissionMode:  "bypassPermissions",
		DelegatePermissionModes: map[string]string{"tpl-review": "plan"},
		Codex: CodexSettings{SandboxMode: "danger-full-access", SandboxModes: map[string]string{"tpl-codex-review": "read-only"},
			SandboxModeSet: true},
		OrphanGraceHours: 24, DormantAfterHours: 24, DormantGraceHours: 168,
		SummaryModel: "haiku", Warm: map[string]int{},
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got  %+v\nwant %+v", m, want)
	}
	if !m.Approves("tpl-dev") || m.Approves("tpl-review") {
		t.Error("Approves")
	}
}

// ISX-002: no mcp.yaml approves nothing; ISX-010, ISX-011, ISX-012, ISX-013, ISX-014, ISX-015: defaults.
func TestISX002MissingMCPApprovesNothing(t *testing.T) {
	home := t.TempDir()
	m := mustLoadMCP(t, home)
	if m.State != FileMissing || len(m.Templates) != 0 || m.Approves("tpl-dev") {
		t.Fatalf("%+v", m)
	}
	checkDefaults(t, m)
}

// ISX-003: an empty mcp.yaml approves nothing, and is told apart from a
// missing one.
func TestISX003EmptyMCPApprovesNothing(t *testing.T) {
	for _, content := range []string{"", "\n\n", "# nothing approved yet\n", "---\n", "~\n"} {
		home := t.TempDir()
		writeMCP(t, home, content)
		m := mustLoadMCP(t, home)
		if m.State != FileEmpty || len(m.Templates) != 0 || m.Approves("tpl-dev") {
			t.Errorf("%q: %+v", content, m)
		}
		checkDefaults(t, m)
	}
	home := t.TempDir()
	writeMCP(t, home, "templates:\n")
	if m := mustLoadMCP(t, home); m.State != FilePresent || len(m.Templates) != 0 {
		t.Errorf("templates: with no list: %+v", m)
	}
	writeMCP(t, home, "templates: []\n")
	if m := mustLoadMCP(t, home); m.State != FilePresent || len(m.Templates) != 0 {
		t.Errorf("templates: []: %+v", m)
	}
}

// ISX-010, ISX-011, ISX-012, ISX-013, ISX-014, ISX-015: defaults when a
// file sets only templates.
func TestISX010To015Defaults(t *testing.T) {
	home := t.TempDir()
	writeMCP(t, home, "templates: [tpl-a]\n")
	m := mustLoadMCP(t, home)
	checkDefaults(t, m)
	if m.OrphanGrace() != 24*time.Hour || m.DormantAfter() != 24*time.Hour || m.DormantGrace() != 168*time.Hour {
		t.Errorf("durations %v %v %v", m.OrphanGrace(), m.DormantAfter(), m.DormantGrace())
	}
}

func checkDefaults(t *testing.T, m *MCP) {
	t.Helper()
	got := fmt.Sprintf("%d %d %d %d %d %s %s %s %v %d %d", m.MaxInstances, m.MaxConcurrentTasks, m.OrphanGraceHours, m.DormantAfterHours, m.DormantGraceHours,
		m.SummaryModel, m.DelegatePermissionMode, m.Codex.SandboxMode, m.Codex.SandboxModeSet, len(m.DelegatePermissionModes), len(m.Codex.SandboxModes))
	if want := "8 8 24 24 168 haiku bypassPermissions danger-full-access false 0 0"; got != want {
		t.Errorf("defaults %s, want %s", got, want)
	}
}

// ISX-016, ISX-017, ISX-018, ISX-019: set values are the ones used.
func TestISX016To019SetValues(t *testing.T) {
	home := t.TempDir()
	writeMCP(t, home, "max-instances: 3\nmax-concurrent-tasks: 5\norphan-grace-hours: 2\ndormant-after-hours: 6\ndormant-grace-hours: 12\nsummary-model: sonnet\n")
	m := mustLoadMCP(t, home)
	got := fmt.Sprintf("%d %d %d %d %d %s", m.MaxInstances, m.MaxConcurrentTasks, m.OrphanGraceHours, m.DormantAfterHours, m.DormantGraceHours, m.SummaryModel)
	if got != "3 5 2 6 12 sonnet" {
		t.Fatalf("got %s", got)
	}
	if m.OrphanGrace() != 2*time.Hour {
		t.Errorf("OrphanGrace %v", m.OrphanGrace())
	}
}

// Counts accept 0 (no instances, no tasks: a way to pause agents); hours
// do not (a grace of 0 destroys orphans when a coordinator restarts).
func TestZeroIsAcceptedOnlyForCounts(t *testing.T) {
	home := t.TempDir()
	writeMCP(t, home, "max-instances: 0\nmax-concurrent-tasks: 0\n")
	if m := mustLoadMCP(t, home); m.MaxInstances != 0 || m.MaxConcurrentTasks != 0 {
		t.Fatalf("%+v", m)
	}
	for _, key := range []string{"orphan-grace-hours", "dormant-after-hours", "dormant-grace-hours"} {
		path := writeMCP(t, home, key+": 0\n")
		_, err := LoadMCP(home)
		if coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), path+":1: "+key+": must be at least 1") {
			t.Errorf("%s: 0 gave %v", key, err)
		}
	}
}

// ISX-004: every load reads the file again.
func TestISX004EditTakesEffectOnNextLoad(t *testing.T) {
	home := t.TempDir()
	writeMCP(t, home, "templates: [tpl-a]\n")
	if m := mustLoadMCP(t, home); m.Approves("tpl-b") {
		t.Fatal("tpl-b approved too early")
	}
	writeMCP(t, home, "templates: [tpl-a, tpl-b]\n")
	if m := mustLoadMCP(t, home); !m.Approves("tpl-b") {
		t.Fatal("edit not seen")
	}
	if err := os.Remove(MCPPath(home)); err != nil {
		t.Fatal(err)
	}
	if m := mustLoadMCP(t, home); m.Approves("tpl-a") || m.State != FileMissing {
		t.Fatal("removal not seen")
	}
}

// ISX-005: reading mcp.yaml (and the status check) never writes it or
// creates it.
func TestISX005LoadMCPNeverWrites(t *testing.T) {
	home := t.TempDir()
	for i := 0; i < 3; i++ {
		mustLoadMCP(t, home)
		if _, err := MCPStatus(home); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(MCPPath(home)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("mcp.yaml appeared: %v", err)
	}
	if _, err := os.Stat(Dir(home)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("config directory appeared: %v", err)
	}
	path := writeMCP(t, home, seedMCP)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	before := sha256.Sum256([]byte(seedMCP))
	for i := 0; i < 3; i++ {
		mustLoadMCP(t, home)
		if _, err := MCPStatus(home); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(path)
	info, _ := os.Stat(path)
	if sha256.Sum256(data) != before || !info.ModTime().Equal(old) {
		t.Fatal("mcp.yaml changed")
	}
	entries, _ := os.ReadDir(Dir(home))
	if len(entries) != 1 {
		t.Fatalf("config directory holds %v", entries)
	}
}

// ISX-006: an mcp.yaml that cannot be read is an error naming mcp.yaml
// and the read failure.
func TestISX006UnreadableMCP(t *testing.T) {
	t.Run("permission denied", func(t *testing.T) {
		home := unprivilegedHome(t)
		path := writeMCP(t, home, "templates: [tpl-a]\n")
		if err := os.Chmod(path, 0); err != nil {
			t.Fatal(err)
		}
		code, msg := loadMCPUnprivileged(t, home)
		if code != CodeInvalid || !strings.Contains(msg, path) || !strings.Contains(msg, "cannot be read") || !strings.Contains(msg, "permission denied") {
			t.Fatalf("code %q message %q", code, msg)
		}
	})
	t.Run("a directory", func(t *testing.T) {
		home := t.TempDir()
		path := MCPPath(home)
		if err := os.MkdirAll(path, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := LoadMCP(home)
		if coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), path+": cannot be read") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		home := t.TempDir()
		path := writeMCP(t, home, "templates: []\n"+strings.Repeat("# padding\n", maxFileSize/10+1))
		_, err := LoadMCP(home)
		if coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), path) {
			t.Fatalf("got %v", err)
		}
	})
}

// ISX-007, ISX-008, ISX-009, ISX-023: every problem with mcp.yaml is an
// error with code config_invalid naming mcp.yaml's full path, the line and
// the setting.
func TestISX007To009And023InvalidMCP(t *testing.T) {
	cases := []struct {
		name, yaml string
		line       int
		key, text  string
	}{
		{"ISX-007 malformed", "templates: [tpl-a\n", 2, "", "not valid YAML"},
		{"ISX-007 bad indentation", "templates: []\n  max-instances: 3\n", 2, "", "not valid YAML"},
		{"two documents", "templates: []\n---\nmax-instances: 3\n", 2, "", "more than one YAML document"},
		{"not a mapping", "- tpl-a\n", 1, "", "must be a mapping"},
		{"just text", "tpl-a\n", 1, "", "must be a mapping"},
		{"ISX-008 unknown key", "templates: [tpl-a]\nmax-instancs: 3\n", 2, "max-instancs", `unknown key "max-instancs"`},
		{"unknown codex key", "codex:\n  sandbox: read-only\n", 2, "codex.sandbox", "unknown key"},
		{"ISX-023 delegate-max-turns", "templates: [tpl-a]\ndelegate-max-turns: 200\n", 2, "delegate-max-turns", "turn limits are no longer supported"},
		{"ISX-023 max-turns", "max-turns: 10\n", 1, "max-turns", "turn limits"},
		{"ISX-023 codex max-turns", "codex:\n  max-turns: 10\n", 2, "codex.max-turns", "turn limits"},
		{"old mcp wrapper", "mcp:\n  templates: [tpl-a]\n", 1, "mcp", "unknown key"},
		{"duplicate key", "max-instances: 3\nmax-instances: 4\n", 2, "max-instances", "appears twice"},
		{"ISX-009 lots", "max-instances: lots\n", 1, "max-instances", `whole number, not "lots"`},
		{"ISX-009 negative", "max-instances: -1\n", 1, "max-instances", "must not be negative"},
		{"ISX-009 float", "max-instances: 2.5\n", 1, "max-instances", "whole number"},
		{"ISX-009 quoted", "max-instances: \"8\"\n", 1, "max-instances", "whole number"},
		{"ISX-009 hex", "max-instances: 0x10\n", 1, "max-instances", "plain decimal"},
		{"ISX-009 huge", "max-instances: 99999999999999999999\n", 1, "max-instances", "too large"},
		{"ISX-009 list", "max-instances: [1]\n", 1, "max-instances", "whole number"},
		{"ISX-009 empty", "max-instances:\n", 1, "max-instances", "has no value"},
		{"ISX-009 bool", "max-concurrent-tasks: true\n", 1, "max-concurrent-tasks", "whole number"},
		{"tasks negative", "max-concurrent-tasks: -3\n", 1, "max-concurrent-tasks", "negative"},
		{"orphan hours text", "orphan-grace-hours: a day\n", 1, "orphan-grace-hours", "whole number"},
		{"orphan hours too many", "orphan-grace-hours: 876001\n", 1, "orphan-grace-hours", "too large"},
		{"dormant after negative", "dormant-after-hours: -24\n", 1, "dormant-after-hours", "negative"},
		{"dormant grace float", "dormant-grace-hours: 1.5\n", 1, "dormant-grace-hours", "whole number"},
		{"templates not a list", "templates: tpl-a\n", 1, "templates", "must be a list"},
		{"template not a name", "templates: [tpl-a, Tpl_B]\n", 1, "templates[1]", "not a template name"},
		{"template is a mapping", "templates:\n  - {a: b}\n", 2, "templates[0]", "must be text"},
		{"template empty", "templates:\n  -\n", 2, "templates[0]", "must be text"},
		{"bad permission mode", "delegate-permission-mode: yolo\n", 1, "delegate-permission-mode", `"yolo" is not a Claude permission mode`},
		{"permission mode case", "delegate-permission-mode: BypassPermissions\n", 1, "delegate-permission-mode", "not a Claude permission mode"},
		{"permission modes not a map", "delegate-permission-modes: [plan]\n", 1, "delegate-permission-modes", "must be a mapping"},
		{"bad per-template mode", "delegate-permission-modes:\n  tpl-review: readonly\n", 2, "delegate-permission-modes.tpl-review", `"readonly" is not a Claude permission mode`},
		{"bad per-template name", "delegate-permission-modes:\n  Tpl: plan\n", 2, "delegate-permission-modes.Tpl", "not a template name"},
		{"bad sandbox mode", "codex:\n  sandbox-mode: full\n", 2, "codex.sandbox-mode", `"full" is not a Codex sandbox mode`},
		{"codex not a map", "codex: read-only\n", 1, "codex", "must be a mapping"},
		{"bad per-template sandbox", "codex:\n  sandbox-modes:\n    tpl-x: plan\n", 3, "codex.sandbox-modes.tpl-x", "not a Codex sandbox mode"},
		{"summary model list", "summary-model: [haiku]\n", 1, "summary-model", "must be text"},
		{"summary model option", "summary-model: --help\n", 1, "summary-model", "not a model name"},
		{"summary model empty", "summary-model: \"\"\n", 1, "summary-model", "has no value"},
		{"alias", "a: &x 3\n", 1, "a", "unknown key"},
		{"alias value", "max-instances: &x 3\nmax-concurrent-tasks: *x\n", 2, "max-concurrent-tasks", "aliases"},
		{"custom tag", "summary-model: !model haiku\n", 1, "summary-model", "tag"},
		{"warm not a map", "warm: [tpl-a]\n", 1, "warm", "must be a mapping"},
		{"warm bad name", "warm:\n  Tpl_A: 2\n", 2, "warm.Tpl_A", "not a template name"},
		{"warm negative", "warm:\n  tpl-a: -1\n", 2, "warm.tpl-a", "negative"},
		{"warm too many", "warm:\n  tpl-a: 65\n", 2, "warm.tpl-a", "too large"},
		{"warm text", "warm:\n  tpl-a: two\n", 2, "warm.tpl-a", "whole number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			path := writeMCP(t, home, c.yaml)
			_, err := LoadMCP(home)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("got %T %v", err, err)
			}
			if ce.Code != CodeInvalid || ce.File != path || ce.Line != c.line || ce.Key != c.key {
				t.Errorf("got code %s file %s line %d key %q, want line %d key %q (%v)", ce.Code, ce.File, ce.Line, ce.Key, c.line, c.key, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, fmt.Sprintf("%s:%d: ", path, c.line)) || !strings.Contains(msg, "mcp.yaml") {
				t.Errorf("message %q does not start with the file and line", msg)
			}
			if !strings.Contains(msg, c.key) || !strings.Contains(msg, c.text) {
				t.Errorf("message %q does not name %q and %q", msg, c.key, c.text)
			}
		})
	}
}

// warm: counts copies per template, and only approved templates get any.
func TestWarmSetting(t *testing.T) {
	home := t.TempDir()
	writeMCP(t, home, "templates: [tpl-dev]\nwarm:\n  tpl-dev: 2\n  tpl-other: 3\n")
	m := mustLoadMCP(t, home)
	if !reflect.DeepEqual(m.Warm, map[string]int{"tpl-dev": 2, "tpl-other": 3}) {
		t.Fatalf("warm: %v", m.Warm)
	}
	if m.WarmCount("tpl-dev") != 2 || m.WarmCount("tpl-other") != 0 || m.WarmCount("tpl-none") != 0 {
		t.Errorf("WarmCount: %d %d %d", m.WarmCount("tpl-dev"), m.WarmCount("tpl-other"), m.WarmCount("tpl-none"))
	}
	writeMCP(t, home, "templates: [tpl-dev]\n")
	if m := mustLoadMCP(t, home); len(m.Warm) != 0 || m.WarmCount("tpl-dev") != 0 {
		t.Errorf("without warm: %v", m.Warm)
	}
}

// ISX-020: LoadMCP never reads config.yaml's old mcp: section.
func TestISX020OldSectionIsNotAFallback(t *testing.T) {
	home := t.TempDir()
	writeConfig(t, home, "mcp:\n  templates: [tpl-b]\n  max-instances: 2\n")
	writeMCP(t, home, "templates: [tpl-a]\n")
	m := mustLoadMCP(t, home)
	if !reflect.DeepEqual(m.Templates, []string{"tpl-a"}) || m.MaxInstances != 8 {
		t.Fatalf("%+v", m)
	}
	if err := os.Remove(MCPPath(home)); err != nil {
		t.Fatal(err)
	}
	m = mustLoadMCP(t, home)
	if len(m.Templates) != 0 || m.MaxInstances != 8 {
		t.Fatalf("without mcp.yaml: %+v", m)
	}
}

// ISX-021, ISX-022: the old mcp: section refuses everything until mcp.yaml
// exists, then only brings a reminder.
func TestISX021And022MCPStatus(t *testing.T) {
	cases := []struct {
		name     string
		config   string // "" = no config.yaml
		mcp      *string
		decision Decision
		text     string
	}{
		{"nothing", "", nil, DecisionFine, ""},
		{"config without section", "project: default\n", nil, DecisionFine, ""},
		{"mcp.yaml only", "", ptr("templates: [tpl-a]\n"), DecisionFine, ""},
		{"ISX-021 old section, no mcp.yaml", "project: default\nmcp:\n  templates: [tpl-b]\n", nil, DecisionRefuse, "move the section's contents into"},
		{"ISX-021 bare mcp: line", "mcp:\n", nil, DecisionRefuse, "delete the `mcp:` line"},
		{"ISX-022 both", "mcp:\n  max-instances: 2\n", ptr("templates: [tpl-a]\n"), DecisionRemind, "delete the section"},
		{"ISX-022 both, mcp.yaml empty", "mcp:\n  max-instances: 2\n", ptr(""), DecisionRemind, "delete the section"},
		{"old section beside unknown keys", "bogus: 1\nmcp: {}\n", nil, DecisionRefuse, "mcp.yaml does not exist"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			if c.config != "" {
				writeConfig(t, home, c.config)
			}
			if c.mcp != nil {
				writeMCP(t, home, *c.mcp)
			}
			r, err := MCPStatus(home)
			if err != nil {
				t.Fatal(err)
			}
			if r.Decision != c.decision || r.MCPExists != (c.mcp != nil) || r.OldSection != (c.decision != DecisionFine) {
				t.Fatalf("%+v", r)
			}
			msg := r.Message()
			if !strings.Contains(msg, c.text) {
				t.Errorf("message %q lacks %q", msg, c.text)
			}
			if c.decision == DecisionFine {
				if msg != "" || r.Err() != nil {
					t.Errorf("fine but says %q / %v", msg, r.Err())
				}
				return
			}
			line := fmt.Sprintf("%s:%d", ConfigPath(home), r.OldSectionLine)
			if r.OldSectionLine == 0 || !strings.Contains(msg, line) || !strings.Contains(msg, MCPPath(home)) {
				t.Errorf("message %q does not point at %s and mcp.yaml", msg, line)
			}
			err = r.Err()
			if c.decision == DecisionRemind && err != nil {
				t.Errorf("a reminder refuses: %v", err)
			}
			if c.decision == DecisionRefuse && (coded.CodeOf(err) != CodeOldMCPSection || !strings.Contains(err.Error(), "mcp.yaml")) {
				t.Errorf("refusal %v", err)
			}
		})
	}
}

func TestMCPStatusOnMalformedConfig(t *testing.T) {
	home := t.TempDir()
	writeConfig(t, home, "mcp: [\n")
	_, err := MCPStatus(home)
	if coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), ConfigPath(home)) {
		t.Fatalf("got %v", err)
	}
}

func ptr(s string) *string { return &s }

// ISX-099, ISX-101, ISX-103, ISX-104 (settings level): per-template
// overrides, and no silent full-access Codex on a template whose Claude
// mode is restricted.
func TestPermissionAndSandboxModes(t *testing.T) {
	home := t.TempDir()
	writeMCP(t, home, `delegate-permission-modes:
  tpl-review: plan
  tpl-plan-codex: plan
  tpl-open: bypassPermissions
codex:
  sandbox-modes:
    tpl-codex-review: read-only
    tpl-plan-codex: workspace-write
`)
	m := mustLoadMCP(t, home)
	for tpl, want := range map[string]string{"tpl-dev": "bypassPermissions", "tpl-review": "plan", "tpl-open": "bypassPermissions"} {
		if got := m.ClaudePermissionMode(tpl); got != want {
			t.Errorf("Claude mode on %s = %s, want %s", tpl, got, want)
		}
	}
	for tpl, want := range map[string]string{"tpl-dev": "danger-full-access", "tpl-codex-review": "read-only", "tpl-plan-codex": "workspace-write", "tpl-open": "danger-full-access"} {
		if got, err := m.CodexSandboxMode(tpl); err != nil || got != want {
			t.Errorf("Codex sandbox on %s = %s, %v; want %s", tpl, got, err, want)
		}
	}
	_, err := m.CodexSandboxMode("tpl-review")
	if coded.CodeOf(err) != CodeSandboxModeRequired || !strings.Contains(err.Error(), "tpl-review") || !strings.Contains(err.Error(), "sandbox-modes") {
		t.Errorf("restricted template: %v", err)
	}
	// The section-wide sandbox-mode, even written out, does not apply to a
	// template restricted by its own entry.
	writeMCP(t, home, "delegate-permission-modes: {tpl-review: plan}\ncodex: {sandbox-mode: danger-full-access}\n")
	m = mustLoadMCP(t, home)
	if _, err := m.CodexSandboxMode("tpl-review"); coded.CodeOf(err) != CodeSandboxModeRequired {
		t.Errorf("section-wide mode applied to a restricted template: %v", err)
	}
	// A restricted default mode needs codex.sandbox-mode written out.
	writeMCP(t, home, "delegate-permission-mode: acceptEdits\n")
	m = mustLoadMCP(t, home)
	if _, err := m.CodexSandboxMode("tpl-dev"); coded.CodeOf(err) != CodeSandboxModeRequired {
		t.Errorf("default sandbox applied under a restricted default: %v", err)
	}
	writeMCP(t, home, "delegate-permission-mode: acceptEdits\ncodex:\n  sandbox-mode: workspace-write\n")
	m = mustLoadMCP(t, home)
	if got, err := m.CodexSandboxMode("tpl-dev"); err != nil || got != "workspace-write" {
		t.Errorf("explicit section-wide mode: %s %v", got, err)
	}
	for _, mode := range ClaudePermissionModes {
		writeMCP(t, home, "delegate-permission-mode: "+mode+"\n")
		if m := mustLoadMCP(t, home); m.ClaudePermissionMode("tpl-x") != mode {
			t.Errorf("mode %s not accepted", mode)
		}
	}
}

func TestSaveMCPTemplatesKeepsEverythingElse(t *testing.T) {
	home := t.TempDir()
	path := writeMCP(t, home, seedMCP)
	if err := SaveMCPTemplates(home, []string{"tpl-dev", "tpl-go", "tpl-dev"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	text := string(data)
	for _, kept := range []string{
		"templates: [tpl-dev, tpl-go] # the only templates an agent may branch from",
		"# delegate-max-turns: 200",
		"tpl-review: plan",
		"tpl-codex-review: read-only",
		"# how long an instance outlives its session (default 24)",
		"summary-model: haiku",
	} {
		if !strings.Contains(text, kept) {
			t.Errorf("lost %q:\n%s", kept, text)
		}
	}
	m := mustLoadMCP(t, home)
	if !reflect.DeepEqual(m.Templates, []string{"tpl-dev", "tpl-go"}) || m.DelegatePermissionModes["tpl-review"] != "plan" || m.DormantGraceHours != 168 {
		t.Fatalf("%+v", m)
	}
	if err := SaveMCPTemplates(home, nil); err != nil {
		t.Fatal(err)
	}
	if m := mustLoadMCP(t, home); len(m.Templates) != 0 || m.State != FilePresent || m.MaxInstances != 8 {
		t.Fatalf("after approving nothing: %+v", m)
	}
}

func TestSaveMCPTemplatesBlockListAndNewFile(t *testing.T) {
	home := t.TempDir()
	// A new file, made with a private directory and mode.
	if err := SaveMCPTemplates(home, []string{"tpl-dev"}); err != nil {
		t.Fatal(err)
	}
	checkMode(t, Dir(home), 0o700|os.ModeDir)
	checkMode(t, MCPPath(home), 0o600)
	if m := mustLoadMCP(t, home); !reflect.DeepEqual(m.Templates, []string{"tpl-dev"}) {
		t.Fatalf("%+v", m)
	}
	path := writeMCP(t, home, "# approvals\ntemplates:\n  - tpl-a\nmax-instances: 3 # raised\n")
	if err := SaveMCPTemplates(home, []string{"tpl-b", "tpl-c"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if want := "# approvals\ntemplates:\n  - tpl-b\n  - tpl-c\nmax-instances: 3 # raised\n"; string(data) != want {
		t.Fatalf("got\n%s\nwant\n%s", data, want)
	}
	// templates: missing from an existing file is added first.
	writeMCP(t, home, "max-instances: 3\n")
	if err := SaveMCPTemplates(home, []string{"tpl-b"}); err != nil {
		t.Fatal(err)
	}
	if m := mustLoadMCP(t, home); !reflect.DeepEqual(m.Templates, []string{"tpl-b"}) || m.MaxInstances != 3 {
		t.Fatalf("%+v", m)
	}
	entries, _ := os.ReadDir(Dir(home))
	if len(entries) != 1 {
		t.Fatalf("leftover files: %v", entries)
	}
}

func TestSaveMCPTemplatesRefuses(t *testing.T) {
	home := t.TempDir()
	if err := SaveMCPTemplates(home, []string{"Bad_Name"}); coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), "templates[0]") {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := os.Stat(MCPPath(home)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused save wrote the file")
	}
	for _, broken := range []string{"templates: [tpl-a\n", "- a\n"} {
		path := writeMCP(t, home, broken)
		err := SaveMCPTemplates(home, []string{"tpl-b"})
		if coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), path) {
			t.Fatalf("%q: %v", broken, err)
		}
		if data, _ := os.ReadFile(path); string(data) != broken {
			t.Fatalf("a broken file was overwritten: %q", data)
		}
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode() != want {
		t.Errorf("%s has mode %v, want %v", path, info.Mode(), want)
	}
}

// unprivilegedHome makes a home an unprivileged user can traverse, since
// a root test (which reads any file, whatever its mode) checks unreadable
// files from a child process running as nobody.
func unprivilegedHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("", "isx-config-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	for _, dir := range []string{home, filepath.Join(home, ".config"), Dir(home)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

const childHomeVariable = "ISX_CONFIG_TEST_LOAD_MCP_HOME"

func TestMain(m *testing.M) {
	if home := os.Getenv(childHomeVariable); home != "" {
		_, err := LoadMCP(home)
		fmt.Printf("%s\n%v", coded.CodeOf(err), err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// loadMCPUnprivileged calls LoadMCP(home) as an unprivileged user and
// returns the error's code and text.
func loadMCPUnprivileged(t *testing.T, home string) (string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		_, err := LoadMCP(home)
		if err == nil {
			t.Fatal("LoadMCP succeeded")
		}
		return coded.CodeOf(err), err.Error()
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(home, "config.test")
	copyFile(t, self, binary)
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(), childHomeVariable+"="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	code, msg, _ := bytes.Cut(out, []byte("\n"))
	return string(code), string(msg)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSaveMCPTemplatesFillsAnEmptyTemplatesKey(t *testing.T) {
	home := t.TempDir()
	path := writeMCP(t, home, "templates:   # none yet\nmax-instances: 3\n")
	if err := SaveMCPTemplates(home, []string{"tpl-a"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if want := "templates: [tpl-a] # none yet\nmax-instances: 3\n"; string(data) != want {
		t.Fatalf("got %q, want %q", data, want)
	}
}

func TestSaveMCPTemplatesEmptiesABlockList(t *testing.T) {
	home := t.TempDir()
	path := writeMCP(t, home, "templates: # approved\n  - tpl-a\nmax-instances: 3\n")
	if err := SaveMCPTemplates(home, nil); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if want := "templates: [] # approved\nmax-instances: 3\n"; string(data) != want {
		t.Fatalf("got %q, want %q", data, want)
	}
}

func TestErrorMatchesCodeAndUnwraps(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(MCPPath(home), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := LoadMCP(home)
	wrapped := fmt.Errorf("isx mcp: %w", err)
	if !errors.Is(wrapped, &coded.Error{Code: CodeInvalid}) || errors.Is(wrapped, &coded.Error{Code: CodeOldMCPSection}) {
		t.Error("errors.Is by code")
	}
	if !errors.Is(wrapped, syscall.EISDIR) {
		t.Errorf("the cause is not wrapped: %v", err)
	}
	if coded.CodeOf(wrapped) != CodeInvalid || coded.CodeOf(errors.New("x")) != "" || coded.CodeOf(nil) != "" {
		t.Error("CodeOf")
	}
}
