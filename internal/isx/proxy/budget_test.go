package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// callChunked sends a model call whose body has no length (chunked), as
// a client streaming its request does: the proxy must read it whole to
// know its size.
func (w *world) callChunked(name string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(w.ctx(), http.MethodPost, "http://isx-proxy"+proxy.AnthropicRoute+"/v1/messages", struct{ io.Reader }{bytes.NewReader(body)})
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Api-Key", w.secret(name))
	req.Header.Set("Content-Type", "application/json")
	return w.hostClient(name).Do(req)
}

// answer reads a response whole and returns its status and body.
func answer(t *testing.T, resp *http.Response, err error) (int, string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// bodyOf is a Messages request of at least size bytes saying word.
func bodyOf(word string, size int) []byte {
	return []byte(`{"model":"claude-test","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"` + word + strings.Repeat(" x", size/2) + `"}]}`)
}

// Model calls hold memory only within two budgets, the instance's and
// the whole proxy's: a body of a known length streams through whatever
// its size, one without a length is read within the budget, and every
// call in flight holds a step of it. Over its own budget an instance's
// call is refused (503, saying so) before anything goes upstream, while
// another instance is served; over the proxy's, any instance's is.
func TestMemoryBudget(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	hold := make(chan struct{})
	w.anthropic.Reply = func(n int, c proxytest.Call) proxytest.Reply {
		r := proxytest.Reply{Usage: proxytest.DefaultUsage(n)}
		if strings.Contains(string(c.Body), "hold-me") {
			r.Hold = hold
		}
		return r
	}
	const step = 64 << 10
	opts := w.options(clock.Real{})
	opts.InstanceMemory, opts.ProxyMemory = 2*step, 3*step
	w.start(opts)
	for _, name := range []string{"bad", "good", "third"} {
		w.branch(name, busyboxAccounts, instance.NetworkProxyOnly)
	}
	overInstance := func(t *testing.T, status int, body string) {
		t.Helper()
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "memory the host proxy gives one instance") {
			t.Errorf("want 503 naming the instance's budget, got %d %s\nproxy log:\n%s", status, body, w.logs.String())
		}
	}
	served := func(t *testing.T, name, why string, resp *http.Response, err error) {
		t.Helper()
		if status, body := answer(t, resp, err); status != http.StatusOK {
			t.Errorf("%s: %s got %d %s", why, name, status, body)
		}
	}
	calls := len(w.anthropic.Calls())

	t.Run("streamed, not buffered", func(t *testing.T) {
		big := bodyOf("big", 3*step)
		resp, err := w.callChunked("bad", big)
		status, body := answer(t, resp, err)
		overInstance(t, status, body)
		if n := len(w.anthropic.Calls()); n != calls {
			t.Errorf("the refused call went upstream")
		}
		// The same body with its length streams through, held nowhere.
		resp, err = w.call(w.ctx(), "bad", big)
		served(t, "bad", "a body larger than the budget, of a known length", resp, err)
		// A body without a length within the budget is read and served.
		resp, err = w.callChunked("bad", bodyOf("small", 100))
		served(t, "bad", "a small chunked body", resp, err)
	})

	t.Run("instance over its budget", func(t *testing.T) {
		var open []*http.Response
		defer func() {
			for _, resp := range open {
				resp.Body.Close()
			}
		}()
		inFlight := func(name string) {
			t.Helper()
			resp, err := w.call(w.ctx(), name, bodyOf("hold-me", 10))
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, resp)
			if first, err := bufio.NewReader(resp.Body).ReadString('\n'); resp.StatusCode != http.StatusOK || err != nil || !strings.HasPrefix(first, "event: message_start") {
				t.Fatalf("a held call of %s: %d %q %v", name, resp.StatusCode, first, err)
			}
		}
		inFlight("bad")
		inFlight("bad")
		before := len(w.anthropic.Calls())
		resp, err := w.call(w.ctx(), "bad", bodyOf("third call", 10))
		status, body := answer(t, resp, err)
		overInstance(t, status, body)
		if len(w.anthropic.Calls()) != before {
			t.Error("the refused call went upstream")
		}
		// Another instance is served meanwhile.
		resp, err = w.call(w.ctx(), "good", bodyOf("meanwhile", 10))
		served(t, "good", "while bad is over its budget", resp, err)
		w.served("good")

		// Over the proxy's budget: bad holds two steps, good a third.
		inFlight("good")
		resp, err = w.call(w.ctx(), "third", bodyOf("over the proxy", 10))
		status, body = answer(t, resp, err)
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "memory it gives model calls of every instance") {
			t.Errorf("over the proxy's budget: %d %s", status, body)
		}
		if !strings.Contains(w.logs.String(), "refused a model call over the memory budget") {
			t.Errorf("the refusals were not logged:\n%s", w.logs.String())
		}
		// Once the held calls end, their memory is back.
		close(hold)
		for _, resp := range open {
			io.Copy(io.Discard, resp.Body) //nolint:errcheck // what matters is that it ends
			resp.Body.Close()
		}
		open = nil
		w.waitActivity("bad", "the held calls to end", func(a proxy.Activity) bool { return a.RequestsInFlight == 0 })
		w.waitActivity("good", "the held call to end", func(a proxy.Activity) bool { return a.RequestsInFlight == 0 })
		resp, err = w.call(context.Background(), "third", bodyOf("after", 10))
		served(t, "third", "once the held calls ended", resp, err)
		resp, err = w.call(context.Background(), "bad", bodyOf("after", 10))
		served(t, "bad", "once its held calls ended", resp, err)
	})
}
