package main

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/testkit"
)

// claudeHost is the real Claude Code with a home of its own, pointed at a
// fake Messages API, whose browser is a script that writes down the URLs
// it is asked to open.
type claudeHost struct {
	t       *testing.T
	binary  string
	home    string
	workdir string
	urls    string
	env     []string
}

func newClaudeHost(t *testing.T, api *messagesAPI) *claudeHost {
	root := t.TempDir()
	h := &claudeHost{t: t, binary: at.Claude(t), home: filepath.Join(root, "home"), workdir: filepath.Join(root, "work"), urls: filepath.Join(root, "urls")}
	for _, dir := range []string{h.home, h.workdir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	browser := filepath.Join(root, "browser")
	if err := os.WriteFile(browser, []byte("#!/bin/sh\nprintf '%s\\n' \"$1\" >> '"+h.urls+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.env = append(environment(), "HOME="+h.home, "BROWSER="+browser, "ANTHROPIC_BASE_URL="+api.server.URL, "ANTHROPIC_API_KEY=sk-test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
		// Every tool in the request, rather than MCP tools found through a
		// search the fake model would have to script.
		"ENABLE_TOOL_SEARCH=false")
	return h
}

// run runs claude to completion in the work directory.
func (h *claudeHost) run(args ...string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.binary, args...)
	cmd.Dir, cmd.Env = h.workdir, h.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		h.t.Fatalf("claude %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// credentials are what Claude Code stored for the server.
type credentials struct {
	AccessToken  string `json:"accessToken"`
	RefreshToken string `json:"refreshToken"`
	ClientID     string `json:"clientId"`
	ExpiresAt    int64  `json:"expiresAt"`
}

func (h *claudeHost) credentials() credentials {
	h.t.Helper()
	raw, err := os.ReadFile(filepath.Join(h.home, ".claude", ".credentials.json"))
	if err != nil {
		h.t.Fatalf("Claude Code stored no credentials: %v", err)
	}
	var stored struct {
		MCPOAuth map[string]credentials `json:"mcpOAuth"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		h.t.Fatal(err)
	}
	for key, c := range stored.MCPOAuth {
		if strings.HasPrefix(key, "actiond|") {
			return c
		}
	}
	h.t.Fatalf("no credentials for actiond in %s", raw)
	return credentials{}
}

// login runs `claude mcp login actiond` on a terminal, as a person does,
// hands the URL it opens to approve, and waits for it to finish.
func (h *claudeHost) login(approve func(authorizeURL string)) string {
	h.t.Helper()
	cmd := exec.Command(h.binary, "mcp", "login", "actiond")
	cmd.Dir, cmd.Env = h.workdir, h.env
	terminal, err := pty.Start(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	defer terminal.Close()
	var shown testkit.SyncBuffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(&shown, terminal) //nolint:errcheck // ends with EIO when claude exits
	}()
	var authorizeURL string
	at.WaitFor(h.t, "Claude Code to open the sign-in page", time.Minute, func() bool {
		raw, _ := os.ReadFile(h.urls)
		authorizeURL = strings.TrimSpace(string(raw))
		return authorizeURL != ""
	})
	approve(authorizeURL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		err = <-done
	}
	terminal.Close()
	<-copied
	if err != nil {
		h.t.Fatalf("claude mcp login: %v\n%s", err, shown.String())
	}
	return shown.String()
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// approveOverHTTP is the person at the browser, played over HTTP: open the
// page (keeping its cookie), approve as subject from the page's origin, and
// follow the redirect to Claude Code's callback.
func approveOverHTTP(t *testing.T, subject string) func(string) {
	return func(authorizeURL string) {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
		resp, err := browser.Get(authorizeURL)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("consent page: %d %s", resp.StatusCode, page)
		}
		form := url.Values{"decision": {"approve"}, "subject": {subject}}
		for _, m := range hiddenInput.FindAllStringSubmatch(string(page), -1) {
			form.Set(m[1], html.UnescapeString(m[2]))
		}
		u, _ := url.Parse(authorizeURL)
		req, _ := http.NewRequest(http.MethodPost, u.Scheme+"://"+u.Host+u.Path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", u.Scheme+"://"+u.Host)
		resp, err = browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Hostname() != "localhost" {
			t.Fatalf("after approving: %d at %s: %s", resp.StatusCode, resp.Request.URL, body)
		}
	}
}

// ACT-056, ACT-057: the real Claude Code, added with
// `claude mcp add --transport http` and no header, signs in to a real
// actiond by itself (discovery, registration, the consent page, PKCE),
// calls a tool as the approved subject, and, once its access token has
// expired, calls again having refreshed it by itself; a revoked refresh
// token is refused.
func TestClaudeCodeSignsInAndRefreshes_ACT056_ACT057(t *testing.T) {
	// Without documents offered, Claude Code registers, as it does with
	// an authorization server that predates them.
	p := serve(t, store.SQLite, "--access-token-ttl", "2s", "--client-metadata-documents=false")
	endpoint := p.URL + "/mcp/v1/000000000000/default"
	api := newMessagesAPI(t, "mcp__actiond__cel", map[string]any{"expression": "1 + 2", "intent": "Add the numbers the user asked about."})
	claude := newClaudeHost(t, api)

	claude.run("mcp", "add", "--transport", "http", "actiond", endpoint)
	shown := claude.login(approveOverHTTP(t, "ada"))
	if !strings.Contains(shown, `Authenticated with "actiond"`) {
		t.Fatalf("claude mcp login showed:\n%s", shown)
	}
	first := claude.credentials()
	if first.AccessToken == "" || first.RefreshToken == "" || first.ClientID == "" || strings.HasPrefix(first.ClientID, "https:") {
		t.Fatalf("credentials %+v", first)
	}

	ask := func() {
		t.Helper()
		before := len(api.toolResults())
		out := claude.run("-p", "What is one plus two?", "--allowedTools", "mcp__actiond__cel", "--output-format", "json")
		results := api.toolResults()
		if len(results) != before+1 || !strings.Contains(results[len(results)-1], "3") || strings.HasPrefix(results[len(results)-1], "error") {
			t.Fatalf("the tool call did not return 3: %v\n%s", results, out)
		}
	}
	ask()
	calls := requestsOf(t, p, "tools/call")
	if len(calls) != 1 || calls[0]["subject"] != "ada" || calls[0]["principal"] != "local" || calls[0]["client"] != first.ClientID {
		t.Fatalf("the call was recorded as %v", calls)
	}

	// The access token expires (2 s, plus the 5 s leeway): actiond refuses it.
	env := p.Env(store.SQLite)
	at.WaitFor(t, "the first access token to expire", 30*time.Second, func() bool {
		reply := env.Post("default", first.AccessToken, at.Request{Method: "tools/list"})
		return reply.Status == 401 && at.Dig(reply.RPC, "error", "data", "reason") == "expired"
	})
	ask()
	second := claude.credentials()
	if second.AccessToken == first.AccessToken || second.RefreshToken == first.RefreshToken || second.ClientID != first.ClientID {
		t.Fatalf("Claude Code did not refresh its token: %+v then %+v", first, second)
	}
	if calls := requestsOf(t, p, "tools/call"); len(calls) != 2 || calls[1]["subject"] != "ada" {
		t.Fatalf("the second call was recorded as %v", calls)
	}

	// Revoked (RFC 7009), the refresh token is refused.
	revoke := postForm(t, p.URL+"/oauth/revoke", url.Values{"token": {second.RefreshToken}, "client_id": {second.ClientID}})
	if revoke.status != http.StatusOK {
		t.Fatalf("revoke: %d %v", revoke.status, revoke.body)
	}
	refused := postForm(t, p.URL+"/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {second.RefreshToken}, "client_id": {second.ClientID}})
	if refused.status != http.StatusBadRequest || refused.body["error"] != "invalid_grant" || !strings.Contains(refused.body["error_description"].(string), "revoked") {
		t.Fatalf("a revoked refresh token: %d %v", refused.status, refused.body)
	}
}

// requestsOf lists the recorded requests of a method, through the CLI.
func requestsOf(t *testing.T, p *at.Process, method string) []map[string]any {
	t.Helper()
	var all []map[string]any
	if err := json.Unmarshal([]byte(mustActiond(t, append([]string{"executions", "--json", "--limit", "10000"}, at.StoreArgs(p.Store)...)...)), &all); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range all {
		if e["method"] == method {
			out = append(out, e)
		}
	}
	return out
}

type formReply struct {
	status int
	body   map[string]any
}

func postForm(t *testing.T, target string, form url.Values) formReply {
	t.Helper()
	resp, err := http.PostForm(target, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	reply := formReply{status: resp.StatusCode}
	if len(raw) > 0 {
		json.Unmarshal(raw, &reply.body)
	}
	return reply
}
