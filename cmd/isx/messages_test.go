package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/template"
)

// userTemplate writes a definition file into the home's own templates.
func (x *cli) userTemplate(t *testing.T, file, content string) string {
	t.Helper()
	dir := template.UserDir(x.home)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A mistyped template suggests the nearest name, in build and in branch;
// a name already taken says so, without Incus's database error.
func TestMessagesTyposAndTakenNames(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBox)

	r := x.run("build", "tpl-test-busybx")
	if r.code != exitFailure || !strings.Contains(r.stderr, `no template named "tpl-test-busybx" is defined`) || !strings.Contains(r.stderr, "hint: did you mean tpl-test-busybox?") {
		t.Errorf("build of a typo: %s", r)
	}
	r = x.run("branch", "w1", "--from", "tpl-test-busybx")
	if r.code != exitFailure || !strings.Contains(r.stderr, "there is no template or instance named tpl-test-busybx in project "+c.ProjectName()) ||
		!strings.Contains(r.stderr, "hint: did you mean tpl-test-busybox?") {
		t.Errorf("branch from a typo: %s", r)
	}
	if r = x.run("build", "tpl-python"); r.code != exitFailure || strings.Contains(r.stderr, "did you mean") {
		t.Errorf("a name near nothing: %s", r)
	}

	x.ok("branch", "w1", "--from", buildtest.BusyBox)
	r = x.run("branch", "w1", "--from", buildtest.BusyBox)
	if r.code != exitFailure || !strings.Contains(r.stderr, "an instance named w1 already exists in project "+c.ProjectName()) ||
		strings.Contains(r.stderr, "UNIQUE") || strings.Contains(r.stderr, "database") {
		t.Errorf("a taken name: %s", r)
	}
	// Branching from an instance by a mistyped name suggests the instance.
	if r = x.run("branch", "w2", "--from", "w11"); r.code != exitFailure || !strings.Contains(r.stderr, "hint: did you mean w1?") {
		t.Errorf("branch from a mistyped instance: %s", r)
	}
}

// list and build say when the project does not exist (list lists what it
// can and succeeds; build fails before making anything); init reports the
// project ISX_PROJECT puts in use instead of config.yaml's, and warns when
// that one does not exist.
func TestMessagesProject(t *testing.T) {
	c := incustest.Project(t)
	other := incustest.Project(t)
	x := newCLI(t, c)

	x.env = []string{envProject + "=isx-no-such-project"}
	r := x.ok("list")
	if !strings.Contains(r.stderr, `warning: Incus has no project "isx-no-such-project"`) || !strings.Contains(r.stderr, "incus project create isx-no-such-project") ||
		!strings.Contains(r.stderr, "ISX_PROJECT chose it") || !strings.Contains(r.stdout, "TEMPLATE") {
		t.Errorf("list in a missing project: %s", r)
	}
	r = x.run("build", buildtest.BusyBox)
	if r.code != exitFailure || !strings.Contains(r.stderr, `isx: Incus has no project "isx-no-such-project"`) ||
		!strings.Contains(r.stderr, "hint: create it with `incus project create isx-no-such-project`") || strings.Contains(r.stdout, "==>") {
		t.Errorf("build in a missing project: %s", r)
	}
	r = x.run("branch", "w1", "--from", buildtest.BusyBox)
	if r.code != exitFailure || !strings.Contains(r.stderr, `Incus has no project "isx-no-such-project"`) {
		t.Errorf("branch in a missing project: %s", r)
	}

	r = x.ok("init", "--non-interactive")
	if !strings.Contains(r.stdout, "config.yaml names project "+c.ProjectName()+", but ISX_PROJECT overrides it: isx works in project isx-no-such-project while it is set") ||
		!strings.Contains(r.stderr, `warning: Incus has no project "isx-no-such-project"`) {
		t.Errorf("init under a missing ISX_PROJECT: %s", r)
	}
	x.env = []string{envProject + "=" + other.ProjectName()}
	r = x.ok("init", "--non-interactive")
	if !strings.Contains(r.stdout, "isx works in project "+other.ProjectName()+" while it is set") || strings.Contains(r.stderr, "warning") {
		t.Errorf("init under ISX_PROJECT: %s", r)
	}
	x.env = nil
	if r = x.ok("init", "--non-interactive"); !strings.Contains(r.stdout, "isx works in project "+c.ProjectName()+".\n") {
		t.Errorf("init: %s", r)
	}
}

