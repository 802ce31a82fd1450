package incustest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/sourcetree"
	"go.uber.org/goleak"
)

// Main runs a package's tests under goleak.VerifyTestMain, so that the run
// fails when they leave goroutines behind. Once the tests are done, the
// shared client's clean-ups are settled first, while the instances whose
// exec logs they delete still stand; then after runs (removing what the
// tests shared), and the client is closed: settled again and its idle
// connections, which are not leaks, dropped.
func Main(m *testing.M, after ...func()) {
	goleak.VerifyTestMain(run{m: m, after: after})
}

type run struct {
	m     *testing.M
	after []func()
}

func (r run) Run() int {
	relay, err := buildRelay()
	if err != nil {
		fmt.Fprintf(os.Stderr, "incustest: %v\n", err)
		return 1
	}
	defer os.RemoveAll(filepath.Dir(relay))
	code := r.m.Run()
	if err := settleClient(); err != nil {
		fmt.Fprintf(os.Stderr, "incustest: settling the shared client: %v\n", err)
		code = max(code, 1)
	}
	for _, f := range r.after {
		f()
	}
	clientMu.Lock()
	defer clientMu.Unlock()
	if client != nil {
		if err := client.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "incustest: closing the shared client: %v\n", err)
			code = max(code, 1)
		}
	}
	return code
}

func settleClient() error {
	clientMu.Lock()
	defer clientMu.Unlock()
	if client == nil {
		return nil
	}
	return client.Settle()
}

// buildRelay builds isx-relay, which every instance connected to the host
// proxy runs, and names it in the environment, where this process and
// every isx it starts find it: a test binary has none beside it.
func buildRelay() (string, error) {
	root, err := sourcetree.Root()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "isx-relay-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, instance.RelayName)
	cmd := exec.Command(goTool(), "build", "-o", path, "./cmd/isx-relay")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("building isx-relay: %w\n%s", err, out)
	}
	return path, os.Setenv(instance.RelayEnv, path)
}

func goTool() string {
	if path, err := exec.LookPath("go"); err == nil {
		return path
	}
	return "/usr/local/go/bin/go"
}
