package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// call sends a model call to the instance's socket from the host, as its
// proxy device would deliver it.
func (w *world) call(ctx context.Context, name string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://isx-proxy"+proxy.AnthropicRoute+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Api-Key", w.secret(name))
	req.Header.Set("Content-Type", "application/json")
	// As curl does for a large body: the proxy may refuse it unsent.
	req.Header.Set("Expect", "100-continue")
	return w.hostClient(name).Do(req)
}

// served checks that another instance is served normally meanwhile.
func (w *world) served(name string) {
	w.t.Helper()
	if out := w.mustRun(name, routeCall(w.secret(name))); !strings.Contains(out, "status=200") {
		w.t.Errorf("%s was not served: %s", name, out)
	}
}

// Bad input never stops the proxy serving: a malformed upstream answer, a
// client that goes away mid-stream and a request larger than the proxy
// accepts are each counted as far as they went and logged, and another
// instance is served the whole time.
func TestBadInputIsCountedAndLogged(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	hold := make(chan struct{})
	defer close(hold)
	w.anthropic.Reply = func(n int, c proxytest.Call) proxytest.Reply {
		// The host's calls are the bad ones; the instance client's, which
		// says hello, are the good ones.
		r := proxytest.Reply{Usage: proxytest.DefaultUsage(n)}
		switch {
		case strings.Contains(string(c.Body), "hello"):
		case n < 2:
			r.Malformed = true
		default:
			r.Hold = hold
		}
		return r
	}
	w.start(w.options(clock.Real{}))
	w.branch("bad", busyboxAccounts, instance.NetworkProxyOnly)
	w.branch("good", busyboxAccounts, instance.NetworkProxyOnly)

	t.Run("malformed answers", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			resp, err := w.call(w.ctx(), "bad", []byte(messagesBody(stream)))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body) //nolint:errcheck // what matters is what the proxy counted
			resp.Body.Close()
		}
		a := w.waitActivity("bad", "both calls to end", func(a proxy.Activity) bool { return a.Requests == 2 && a.RequestsInFlight == 0 })
		// The stream's first event was cut off; nothing counts.
		if a.InputTokens != 0 || a.OutputTokens != 0 {
			t.Errorf("tokens from malformed answers: %+v", a)
		}
		if !strings.Contains(w.logs.String(), "could not be read") {
			t.Errorf("the log does not say why:\n%s", w.logs.String())
		}
		w.served("good")
	})

	t.Run("client gone mid-stream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(w.ctx())
		resp, err := w.call(ctx, "bad", []byte(messagesBody(true)))
		if err != nil {
			t.Fatal(err)
		}
		first, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.HasPrefix(first, "event: message_start") {
			t.Fatalf("the first line of the stream: %q, %v", first, err)
		}
		w.waitActivity("bad", "the stream to be in flight", func(a proxy.Activity) bool { return a.RequestsInFlight == 1 })
		w.served("good")
		cancel()
		resp.Body.Close()
		a := w.waitActivity("bad", "the abandoned stream to end", func(a proxy.Activity) bool { return a.RequestsInFlight == 0 })
		// The fake's third call was the good instance's, the fourth this.
		if a.Requests != 3 || a.InputTokens != proxytest.DefaultUsage(3).Input || a.OutputTokens != 1 || a.IdleSeconds == nil {
			t.Errorf("after the client went away: %+v", a)
		}
		if !strings.Contains(w.logs.String(), "ended before its response did") {
			t.Errorf("the log does not say the call was cut short:\n%s", w.logs.String())
		}
	})

	t.Run("request too large", func(t *testing.T) {
		before := w.activity("bad")
		huge := append([]byte(`{"model":"claude-test","messages":[{"role":"user","content":"`), bytes.Repeat([]byte("x"), proxy.DefaultMaxModelRequest)...)
		huge = append(huge, `"}]}`...)
		resp, err := w.call(w.ctx(), "bad", huge)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "larger than") {
			t.Errorf("an oversized call: %s %s", resp.Status, body)
		}
		after := w.activity("bad")
		if after.Requests != before.Requests || after.TrafficRequests != before.TrafficRequests+1 {
			t.Errorf("the refused call counted as a model call: before %+v, after %+v", before, after)
		}
		if !strings.Contains(w.logs.String(), "larger than the proxy accepts") {
			t.Errorf("the log does not say why:\n%s", w.logs.String())
		}
		w.served("good")
	})
	t.Run("too many connections", func(t *testing.T) {
		socket := instance.ProxySocket(w.proxyDir(), w.client.ProjectName(), "bad")
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range 512 {
			c, err := net.Dial("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		// The proxy has taken every one before the one beyond is tried.
		for _, c := range conns {
			if _, err := c.Write([]byte("GET /anthropic/v1/models HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
		}
		extra, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		defer extra.Close()
		extra.SetReadDeadline(time.Now().Add(time.Minute)) //nolint:errcheck // a read that times out fails below
		if n, err := extra.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
			t.Errorf("the connection beyond the limit was served: %d, %v", n, err)
		}
		if !strings.Contains(w.logs.String(), "beyond the instance's limit") {
			t.Errorf("the log does not say why:\n%s", w.logs.String())
		}
		w.served("good")
	})
	if n := len(w.anthropic.Calls()); n != 4+3 {
		t.Errorf("the fake got %d calls, want the 3 bad ones and 4 good ones", n)
	}
}

// An upstream that stalls is given up after the stall timeout, on the
// proxy's clock: the call ends, is no longer in flight, is logged, and
// another instance is served while it hangs.
func TestStalledUpstreamGivenUp(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	w.anthropic.Reply = func(n int, c proxytest.Call) proxytest.Reply {
		return proxytest.Reply{Usage: proxytest.DefaultUsage(n), Stall: n == 0}
	}
	fake := clock.NewFake(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC))
	opts := w.options(fake)
	opts.StallTimeout = 2 * time.Minute
	w.start(opts)
	w.branch("stall", busyboxAccounts, instance.NetworkProxyOnly)
	w.branch("good", busyboxAccounts, instance.NetworkProxyOnly)
	timers := fake.Timers()
	resp, err := w.call(w.ctx(), "stall", []byte(messagesBody(true)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	reader := bufio.NewReader(resp.Body)
	if first, err := reader.ReadString('\n'); err != nil || !strings.HasPrefix(first, "event: message_start") {
		t.Fatalf("the stream's first line: %q, %v", first, err)
	}
	w.served("good")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fake.WaitForTimers(ctx, timers+1); err != nil {
		t.Fatal(err)
	}
	if a := w.activity("stall"); a.RequestsInFlight != 1 {
		t.Fatalf("before the stall timeout: %+v", a)
	}
	fake.Advance(2 * time.Minute)
	rest, _ := io.ReadAll(reader)
	if strings.Contains(string(rest), "message_stop") {
		t.Errorf("the stalled stream went on: %s", rest)
	}
	a := w.waitActivity("stall", "the stalled call to end", func(a proxy.Activity) bool { return a.RequestsInFlight == 0 })
	if a.Requests != 1 {
		t.Errorf("after the stall: %+v", a)
	}
	if !strings.Contains(w.logs.String(), "upstream stalled") {
		t.Errorf("the log does not say the upstream stalled:\n%s", w.logs.String())
	}
	w.served("good")
}