// One bad user template does not block builds of the others: every
// command names the file and goes on; the bad one's own build fails,
// naming the file and line; list shows it invalid.
func TestMessagesOneBadTemplate(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	bad := x.userTemplate(t, "bad.yaml", "name: tpl-bad\nimage: isx/busybox\nimgae: x\n")
	incustest.EnsureImages(t, incustest.BusyBox)

	r := x.ok("build", buildtest.BusyBox)
	if !strings.Contains(r.stderr, "warning: "+bad+":3") || !strings.Contains(r.stderr, "isx leaves it out until it is fixed") || !strings.Contains(r.stdout, "Built 1 template(s)") {
		t.Errorf("building a good template beside a bad one: %s", r)
	}
	r = x.run("build", "tpl-bad")
	if r.code != exitFailure || !strings.Contains(r.stderr, "isx: template tpl-bad cannot be used until its definition is fixed: "+bad+":3") {
		t.Errorf("building the bad one: %s", r)
	}
	r = x.ok("list")
	_, templates := table(r.stdout, "TEMPLATE")
	if got := row(templates, "tpl-bad"); !slices.Equal(got, []string{"tpl-bad", "user", "invalid"}) {
		t.Errorf("tpl-bad in list: %v\n%s", got, r)
	}
	if got := row(templates, buildtest.BusyBox); len(got) != 3 || got[2] != "built" {
		t.Errorf("the good one in list: %v\n%s", got, r)
	}
	x.ok("branch", "w1", "--from", buildtest.BusyBox)
}

// isx list and isx init report an mcp.yaml isx mcp cannot use, naming
// the file and what is wrong; and the retired mcp: section without
// mcp.yaml.
func TestMessagesUnusableMCPFile(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	if err := os.WriteFile(config.MCPPath(x.home), []byte("templates: [tpl-dev]\nmax-instancs: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"list"}, {"init", "--non-interactive"}} {
		r := x.ok(args...)
		if !strings.Contains(r.stderr, "refuses every call until mcp.yaml is fixed") || !strings.Contains(r.stderr, config.MCPPath(x.home)) || !strings.Contains(r.stderr, "max-instancs") {
			t.Errorf("isx %s: %s", strings.Join(args, " "), r)
		}
	}
	if err := os.WriteFile(config.MCPPath(x.home), []byte("templates: [tpl-dev]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := x.ok("list"); strings.Contains(r.stderr, "mcp.yaml") {
		t.Errorf("a usable mcp.yaml is reported: %s", r)
	}
	if err := os.Remove(config.MCPPath(x.home)); err != nil {
		t.Fatal(err)
	}
	configYAML := "project: " + c.ProjectName() + "\nmcp:\n  templates: [tpl-dev]\n"
	if err := os.WriteFile(config.ConfigPath(x.home), []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := x.ok("list"); !strings.Contains(r.stderr, "has an `mcp:` section, which isx no longer reads") {
		t.Errorf("the old section: %s", r)
	}
}

// isx build --all builds what it can: a broken file and a template whose
// parent cannot be used are left out and named (the build itself stops at
// a failing step, so this is the plan --all makes).
func TestBuildAllLeavesOutWhatCannotBeBuilt(t *testing.T) {
	home := t.TempDir()
	x := &cli{t: t, home: home}
	bad := x.userTemplate(t, "bad.yaml", "name: tpl-bad\nimage: [isx/busybox\n")
	x.userTemplate(t, "child.yaml", "name: tpl-bad-child\nparent: tpl-bad\n")
	x.userTemplate(t, "good.yaml", "name: tpl-good\nimage: isx/busybox\n")
	set, err := template.Load(template.Options{Home: home, KeepGoing: true})
	if err != nil {
		t.Fatal(err)
	}
	req, left := buildable(set)
	if !slices.Equal(req.Templates, []string{"tpl-dev", "tpl-good"}) || req.All {
		t.Errorf("builds %+v", req)
	}
	if len(left) != 2 || !strings.Contains(left[0], bad+":2") || !strings.Contains(left[1], `names parent template "tpl-bad", whose definition cannot be used`) {
		t.Errorf("left out %q", left)
	}
	if err := notAllBuilt(left); !strings.Contains(err.Error(), "2 template definition(s) could not be built") {
		t.Errorf("error %v", err)
	}
}
