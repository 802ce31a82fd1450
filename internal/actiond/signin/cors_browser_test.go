package signin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// webHost serves a blank page at an origin of its own, as a browser-based
// MCP host is served.
func webHost(t *testing.T) string {
	t.Helper()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><title>web host</title>"))
	}))
	t.Cleanup(page.Close)
	return page.URL
}

// exchangeScript is what a browser-based host runs once the person has
// approved: the code exchanged at /oauth/token with its PKCE verifier, then
// tools/list with the access token. Each step answers what it read, or how
// fetch failed.
const exchangeScript = `(async () => {
  const failed = (e) => "failed: " + e.name + ": " + e.message;
  let tokens;
  try {
    const r = await fetch(BASE + "/oauth/token", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
      body: new URLSearchParams({grant_type: "authorization_code", code: CODE, redirect_uri: REDIRECT, code_verifier: VERIFIER, client_id: CLIENT})});
    tokens = await r.json();
  } catch (e) { return JSON.stringify({token: failed(e)}); }
  if (!tokens.access_token) return JSON.stringify({token: JSON.stringify(tokens)});
  try {
    const r = await fetch(BASE + "/mcp/v1/000000000000/default", {method: "POST",
      headers: {"Authorization": "Bearer " + tokens.access_token, "Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"},
      body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "tools/list", params: {}})});
    return JSON.stringify({token: "access_token", mcp: await r.text()});
  } catch (e) { return JSON.stringify({token: "access_token", mcp: failed(e)}); }
})()`

type exchanged struct {
	Token string `json:"token"`
	MCP   string `json:"mcp"`
}

// A browser-based host on an origin --cors-origin allows finishes the
// sign-in from its page: it exchanges the code at /oauth/token and calls
// the MCP server with the access token it read. A page on another origin
// cannot read the token endpoint's answer: its fetch fails.
func TestBrowserHostSignsInAcrossOrigins(t *testing.T) {
	allowed, other := webHost(t), webHost(t)
	env := at.New(t, store.SQLite, at.Options{CORSOrigins: []string{allowed}})
	ctx := at.Chromium(t)
	run := func(page string) exchanged {
		t.Helper()
		h := newHost(t, env.URL, nil)
		code := h.approve("dana").Get("code")
		if code == "" {
			t.Fatal("no code")
		}
		quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		script := "const BASE = " + quoted(env.URL) + ", CODE = " + quoted(code) + ", REDIRECT = " + quoted(h.redirect) +
			", VERIFIER = " + quoted(h.verifier) + ", CLIENT = " + quoted(h.clientID) + ";\n" + exchangeScript
		if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
			t.Fatal(err)
		}
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("the page's script: %v", err)
		}
		var got exchanged
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("the page's script answered %q: %v", out, err)
		}
		return got
	}

	got := run(allowed)
	if got.Token != "access_token" || !strings.Contains(got.MCP, `"tools"`) {
		t.Errorf("the allowed page: %+v", got)
	}
	got = run(other)
	if !strings.HasPrefix(got.Token, "failed: TypeError") || got.MCP != "" {
		t.Errorf("another page read the token endpoint: %+v", got)
	}
}
