package proxytest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/sourcetree"
)

// ClientPath is where PushClient puts the client in an instance.
const ClientPath = "/usr/local/bin/isx-test-client"

var built struct {
	once sync.Once
	path string
	err  error
}

// Client builds instanceclient once per test binary (static, so it runs
// in any instance) and returns its path; it lives until the process ends.
func Client(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		root, err := sourcetree.Root()
		if err != nil {
			built.err = err
			return
		}
		dir, err := os.MkdirTemp("", "isx-proxytest-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "instanceclient")
		cmd := exec.Command(goTool(), "build", "-o", built.path, "./internal/isx/proxy/proxytest/instanceclient")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = &buildError{out: string(out), err: err}
		}
	})
	if built.err != nil {
		t.Fatalf("proxytest: building instanceclient: %v", built.err)
	}
	return built.path
}

// RemoveClient deletes the built client; call it from TestMain.
func RemoveClient() {
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

func goTool() string {
	if path, err := exec.LookPath("go"); err == nil {
		return path
	}
	return "/usr/local/go/bin/go"
}

// PushClient copies the client into the instance at ClientPath.
func PushClient(t testing.TB, c *incus.Client, instance string) {
	t.Helper()
	f, err := os.Open(Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.PushFile(ctx, instance, ClientPath, f, incus.FileOptions{Mode: 0o755, MakeParents: true}); err != nil {
		t.Fatalf("proxytest: pushing the client into %s: %v", instance, err)
	}
}

// Home is a home directory for a test that may start a proxy (isx
// branch and isx mcp do): short enough for the proxy's socket paths, and
// its proxy stopped when the test ends, before the directory goes.
func Home(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "isxh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Cleanup(func() { StopProxy(t, dir) })
	return dir
}

// StopProxy stops the proxy of home if one runs.
func StopProxy(t testing.TB, home string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := proxy.StopAndWait(ctx, home, nil); err != nil && !proxy.IsNotRunning(err) {
		t.Errorf("proxytest: stopping the proxy of %s: %v", home, err)
	}
}
