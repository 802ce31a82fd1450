package build_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newBuilder(c *incus.Client, set *template.Set, out *bytes.Buffer) *build.Builder {
	return &build.Builder{Client: c, Set: set, Owner: "tester", Out: out}
}

func getInstance(t *testing.T, c *incus.Client, name string) *incus.Instance {
	t.Helper()
	inst, _, err := c.GetInstance(testContext(t), name)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return inst
}

// instanceNames lists the project's instances, sorted.
func instanceNames(t *testing.T, c *incus.Client) []string {
	t.Helper()
	list, err := c.Instances(testContext(t))
	if err != nil {
		t.Fatalf("%v", err)
	}
	var names []string
	for _, inst := range list {
		names = append(names, inst.Name)
	}
	return names
}

// run runs a command as root in a running instance and returns stdout.
func run(t *testing.T, c *incus.Client, name string, command ...string) string {
	t.Helper()
	res, err := c.Exec(testContext(t), name, incus.ExecRequest{Command: command})
	if err != nil {
		t.Fatalf("exec %v: %v", command, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %v: exit %d: %s", command, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

// Builds the two-level busybox chain, parents first, and checks what each
// level left in its template instance and its stamps; then staleness.
func TestBuildBusyboxChain(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	ctx := testContext(t)
	set := buildtest.Templates(t)
	var out bytes.Buffer
	b := newBuilder(c, set, &out)
	b.Clock = clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))

	plan, err := b.Plan(ctx, build.Request{Templates: []string{buildtest.BusyBoxChild}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(plan, " ") != buildtest.BusyBox+" "+buildtest.BusyBoxChild {
		t.Fatalf("plan %v: the unbuilt parent must come first", plan)
	}
	results, err := b.Build(ctx, build.Request{Templates: []string{buildtest.BusyBoxChild}})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(results) != 2 {
		t.Fatalf("built %v", results)
	}
	for _, want := range []string{"[1/2] record the root build", "[2/2] agent step", "create the agent user", "tpl-test-busybox-child built"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, out.String())
		}
	}
	if names := instanceNames(t, c); strings.Join(names, " ") != buildtest.BusyBox+" "+buildtest.BusyBoxChild {
		t.Errorf("instances after the build: %v (no build instance may be left)", names)
	}

	for _, name := range []string{buildtest.BusyBox, buildtest.BusyBoxChild} {
		inst := getInstance(t, c, name)
		if inst.Running() {
			t.Errorf("%s is left running", name)
		}
		s := instance.ParseStamps(inst.Config)
		hash, err := build.DefinitionHash(set, name)
		if err != nil {
			t.Fatal(err)
		}
		if s.Type != instance.TypeBase || s.Template != name || s.DefinitionHash != hash || s.Version != build.Version ||
			s.Source != "search-path" || s.Owner != "tester" || s.Network != instance.NetworkDefault ||
			!s.Created.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) {
			t.Errorf("%s stamps: %+v", name, s)
		}
	}
	rootTools, _ := instance.ParseStamps(getInstance(t, c, buildtest.BusyBox).Config).Tools()
	childTools, err := instance.ParseStamps(getInstance(t, c, buildtest.BusyBoxChild).Config).Tools()
	// Neither installs an agent (tools_test.go builds those).
	if err != nil || len(rootTools) != 0 || len(childTools) != 0 {
		t.Errorf("tools stamps: root %+v, child %+v (%v)", rootTools, childTools, err)
	}

	// What the steps, files and env left, seen from a running copy.
	m := &instance.Manager{Client: c, Clock: clock.Real{}}
	if err := m.Branch(ctx, instance.BranchOptions{Name: "look", From: buildtest.BusyBoxChild, Owner: "tester"}); err != nil {
		t.Fatal(err)
	}
	checks := map[string]string{
		"id -u agent; id -g agent":                       "1000\n1000\n",
		"cat /etc/isx-test/root-step.txt":                "root build ran as 0 in /root\n",
		"cat /home/agent/agent-step.txt":                 "agent build ran as 1000:1000 in /home/agent home /home/agent\n",
		"stat -c '%u:%g %a' /home/agent/notes/agent.txt": "1000:1000 600\n",
		"stat -c '%u:%g %a' /etc/isx-test/root.txt":      "0:0 644\n",
		"cat /etc/isx-test/child.txt":                    "written by tpl-test-busybox-child\n",
		"echo $ISX_TEST_LEVEL $ISX_TEST_GREETING":        "child hello from the root template\n",
		". /etc/profile.d/isx.sh; echo $ISX_TEST_LEVEL":  "child\n",
		"grep ISX_TEST_LEVEL /etc/environment":           "ISX_TEST_LEVEL=\"child\"\n",
	}
	for script, want := range checks {
		if got := run(t, c, "look", "sh", "-c", script); got != want {
			t.Errorf("%s: got %q, want %q", script, got, want)
		}
	}

	// Current right after the build.
	for _, name := range []string{buildtest.BusyBox, buildtest.BusyBoxChild} {
		status, err := build.Status(ctx, c, set, name)
		if err != nil || !status.Built || status.Stale {
			t.Errorf("status of %s: %+v, %v", name, status, err)
		}
	}
}

