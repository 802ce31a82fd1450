package proxy_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
	"github.com/incusspawn/isx/internal/testkit"
)

// metricValue is the value of the series written exactly as series, or -1.
func metricValue(t *testing.T, exposition []byte, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(exposition)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("%s: %v", series, err)
	}
	return v
}

func (w *world) metrics() []byte {
	w.t.Helper()
	exposition, err := proxy.Connect(w.home).Metrics(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	return exposition
}

// The proxy's metrics on its control socket are the counts activity
// shows, per instance: a streamed model call held open is in flight,
// and once it ends its tokens, the call, the requests and the bytes are
// counted, all in an exposition promtool accepts.
func TestMetricsOnTheControlSocket(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	hold := make(chan struct{})
	w.anthropic.Reply = func(n int, c proxytest.Call) proxytest.Reply {
		return proxytest.Reply{Usage: proxytest.DefaultUsage(n), Hold: hold}
	}
	w.start(w.options(clock.Real{}))
	w.branch("m", busyboxAccounts, instance.NetworkProxyOnly)
	done := w.execLater("m", routeCall(w.secret("m"))+" -stream")
	w.waitActivityWhile("m", "the streamed call to be in flight", done, func(a proxy.Activity) bool { return a.RequestsInFlight == 1 })
	during := w.metrics()
	testkit.PromtoolCheck(t, during)
	if v := metricValue(t, during, `isx_proxy_model_calls_in_flight{instance="m"}`); v != 1 {
		t.Errorf("in flight while the stream is held: %v\n%s", v, during)
	}
	if v := metricValue(t, during, `isx_proxy_requests_in_flight{instance="m"}`); v != 1 {
		t.Errorf("requests in flight while the stream is held: %v", v)
	}
	close(hold)
	if out := <-done; !strings.Contains(out, "message_stop") {
		t.Fatalf("the stream: %s", out)
	}
	a := w.waitActivity("m", "the call to end", func(a proxy.Activity) bool { return a.RequestsInFlight == 0 && a.TrafficInFlight == 0 })
	after := w.metrics()
	testkit.PromtoolCheck(t, after)
	usage := proxytest.DefaultUsage(0)
	for series, want := range map[string]int64{
		`isx_proxy_model_calls_in_flight{instance="m"}`:                    0,
		`isx_proxy_model_calls_total{instance="m"}`:                        1,
		`isx_proxy_model_tokens_total{instance="m",kind="input"}`:          usage.Input,
		`isx_proxy_model_tokens_total{instance="m",kind="output"}`:         usage.Output,
		`isx_proxy_model_tokens_total{instance="m",kind="cache_read"}`:     usage.CacheRead,
		`isx_proxy_model_tokens_total{instance="m",kind="cache_creation"}`: usage.CacheCreation,
		`isx_proxy_requests_total{instance="m"}`:                           a.TrafficRequests,
		`isx_proxy_bytes_total{direction="sent",instance="m"}`:             a.TrafficBytesSent,
		`isx_proxy_bytes_total{direction="received",instance="m"}`:         a.TrafficBytesReceived,
	} {
		if got := metricValue(t, after, series); got != float64(want) {
			t.Errorf("%s = %v, want %d", series, got, want)
		}
	}
	if a.TrafficBytesReceived == 0 || a.TrafficBytesSent == 0 {
		t.Errorf("the activity counted no bytes: %+v", a)
	}
	if metricValue(t, after, `isx_proxy_counting_since_seconds{instance="m"}`) <= 0 {
		t.Errorf("no counting_since:\n%s", after)
	}
	if strings.Contains(string(after), w.secret("m")) || strings.Contains(string(after), w.apiKey) {
		t.Error("the metrics carry a secret")
	}
}
