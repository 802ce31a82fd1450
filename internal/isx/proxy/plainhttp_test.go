package proxy_test

import (
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// An absolute-form http:// request to a host the proxy puts a credential
// into would carry that credential to port 80 in clear: it is refused
// (400, saying to use https://) before anything goes upstream, for every
// such host. An upstream config.yaml names for the host (a local fake, a
// mirror) is the user's choice and is served.
func TestPlainHTTPGetsNoCredential(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	w.start(w.options(clock.Real{}))
	w.branch("plain", busyboxAccounts, instance.NetworkProxyOnly)
	refused := func(t *testing.T, url, script string) {
		t.Helper()
		before := w.activity("plain")
		out, code := w.run("plain", script)
		if code == 0 || !strings.Contains(out, "status=400") || !strings.Contains(out, "in clear") || !strings.Contains(out, "https://") {
			t.Errorf("%s: not refused as plain http (exit %d):\n%s", url, code, out)
		}
		if after := w.activity("plain"); after.TrafficRequests != before.TrafficRequests {
			t.Errorf("%s: the refused request went on as traffic: %+v", url, after)
		}
	}
	for _, host := range []string{"api.openai.com", "github.com", "api.github.com"} {
		url := "http://" + host + "/org/repo.git/info/refs"
		refused(t, url, proxytest.ClientPath+" request -url "+url)
	}
	// config.yaml sends api.anthropic.com to the fake over http://.
	const messages = "http://api.anthropic.com/v1/messages"
	if out := w.mustRun("plain", proxytest.ClientPath+" messages -url "+messages); !strings.Contains(out, "status=200") {
		t.Errorf("a configured http:// upstream was not served:\n%s", out)
	}
	if calls := w.anthropic.Calls(); len(calls) != 1 || calls[0].APIKey != w.apiKey {
		t.Fatalf("the fake got %+v", calls)
	}
	if !strings.Contains(w.logs.String(), "refused a plain http:// request") {
		t.Errorf("the refusals were not logged:\n%s", w.logs.String())
	}

	// Without the upstream, api.anthropic.com is refused like the others.
	w.stop()
	delete(w.upstreams, "api.anthropic.com")
	w.start(w.options(clock.Real{}))
	if _, err := w.server.Admit(w.ctx(), "plain"); err != nil {
		t.Fatal(err)
	}
	refused(t, messages, proxytest.ClientPath+" messages -url "+messages)
	if calls := w.anthropic.Calls(); len(calls) != 1 {
		t.Errorf("the fake got %d calls, want only the one through the configured upstream", len(calls))
	}
}