// A changed definition, a changed parent, and an older isx's stamp all make
// a built template stale; rebuilding makes it current again, and a build
// rebuilds stale parents but not current ones unless --with-parents.
func TestStaleness(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	ctx := testContext(t)
	set := buildtest.Templates(t)
	buildtest.Build(t, c, set, buildtest.BusyBoxChild)

	unbuilt, err := build.Status(ctx, c, set, buildtest.Debian)
	if err != nil || unbuilt.Built || unbuilt.Stale || !strings.Contains(unbuilt.Reason, "isx build "+buildtest.Debian) {
		t.Errorf("status of an unbuilt template: %+v, %v", unbuilt, err)
	}

	// The child's definition changes: only the child is stale.
	source, err := os.ReadFile(filepath.Join(buildtest.Dir(t), buildtest.BusyBoxChild+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	changedDir := buildtest.Write(t, map[string]string{"child.yaml": strings.Replace(string(source), "check the parent", "check the parent again", 1)})
	changed, err := template.Load(template.Options{Home: t.TempDir(), SearchPaths: []string{changedDir, buildtest.Dir(t)}})
	if err != nil {
		t.Fatal(err)
	}
	status, err := build.Status(ctx, c, changed, buildtest.BusyBoxChild)
	if err != nil || !status.Built || !status.Stale || !strings.Contains(status.Reason, "definition changed") {
		t.Errorf("changed definition: %+v, %v", status, err)
	}
	if status, _ := build.Status(ctx, c, changed, buildtest.BusyBox); status.Stale {
		t.Errorf("the parent went stale when only its child changed: %+v", status)
	}
	var out bytes.Buffer
	plan, err := newBuilder(c, changed, &out).Plan(ctx, build.Request{Templates: []string{buildtest.BusyBoxChild}})
	if err != nil || strings.Join(plan, " ") != buildtest.BusyBoxChild {
		t.Errorf("plan with a current parent: %v, %v", plan, err)
	}
	plan, err = newBuilder(c, changed, &out).Plan(ctx, build.Request{Templates: []string{buildtest.BusyBoxChild}, WithParents: true})
	if err != nil || strings.Join(plan, " ") != buildtest.BusyBox+" "+buildtest.BusyBoxChild {
		t.Errorf("plan with --with-parents: %v, %v", plan, err)
	}
	if _, err := newBuilder(c, changed, &out).Build(ctx, build.Request{Templates: []string{buildtest.BusyBoxChild}}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if status, err := build.Status(ctx, c, changed, buildtest.BusyBoxChild); err != nil || status.Stale {
		t.Errorf("rebuilt child still stale: %+v, %v", status, err)
	}

	// The parent's definition changes: the parent and, through the chain
	// hash, the child are stale; a build of the child rebuilds both.
	parentSource, err := os.ReadFile(filepath.Join(buildtest.Dir(t), buildtest.BusyBox+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	parentDir := buildtest.Write(t, map[string]string{"parent.yaml": strings.Replace(string(parentSource), "hello from the root template", "hello again", 1)})
	parentChanged, err := template.Load(template.Options{Home: t.TempDir(), SearchPaths: []string{parentDir, changedDir, buildtest.Dir(t)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{buildtest.BusyBox, buildtest.BusyBoxChild} {
		if status, err := build.Status(ctx, c, parentChanged, name); err != nil || !status.Stale {
			t.Errorf("%s after its chain's root changed: %+v, %v", name, status, err)
		}
	}
	plan, err = newBuilder(c, parentChanged, &out).Plan(ctx, build.Request{Templates: []string{buildtest.BusyBoxChild}})
	if err != nil || strings.Join(plan, " ") != buildtest.BusyBox+" "+buildtest.BusyBoxChild {
		t.Errorf("plan with a stale parent: %v, %v", plan, err)
	}

	// An older isx's stamp.
	err = c.UpdateInstance(ctx, buildtest.BusyBoxChild, func(inst *incus.Instance) error {
		inst.Config[instance.KeyVersion] = "0.0.1"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	status, err = build.Status(ctx, c, changed, buildtest.BusyBoxChild)
	if err != nil || !status.Stale || !strings.Contains(status.Reason, "isx 0.0.1 built it") {
		t.Errorf("older version stamp: %+v, %v", status, err)
	}
}

// A failing step deletes the build instance, leaves the previous template
// instance exactly as it was, and reports the step with its output.
func TestFailingStepLeavesNothing(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	ctx := testContext(t)
	set := buildtest.Templates(t)
	buildtest.Build(t, c, set, buildtest.BusyBoxChild)
	before := getInstance(t, c, buildtest.BusyBoxChild)

	source, err := os.ReadFile(filepath.Join(buildtest.Dir(t), buildtest.BusyBoxChild+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(source), "run:\n", "run:\n  - name: breaks on purpose\n    run: |\n      echo to-stdout\n      echo to-stderr >&2\n      exit 3\n", 1)
	brokenSet, err := template.Load(template.Options{Home: t.TempDir(), SearchPaths: []string{buildtest.Write(t, map[string]string{"c.yaml": broken}), buildtest.Dir(t)}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err = newBuilder(c, brokenSet, &out).Build(ctx, build.Request{Templates: []string{buildtest.BusyBoxChild}})
	var stepErr *build.StepError
	if !errors.As(err, &stepErr) {
		t.Fatalf("error %v is not a StepError\n%s", err, out.String())
	}
	if stepErr.Step != "breaks on purpose" || stepErr.Index != 1 || stepErr.ExitCode != 3 ||
		string(stepErr.Stdout) != "to-stdout\n" || string(stepErr.Stderr) != "to-stderr\n" || coded.CodeOf(err) != build.CodeStepFailed {
		t.Errorf("step error: %+v", stepErr)
	}
	if output := stepErr.Output(); !strings.Contains(output, "to-stdout") || !strings.Contains(output, "to-stderr") || !strings.Contains(output, "breaks on purpose") {
		t.Errorf("Output(): %s", output)
	}
	if !strings.Contains(out.String(), "removed the build instance") {
		t.Errorf("progress does not say the build instance went:\n%s", out.String())
	}
	if names := instanceNames(t, c); strings.Join(names, " ") != buildtest.BusyBox+" "+buildtest.BusyBoxChild {
		t.Errorf("instances after a failed build: %v", names)
	}
	after := getInstance(t, c, buildtest.BusyBoxChild)
	if after.Config["volatile.uuid"] != before.Config["volatile.uuid"] || after.Config[instance.KeyDefinitionHash] != before.Config[instance.KeyDefinitionHash] {
		t.Errorf("the old template instance was replaced by a failed build")
	}
}

// Bad input fails before anything is created: an unknown image alias
// (naming it and the project, and the command that imports it), a missing parent, a
// cycle of parents, a request naming nothing; and packages without
// network fail with a clear message, leaving nothing behind.
func TestBuildRefusesBadInput(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	ctx := testContext(t)
	dir := buildtest.Write(t, map[string]string{
		"noimage.yaml": "name: tpl-noimage\nimage: isx/no-such-image\n",
		"orphan.yaml":  "name: tpl-orphan\nparent: tpl-missing\n",
		"loop-a.yaml":  "name: tpl-loop-a\nparent: tpl-loop-b\n",
		"loop-b.yaml":  "name: tpl-loop-b\nparent: tpl-loop-a\n",
		"pkgs.yaml":    "name: tpl-pkgs\nimage: isx/busybox\npackages: [curl]\n",
	})
	set := buildtest.Templates(t, dir)
	var out bytes.Buffer
	b := newBuilder(c, set, &out)

	_, err := b.Build(ctx, build.Request{Templates: []string{"tpl-noimage"}})
	hint := coded.HintOf(err)
	if coded.CodeOf(err) != build.CodeImageNotFound || !strings.Contains(err.Error(), `"isx/no-such-image"`) ||
		!strings.Contains(err.Error(), "in project "+c.ProjectName()) ||
		!strings.Contains(hint, "incus image import TARBALL --alias isx/no-such-image --project "+c.ProjectName()) ||
		!strings.Contains(hint, "scripts/images.sh") {
		t.Errorf("unknown image: %v (hint %q)", err, hint)
	}
	_, err = b.Build(ctx, build.Request{Templates: []string{"tpl-orphan"}})
	if coded.CodeOf(err) != template.CodeMissingParent || !strings.Contains(err.Error(), "tpl-missing") {
		t.Errorf("missing parent: %v", err)
	}
	_, err = b.Build(ctx, build.Request{Templates: []string{"tpl-loop-a"}})
	if coded.CodeOf(err) != template.CodeCycle {
		t.Errorf("cycle: %v", err)
	}
	_, err = b.Build(ctx, build.Request{})
	if coded.CodeOf(err) != build.CodeInvalidRequest {
		t.Errorf("empty request: %v", err)
	}
	_, err = b.Build(ctx, build.Request{Templates: []string{"tpl-nowhere"}})
	if coded.CodeOf(err) != template.CodeNotFound {
		t.Errorf("unknown template: %v", err)
	}
	if names := instanceNames(t, c); len(names) != 0 {
		t.Errorf("bad input created %v", names)
	}

	incustest.EnsureImages(t, incustest.BusyBox)
	_, err = b.Build(ctx, build.Request{Templates: []string{"tpl-pkgs"}})
	if coded.CodeOf(err) != build.CodeNeedsNetwork || !strings.Contains(err.Error(), "curl") || !strings.Contains(err.Error(), "network") {
		t.Errorf("packages offline: %v", err)
	}
	if names := instanceNames(t, c); len(names) != 0 {
		t.Errorf("a failed packages build left %v", names)
	}
}

// With the Incus daemon unreachable, a build fails with the message saying
// how to start it, and creates nothing.
func TestBuildWithoutIncus(t *testing.T) {
	t.Parallel()
	project := incustest.Project(t)
	set := buildtest.Templates(t)
	c := incus.New("/nonexistent/incus.socket", incus.WithProject(project.ProjectName()))
	var out bytes.Buffer
	_, err := newBuilder(c, set, &out).Build(testContext(t), build.Request{Templates: []string{buildtest.BusyBox}})
	if !errors.Is(err, incus.ErrUnavailable) || !strings.Contains(err.Error(), "incus-up.sh") {
		t.Errorf("error %v", err)
	}
	if names := instanceNames(t, project); len(names) != 0 {
		t.Errorf("instances %v", names)
	}
}

// ISX-028, ISX-029: a project-local definition, and a trusted one built on
// it, are never approvable, and what is built from them is stamped
// project-local.
func TestProjectLocalTemplates(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	ctx := testContext(t)
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, ".incus-spawn"), 0o755); err != nil {
		t.Fatal(err)
	}
	local := "name: tpl-local\nparent: tpl-test-busybox\nrun:\n  - echo local\n"
	if err := os.WriteFile(filepath.Join(work, ".incus-spawn", "local.yaml"), []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	onLocal := buildtest.Write(t, map[string]string{"on-local.yaml": "name: tpl-on-local\nparent: tpl-local\n"})
	set, err := template.Load(template.Options{Home: t.TempDir(), SearchPaths: []string{buildtest.Dir(t), onLocal}, WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tpl-local", "tpl-on-local"} {
		if err := set.Approvable(name); coded.CodeOf(err) != template.CodeNotApproved {
			t.Errorf("Approvable(%s) = %v", name, err)
		}
	}
	if err := set.Approvable(buildtest.BusyBox); err != nil {
		t.Errorf("a trusted template is refused: %v", err)
	}
	var out bytes.Buffer
	if _, err := newBuilder(c, set, &out).Build(ctx, build.Request{Templates: []string{"tpl-on-local"}}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for name, want := range map[string]string{buildtest.BusyBox: "search-path", "tpl-local": "project-local", "tpl-on-local": "project-local"} {
		if got := getInstance(t, c, name).Config[instance.KeySource]; got != want {
			t.Errorf("%s stamped source %q, want %q", name, got, want)
		}
	}
}

// A root image given as a local tarball is imported under
// isx-local/<digest prefix>, and its content is part of the stamped hash:
// a new tarball at the same path makes the template stale.
func TestTarballImage(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	ctx := testContext(t)
	original := busyboxTarball(t)
	dir := t.TempDir()
	tarball := filepath.Join(dir, "images", "busybox.tar.gz")
	if err := os.MkdirAll(filepath.Dir(tarball), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tarball, original, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tar.yaml"), []byte("name: tpl-tarball\nimage: ./images/busybox.tar.gz\nrun:\n  - echo from a tarball\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(original)
	fingerprint := hex.EncodeToString(digest[:])
	removeLocalImage(t, c, fingerprint)
	set := buildtest.Templates(t, dir)
	var out bytes.Buffer
	if _, err := newBuilder(c, set, &out).Build(ctx, build.Request{Templates: []string{"tpl-tarball"}}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "importing image") && !strings.Contains(out.String(), "image isx-local/"+fingerprint[:12]) {
		t.Errorf("progress does not name the local alias:\n%s", out.String())
	}
	image, err := c.ImageByAlias(ctx, "isx-local/"+fingerprint[:12])
	if err != nil {
		t.Fatalf("the tarball's alias: %v", err)
	}
	if image.Fingerprint != fingerprint {
		t.Errorf("the alias names image %s, not the tarball's %s", image.Fingerprint, fingerprint)
	}
	chainHash, _ := set.ChainHash("tpl-tarball")
	stamped := getInstance(t, c, "tpl-tarball").Config[instance.KeyDefinitionHash]
	if stamped == chainHash || stamped == "" {
		t.Errorf("the stamped hash %q does not cover the tarball", stamped)
	}
	if status, err := build.Status(ctx, c, set, "tpl-tarball"); err != nil || status.Stale {
		t.Errorf("fresh tarball build: %+v, %v", status, err)
	}
	// Same path, new content (a gzip member appended still unpacks).
	if err := os.WriteFile(tarball, append(original, original...), 0o644); err != nil {
		t.Fatal(err)
	}
	if status, err := build.Status(ctx, c, set, "tpl-tarball"); err != nil || !status.Stale {
		t.Errorf("after the tarball changed: %+v, %v", status, err)
	}
}

// busyboxTarball reads the unified tarball scripts/images.sh keeps in its
// cache, making it when it is missing.
func busyboxTarball(t *testing.T) []byte {
	t.Helper()
	cache := os.Getenv("ISX_IMAGE_CACHE")
	if cache == "" {
		cache = "/var/cache/isx/images"
	}
	file := filepath.Join(cache, "busybox.tar.gz")
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		root, err := incustest.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(filepath.Join(root, "scripts", "images.sh"), "busybox").CombinedOutput(); err != nil {
			t.Fatalf("scripts/images.sh busybox: %v\n%s", err, out)
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the busybox image tarball (scripts/images.sh busybox makes it): %v", err)
	}
	return data
}

// removeLocalImage removes, when the test ends, the alias a build makes
// for the tarball with this fingerprint (the sha256 of the file, as Incus
// computes it), and the image unless it is isx/busybox's own (the usual
// case: the same tarball).
func removeLocalImage(t *testing.T, c *incus.Client, fingerprint string) {
	t.Helper()
	shared, err := c.ImageByAlias(testContext(t), incustest.BusyBox)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := c.DeleteImageAlias(ctx, build.LocalAlias(fingerprint)); err != nil && !errors.Is(err, incus.ErrNotFound) {
			t.Errorf("removing the test alias: %v", err)
		}
		if fingerprint != shared.Fingerprint {
			if err := c.DeleteImage(ctx, fingerprint); err != nil && !errors.Is(err, incus.ErrNotFound) {
				t.Errorf("removing the test image: %v", err)
			}
		}
	})
}
