package build_test

import (
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// The Debian chain, which tasks need for systemd: build both levels, branch
// from the child (ISX-033: a branch gets the template's defaults, ISX-036:
// stamped with its owner), and exec in the branch as the agent with stdin,
// env, cwd and a timeout.
func TestDebianChainBranchAndExec(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	ctx := testContext(t)
	set := buildtest.Templates(t)
	buildtest.Build(t, c, set, buildtest.DebianChild)

	m := &instance.Manager{Client: c, Clock: clock.NewFake(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))}
	if err := m.Branch(ctx, instance.BranchOptions{Name: "work", From: buildtest.DebianChild, Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	inst := getInstance(t, c, "work")
	if !inst.Running() {
		t.Fatalf("the branch is %s, not running", inst.Status)
	}
	s := instance.ParseStamps(inst.Config)
	tpl := instance.ParseStamps(getInstance(t, c, buildtest.DebianChild).Config)
	if s.Type != instance.TypeInstance || s.Template != buildtest.DebianChild || s.Owner != "alice" ||
		s.Network != instance.NetworkDefault || !s.Created.Equal(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)) ||
		s.DefinitionHash != tpl.DefinitionHash || s.Source != tpl.Source || s.ToolsJSON != tpl.ToolsJSON || s.ToolsJSON == "" {
		t.Errorf("branch stamps %+v (template %+v)", s, tpl)
	}

	agent := func(req incus.ExecRequest) *incus.ExecResult {
		t.Helper()
		req.UID, req.GID = build.AgentUID, build.AgentGID
		res, err := c.Exec(ctx, "work", req)
		if err != nil {
			t.Fatalf("exec %v: %v", req.Command, err)
		}
		return res
	}
	// The agents' template has Claude Code and Codex for the agent user,
	// Codex reaching its provider through the host proxy's route.
	tools := agent(incus.ExecRequest{Command: []string{"sh", "-c", "claude --version && codex --version && cat ~/.codex/config.toml"}, Env: map[string]string{"HOME": build.AgentHome}})
	if out := string(tools.Stdout); tools.ExitCode != 0 || !strings.Contains(out, "Claude Code") || !strings.Contains(out, "codex-cli") ||
		!strings.Contains(out, `base_url = "http://127.0.0.1:3128/openai/v1"`) || !strings.Contains(out, `approval_policy = "never"`) {
		t.Errorf("the agents: exit %d\n%s%s", tools.ExitCode, out, tools.Stderr)
	}
	res := agent(incus.ExecRequest{
		Command: []string{"bash", "-c", `read -r line; echo "$line|$EXTRA|$ISX_TEST_LEVEL|$(pwd)|$(id -un)"; git -C . rev-parse --is-inside-work-tree`},
		Stdin:   []byte("from stdin\n"),
		Env:     map[string]string{"EXTRA": "extra value", "HOME": build.AgentHome},
		Cwd:     build.AgentHome + "/work",
	})
	if res.ExitCode != 0 || string(res.Stdout) != "from stdin|extra value|child|/home/agent/work|agent\ntrue\n" {
		t.Errorf("exec: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = agent(incus.ExecRequest{Command: []string{"sleep", "30"}, Timeout: 500 * time.Millisecond})
	if !res.TimedOut || res.ExitCode != 137 || res.Duration > 15*time.Second {
		t.Errorf("timeout: %+v", res)
	}
	res = agent(incus.ExecRequest{Command: []string{"sh", "-c", "systemctl is-system-running --wait; sudo -n id -u; cat /home/agent/work/bash.txt"}})
	if out := string(res.Stdout); !strings.HasPrefix(out, "running\n0\nbash is here\n") && !strings.HasPrefix(out, "degraded\n0\nbash is here\n") {
		t.Errorf("systemd, sudo and the workspace: %q %q", out, res.Stderr)
	}

	if err := m.Destroy(ctx, "work", instance.DestroyOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if names := instanceNames(t, c); strings.Join(names, " ") != buildtest.Debian+" "+buildtest.DebianChild {
		t.Errorf("after destroy: %v", names)
	}
}
