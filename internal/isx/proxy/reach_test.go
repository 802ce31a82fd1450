package proxy_test

import (
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
)

// The moment a create returns (the copy started, the proxy admitted it),
// the instance reaches the proxy: its first model call, with nothing
// pushed or waited for in between, is answered at once, through the relay
// and the instance's own socket, and no Incus proxy device is involved.
// (The call goes to the proxy's route, not through it as a forward proxy:
// wget -Y off.)
func TestModelCallRightAfterCreate(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	w.start(w.options(clock.Real{}))
	owner, err := instance.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	m := &instance.Manager{Client: w.client, Clock: clock.Real{}, ProxyDir: w.proxyDir()}
	if err := m.Branch(w.ctx(), instance.BranchOptions{Name: "quick", From: busyboxAccounts, Owner: owner, Network: instance.NetworkProxyOnly}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.server.Admit(w.ctx(), "quick"); err != nil {
		t.Fatal(err)
	}
	body := `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	out, code := w.run("quick", `wget -Y off -q -O- --header "x-api-key: $(cat $`+instance.SecretFileEnv+`)" --header 'content-type: application/json' --header 'anthropic-version: 2023-06-01' --post-data '`+body+`' `+proxy.AnthropicBaseURL+`/v1/messages`)
	if code != 0 || !strings.Contains(out, "Hello from the fake.") {
		t.Fatalf("the first model call right after create: exit %d\n%s\nproxy log:\n%s", code, out, w.logs.String())
	}
	if calls := w.anthropic.Calls(); len(calls) != 1 || calls[0].APIKey != w.apiKey {
		t.Errorf("the fake got %d calls, want the one with the account's key", len(calls))
	}
	inst, _, err := w.client.GetInstance(w.ctx(), "quick")
	if err != nil {
		t.Fatal(err)
	}
	for name, device := range inst.ExpandedDevices {
		if device["type"] == "proxy" {
			t.Errorf("the instance has an Incus proxy device %s: %v", name, device)
		}
	}
}
