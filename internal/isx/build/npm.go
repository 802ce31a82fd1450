package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Agent CLIs come from npm. isx keeps the package tarballs it needs in a
// cache on the host (NPMCache), filled by `npm pack` from the registry the
// host's npm is set up for and reused by every later build, so a template
// builds offline once the cache has its tools, and an instance never needs
// the registry (nor any network) to get its agent.

// NPMCacheEnv overrides the cache directory (scripts and CI share one).
const NPMCacheEnv = "ISX_NPM_CACHE"

// NPMCacheDir is the cache of home: $ISX_NPM_CACHE, or
// ~/.cache/incus-spawn/npm.
func NPMCacheDir(home string) string {
	if dir := os.Getenv(NPMCacheEnv); dir != "" {
		return dir
	}
	return filepath.Join(home, ".cache", "incus-spawn", "npm")
}

// npmPackage is one pinned package of the registry.
type npmPackage struct {
	Name    string // @scope/name or name
	Version string
}

func (p npmPackage) spec() string { return p.Name + "@" + p.Version }

// tarball is the file `npm pack` writes for the package:
// @scope/name@v becomes scope-name-v.tgz.
func (p npmPackage) tarball() string {
	name := strings.ReplaceAll(strings.TrimPrefix(p.Name, "@"), "/", "-")
	return name + "-" + p.Version + ".tgz"
}

// bundle is the cache's tarball of a package installed with its
// dependencies (node_modules), for an agent that is a Node program.
func (p npmPackage) bundle() string {
	return strings.TrimSuffix(p.tarball(), ".tgz") + "-with-dependencies.tgz"
}

// packTimeout bounds fetching one package (the agents' are 60-190 MB).
const packTimeout = 15 * time.Minute

// fetch returns the path of the package's tarball in the cache dir,
// fetching it with npm pack when it is not there yet. Two builds fetching
// at once take turns on a lock, so the registry is asked once.
func fetch(ctx context.Context, dir string, p npmPackage) (string, error) {
	path := filepath.Join(dir, p.tarball())
	if err := fillOnce(dir, path, func() error { return pack(ctx, dir, path, p) }); err != nil {
		return "", err
	}
	return path, nil
}

// pack fetches the package's tarball to path with npm pack.
func pack(ctx context.Context, dir, path string, p npmPackage) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("%s is not in the npm cache %s, and there is no npm on this host to fetch it with (install npm, or put the tarball of `npm pack %s` there)", p.spec(), dir, p.spec())
	}
	ctx, cancel := context.WithTimeout(ctx, packTimeout)
	defer cancel()
	work, err := os.MkdirTemp(dir, ".pack-")
	if err != nil {
		return fmt.Errorf("fetching %s: %w", p.spec(), err)
	}
	defer os.RemoveAll(work)
	cmd := exec.CommandContext(ctx, npm, "pack", "--silent", "--pack-destination", work, p.spec())
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("fetching %s with npm pack failed (is the npm registry reachable?): %w: %s", p.spec(), err, strings.TrimSpace(clipText(string(out), 400)))
	}
	if err := os.Rename(filepath.Join(work, p.tarball()), path); err != nil {
		return fmt.Errorf("npm pack %s wrote no %s: %w", p.spec(), p.tarball(), err)
	}
	return nil
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

var errNoTool = errors.New("no such tool")

// fetchBundle returns the path of the package's bundle in the cache dir:
// node_modules with the package and its dependencies, installed once on
// the host with npm (install scripts are not run), then tarred.
func fetchBundle(ctx context.Context, dir string, p npmPackage) (string, error) {
	path := filepath.Join(dir, p.bundle())
	if err := fillOnce(dir, path, func() error { return bundle(ctx, dir, path, p) }); err != nil {
		return "", err
	}
	return path, nil
}

// bundle installs the package and its dependencies with npm into a
// node_modules and tars it to path.
func bundle(ctx context.Context, dir, path string, p npmPackage) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("%s is not in the npm cache %s, and there is no npm on this host to fetch it and its dependencies with (install npm)", p.spec(), dir)
	}
	tar, err := exec.LookPath("tar")
	if err != nil {
		return fmt.Errorf("bundling %s needs tar on this host: %w", p.spec(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, packTimeout)
	defer cancel()
	work, err := os.MkdirTemp(dir, ".bundle-")
	if err != nil {
		return fmt.Errorf("fetching %s: %w", p.spec(), err)
	}
	defer os.RemoveAll(work)
	install := exec.CommandContext(ctx, npm, "install", "--prefix", work, "--no-audit", "--no-fund", "--ignore-scripts", "--omit=dev", p.spec())
	if out, err := install.CombinedOutput(); err != nil {
		return fmt.Errorf("installing %s with npm failed (is the npm registry reachable?): %w: %s", p.spec(), err, strings.TrimSpace(clipText(string(out), 400)))
	}
	staged := filepath.Join(work, "bundle.tgz")
	if out, err := exec.CommandContext(ctx, tar, "-C", work, "-czf", staged, "node_modules").CombinedOutput(); err != nil {
		return fmt.Errorf("bundling %s: %w: %s", p.spec(), err, strings.TrimSpace(clipText(string(out), 400)))
	}
	if err := os.Rename(staged, path); err != nil {
		return fmt.Errorf("bundling %s: %w", p.spec(), err)
	}
	return nil
}

// fillOnce makes path in the cache dir with fill unless it is there
// already. Two builds filling at once take turns on a lock, so the
// registry is asked once.
func fillOnce(dir, path string, fill func() error) error {
	if info, err := os.Stat(path); err == nil && info.Size() > 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making the npm cache %s: %w", dir, err)
	}
	unlock, err := lockCache(dir)
	if err != nil {
		return err
	}
	defer unlock()
	if info, err := os.Stat(path); err == nil && info.Size() > 0 {
		return nil
	}
	return fill()
}

// lockCache takes the cache's lock, so that two builds fetch a package once.
func lockCache(dir string) (func(), error) {
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking the npm cache %s: %w", dir, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, fmt.Errorf("locking the npm cache %s: %w", dir, err)
	}
	return func() { lock.Close() }, nil
}
