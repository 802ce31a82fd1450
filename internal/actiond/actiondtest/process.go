package actiondtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/sourcetree"
	"github.com/incusspawn/isx/internal/testkit"
)

// Build builds cmd/actiond into dir and returns the binary's path.
func Build(dir string) (string, error) {
	root, err := sourcetree.Root()
	if err != nil {
		return "", err
	}
	binary := filepath.Join(dir, "actiond")
	cmd := exec.Command("go", "build", "-o", binary, "./cmd/actiond")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/actiond: %w\n%s", err, out)
	}
	return binary, nil
}

// FreeAddr returns a loopback address with a port nobody listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// StoreArgs are the command line flags that open a store.
func StoreArgs(opts store.Options) []string {
	if opts.PostgresDSN == "" {
		return []string{"--data", opts.DataDir}
	}
	dsn := opts.PostgresDSN
	if opts.PostgresSchema != "" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + "search_path=" + opts.PostgresSchema
	}
	return []string{"--postgres", dsn}
}

// Process is actiond running as its own process.
type Process struct {
	T      testing.TB
	Binary string
	Addr   string
	// URL is where it listens; PublicURL what its tokens name.
	URL, PublicURL string
	Store          store.Options
	cmd            *exec.Cmd
	stderr         *testkit.SyncBuffer
	exited         chan struct{}
}

// StartProcess runs `actiond serve` on a free loopback port over the store,
// with publicURL ("" for its own address), and waits until it is healthy.
// It is killed at the end of the test.
func StartProcess(t testing.TB, binary string, opts store.Options, publicURL string, extra ...string) *Process {
	t.Helper()
	addr := FreeAddr(t)
	url := "http://" + addr
	if publicURL == "" {
		publicURL = url
	}
	args := append([]string{"serve", "--addr", addr, "--public-url", publicURL}, StoreArgs(opts)...)
	args = append(args, extra...)
	p := &Process{T: t, Binary: binary, Addr: addr, URL: url, PublicURL: publicURL, Store: opts, stderr: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start actiond: %v", err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exited := false
	err := Poll(ctx, func() bool {
		select {
		case <-p.exited:
			exited = true
			return true
		default:
		}
		return healthy(url)
	})
	switch {
	case exited:
		t.Fatalf("actiond exited at start:\n%s", p.stderr.String())
	case err != nil:
		t.Fatalf("actiond did not become healthy:\n%s", p.stderr.String())
	}
	return p
}

// healthy says whether actiond at url answers its health check.
func healthy(url string) bool {
	resp, err := http.Get(url + "/healthcheck")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Kill sends SIGKILL and waits for the process to go.
func (p *Process) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop sends SIGTERM and waits, letting running requests finish.
func (p *Process) Stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(40 * time.Second):
		p.Kill()
	}
}

// PID is the process's id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Log is what the process wrote to stderr.
func (p *Process) Log() string { return p.stderr.String() }

// Token mints an MCP token with `actiond token` over the process's store.
func (p *Process) Token(principal, subject string) string {
	p.T.Helper()
	args := append([]string{"token", "--principal", principal, "--subject", subject}, StoreArgs(p.Store)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, p.Binary, args...).Output()
	if err != nil {
		var stderr string
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = string(exit.Stderr)
		}
		p.T.Fatalf("actiond token: %v %s", err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// Env is an Env for the process: GraphQL, records and raw MCP requests go
// to it over HTTP.
func (p *Process) Env(d store.Dialect) *Env {
	return &Env{T: p.T, Dialect: d, URL: p.URL, StoreOptions: p.Store, minter: func(o auth.MintOptions) (string, error) {
		return p.Token(o.Principal, o.Subject), nil
	}}
}
