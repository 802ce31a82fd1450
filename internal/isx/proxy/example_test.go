package proxy_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
	"github.com/incusspawn/isx/internal/sourcetree"
)

// The README's controller, built and run as the user would: a request
// through the proxy is answered; the same request sent straight to it on
// the host's loopback, without the route secret or with a wrong one, is
// refused; after the secret file is deleted the controller takes the new
// one at once.
func TestREADMEController(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	root, err := sourcetree.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "route-controller")
	build := exec.Command("go", "build", "-o", bin, "./examples/route-controller")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the example: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bin, "-listen", "127.0.0.1:0", "-route", "work.isx.internal")
	cmd.Env = append(os.Environ(), "HOME="+w.home)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() }) //nolint:errcheck // killed
	lines := make(chan string, 16)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
		close(lines)
	}()
	next := func() string {
		t.Helper()
		select {
		case line := <-lines:
			return line
		case <-time.After(time.Minute):
			t.Fatal("the controller printed nothing")
			return ""
		}
	}
	addr := strings.TrimPrefix(next(), "listening on ")
	text := "host-routes:\n  work.isx.internal:\n    target: " + addr + "\n    templates: [" + busyboxAccounts + "]\n"
	if err := os.WriteFile(config.ConfigPath(w.home), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(w.home)
	if err != nil {
		t.Fatal(err)
	}
	opts := w.options(clock.Real{})
	opts.HostRoutes = cfg.HostRoutes
	w.start(opts)
	w.branch("agent", busyboxAccounts, instance.NetworkProxyOnly)

	call := proxytest.ClientPath + " request -url https://work.isx.internal/report -method POST -body done " + withSecret
	if out := w.mustRun("agent", call); !strings.Contains(out, "body=hello agent") {
		t.Errorf("through the proxy:\n%s", out)
	}
	if line := next(); line != "POST /report from agent ("+busyboxAccounts+")" {
		t.Errorf("the controller logged %q", line)
	}
	direct := func(secret string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/report", nil)
		req.Header.Set("X-Isx-Instance", "forged")
		if secret != "" {
			req.Header.Set("X-Isx-Route-Secret", secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := direct(""); code != http.StatusForbidden {
		t.Errorf("straight to the controller without the secret: %d", code)
	}
	if code := direct(strings.Repeat("0", 64)); code != http.StatusForbidden {
		t.Errorf("straight to the controller with a wrong secret: %d", code)
	}
	old, err := os.ReadFile(config.RouteSecretPath(w.home, "work.isx.internal"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(config.RouteSecretPath(w.home, "work.isx.internal")); err != nil {
		t.Fatal(err)
	}
	if out := w.mustRun("agent", call); !strings.Contains(out, "body=hello agent") {
		t.Errorf("after rotating the secret:\n%s", out)
	}
	next()
	if code := direct(strings.TrimSpace(string(old))); code != http.StatusForbidden {
		t.Errorf("the rotated-out secret still works: %d", code)
	}
}
