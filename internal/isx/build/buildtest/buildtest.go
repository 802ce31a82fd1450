// Package buildtest gives integration tests built test templates: the
// definitions in testdata/templates at the repository root (a busybox chain
// for speed, a Debian chain with systemd for tasks), loaded as a trusted
// search path and built into the test's throwaway Incus project.
package buildtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/template"
)

// The test templates.
const (
	// BusyBox builds on isx/busybox: env, files (one owned by the agent),
	// a root step and an agent step.
	BusyBox = "tpl-test-busybox"
	// BusyBoxChild builds on BusyBox and overrides an env value.
	BusyBoxChild = "tpl-test-busybox-child"
	// Debian builds on isx/debian-12 (systemd, git, sudo, bash).
	Debian = "tpl-test-debian"
	// DebianChild builds on Debian, makes a git workspace for the agent and
	// installs Claude Code and Codex.
	DebianChild = "tpl-test-debian-child"
	// DebianOthers builds on Debian, makes a git workspace and installs Pi
	// and opencode; it is in OthersDir.
	DebianOthers = "tpl-test-debian-others"
)

// buildTimeout bounds building the test templates (the agents' template
// copies two CLIs of some 170 MB each into its build instance).
const buildTimeout = 10 * time.Minute

// NPMCache is the npm package cache tests build agent tools from:
// $ISX_NPM_CACHE, or the one scripts/test fills, beside the image cache,
// so the CLIs are fetched from npm once per machine.
func NPMCache() string {
	if dir := os.Getenv(build.NPMCacheEnv); dir != "" {
		return dir
	}
	return "/var/cache/isx/npm"
}

// Dir is testdata/templates at the repository root.
func Dir(t testing.TB) string {
	t.Helper()
	root, err := incustest.RepoRoot()
	if err != nil {
		t.Fatalf("buildtest: %v", err)
	}
	return filepath.Join(root, "testdata", "templates")
}

// OthersDir is the directory of DebianOthers, apart from Dir so that what
// lists every test template (the TUI's tests) sees only Dir's.
func OthersDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(filepath.Dir(Dir(t)), "templates-others")
}

// Templates loads the built-in definitions, the test templates (as a
// search path) and the definitions in extraDirs (search paths too), with a
// fresh home directory and no project-local definitions.
func Templates(t testing.TB, extraDirs ...string) *template.Set {
	t.Helper()
	set, err := template.Load(template.Options{
		Home:        t.TempDir(),
		SearchPaths: append([]string{Dir(t)}, extraDirs...),
	})
	if err != nil {
		t.Fatalf("buildtest: loading templates: %v", err)
	}
	return set
}

// Write writes a definition file into a new temporary directory and
// returns the directory, for Templates' extraDirs.
func Write(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatalf("buildtest: %v", err)
		}
	}
	return dir
}

// Build builds the named templates (and their parents) of set in the
// project of c, making sure the root images exist first.
func Build(t testing.TB, c *incus.Client, set *template.Set, names ...string) {
	t.Helper()
	var aliases []string
	for _, name := range names {
		chain, err := set.Chain(name)
		if err != nil {
			t.Fatalf("buildtest: %v", err)
		}
		if alias := chain[0].ImageAlias(); strings.HasPrefix(alias, "isx/") {
			aliases = append(aliases, alias)
		}
	}
	incustest.EnsureImages(t, aliases...)
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	var progress strings.Builder
	b := &build.Builder{Client: c, Set: set, Owner: "isx-test", Out: &progress, NPMCache: NPMCache()}
	if _, err := b.Build(ctx, build.Request{Templates: names}); err != nil {
		t.Fatalf("buildtest: building %s: %v\n%s", strings.Join(names, ", "), err, progress.String())
	}
}
