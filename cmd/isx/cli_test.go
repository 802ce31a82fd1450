package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

func instanceNames(t *testing.T, c *incus.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := c.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, inst := range list {
		names = append(names, inst.Name)
	}
	slices.Sort(names)
	return names
}

func stamp(t *testing.T, c *incus.Client, name string, stamps map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.UpdateInstance(ctx, name, func(inst *incus.Instance) error {
		for k, v := range stamps {
			inst.Config[k] = v
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The lifecycle end to end through the binary: init, build (parents
// first), branch (ISX-036: stamped with the host user), list (with the MCP
// column only once MCP stamps exist, showing the purpose: ISX-038,
// ISX-044, ISX-045, ISX-046, ISX-047), stale templates, destroy.
func TestCLILifecycle(t *testing.T) {
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	x := &cli{t: t, home: proxytest.Home(t), project: c.ProjectName()}

	r := x.ok("init", "--non-interactive", "--project", x.project)
	if !strings.Contains(r.stdout, "isx works in project "+x.project) {
		t.Errorf("init: %s", r)
	}
	cfg, err := config.Load(x.home)
	if err != nil || cfg.Project != x.project || !cfg.Exists {
		t.Fatalf("config.yaml after init: %+v, %v", cfg, err)
	}
	cfg.TemplatePaths = []string{buildtest.Dir(t)}
	if err := config.Save(x.home, cfg); err != nil {
		t.Fatal(err)
	}

	r = x.ok("build", buildtest.BusyBoxChild)
	for _, want := range []string{"==> [1/2] tpl-test-busybox\n", "==> [2/2] tpl-test-busybox-child\n", "    [1/2] record the root build\n    [1/2] done in ", "Built 2 template(s)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("build output lacks %q: %s", want, r)
		}
	}

	r = x.ok("list")
	_, templates := table(r.stdout, "TEMPLATE")
	for name, want := range map[string]string{buildtest.BusyBox: "built", buildtest.BusyBoxChild: "built", buildtest.Debian: "not built", "tpl-dev": "not built"} {
		if got := row(templates, name); len(got) != 3 || got[2] != want {
			t.Errorf("template row %s = %v, want status %q\n%s", name, got, want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "hint: no instances yet") || strings.Contains(r.stdout, "hint") {
		t.Errorf("list without instances: %s", r)
	}

	r = x.run("branch", "w0", "--from", buildtest.Debian)
	if r.code != exitFailure || !strings.Contains(r.stderr, "not built") || !strings.Contains(r.stderr, "isx build "+buildtest.Debian) {
		t.Errorf("branch from an unbuilt template: %s", r)
	}
	for _, args := range [][]string{
		{"branch", "w1", "--from", buildtest.BusyBoxChild},
		{"branch", "w2", "--from", buildtest.BusyBoxChild, "--airgap"},
		{"branch", "w3", "--from", buildtest.BusyBoxChild, "--proxy-only"},
		{"branch", "w4", "--from", buildtest.BusyBox},
	} {
		x.ok(args...)
	}
	owner, err := instance.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	for name, network := range map[string]string{"w1": "default", "w2": "airgap", "w3": "proxy-only"} {
		inst, _, err := c.GetInstance(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		s := instance.ParseStamps(inst.Config)
		if s.Type != "instance" || s.Template != buildtest.BusyBoxChild || s.Owner != owner || string(s.Network) != network || s.Created.IsZero() {
			t.Errorf("%s stamps %+v", name, s)
		}
	}

	// ISX-044: no MCP column while no instance has MCP stamps.
	r = x.ok("list")
	header, rows := table(r.stdout, "NAME")
	if !slices.Equal(header, []string{"NAME", "TEMPLATE", "STATE"}) || len(rows) != 4 {
		t.Errorf("instance table %v %v\n%s", header, rows, r.stdout)
	}
	if got := row(rows, "w1"); !slices.Equal(got, []string{"w1", buildtest.BusyBoxChild, "running"}) {
		t.Errorf("row w1 = %v", got)
	}

	// ISX-045, ISX-046, ISX-047: held, orphaned and kept, as isx mcp
	// stamps them.
	stamp(t, c, "w1", map[string]string{instance.KeyMCPSession: "s1", instance.KeyMCPOwner: owner, instance.KeyMCPPurpose: "#870 implement"})
	stamp(t, c, "w2", map[string]string{instance.KeyMCPSession: "s1", instance.KeyMCPPurpose: "x", instance.KeyMCPOrphaned: "2030-01-01T00:00:00Z s1"})
	stamp(t, c, "w3", map[string]string{instance.KeyMCPPurpose: "spike", instance.KeyMCPKept: "2030-01-01T00:00:00Z"})
	r = x.ok("list")
	header, rows = table(r.stdout, "NAME")
	if !slices.Equal(header, []string{"NAME", "TEMPLATE", "STATE", "MCP"}) {
		t.Errorf("header with MCP stamps: %v\n%s", header, r.stdout)
	}
	for name, want := range map[string]string{"w1": "held: #870 implement", "w2": "orphaned", "w3": "kept: spike", "w4": "-"} {
		if got := row(rows, name); len(got) != 4 || got[3] != want {
			t.Errorf("MCP column of %s = %v, want %q", name, got, want)
		}
	}

	// A template an older isx built is reported stale.
	stamp(t, c, buildtest.BusyBox, map[string]string{instance.KeyVersion: "0.0.1"})
	r = x.ok("list")
	_, templates = table(r.stdout, "TEMPLATE")
	if got := row(templates, buildtest.BusyBox); len(got) != 3 || got[2] != "stale" ||
		!strings.Contains(r.stderr, "hint: "+buildtest.BusyBox+" is stale: isx 0.0.1 built it") || !strings.Contains(r.stderr, "`isx build "+buildtest.BusyBox+"`") {
		t.Errorf("stale template: %v\n%s", got, r)
	}
	r = x.ok("branch", "w5", "--from", buildtest.BusyBox)
	if !strings.Contains(r.stderr, "stale") {
		t.Errorf("branching from a stale template does not warn: %s", r)
	}

	// Destroy: unknown names and templates are refused; instances go.
	r = x.run("destroy", "nowhere")
	if r.code != exitFailure || !strings.Contains(r.stderr, "no instance named nowhere") {
		t.Errorf("destroy of an unknown name: %s", r)
	}
	r = x.run("destroy", buildtest.BusyBoxChild)
	if r.code != exitFailure || !strings.Contains(r.stderr, "--template") {
		t.Errorf("destroy of a template: %s", r)
	}
	x.ok("destroy", "--force", "w1", "w2", "w3", "w4", "w5")
	x.ok("destroy", "--template", buildtest.BusyBoxChild)
	if got := instanceNames(t, c); !slices.Equal(got, []string{buildtest.BusyBox}) {
		t.Errorf("left after destroying: %v", got)
	}
}

// Bad definitions make `isx build` fail with a message naming the file,
// the line or key, or the missing thing, and create nothing.
func TestCLIBadTemplates(t *testing.T) {
	c := incustest.Project(t)
	cases := []struct {
		name  string
		files map[string]string
		wants []string
	}{
		{"malformed", map[string]string{"bad.yaml": "name: tpl-bad\nimage: [isx/busybox\n"}, []string{"bad.yaml:"}},
		{"unknown key", map[string]string{"bad.yaml": "name: tpl-bad\nimage: isx/busybox\nimgae: x\n"}, []string{"bad.yaml:3", "imgae"}},
		{"missing parent", map[string]string{"bad.yaml": "name: tpl-bad\nparent: tpl-nowhere\n"}, []string{"tpl-nowhere"}},
		{"cycle", map[string]string{"bad.yaml": "name: tpl-bad\nparent: tpl-bad-2\n", "bad2.yaml": "name: tpl-bad-2\nparent: tpl-bad\n"}, []string{"cycle"}},
		{"unknown image", map[string]string{"bad.yaml": "name: tpl-bad\nimage: isx/no-such-image\n"}, []string{`"isx/no-such-image"`, "in project " + c.ProjectName(),
			"hint: import it with `incus image import TARBALL --alias isx/no-such-image --project " + c.ProjectName() + "`", "scripts/images.sh"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := newCLI(t, c)
			dir := filepath.Join(x.home, ".config", "incus-spawn", "images")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := x.run("build", "tpl-bad")
			if r.code != exitFailure {
				t.Errorf("exit code: %s", r)
			}
			for _, want := range tc.wants {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("message lacks %q: %s", want, r)
				}
			}
			if got := instanceNames(t, c); len(got) != 0 {
				t.Errorf("a failed build left %v", got)
			}
		})
	}
}

// With the Incus daemon unreachable every command fails with exit code 3
// and the message saying how to start it, and nothing is created; when
// INCUS_SOCKET names a socket that is not there, the message names
// INCUS_SOCKET instead.
func TestCLIWithoutIncus(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	// A socket nothing listens on any more, as a stopped daemon leaves it.
	stale := filepath.Join(t.TempDir(), "unix.socket")
	listener, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	listener.(*net.UnixListener).SetUnlinkOnClose(false)
	listener.Close()
	commands := [][]string{
		{"build", buildtest.BusyBox},
		{"branch", "w1", "--from", buildtest.BusyBox},
		{"list"},
		{"destroy", "w1"},
		{"shell", "w1"},
		{"init", "--non-interactive"},
		{"version"},
	}
	for _, args := range commands {
		x.env = []string{envSocket + "=" + stale}
		r := x.run(args...)
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "not running") || !strings.Contains(r.stderr, "incusd") {
			t.Errorf("isx %s with a stale socket: %s", strings.Join(args, " "), r)
		}
		x.env = []string{envSocket + "=/nonexistent/unix.socket"}
		r = x.run(args...)
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "INCUS_SOCKET=/nonexistent/unix.socket points nowhere Incus listens (") ||
			!strings.Contains(r.stderr, "hint: unset INCUS_SOCKET") {
			t.Errorf("isx %s with INCUS_SOCKET pointing nowhere: %s", strings.Join(args, " "), r)
		}
	}
	// config.yaml's socket: is named the same way.
	x.env = nil
	if err := config.Save(x.home, &config.Config{Project: x.project, Socket: "/nonexistent/unix.socket"}); err != nil {
		t.Fatal(err)
	}
	if r := x.run("list"); r.code != exitUnavailable || !strings.Contains(r.stderr, "config.yaml's socket: /nonexistent/unix.socket points nowhere") ||
		!strings.Contains(r.stderr, "hint: run `isx init --socket PATH`") {
		t.Errorf("a config.yaml socket pointing nowhere: %s", r)
	}
	if got := instanceNames(t, c); len(got) != 0 {
		t.Errorf("instances made without Incus: %v", got)
	}
}

// `isx init` asks for each setting, offering the current one; Enter keeps
// it. A project Incus does not have is reported with how to create it.
func TestCLIInitInteractive(t *testing.T) {
	c := incustest.Project(t)
	x := &cli{t: t, home: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := x.command(ctx, "init")
	cmd.Stdin = strings.NewReader("\n" + c.ProjectName() + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("isx init: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Incus socket ["+incus.DefaultSocket()+"]: ") || !strings.Contains(string(out), "Incus project [default]: ") {
		t.Errorf("questions: %s", out)
	}
	cfg, err := config.Load(x.home)
	if err != nil || cfg.Project != c.ProjectName() || cfg.Socket != "" {
		t.Errorf("config.yaml: %+v, %v", cfg, err)
	}

	r := x.run("init", "--non-interactive", "--project", "isx-no-such-project")
	if r.code != exitFailure || !strings.Contains(r.stderr, "incus project create isx-no-such-project") {
		t.Errorf("init with an unknown project: %s", r)
	}
	if cfg, err := config.Load(x.home); err != nil || cfg.Project != c.ProjectName() {
		t.Errorf("a refused init changed config.yaml: %+v, %v", cfg, err)
	}
	r = x.run("init", "--non-interactive", "--socket", "relative/path")
	if r.code != exitFailure || !strings.Contains(r.stderr, "absolute path") {
		t.Errorf("init with a relative socket: %s", r)
	}
}
