package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// ACT-056: the real Claude Code, offered Client ID Metadata Documents by
// actiond's metadata, signs in with its document's URL as its client_id
// instead of registering: actiond fetches the document from the host's
// https site (a certificate from the test's own authority, which actiond
// trusts through SSL_CERT_FILE), shows its name, accepts Claude Code's
// callback because the document lists it, and the call is recorded with
// the URL as its client. Nothing is registered.
func TestClaudeCodeSignsInByClientMetadataDocument_ACT056(t *testing.T) {
	authority := at.NewAuthority(t)
	var mu sync.Mutex
	fetched := 0
	var site string
	published := authority.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/oauth/claude-code-client-metadata" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		fetched++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		json.NewEncoder(w).Encode(map[string]any{
			"client_id": site + r.URL.Path, "client_name": "Claude Code (published)",
			"redirect_uris":  []string{"http://localhost/callback", "http://127.0.0.1/callback"},
			"grant_types":    []string{"authorization_code", "refresh_token"},
			"response_types": []string{"code"}, "token_endpoint_auth_method": "none",
		})
	}))
	site = published.URL
	clientID := site + "/oauth/claude-code-client-metadata"

	t.Setenv("SSL_CERT_FILE", authority.PEMFile) // read by actiond, started next
	p := serve(t, store.SQLite)
	endpoint := p.URL + "/mcp/v1/000000000000/default"
	api := newMessagesAPI(t, "mcp__actiond__cel", map[string]any{"expression": "2 * 3", "intent": "Multiply the numbers the user asked about."})
	claude := newClaudeHost(t, api)
	claude.env = append(claude.env, "MCP_OAUTH_CLIENT_METADATA_URL="+clientID)

	claude.run("mcp", "add", "--transport", "http", "actiond", endpoint)
	var consent string
	shown := claude.login(func(authorizeURL string) {
		if !strings.Contains(authorizeURL, "client_id="+strings.ReplaceAll(strings.ReplaceAll(clientID, ":", "%3A"), "/", "%2F")) {
			t.Errorf("Claude Code did not send its document's URL as client_id: %s", authorizeURL)
		}
		consent = authorizeURL
		approveOverHTTP(t, "grace")(authorizeURL)
	})
	if !strings.Contains(shown, `Authenticated with "actiond"`) {
		t.Fatalf("claude mcp login showed:\n%s\nconsent %s\nactiond: %s", shown, consent, p.Log())
	}
	if c := claude.credentials(); c.ClientID != clientID || c.AccessToken == "" || c.RefreshToken == "" {
		t.Fatalf("credentials %+v, want client %s", c, clientID)
	}
	out := claude.run("-p", "What is two times three?", "--allowedTools", "mcp__actiond__cel", "--output-format", "json")
	if results := api.toolResults(); len(results) != 1 || !strings.Contains(results[0], "6") {
		t.Fatalf("the tool call did not return 6: %v\n%s", results, out)
	}
	calls := requestsOf(t, p, "tools/call")
	if len(calls) != 1 || calls[0]["client"] != clientID || calls[0]["subject"] != "grace" {
		t.Fatalf("the call was recorded as %v", calls)
	}
	mu.Lock()
	defer mu.Unlock()
	if fetched == 0 {
		t.Fatal("actiond never fetched the document")
	}
}
