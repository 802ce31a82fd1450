package mcpserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

// One test per refusal code: each is a tool result with isError, no
// structuredContent and the code in _meta (ISX-117, ISX-118, ISX-119).
func TestRefusalCodes(t *testing.T) {
	t.Run("invalid_argument/max_turns", func(t *testing.T) {
		e := newEnv(t, buildtest.BusyBox)
		e.writeMCP("templates: [tpl-test-busybox]\n")
		s := e.start(sessionOptions{})
		meta := s.refused("create_instance", map[string]any{"template": "tpl-test-busybox", "max_turns": 5}, CodeInvalidArgument)
		if !strings.Contains(meta["message"].(string), "max_turns") {
			t.Errorf("message: %v", meta["message"])
		}
		s.refused("create_instance", map[string]any{"template": "tpl-test-busybox", "name_hint": "Not_OK"}, CodeInvalidArgument)
		s.refused("create_instance", map[string]any{"template": "tpl-test-busybox", "purpose": "two\nlines"}, CodeInvalidArgument)
		s.refused("exec", map[string]any{"instance": "mcp-x-y-aaaaa", "command": "true", "timeout_seconds": "soon"}, CodeInvalidArgument)
		if n := len(e.mcpInstances()); n != 0 {
			t.Errorf("refused calls made %d instances", n)
		}
	})

	// ISX-024, ISX-027, ISX-030, ISX-031.
	t.Run("not_approved", func(t *testing.T) {
		unbuilt := buildtest.Write(t, map[string]string{"tpl-unbuilt.yaml": "name: tpl-unbuilt\nimage: isx/busybox\n"})
		e := newEnv(t, buildtest.BusyBox, buildtest.BusyBoxChild)
		if err := config.Save(e.home, &config.Config{Project: e.client.ProjectName(), TemplatePaths: []string{buildtest.Dir(t), unbuilt}}); err != nil {
			t.Fatal(err)
		}
		e.writeMCP("templates: [tpl-test-busybox, tpl-unbuilt]\n")
		s := e.start(sessionOptions{})
		s.refused("create_instance", map[string]any{"template": "tpl-test-busybox-child"}, CodeNotApproved)
		meta := s.refused("create_instance", map[string]any{"template": "tpl-unbuilt"}, CodeNotApproved)
		if !strings.Contains(meta["message"].(string), "isx build") {
			t.Errorf("the unbuilt refusal does not say isx build: %v", meta["message"])
		}
		var list ListTemplatesResult
		s.ok("list_templates", map[string]any{}, &list)
		if list.Templates[1].Usable || list.Templates[1].Built || !strings.Contains(list.Templates[1].Reason, "isx build") {
			t.Errorf("unbuilt template listed as %+v", list.Templates[1])
		}
		s.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, nil)
		e.writeMCP("templates: [tpl-unbuilt]\n")
		s.refused("create_instance", map[string]any{"template": "tpl-test-busybox"}, CodeNotApproved)
		if n := len(e.mcpInstances()); n != 1 {
			t.Errorf("%d instances, want the one approved", n)
		}
	})

	t.Run("not_found", func(t *testing.T) {
		e := newEnv(t)
		e.writeMCP("templates: []\n")
		s := e.start(sessionOptions{})
		s.refused("exec", map[string]any{"instance": "mcp-gone-work-aaaaa", "command": "true"}, CodeNotFound)
		s.refused("task_status", map[string]any{"instance": "mcp-gone-work-aaaaa", "task_id": "t-aaaaaaaaaa"}, CodeNotFound)
	})

	t.Run("not_held", func(t *testing.T) {
		e := newEnv(t, buildtest.BusyBox)
		e.writeMCP("templates: [tpl-test-busybox]\n")
		a, b := e.start(sessionOptions{}), e.start(sessionOptions{})
		var made CreateInstanceResult
		a.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &made)
		b.refused("stop_instance", map[string]any{"instance": made.Instance}, CodeNotHeld)
	})

	t.Run("wrong_state", func(t *testing.T) {
		e := newEnv(t, buildtest.BusyBox)
		e.writeMCP("templates: [tpl-test-busybox]\n")
		s := e.start(sessionOptions{})
		var made CreateInstanceResult
		s.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &made)
		s.ok("stop_instance", map[string]any{"instance": made.Instance}, nil)
		s.refused("exec", map[string]any{"instance": made.Instance, "command": "true"}, CodeWrongState)
	})

	t.Run("busy", func(t *testing.T) {
		e := newEnv(t, buildtest.BusyBox)
		e.writeMCP("templates: [tpl-test-busybox]\n")
		s := e.start(sessionOptions{})
		var made CreateInstanceResult
		s.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &made)
		release, err := instance.MarkShell(e.home, e.client.ProjectName(), made.Instance, os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		s.refused("destroy_instance", map[string]any{"instance": made.Instance}, CodeBusy)
		if err := release(); err != nil {
			t.Fatal(err)
		}
		s.ok("destroy_instance", map[string]any{"instance": made.Instance}, nil)
	})

	t.Run("limit", func(t *testing.T) {
		e := newEnv(t, buildtest.BusyBox)
		e.writeMCP("templates: [tpl-test-busybox]\nmax-instances: 0\n")
		s := e.start(sessionOptions{})
		s.refused("create_instance", map[string]any{"template": "tpl-test-busybox"}, CodeLimit)
	})

	t.Run("unavailable", func(t *testing.T) {
		e := offlineEnv(t)
		e.writeMCP("templates: []\n")
		s := e.startOffline(sessionOptions{})
		meta := s.refused("list_instances", map[string]any{}, CodeUnavailable)
		if !strings.Contains(meta["message"].(string), "Incus") {
			t.Errorf("message: %v", meta["message"])
		}
	})

	t.Run("task_failed", func(t *testing.T) {
		e := newEnv(t, buildtest.BusyBox)
		e.writeMCP("templates: [tpl-test-busybox]\n")
		s := e.start(sessionOptions{})
		var made CreateInstanceResult
		s.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &made)
		// The agent can no longer write task records.
		e.execIn(made.Instance, "mkdir -p /home/agent/.isx-mcp/tasks /home/agent/.isx-mcp/keys && chown -R root:root /home/agent/.isx-mcp && chmod 755 /home/agent/.isx-mcp/tasks")
		meta := s.refused("exec", map[string]any{"instance": made.Instance, "command": "true", "background": true, "idempotency_key": "k1"}, CodeTaskFailed)
		if meta["instance"] != made.Instance {
			t.Errorf("meta = %v", meta)
		}
		// The failure made nothing, so the key is free again.
		if keys := e.instanceConfig(made.Instance)[instance.KeyMCPTaskKeys]; keys != "" {
			t.Errorf("task-keys stamp after a failed start: %q", keys)
		}
	})

	t.Run("refused", func(t *testing.T) {
		e := offlineEnv(t)
		e.writeMCP("templates: []\nmax-instancs: 3\n")
		s := e.startOffline(sessionOptions{})
		s.refused("list_instances", map[string]any{}, CodeRefused)
	})

	// Nothing runs unrecorded: a log that cannot be written refuses all.
	t.Run("internal", func(t *testing.T) {
		e := offlineEnv(t)
		e.writeMCP("templates: []\n")
		state := config.StateDir(e.home)
		if err := os.MkdirAll(filepath.Dir(state), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(state, []byte("not a directory"), 0o600); err != nil {
			t.Fatal(err)
		}
		s := e.startOffline(sessionOptions{})
		meta := s.refused("list_templates", map[string]any{}, CodeInternal)
		if !strings.Contains(meta["message"].(string), "audit log") {
			t.Errorf("message: %v", meta["message"])
		}
	})
}

