// Package incustest gives integration tests a throwaway Incus project on the
// real daemon, deleted with everything in it when the test ends (also when
// it fails), and makes sure the test images exist.
package incustest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/sourcetree"
)

// Image aliases the tests launch from, built by scripts/images.sh.
const (
	// BusyBox is a busybox-static rootfs: no init system, launches in about
	// half a second, never shuts down cleanly (stop it with Force).
	BusyBox = "isx/busybox"
	// Debian is Debian 12 minbase with systemd, git, sudo, bash and procps.
	Debian = "isx/debian-12"
)

const (
	// ProjectPrefix starts the name of every throwaway project.
	ProjectPrefix = "isxtest-"
	// CreatedKey is the project config key holding its creation time
	// (RFC 3339), which the sweep of leftovers reads.
	CreatedKey = "user.isxtest.created"
	// StaleAfter is the age at which a leftover throwaway project is deleted.
	StaleAfter = time.Hour
	// requestTimeout bounds each set-up and clean-up step.
	requestTimeout = 2 * time.Minute
)

// imageTargets maps an alias to the scripts/images.sh target that builds it.
var imageTargets = map[string]string{BusyBox: "busybox", Debian: "debian"}

// Clock is the time source for creation stamps and the sweep.
var Clock clock.Clock = clock.Real{}

var (
	sweepOnce sync.Once
	clientMu  sync.Mutex
	client    *incus.Client
)

// Client is a shared client for the daemon on incus.DefaultSocket().
func Client() *incus.Client {
	clientMu.Lock()
	defer clientMu.Unlock()
	if client == nil {
		client = incus.New("")
	}
	return client
}

// Require makes sure the Incus daemon answers and returns a client for it.
// When it does not, the test fails with the message saying how to start it
// (it is never skipped).
func Require(t testing.TB) *incus.Client {
	t.Helper()
	c := Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Server(ctx); err != nil {
		t.Fatalf("incustest: the Incus daemon is needed for this test: %v", err)
	}
	return c
}

