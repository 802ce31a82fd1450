package build_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

// The built-in tpl-dev really has Claude Code: installed from the npm
// cache for the agent user, trusting the agent's home and workdir, and
// its descriptor's tool stamped.
func TestTplDevHasClaudeCode(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	ctx := testContext(t)
	set := buildtest.Templates(t)
	buildtest.Build(t, c, set, "tpl-dev")
	m := &instance.Manager{Client: c, Clock: clock.Real{}}
	if err := m.Branch(ctx, instance.BranchOptions{Name: "dev", From: "tpl-dev", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, "dev", incus.ExecRequest{Command: []string{"sh", "-c", "claude --version && cat ~/.claude.json"},
		UID: build.AgentUID, GID: build.AgentGID, Env: map[string]string{"HOME": build.AgentHome}, Cwd: build.AgentHome})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("claude --version as the agent: %v %+v", err, res)
	}
	out := string(res.Stdout)
	if !strings.Contains(out, "Claude Code") || !strings.Contains(out, `"/home/agent/work"`) || !strings.Contains(out, `"hasTrustDialogAccepted": true`) {
		t.Errorf("claude and its settings:\n%s", out)
	}
	tools, err := instance.ParseStamps(getInstance(t, c, "tpl-dev").Config).Tools()
	if err != nil || len(tools) != 1 || tools[0].Name != template.ToolClaude || tools[0].Model != "sonnet" {
		t.Errorf("tools stamp %+v, %v", tools, err)
	}
}

// A tool that cannot be installed fails the build, saying why, and leaves
// nothing behind: one the npm cache lacks with no npm to fetch it, and one
// whose program does not run in the image (Claude Code needs a C library
// busybox lacks).
func TestToolThatCannotBeInstalled(t *testing.T) {
	c := incustest.Project(t)
	ctx := testContext(t)
	dir := buildtest.Write(t, map[string]string{
		"claude.yaml": "name: tpl-claude-busybox\nparent: tpl-test-busybox\ntools:\n  - name: claude\n",
	})
	set := buildtest.Templates(t, dir)
	buildtest.Build(t, c, set, buildtest.BusyBox)
	for _, tc := range []struct {
		template, cache, path, want string
	}{
		{"tpl-claude-busybox", t.TempDir(), "/nonexistent", "no npm on this host"},
		{"tpl-claude-busybox", buildtest.NPMCache(), "", "claude --version"},
	} {
		if tc.path != "" {
			t.Setenv("PATH", tc.path)
		}
		var out bytes.Buffer
		b := newBuilder(c, set, &out)
		b.NPMCache = tc.cache
		_, err := b.Build(ctx, build.Request{Templates: []string{tc.template}})
		var stepErr *build.StepError
		switch {
		case err == nil:
			t.Fatalf("%s built", tc.template)
		case errors.As(err, &stepErr):
			if !strings.Contains(stepErr.Step, tc.want) {
				t.Errorf("%s: step %q, want one about %q", tc.template, stepErr.Step, tc.want)
			}
		case coded.CodeOf(err) != build.CodeToolFailed || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %v (code %s), want %s about %q", tc.template, err, coded.CodeOf(err), build.CodeToolFailed, tc.want)
		}
		if names := instanceNames(t, c); strings.Join(names, " ") != buildtest.BusyBox {
			t.Errorf("%s left %v behind; the build said: %v", tc.template, names, err)
		}
	}
}
