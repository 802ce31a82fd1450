package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// routeCall is a model call at the route, with key as the API key.
func routeCall(key string) string {
	return proxytest.ClientPath + " messages -url " + proxy.AnthropicBaseURL + "/v1/messages -key '" + key + "'"
}

// A request must prove the instance twice: by the socket it arrives on
// (its own proxy device) and by the secret of the instance's current
// start. A missing or wrong secret, another instance's secret, and a
// secret of an earlier start are refused, and counted nowhere; so is a
// CONNECT without the secret as its proxy password.
//
// ISX-281 (no credential reaches a request that does not prove itself).
func TestSecretsRefused(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	w.start(w.options(clock.Real{}))
	w.branch("one", busyboxAccounts, instance.NetworkProxyOnly)
	w.branch("two", busyboxAccounts, instance.NetworkDefault)
	oldSecret := w.secret("one")
	refused := func(t *testing.T, name, why, script string) {
		t.Helper()
		before := w.activity(name)
		out, code := w.run(name, script)
		if code == 0 || !(strings.Contains(out, "status=401") || strings.Contains(out, "Proxy Authentication Required")) {
			t.Errorf("%s: not refused (exit %d):\n%s", why, code, out)
		}
		if after := w.activity(name); after.TrafficRequests != before.TrafficRequests || after.Requests != before.Requests {
			t.Errorf("%s: the refused request was counted: %+v", why, after)
		}
	}
	t.Run("missing", func(t *testing.T) {
		refused(t, "one", "no secret", proxytest.ClientPath+" messages -url "+proxy.AnthropicBaseURL+"/v1/messages")
	})
	t.Run("wrong", func(t *testing.T) {
		refused(t, "one", "a wrong secret", routeCall(strings.Repeat("0", 64)))
	})
	t.Run("another instance's", func(t *testing.T) {
		refused(t, "one", "the secret of two", routeCall(w.secret("two")))
	})
	t.Run("wrong proxy password", func(t *testing.T) {
		refused(t, "one", "CONNECT with a wrong password", "HTTPS_PROXY=http://isx:nope@"+instance.ProxyAddress+" "+proxytest.ClientPath+" messages -url https://api.anthropic.com/v1/messages")
	})
	t.Run("rotated out", func(t *testing.T) {
		if err := w.client.RestartInstance(w.ctx(), "one", incus.StopOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.server.Admit(w.ctx(), "one"); err != nil {
			t.Fatal(err)
		}
		newSecret := w.secret("one")
		if newSecret == oldSecret {
			t.Fatal("the secret was not rotated at the start")
		}
		refused(t, "one", "the secret of the previous start", routeCall(oldSecret))
		if out := w.mustRun("one", routeCall(newSecret)); !strings.Contains(out, "status=200") {
			t.Errorf("the new secret: %s", out)
		}
	})
	if calls := w.anthropic.Calls(); len(calls) != 1 {
		t.Errorf("the fake got %d calls; only the one with the current secret may reach it", len(calls))
	}
}

// An instance whose template names no account for the provider gets a
// refusal saying so, and so does one built from a project-local
// definition whatever its template names; neither reaches the provider.
func TestNoAccountNoCredential(t *testing.T) {
	w := newWorld(t, busyboxNone, busyboxAccounts)
	w.start(w.options(clock.Real{}))
	w.branch("none", busyboxNone, instance.NetworkProxyOnly)
	out, code := w.run("none", routeCall(w.secret("none")))
	if code == 0 || !strings.Contains(out, "status=403") || !strings.Contains(out, "names no claude account") {
		t.Errorf("a template without an account: exit %d\n%s", code, out)
	}
	if a := w.activity("none"); a.TrafficRequests != 1 || a.Requests != 0 {
		t.Errorf("activity %+v", a)
	}
	if calls := w.anthropic.Calls(); len(calls) != 0 {
		t.Errorf("the fake got %d calls", len(calls))
	}
	// accounts.yaml is read again when it changes: a default account is
	// what a template naming none uses.
	w.writeAccounts(fmt.Sprintf("claude:\n  default: {api-key: %s-default}\n  work: {api-key: %s}\n", w.apiKey, w.apiKey), 0o600)
	if out := w.mustRun("none", routeCall(w.secret("none"))); !strings.Contains(out, "status=200") {
		t.Errorf("with a default account: %s", out)
	}
	if calls := w.anthropic.Calls(); len(calls) != 1 || calls[0].APIKey != w.apiKey+"-default" {
		t.Errorf("the default account was not used: %+v", calls)
	}
	w.writeAccounts(fmt.Sprintf("claude:\n  work: {api-key: %s}\n", w.apiKey), 0o600)

	// An instance stamped as built from a project-local definition.
	owner, _ := instance.CurrentOwner()
	m := &instance.Manager{Client: w.client, Clock: clock.Real{}, ProxyDir: w.proxyDir()}
	if err := m.Branch(w.ctx(), instance.BranchOptions{Name: "local", From: busyboxAccounts, Owner: owner, NoStart: true}); err != nil {
		t.Fatal(err)
	}
	err := w.client.UpdateInstance(w.ctx(), "local", func(inst *incus.Instance) error {
		inst.Config[instance.KeySource] = "project-local"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.client.StartInstance(w.ctx(), "local"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.server.Admit(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	proxytest.PushClient(t, w.client, "local")
	out, code = w.run("local", routeCall(w.secret("local")))
	if code == 0 || !strings.Contains(out, "project-local") {
		t.Errorf("a project-local build: exit %d\n%s", code, out)
	}
	if calls := w.anthropic.Calls(); len(calls) != 1 {
		t.Errorf("the fake got %d calls", len(calls))
	}
}

// An airgapped instance gets no proxy device and the proxy refuses to
// serve it; a proxy-only one reaches nothing but the proxy.
func TestAirgapNotServed(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	s := w.start(w.options(clock.Real{}))
	w.branch("air", busyboxAccounts, instance.NetworkAirgap)
	inst, _, err := w.client.GetInstance(w.ctx(), "air")
	if err != nil {
		t.Fatal(err)
	}
	if _, has := inst.ExpandedDevices[instance.ProxyDevice]; has {
		t.Errorf("the airgapped instance has a proxy device: %v", inst.ExpandedDevices)
	}
	if _, err := s.Admit(w.ctx(), "air"); err == nil || !strings.Contains(err.Error(), "airgapped") {
		t.Errorf("admitting an airgapped instance: %v", err)
	}
	if a := w.activity("air"); a.Known() {
		t.Errorf("the proxy knows the airgapped instance: %+v", a)
	}
}
