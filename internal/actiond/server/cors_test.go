package server_test

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/server"
)

// corsAsked is one cross-origin request and what came back.
type corsAsked struct {
	status int
	header http.Header
	body   string
}

func corsRequest(t *testing.T, method, url, origin string, header map[string]string, body string) corsAsked {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return corsAsked{resp.StatusCode, resp.Header, string(raw)}
}

// The preflight and response matrix: public metadata answers any origin
// with `*`; the MCP endpoint and the sign-in's token, registration and
// revocation answer an allowed origin with that origin, the headers a host
// sends and reads, and no credentials; a disallowed origin gets no CORS
// header anywhere, and an MCP request from it is refused with 403; GraphQL
// and the explorer offer nothing cross-origin, and GraphQL is never the
// local root for a page.
func TestCORSMatrix(t *testing.T) {
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pagePort := strconv.Itoa(probe.Addr().(*net.TCPAddr).Port)
	probe.Close()
	allowed := "http://localhost:" + pagePort
	disallowed := "http://127.0.0.1:" + pagePort
	base, srv := loopbackServer(t, allowed)
	own := base
	token, err := srv.Issuer.Mint(auth.MintOptions{Principal: server.LocalPrincipal, Subject: "dana"})
	if err != nil {
		t.Fatal(err)
	}
	const mcpPath = "/mcp/v1/000000000000/default"
	metadata := []string{auth.AuthorizationServerMetadataPath, auth.OpenIDConfigurationPath, auth.ProtectedResourcePrefix + mcpPath, auth.JWKSPath}
	restricted := []string{mcpPath, "/oauth/token", "/oauth/register", "/oauth/revoke"}
	preflight := map[string]string{
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version, mcp-session-id, mcp-param-region, bad header",
	}

	noCredentials := func(what string, got corsAsked) {
		if v := got.header.Get("Access-Control-Allow-Credentials"); v != "" {
			t.Errorf("%s: Access-Control-Allow-Credentials %q", what, v)
		}
	}
	for _, path := range metadata {
		for _, origin := range []string{allowed, disallowed, "https://anywhere.example"} {
			what := "preflight " + path + " from " + origin
			pre := corsRequest(t, http.MethodOptions, base+path, origin, map[string]string{"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "mcp-protocol-version"}, "")
			if pre.status != http.StatusNoContent || pre.header.Get("Access-Control-Allow-Origin") != "*" ||
				!strings.Contains(pre.header.Get("Access-Control-Allow-Methods"), "GET") || !strings.Contains(pre.header.Get("Access-Control-Allow-Headers"), "Mcp-Protocol-Version") {
				t.Errorf("%s: %d %v", what, pre.status, pre.header)
			}
			noCredentials(what, pre)
			get := corsRequest(t, http.MethodGet, base+path, origin, nil, "")
			if get.status != http.StatusOK || get.header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("GET %s from %s: %d %v", path, origin, get.status, get.header)
			}
		}
	}
	for _, path := range restricted {
		what := "preflight " + path + " from the allowed origin"
		pre := corsRequest(t, http.MethodOptions, base+path, allowed, preflight, "")
		allowHeaders := pre.header.Get("Access-Control-Allow-Headers")
		if pre.status != http.StatusNoContent || pre.header.Get("Access-Control-Allow-Origin") != allowed || pre.header.Get("Access-Control-Allow-Methods") != "POST" ||
			!strings.Contains(pre.header.Get("Vary"), "Origin") {
			t.Errorf("%s: %d %v", what, pre.status, pre.header)
		}
		for _, name := range []string{"Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID", "mcp-param-region"} {
			if !strings.Contains(allowHeaders, name) {
				t.Errorf("%s: Access-Control-Allow-Headers %q lacks %s", what, allowHeaders, name)
			}
		}
		if strings.Contains(allowHeaders, "bad") {
			t.Errorf("%s: a requested header that is not a token was echoed: %q", what, allowHeaders)
		}
		noCredentials(what, pre)
		for _, origin := range []string{disallowed, "null", "https://anywhere.example"} {
			got := corsRequest(t, http.MethodOptions, base+path, origin, preflight, "")
			if got.status != http.StatusForbidden || got.header.Get("Access-Control-Allow-Origin") != "" || got.header.Get("Access-Control-Allow-Headers") != "" {
				t.Errorf("preflight %s from %s: %d %v", path, origin, got.status, got.header)
			}
		}
	}

	// The MCP endpoint itself.
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	mcpHeaders := func(bearer string) map[string]string {
		h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"}
		if bearer != "" {
			h["Authorization"] = "Bearer " + bearer
		}
		return h
	}
	got := corsRequest(t, http.MethodPost, base+mcpPath, allowed, mcpHeaders(token), list)
	if got.status != http.StatusOK || got.header.Get("Access-Control-Allow-Origin") != allowed || !strings.Contains(got.body, `"tools"`) ||
		!strings.Contains(got.header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") || !strings.Contains(got.header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
		t.Errorf("tools/list from the allowed origin: %d %v %.300s", got.status, got.header, got.body)
	}
	noCredentials("tools/list", got)
	if got := corsRequest(t, http.MethodPost, base+mcpPath, allowed, mcpHeaders(""), list); got.status != http.StatusUnauthorized ||
		got.header.Get("Access-Control-Allow-Origin") != allowed || got.header.Get("WWW-Authenticate") == "" {
		t.Errorf("a page without a token must read the challenge: %d %v", got.status, got.header)
	}
	for _, origin := range []string{disallowed, "null", "https://anywhere.example"} {
		got := corsRequest(t, http.MethodPost, base+mcpPath, origin, mcpHeaders(token), list)
		if got.status != http.StatusForbidden || got.header.Get("Access-Control-Allow-Origin") != "" || strings.Contains(got.body, `"tools"`) ||
			!strings.Contains(got.body, `"id":null`) {
			t.Errorf("tools/list from %s: %d %v %.300s", origin, got.status, got.header, got.body)
		}
	}
	for _, origin := range []string{"", own, strings.Replace(own, "127.0.0.1", "localhost", 1)} {
		got := corsRequest(t, http.MethodPost, base+mcpPath, origin, mcpHeaders(token), list)
		if got.status != http.StatusOK || got.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("tools/list with Origin %q (same origin): %d %v %.300s", origin, got.status, got.header, got.body)
		}
	}

	// The token endpoint answers either way; only the allowed page may
	// read the answer.
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for origin, readable := range map[string]bool{allowed: true, disallowed: false} {
		got := corsRequest(t, http.MethodPost, base+"/oauth/token", origin, form, "grant_type=refresh_token&refresh_token=nothing&client_id=nobody")
		if got.status != http.StatusBadRequest && got.status != http.StatusUnauthorized {
			t.Errorf("/oauth/token from %s: %d %s", origin, got.status, got.body)
		}
		if (got.header.Get("Access-Control-Allow-Origin") == origin) != readable {
			t.Errorf("/oauth/token from %s: Access-Control-Allow-Origin %q, readable %v wanted", origin, got.header.Get("Access-Control-Allow-Origin"), readable)
		}
	}

	// GraphQL and the explorer: nothing cross-origin, and a page's
	// unauthenticated GraphQL is not the local root.
	gql := corsRequest(t, http.MethodPost, base+"/financial/v1/graphql", allowed, map[string]string{"Content-Type": "application/json"}, graphQLBody(`{ auth { principals { name } } }`))
	if gql.status != http.StatusUnauthorized || gql.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GraphQL from the allowed origin: %d %v %.200s", gql.status, gql.header, gql.body)
	}
	for _, path := range []string{"/financial/v1/graphql", "/explorer/"} {
		if got := corsRequest(t, http.MethodOptions, base+path, allowed, preflight, ""); got.header.Get("Access-Control-Allow-Origin") != "" || got.status == http.StatusNoContent {
			t.Errorf("preflight %s: %d %v", path, got.status, got.header)
		}
	}
}

