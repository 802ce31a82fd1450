package proxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// execLater runs a script in the instance in the background of the test
// and hands back its output when it ends.
func (w *world) execLater(name, script string) <-chan string {
	out := make(chan string, 1)
	go func() {
		res, err := w.client.Exec(context.Background(), name, incus.ExecRequest{
			Command: []string{"sh", "-c", ". " + instance.ProfileFile + "; " + script}, Timeout: 4 * time.Minute,
		})
		if err != nil {
			out <- "exec failed: " + err.Error()
			return
		}
		out <- string(res.Stdout) + string(res.Stderr)
	}()
	return out
}

// A streamed model call held open by the fake is in flight, and
// idle_seconds is absent, for as long as it streams; once it ends the
// call is no longer in flight and idle_seconds is back.
//
// ISX-175, ISX-179.
func TestStreamedCallInFlightISX175ISX179(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	hold := make(chan struct{})
	w.anthropic.Reply = func(n int, c proxytest.Call) proxytest.Reply {
		return proxytest.Reply{Usage: proxytest.DefaultUsage(n), Hold: hold}
	}
	w.start(w.options(clock.Real{}))
	w.branch("s", busyboxAccounts, instance.NetworkProxyOnly)
	done := w.execLater("s", routeCall(w.secret("s"))+" -stream")
	// In flight comes when the request arrives, the tokens when the
	// stream's first event has passed through, so wait for both.
	during := w.waitActivityWhile("s", "the streamed call to be in flight with its start counted", done, func(a proxy.Activity) bool {
		return a.RequestsInFlight == 1 && a.InputTokens > 0
	})
	if during.IdleSeconds != nil || during.Requests != 1 || during.TrafficInFlight != 1 {
		t.Errorf("while the stream is open: %+v", during)
	}
	// The start of the stream has been counted already.
	if during.InputTokens != proxytest.DefaultUsage(0).Input || during.OutputTokens != 1 {
		t.Errorf("tokens while streaming: in %d, out %d", during.InputTokens, during.OutputTokens)
	}
	close(hold)
	if out := <-done; !strings.Contains(out, "message_stop") {
		t.Fatalf("the stream: %s", out)
	}
	after := w.waitActivity("s", "the call to end", func(a proxy.Activity) bool { return a.RequestsInFlight == 0 })
	if after.IdleSeconds == nil || after.OutputTokens != proxytest.DefaultUsage(0).Output || after.TrafficInFlight != 0 {
		t.Errorf("after the stream: %+v", after)
	}
}

// idle_seconds is the time since the last model call ended, and grows.
//
// ISX-178.
func TestIdleSecondsGrowISX178(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	fake := clock.NewFake(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))
	w.start(w.options(fake))
	w.branch("i", busyboxAccounts, instance.NetworkProxyOnly)
	w.mustRun("i", routeCall(w.secret("i")))
	if a := w.activity("i"); a.IdleSeconds == nil || *a.IdleSeconds != 0 || a.LastResponseAt != "2031-05-06T07:08:09.000Z" {
		t.Fatalf("right after the call: %+v", a)
	}
	fake.Advance(30 * time.Second)
	if a := w.activity("i"); a.IdleSeconds == nil || *a.IdleSeconds != 30 {
		t.Errorf("30 s later: idle %v", a.IdleSeconds)
	}
	fake.Advance(12 * time.Second)
	if a := w.activity("i"); a.IdleSeconds == nil || *a.IdleSeconds != 42 {
		t.Errorf("42 s later: idle %v", a.IdleSeconds)
	}
}