// Project creates a throwaway project isxtest-<random> that shares the
// default project's images and default profile (root disk on the isx pool)
// and returns a client for it. When the test ends, every instance in it is
// force-deleted and the project removed, whatever the outcome. The first call
// in a process also deletes leftover throwaway projects older than
// StaleAfter.
func Project(t testing.TB) *incus.Client {
	t.Helper()
	base := Require(t)
	sweepOnce.Do(func() {
		if err := Sweep(base); err != nil {
			t.Logf("incustest: sweeping leftover projects: %v", err)
		}
	})
	name := ProjectPrefix + randomHex(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	err := base.CreateProject(ctx, incus.Project{
		Name:        name,
		Description: "throwaway project of test " + t.Name(),
		Config: map[string]string{
			"features.images":          "false",
			"features.profiles":        "false",
			"features.storage.volumes": "false",
			"features.networks":        "false",
			CreatedKey:                 Clock.Now().UTC().Format(time.RFC3339),
		},
	})
	if err != nil {
		t.Fatalf("incustest: %v", err)
	}
	t.Cleanup(func() {
		if err := RemoveProject(base, name); err != nil {
			t.Errorf("incustest: cleaning up: %v", err)
		}
	})
	return base.InProject(name)
}

// RemoveProject force-deletes every instance of the project, then the
// project. A project that is already gone is not an error.
func RemoveProject(base *incus.Client, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	c := base.InProject(name)
	instances, err := c.Instances(ctx)
	if errors.Is(err, incus.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("project %s: %w", name, err)
	}
	errs := make([]error, len(instances))
	var wg sync.WaitGroup
	for i, inst := range instances {
		wg.Go(func() { errs[i] = deleteInstance(ctx, c, inst.Name) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("project %s: %w", name, err)
	}
	if err := base.DeleteProject(ctx, name); err != nil && !errors.Is(err, incus.ErrNotFound) {
		return err
	}
	return nil
}

// deleteRetry is how long deleteInstance keeps trying: on a loaded daemon a
// start or exec can hold an instance for well over half a minute.
const deleteRetry = 2 * time.Minute

// deleteInstance retries: an operation still finishing on the instance (a
// start, an exec) makes Incus refuse the delete until it ends.
func deleteInstance(ctx context.Context, c *incus.Client, name string) error {
	var err error
	retry, cancel := context.WithTimeout(ctx, deleteRetry)
	defer cancel()
	deleted := func() bool {
		err = c.DeleteInstance(ctx, name, true)
		return err == nil || errors.Is(err, incus.ErrNotFound)
	}
	if Poll(retry, 500*time.Millisecond, deleted) == nil {
		return nil
	}
	return err
}

// Sweep deletes throwaway projects whose CreatedKey is older than
// StaleAfter: what tests left behind when their process was killed.
func Sweep(base *incus.Client) error { return SweepPrefix(base, ProjectPrefix) }

// SweepPrefix sweeps the stale projects whose names start with prefix. The
// sweep's own test uses a prefix of its own: its fake stale project must
// not be swept by another test process while it is being filled, which
// left Incus with an instance it could neither start nor delete.
func SweepPrefix(base *incus.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	projects, err := base.Projects(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range projects {
		if !strings.HasPrefix(p.Name, prefix) {
			continue
		}
		created, err := time.Parse(time.RFC3339, p.Config[CreatedKey])
		if err != nil || Clock.Now().Sub(created) < StaleAfter {
			continue
		}
		errs = append(errs, RemoveProject(base, p.Name))
	}
	return errors.Join(errs...)
}

// Name returns a unique instance name starting with prefix.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	return prefix + "-" + randomHex(t, 4)
}

// Launch creates and starts an instance from an image alias (made sure of
// with EnsureImages) in the project of c, without a NIC, and returns its
// name. The project's clean-up deletes it.
func Launch(t testing.TB, c *incus.Client, alias string) string {
	t.Helper()
	EnsureImages(t, alias)
	name := Name(t, "t")
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	err := c.CreateInstance(ctx, incus.InstanceCreate{Name: name, Source: incus.ImageSource(alias), Start: true})
	if err != nil {
		t.Fatalf("incustest: launching %s: %v", alias, err)
	}
	return name
}

// EnsureImages makes sure the daemon has the image aliases, building missing
// ones with scripts/images.sh (which takes minutes for Debian).
func EnsureImages(t testing.TB, aliases ...string) {
	t.Helper()
	c := Require(t)
	var missing []string
	for _, alias := range aliases {
		if _, ok := imageTargets[alias]; !ok {
			t.Fatalf("incustest: no recipe for image alias %q (known: %s, %s)", alias, BusyBox, Debian)
		}
		if !hasAlias(t, c, alias) {
			missing = append(missing, alias)
		}
	}
	if len(missing) == 0 {
		return
	}
	unlock := lockImages(t)
	defer unlock()
	for _, alias := range missing {
		if hasAlias(t, c, alias) {
			continue // another test process built it meanwhile
		}
		buildImage(t, alias)
		if !hasAlias(t, c, alias) {
			t.Fatalf("incustest: scripts/images.sh %s ran but alias %s is still missing", imageTargets[alias], alias)
		}
	}
}

func hasAlias(t testing.TB, c *incus.Client, alias string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.GetImageAlias(ctx, alias)
	if errors.Is(err, incus.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("incustest: %v", err)
	}
	return true
}

func buildImage(t testing.TB, alias string) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("incustest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	script := filepath.Join(root, "scripts", "images.sh")
	t.Logf("incustest: building image %s with %s %s", alias, script, imageTargets[alias])
	out, err := exec.CommandContext(ctx, script, imageTargets[alias]).CombinedOutput()
	if err != nil {
		t.Fatalf("incustest: %s %s: %v\n%s", script, imageTargets[alias], err, out)
	}
}

// lockImages serialises image builds across test processes (go test runs
// packages in parallel).
func lockImages(t testing.TB) func() {
	t.Helper()
	file, err := os.OpenFile(filepath.Join(os.TempDir(), "isx-incustest-images.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("incustest: %v", err)
	}
	if err := syscall.Flock(int(file.Fd()), syscall.LOCK_EX); err != nil {
		file.Close()
		t.Fatalf("incustest: locking image builds: %v", err)
	}
	return func() {
		// Closing the file releases the lock as well; a failure here only
		// delays the next build until then.
		if err := syscall.Flock(int(file.Fd()), syscall.LOCK_UN); err != nil {
			t.Logf("incustest: unlocking image builds: %v", err)
		}
		if err := file.Close(); err != nil {
			t.Logf("incustest: %v", err)
		}
	}
}

// RepoRoot is the directory holding go.mod (see sourcetree.Root).
func RepoRoot() (string, error) { return sourcetree.Root() }

func randomHex(t testing.TB, n int) string {
	t.Helper()
	raw := make([]byte, n)
	if _, err := rand.Read(raw); err != nil {
		t.Fatalf("incustest: %v", err)
	}
	return hex.EncodeToString(raw)
}
