package proxy_test

import (
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

func TestSmoke(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	w.start(w.options(clock.Real{}))
	w.branch("smoke", busyboxAccounts, instance.NetworkDefault)
	out := w.mustRun("smoke", proxytest.ClientPath+" messages -url "+proxy.AnthropicBaseURL+"/v1/messages -key-file "+instance.SecretFile)
	t.Log(out)
	out = w.mustRun("smoke", proxytest.ClientPath+" messages -stream -url "+proxy.AnthropicBaseURL+"/v1/messages -key-file "+instance.SecretFile)
	t.Log(out)
	t.Logf("%+v", w.activity("smoke"))
	for _, c := range w.anthropic.Calls() {
		if c.APIKey != w.apiKey || strings.Contains(string(c.Body), "secret") {
			t.Errorf("call %+v", c)
		}
	}
	t.Log(w.logs.String())
}