// ISX-028, ISX-029: a project-local definition is never usable, even when
// approved; nor an image built from one, even once a trusted definition of
// that name exists.
func TestProjectLocalNeverUsableISX028(t *testing.T) {
	e := newEnv(t)
	project := t.TempDir()
	local := filepath.Join(project, template.ProjectDirName)
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	definition := "name: tpl-local\nimage: isx/busybox\n"
	if err := os.WriteFile(filepath.Join(local, "tpl-local.yaml"), []byte(definition), 0o644); err != nil {
		t.Fatal(err)
	}
	// Built from the project-local definition.
	set, err := template.Load(template.Options{Home: t.TempDir(), WorkDir: project})
	if err != nil {
		t.Fatal(err)
	}
	b := &build.Builder{Client: e.client, Set: set, Owner: "isx-test"}
	if _, err := b.Build(e.ctx(), build.Request{Templates: []string{"tpl-local"}}); err != nil {
		t.Fatal(err)
	}
	e.writeMCP("templates: [tpl-local]\n")

	// The server started inside the project sees the project-local one.
	s := e.startIn(project, sessionOptions{})
	meta := s.refused("create_instance", map[string]any{"template": "tpl-local"}, CodeNotApproved)
	if !strings.Contains(meta["message"].(string), "project-local") {
		t.Errorf("message: %v", meta["message"])
	}
	var list ListTemplatesResult
	s.ok("list_templates", map[string]any{}, &list)
	if list.Templates[0].Usable {
		t.Errorf("a project-local template is listed usable: %+v", list.Templates[0])
	}
	s.close()

	// A trusted definition of the same name does not make that build usable.
	trusted := buildtest.Write(t, map[string]string{"tpl-local.yaml": definition})
	if err := config.Save(e.home, &config.Config{Project: e.client.ProjectName(), TemplatePaths: []string{trusted}}); err != nil {
		t.Fatal(err)
	}
	s = e.startIn(t.TempDir(), sessionOptions{})
	meta = s.refused("create_instance", map[string]any{"template": "tpl-local"}, CodeNotApproved)
	if !strings.Contains(meta["message"].(string), "project-local") {
		t.Errorf("message: %v", meta["message"])
	}
	if n := len(e.mcpInstances()); n != 0 {
		t.Errorf("%d instances made", n)
	}
}

// startIn starts a session whose working directory is dir.
func (e *env) startIn(dir string, opts sessionOptions) *session {
	e.t.Helper()
	opts.dir = dir
	return e.start(opts)
}
