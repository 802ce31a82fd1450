package proxy_test

import (
	"net"
	"net/http"
	"os/exec"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// startCoordinatorStandIn has the proxy start, for each coordinator, a
// stand-in for isx mcp that records what reaches it. The stand-in
// listens in the test process, which reads what it records; the command
// is only a process for the proxy to keep and end.
func (w *world) startCoordinatorStandIn() *controller {
	standIn := &controller{}
	opts := w.options(clock.Real{})
	opts.Coordinator = func(_, socket string) *exec.Cmd {
		l, err := net.Listen("unix", socket)
		if err != nil {
			w.t.Errorf("the stand-in for isx mcp cannot listen: %v", err)
			return exec.Command("false")
		}
		standIn.serve(w.t, l)
		return exec.Command("sleep", "infinity")
	}
	w.start(opts)
	return standIn
}

// The coordinator's isx mcp is the host's, as a host route's controller
// is, and gets what the instance sent cleaned as a controller does: the
// instance secret, under whatever name, is for the proxy alone, and no
// proxy header goes on.
func TestCoordinatorHeadersCleaned(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	standIn := w.startCoordinatorStandIn()
	w.branch("coord", busyboxAccounts, instance.NetworkProxyOnly)
	m := &instance.Manager{Client: w.client, Clock: clock.Real{}}
	if err := m.Grant(w.ctx(), "coord"); err != nil {
		t.Fatal(err)
	}
	secret := w.secret("coord")
	w.mustRun("coord", proxytest.ClientPath+" request -method POST -url "+instance.CoordinatorURL+" "+withSecret+
		secretFlags(secret)+proxyFlags+" -header 'X-Other: kept'")
	seen := standIn.requests()
	if len(seen) != 1 {
		t.Fatalf("isx mcp saw %d requests", len(seen))
	}
	got := seen[0].Header
	for _, name := range bearingSecret(got, secret) {
		t.Errorf("isx mcp saw the instance secret in %s", name)
	}
	for _, name := range proxyNamed(got) {
		t.Errorf("isx mcp saw %s = %q", name, got.Values(name))
	}
	if got.Get("X-Other") != "kept" || seen[0].Method != http.MethodPost || seen[0].Path != "/mcp" {
		t.Errorf("isx mcp did not get the request as sent: %s %s %v", seen[0].Method, seen[0].Path, got)
	}
}
