package incustest_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// helperEnv makes the test binary run one of the failing TestHelper* tests
// below in a child process, so that the parent can look at what a failed
// test leaves behind. Without it those tests are left out of the run.
const helperEnv = "INCUSTEST_HELPER"

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(helperEnv) == "" {
		skip := "^TestHelper"
		if current := flag.Lookup("test.skip").Value.String(); current != "" {
			skip += "|" + current
		}
		if err := flag.Set("test.skip", skip); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	incustest.Main(m)
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// runHelper runs TestHelper<name> in a child process and returns its output;
// the helper is expected to fail.
func runHelper(t *testing.T, name string, extraEnv ...string) string {
	t.Helper()
	cmd := exec.CommandContext(testContext(t), os.Args[0], "-test.run=^TestHelper"+name+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+name), extraEnv...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("helper %s should have failed: %v\n%s", name, err, out)
	}
	return string(out)
}

func projectExists(t *testing.T, name string) bool {
	t.Helper()
	_, _, err := incustest.Client().GetProject(testContext(t), name)
	if errors.Is(err, incus.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// TestHelperFailingTest makes a project with a running instance, then fails.
func TestHelperFailingTest(t *testing.T) {
	c := incustest.Project(t)
	incustest.Launch(t, c, incustest.BusyBox)
	if err := os.WriteFile(os.Getenv("INCUSTEST_OUT"), []byte(c.ProjectName()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Fatal("failing on purpose")
}

func TestProjectRemovedAfterFailedTest(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "project")
	log := runHelper(t, "FailingTest", "INCUSTEST_OUT="+out)
	name, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the helper did not get as far as making a project: %v\n%s", err, log)
	}
	if !strings.HasPrefix(string(name), incustest.ProjectPrefix) {
		t.Errorf("project name %q lacks the prefix %q", name, incustest.ProjectPrefix)
	}
	if projectExists(t, string(name)) {
		t.Errorf("project %s (with its running instance) survived the failed test", name)
	}
}

// TestHelperUnknownImage asks for an image nobody knows how to build.
func TestHelperUnknownImage(t *testing.T) {
	incustest.EnsureImages(t, "isx/no-such-image")
}

func TestEnsureImagesRefusesUnknownAlias(t *testing.T) {
	t.Parallel()
	log := runHelper(t, "UnknownImage")
	if !strings.Contains(log, `no recipe for image alias "isx/no-such-image"`) {
		t.Errorf("output does not explain the failure:\n%s", log)
	}
}

// TestHelperNoDaemon requires a daemon on a socket where none runs.
func TestHelperNoDaemon(t *testing.T) {
	incustest.Require(t)
}

func TestRequireFailsWithHowToStart(t *testing.T) {
	t.Parallel()
	log := runHelper(t, "NoDaemon", "INCUS_SOCKET="+filepath.Join(t.TempDir(), "none.socket"))
	if !strings.Contains(log, "systemctl start incus") || !strings.Contains(log, "--- FAIL: TestHelperNoDaemon") || strings.Contains(log, "SKIP") {
		t.Errorf("Require without a daemon must fail (not skip) saying how to start it:\n%s", log)
	}
}

func TestProjectSharesImagesAndProfile(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)
	project, _, err := incustest.Client().GetProject(ctx, c.ProjectName())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"features.images", "features.profiles", "features.storage.volumes", "features.networks"} {
		if project.Config[key] != "false" {
			t.Errorf("%s = %q, want false", key, project.Config[key])
		}
	}
	created, err := time.Parse(time.RFC3339, project.Config[incustest.CreatedKey])
	if err != nil || time.Since(created) > time.Minute {
		t.Errorf("%s = %q (%v), want the creation time", incustest.CreatedKey, project.Config[incustest.CreatedKey], err)
	}
	name := incustest.Launch(t, c, incustest.BusyBox)
	inst, _, err := c.GetInstance(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !inst.Running() || inst.ExpandedDevices["root"]["type"] != "disk" || len(inst.ExpandedDevices) != 1 {
		t.Errorf("launched instance: status %s, devices %v; want running with only the shared root disk (no NIC)", inst.Status, inst.ExpandedDevices)
	}
}

// sweepPrefix keeps the sweep test's projects out of every other test
// process's sweep of isxtest- projects.
const sweepPrefix = "isxsweeptest-"

func TestSweepRemovesOnlyStaleProjects(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	base := incustest.Require(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	makeProject := func(age time.Duration) string {
		name := incustest.Name(t, sweepPrefix+"sweep")
		err := base.CreateProject(ctx, incus.Project{Name: name, Config: map[string]string{
			"features.images": "false", "features.profiles": "false",
			incustest.CreatedKey: time.Now().Add(-age).UTC().Format(time.RFC3339),
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := incustest.RemoveProject(base, name); err != nil {
				t.Error(err)
			}
		})
		return name
	}
	stale, fresh := makeProject(2*time.Hour), makeProject(10*time.Minute)
	err := base.InProject(stale).CreateInstance(ctx, incus.InstanceCreate{Name: "left", Source: incus.ImageSource(incustest.BusyBox), Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := incustest.SweepPrefix(base, sweepPrefix); err != nil {
		t.Fatal(err)
	}
	if projectExists(t, stale) {
		t.Errorf("stale project %s (with a running instance) was not swept", stale)
	}
	if !projectExists(t, fresh) {
		t.Errorf("fresh project %s was swept", fresh)
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := incustest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "scripts", "images.sh")); err != nil {
		t.Errorf("repo root %s has no scripts/images.sh: %v", root, err)
	}
}

func TestEnsureImagesKnownAliases(t *testing.T) {
	t.Parallel()
	incustest.EnsureImages(t, incustest.BusyBox, incustest.Debian)
	for _, alias := range []string{incustest.BusyBox, incustest.Debian} {
		if _, err := incustest.Client().GetImageAlias(testContext(t), alias); err != nil {
			t.Errorf("%s: %v", alias, err)
		}
	}
}
