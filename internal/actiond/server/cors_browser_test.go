package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/server"
)

// hostPage serves a blank page at its own loopback origin, as a
// browser-based MCP host is served.
func hostPage(t *testing.T) string {
	t.Helper()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><title>host</title>"))
	}))
	t.Cleanup(page.Close)
	return page.URL
}

// pageFetches is what the page's script got from actiond: the body it read,
// or the error fetch rejected with.
type pageFetches struct {
	MCP      string `json:"mcp"`
	Register string `json:"register"`
	Token    string `json:"token"`
}

// fetchesScript has the page call actiond as a browser-based host does:
// tools/list with its bearer token (a preflighted request), a client
// registration (JSON, preflighted) and a token request.
const fetchesScript = `(async () => {
  const read = (p) => p.then(r => r.text(), e => "failed: " + e.name + ": " + e.message);
  return JSON.stringify({
    mcp: await read(fetch(BASE + "/mcp/v1/000000000000/default", {method: "POST",
      headers: {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"},
      body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "tools/list", params: {}})})),
    register: await read(fetch(BASE + "/oauth/register", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({client_name: "Web host", redirect_uris: ["http://127.0.0.1:1/callback"], token_endpoint_auth_method: "none", grant_types: ["authorization_code", "refresh_token"]})})),
    token: await read(fetch(BASE + "/oauth/token", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
      body: "grant_type=refresh_token&refresh_token=none&client_id=nobody"})),
  });
})()`

func fetchFrom(t *testing.T, ctx context.Context, page, base, token string) pageFetches {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	script := "const BASE = " + quoted(base) + ", TOKEN = " + quoted(token) + ";\n" + fetchesScript
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("the page's script: %v", err)
	}
	var got pageFetches
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("the page's script answered %q: %v", out, err)
	}
	return got
}

// In a real browser, a page on another origin: the origin --cors-origin
// names gets its tools/list answered, registers a client and reads the
// token endpoint's answer; a page on any other origin gets nothing, each
// fetch failing as the browser's CORS check fails it.
func TestCORSInChromium(t *testing.T) {
	allowedPage, otherPage := hostPage(t), hostPage(t)
	base, srv := loopbackServer(t, allowedPage)
	token, err := srv.Issuer.Mint(auth.MintOptions{Principal: server.LocalPrincipal, Subject: "dana"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := at.Chromium(t)

	got := fetchFrom(t, ctx, allowedPage, base, token)
	if !strings.Contains(got.MCP, `"tools"`) || !strings.Contains(got.MCP, `"graphql"`) {
		t.Errorf("the allowed page's tools/list read %q", got.MCP)
	}
	if !strings.Contains(got.Register, `"client_id"`) {
		t.Errorf("the allowed page's registration read %q", got.Register)
	}
	if !strings.Contains(got.Token, `"error":"invalid_`) {
		t.Errorf("the allowed page's token request read %q", got.Token)
	}

	got = fetchFrom(t, ctx, otherPage, base, token)
	for what, text := range map[string]string{"tools/list": got.MCP, "registration": got.Register, "token request": got.Token} {
		if !strings.HasPrefix(text, "failed: TypeError") {
			t.Errorf("another page's %s read %q, want the fetch to fail", what, text)
		}
	}
}