// Without --cors-origin no page of another origin is allowed: the MCP
// endpoint refuses it, the token endpoint gives it nothing to read, and
// the metadata is still public.
func TestCORSNothingAllowedByDefault(t *testing.T) {
	base, srv := loopbackServer(t)
	token, err := srv.Issuer.Mint(auth.MintOptions{Principal: server.LocalPrincipal, Subject: "dana"})
	if err != nil {
		t.Fatal(err)
	}
	page := "http://localhost:6274"
	got := corsRequest(t, http.MethodPost, base+"/mcp/v1/000000000000/default", page,
		map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer " + token},
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	if got.status != http.StatusForbidden || got.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("MCP from %s: %d %v", page, got.status, got.header)
	}
	pre := corsRequest(t, http.MethodOptions, base+"/oauth/register", page, map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}, "")
	if pre.status != http.StatusForbidden || pre.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("registration preflight from %s: %d %v", page, pre.status, pre.header)
	}
	meta := corsRequest(t, http.MethodGet, base+auth.AuthorizationServerMetadataPath, page, nil, "")
	if meta.status != http.StatusOK || meta.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("metadata from %s: %d %v", page, meta.status, meta.header)
	}
}

// --cors-origin takes origins exactly as browsers send them.
func TestCORSOriginsChecked(t *testing.T) {
	for origin, ok := range map[string]bool{
		"http://localhost:6274":         true,
		"https://inspector.example":     true,
		"https://[::1]:8443":            true,
		"http://localhost:6274/":        false,
		"http://localhost:6274/mcp":     false,
		"*":                             false,
		"null":                          false,
		"HTTP://localhost:6274":         false,
		"http://LOCALHOST:6274":         false,
		"https://inspector.example:443": false,
		"ftp://files.example":           false,
		"http://user@host.example":      false,
		"http://host.example?":          false,
	} {
		_, err := server.NewCORS("http://127.0.0.1:8080", []string{origin})
		if (err == nil) != ok {
			t.Errorf("%q: err %v, accepted wanted %v", origin, err, ok)
		}
	}
}
