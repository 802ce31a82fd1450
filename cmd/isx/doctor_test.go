package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// doctorLine finds the line of check with status in isx doctor's output.
func doctorLine(out, status, check string) string {
	for _, line := range strings.Split(out, "\n") {
		if fields := strings.Fields(line); len(fields) > 2 && fields[0] == status && fields[1] == check {
			return line
		}
	}
	return ""
}

// With everything in place isx doctor says so, check by check, down to the
// real Claude Code reaching this isx mcp; a registration of another
// command is pointed out.
func TestDoctorAllInPlace(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBoxChild)
	if err := os.WriteFile(config.MCPPath(x.home), []byte("templates: ["+buildtest.BusyBoxChild+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	claude := claudeDir(t)
	x.env = append(x.env, "PATH="+claude+":"+os.Getenv("PATH"), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	register := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(claude, "claude"), args...)
		cmd.Env = append(x.baseEnv(), x.env...)
		cmd.Dir = t.TempDir()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("claude %v: %v\n%s", args, err, out)
		}
	}
	register(mcpAddArgs(isxBinary)...)

	r := x.ok("doctor")
	for check, want := range map[string]string{
		"incus":     "answers on",
		"project":   "isx works in project " + c.ProjectName() + " (config.yaml's), which exists",
		"templates": "built: " + buildtest.BusyBox + ", " + buildtest.BusyBoxChild,
		"images":    "project " + c.ProjectName() + " has ",
		"mcp.yaml":  "approves " + buildtest.BusyBoxChild,
		"claude":    "Claude Code has isx mcp registered (user config",
	} {
		if line := doctorLine(r.stdout, statusOK, check); !strings.Contains(line, want) {
			t.Errorf("%s: want ok and %q in:\n%s", check, want, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "reaches it") || !strings.Contains(doctorLine(r.stdout, statusOK, "proxy"), "the host proxy is not running; isx branch and isx mcp start it") ||
		!strings.Contains(r.stdout, "Everything isx needs is in place.") {
		t.Errorf("doctor:\n%s", r.stdout)
	}

	// A running proxy of this project is in place; one of another project
	// is pointed out, with the command that fixes it.
	x.ok("proxy", "start")
	if line := doctorLine(x.ok("doctor").stdout, statusOK, "proxy"); !strings.Contains(line, "the host proxy runs (pid ") {
		t.Errorf("a running proxy: %q", line)
	}
	x.ok("proxy", "stop")
	x.ok("proxy", "start", "--project", "default")
	r = x.ok("doctor")
	if line := doctorLine(r.stdout, statusWarn, "proxy"); !strings.Contains(line, "serves project default, not "+c.ProjectName()) ||
		!strings.Contains(r.stdout, "hint: `isx proxy restart` starts it again in project "+c.ProjectName()) {
		t.Errorf("a proxy of another project:\n%s", r.stdout)
	}
	x.ok("proxy", "stop")

	register("mcp", "remove", "--scope", "user", "isx")
	register("mcp", "add", "--scope", "user", "isx", "--", "/bin/true", "mcp")
	r = x.ok("doctor")
	if line := doctorLine(r.stdout, statusWarn, "claude"); !strings.Contains(line, "runs `/bin/true mcp`, not this isx ("+isxBinary+" mcp)") ||
		!strings.Contains(r.stdout, "hint: `claude mcp remove --scope user isx`, then `claude mcp add --scope user isx -- "+isxBinary+" mcp`") {
		t.Errorf("a registration of another command:\n%s", r.stdout)
	}
}

// isx doctor names each problem with what to do about it, and exits 1: a
// missing project, a broken definition, a missing root image, an unusable
// mcp.yaml, an accounts.yaml the proxy refuses; --json gives the same
// findings.
func TestDoctorSaysWhatIsWrong(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	bad := x.userTemplate(t, "bad.yaml", "name: tpl-bad\nimage: [isx/busybox\n")
	x.userTemplate(t, "noimage.yaml", "name: tpl-noimage\nimage: isx/no-such-image\n")
	if err := os.WriteFile(config.MCPPath(x.home), []byte("max-instancs: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// An accounts.yaml others can read keeps the proxy from starting.
	if err := os.MkdirAll(filepath.Dir(config.AccountsPath(x.home)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config.AccountsPath(x.home), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	x.env = []string{envProject + "=isx-no-such-project"}
	r := x.run("doctor")
	if r.code != exitFailure || !strings.Contains(doctorLine(r.stdout, statusFail, "project"), `Incus has no project "isx-no-such-project"`) ||
		!strings.Contains(r.stdout, "hint: create it with `incus project create isx-no-such-project`") || doctorLine(r.stdout, statusSkip, "images") == "" {
		t.Errorf("a missing project: %s", r)
	}

	x.env = nil
	r = x.run("doctor")
	if r.code != exitFailure || !strings.Contains(r.stderr, "isx: 3 of isx doctor's checks failed") {
		t.Errorf("exit: %s", r)
	}
	for _, want := range [][3]string{
		{statusWarn, "templates", bad + ":2"},
		{statusFail, "images", `builds on image "isx/no-such-image", which Incus does not have in project ` + c.ProjectName() + " (the root image of tpl-noimage)"},
		{statusFail, "mcp.yaml", "max-instancs"},
		{statusSkip, "claude", "not checked"},
		{statusFail, "proxy", config.AccountsPath(x.home)},
	} {
		if !strings.Contains(doctorLine(r.stdout, want[0], want[1]), want[2]) {
			t.Errorf("want %s %s with %q in:\n%s", want[0], want[1], want[2], r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "hint: import it with `incus image import TARBALL --alias isx/no-such-image --project "+c.ProjectName()+"`") {
		t.Errorf("no hint for the image:\n%s", r.stdout)
	}

	r = x.run("doctor", "--json")
	var found []finding
	if err := json.Unmarshal([]byte(r.stdout), &found); err != nil || r.code != exitFailure {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	statuses := map[string]string{}
	for _, f := range found {
		if statuses[f.Check] != statusFail {
			statuses[f.Check] = f.Status
		}
	}
	if statuses["incus"] != statusOK || statuses["project"] != statusOK || statuses["images"] != statusFail || statuses["mcp.yaml"] != statusFail {
		t.Errorf("doctor --json: %+v", found)
	}
}