// tokens_per_minute is the tokens credited in each of the last 15
// minutes of the clock, the current one last: a call's tokens land in its
// minute, move back a place a minute, and are gone after 15 (issue 25's
// sparklines read it).
func TestTokensPerMinute(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	fake := clock.NewFake(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))
	w.start(w.options(fake))
	w.branch("m", busyboxAccounts, instance.NetworkProxyOnly)
	total := func(n int) int64 {
		u := proxytest.DefaultUsage(n)
		return u.Input + u.Output + u.CacheRead + u.CacheCreation
	}
	w.mustRun("m", routeCall(w.secret("m")))
	fake.Advance(20 * time.Second) // the same minute
	w.mustRun("m", routeCall(w.secret("m")))
	fake.Advance(time.Minute)
	w.mustRun("m", routeCall(w.secret("m")))
	got := w.activity("m").TokensPerMinute
	want := make([]int64, proxy.SpendMinutes)
	want[proxy.SpendMinutes-2], want[proxy.SpendMinutes-1] = total(0)+total(1), total(2)
	if !slices.Equal(got, want) {
		t.Errorf("tokens per minute = %v, want %v", got, want)
	}
	fake.Advance(3 * time.Minute)
	got = w.activity("m").TokensPerMinute
	want = make([]int64, proxy.SpendMinutes)
	want[proxy.SpendMinutes-5], want[proxy.SpendMinutes-4] = total(0)+total(1), total(2)
	if !slices.Equal(got, want) {
		t.Errorf("3 minutes later: %v, want %v", got, want)
	}
	fake.Advance(proxy.SpendMinutes * time.Minute)
	if got = w.activity("m").TokensPerMinute; !slices.Equal(got, make([]int64, proxy.SpendMinutes)) {
		t.Errorf("15 minutes later: %v, want zeros", got)
	}
}

// A WebSocket through the proxy counts as traffic in flight for as long
// as it is open, and is not a model call.
//
// ISX-184.
func TestWebSocketInFlightISX184(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	echo, err := proxytest.StartEcho()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(echo.Close)
	w.upstream("echo.isx.test", echo.URL)
	w.start(w.options(clock.Real{}))
	w.branch("ws", busyboxAccounts, instance.NetworkProxyOnly)
	done := w.execLater("ws", proxytest.ClientPath+" ws -url ws://echo.isx.test/echo -until /tmp/release")
	open := w.waitActivityWhile("ws", "the WebSocket to be open", done, func(a proxy.Activity) bool { return a.TrafficInFlight >= 1 && a.TrafficBytesReceived > 0 })
	if open.Requests != 0 || open.TrafficRequests != 1 {
		t.Errorf("while the WebSocket is open: %+v", open)
	}
	w.mustRun("ws", "touch /tmp/release")
	if out := <-done; !strings.Contains(out, "open echo=ping") || !strings.Contains(out, "closed") {
		t.Fatalf("the WebSocket client: %s", out)
	}
	w.waitActivity("ws", "the WebSocket to count as closed", func(a proxy.Activity) bool { return a.TrafficInFlight == 0 })
}

// An OpenAI call is traffic, not a model call: its usage is not in the
// token counts, which cover Anthropic only. It reaches OpenAI with the
// template's openai account as a bearer token.
//
// ISX-180, ISX-181.
func TestOpenAICallsAreTrafficISX181(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	var auth, key atomic.Value
	openai := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		key.Store(r.Header.Get("X-Api-Key"))
		rw.Header().Set("Content-Type", "application/json")
		io.WriteString(rw, `{"id":"resp_1","object":"response","status":"completed","usage":{"input_tokens":50,"output_tokens":60,"total_tokens":110}}`) //nolint:errcheck // test server
	}))
	t.Cleanup(openai.Close)
	w.upstream("api.openai.com", openai.URL)
	w.start(w.options(clock.Real{}))
	w.branch("o", busyboxAccounts, instance.NetworkProxyOnly)
	out := w.mustRun("o", proxytest.ClientPath+" messages -url "+proxy.OpenAIBaseURL+"/responses -key-file "+instance.SecretFile)
	if !strings.Contains(out, "resp_1") {
		t.Fatalf("the OpenAI call: %s", out)
	}
	if auth.Load() != "Bearer "+w.apiKey+"-openai" || key.Load() != "" {
		t.Errorf("OpenAI got authorization %q and x-api-key %q", auth.Load(), key.Load())
	}
	a := w.activity("o")
	if a.InputTokens != 0 || a.OutputTokens != 0 || a.Requests != 0 || a.TrafficRequests != 1 || a.TrafficBytesReceived == 0 ||
		len(a.ModelUsageProviders) != 1 || a.ModelUsageProviders[0] != proxy.ProviderAnthropic {
		t.Errorf("after an OpenAI call: %+v", a)
	}
}
