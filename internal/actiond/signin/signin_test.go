package signin_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

func getJSON(t *testing.T, rawURL string) map[string]any {
	t.Helper()
	resp, err := http.Get(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	status, body := readJSON(t, resp)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %v", rawURL, status, body)
	}
	return body
}

var metadataPattern = regexp.MustCompile(`resource_metadata="([^"]+)"`)

// ACT-056, ACT-057: a host without a token discovers the sign-in from the
// endpoint (401, Protected Resource Metadata, authorization server
// metadata), registers, is approved on the consent page, exchanges its code
// with PKCE, calls the server as the approved subject and principal local,
// and refreshes its token itself; the refreshed token works, and the spent
// refresh token presented again revokes the sign-in.
func TestHostSignsInByItself_ACT056_ACT057(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		fake := clock.NewFake(at.Start)
		env := at.New(t, d, at.Options{Clock: fake, SignIn: server.SignIn{DefaultSubject: "operator"}})

		unauthenticated := call(t, env, "")
		found := metadataPattern.FindStringSubmatch(unauthenticated.Header.Get("WWW-Authenticate"))
		if unauthenticated.Status != http.StatusUnauthorized || found == nil {
			t.Fatalf("no challenge: %s", unauthenticated)
		}
		resource := getJSON(t, found[1])
		servers, _ := resource["authorization_servers"].([]any)
		if len(servers) == 0 || servers[0] != env.URL {
			t.Fatalf("the metadata does not name actiond as its authorization server: %v", resource)
		}
		metadata := getJSON(t, env.URL+"/.well-known/oauth-authorization-server")
		for key, want := range map[string]any{
			"issuer": env.URL, "authorization_endpoint": env.URL + "/oauth/authorize", "token_endpoint": env.URL + "/oauth/token",
			"registration_endpoint": env.URL + "/oauth/register", "revocation_endpoint": env.URL + "/oauth/revoke",
		} {
			if metadata[key] != want {
				t.Errorf("metadata %s = %v, want %v", key, metadata[key], want)
			}
		}
		if methods, _ := metadata["code_challenge_methods_supported"].([]any); !slices.Equal(methods, []any{"S256"}) {
			t.Errorf("code challenge methods %v", methods)
		}
		if openid := getJSON(t, env.URL+"/.well-known/openid-configuration"); openid["token_endpoint"] != metadata["token_endpoint"] {
			t.Errorf("openid-configuration differs: %v", openid)
		}

		h := newHost(t, env.URL, nil)
		p := h.open(h.authorizeURL(nil))
		if p.status != http.StatusOK || !strings.Contains(p.body, `value="operator"`) || !strings.Contains(p.body, "Test host") ||
			!strings.Contains(p.body, "last 15 minutes, renewed by the host for up to 30 days") {
			t.Fatalf("consent page: %d %s", p.status, p.body)
		}
		redirect := h.redirected(h.submit(p.form, "approve", "ada", nil))
		if redirect.Get("state") != "state-123" || redirect.Get("iss") != env.URL || redirect.Get("code") == "" {
			t.Fatalf("redirect parameters %v", redirect)
		}
		status, tokens := h.exchange(redirect.Get("code"))
		if status != http.StatusOK || tokens["token_type"] != "Bearer" || tokens["expires_in"] != 900.0 || tokens["scope"] != "openid" || str(tokens["refresh_token"]) == "" {
			t.Fatalf("exchange: %d %v", status, tokens)
		}
		if reply := call(t, env, str(tokens["access_token"])); reply.Status != http.StatusOK {
			t.Fatalf("a call with the signed-in token: %s", reply)
		}
		// The request's principal, subject and client come from the token.
		records := env.Executions(server.DefaultServerID)
		last := records[len(records)-1]
		if last["caller"] != server.LocalPrincipal || last["subject"] != "ada" || last["client"] != h.clientID {
			t.Fatalf("recorded as %v/%v/%v", last["caller"], last["subject"], last["client"])
		}

		// The access token expires; the host refreshes it.
		fake.Advance(15*time.Minute + 6*time.Second)
		if reply := call(t, env, str(tokens["access_token"])); reply.Status != http.StatusUnauthorized || at.Dig(reply.RPC, "error", "data", "reason") != "expired" {
			t.Fatalf("an expired token: %s", reply)
		}
		status, refreshed := h.refresh(str(tokens["refresh_token"]))
		if status != http.StatusOK || refreshed["refresh_token"] == tokens["refresh_token"] || str(refreshed["refresh_token"]) == "" {
			t.Fatalf("refresh: %d %v", status, refreshed)
		}
		if reply := call(t, env, str(refreshed["access_token"])); reply.Status != http.StatusOK {
			t.Fatalf("a call with the refreshed token: %s", reply)
		}
		// Rotation: the spent refresh token presented again is refused and
		// ends the sign-in, so the newest one is refused too.
		if status, body := h.refresh(str(tokens["refresh_token"])); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Fatalf("a spent refresh token: %d %v", status, body)
		}
		if status, body := h.refresh(str(refreshed["refresh_token"])); status != http.StatusBadRequest || body["error"] != "invalid_grant" || !strings.Contains(str(body["error_description"]), "revoked") {
			t.Fatalf("the chain after a reuse: %d %v", status, body)
		}
	})
}

// A code is single-use, short-lived, bound to its client, its redirect URI
// and its PKCE challenge.
func TestCodeRules(t *testing.T) {
	fake := clock.NewFake(at.Start)
	env := at.New(t, store.SQLite, at.Options{Clock: fake})
	h := newHost(t, env.URL, nil)
	other := newHost(t, env.URL, nil)

	code := h.approve("ada").Get("code")
	if status, _ := h.exchange(code); status != http.StatusOK {
		t.Fatalf("first exchange: %d", status)
	}
	if status, body := h.exchange(code); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("second exchange: %d %v", status, body)
	}

	code = h.approve("ada").Get("code")
	fake.Advance(time.Minute)
	if status, body := h.exchange(code); status != http.StatusBadRequest || !strings.Contains(str(body["error_description"]), "expired") {
		t.Fatalf("a code a minute old: %d %v", status, body)
	}

	for name, change := range map[string]func(url.Values){
		"wrong verifier":     func(v url.Values) { v.Set("code_verifier", strings.Repeat("w", 43)) },
		"short verifier":     func(v url.Values) { v.Set("code_verifier", "short") },
		"wrong redirect URI": func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:33418/other") },
		"other port":         func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:9999/callback") },
		"another client":     func(v url.Values) { v.Set("client_id", other.clientID) },
	} {
		code := h.approve("ada").Get("code")
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {h.redirect}, "code_verifier": {h.verifier}, "client_id": {h.clientID}}
		change(form)
		status, body := h.tokenRequest("/oauth/token", form)
		if status != http.StatusBadRequest || (body["error"] != "invalid_grant" && body["error"] != "invalid_request") {
			t.Errorf("%s: %d %v", name, status, body)
		}
		// Whatever went wrong, the code is spent.
		if status, _ := h.exchange(code); status == http.StatusOK && name != "short verifier" {
			t.Errorf("%s: the code still worked afterwards", name)
		}
	}
}

// The authorization request: S256 only, the redirect URI exactly
// registered (any port on loopback, RFC 8252), a resource of this server.
// What cannot be redirected to is shown to the person instead.
func TestAuthorizationRequestRules(t *testing.T) {
	env := at.New(t, store.SQLite, at.Options{})
	h := newHost(t, env.URL, nil)

	// Another port on loopback is the same redirect URI.
	h.redirect = "http://127.0.0.1:50123/callback"
	p := h.open(h.authorizeURL(nil))
	if p.status != http.StatusOK {
		t.Fatalf("another loopback port: %d %s", p.status, p.body)
	}
	if redirect := h.redirected(h.submit(p.form, "approve", "ada", nil)); redirect.Get("code") == "" {
		t.Fatal("no code for another loopback port")
	}
	h.redirect = "http://127.0.0.1:33418/callback"

	for name, change := range map[string]func(url.Values){
		"unregistered path": func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:33418/elsewhere") },
		"another host":      func(v url.Values) { v.Set("redirect_uri", "http://evil.example/callback") },
		"unknown client":    func(v url.Values) { v.Set("client_id", "nobody") },
		"no client":         func(v url.Values) { v.Del("client_id") },
	} {
		p := h.open(h.authorizeURL(change))
		if p.status != http.StatusBadRequest || p.header.Get("Location") != "" || !strings.Contains(p.body, `id="problem"`) {
			t.Errorf("%s: %d Location %q", name, p.status, p.header.Get("Location"))
		}
	}
	for name, c := range map[string]struct {
		change func(url.Values)
		error  string
	}{
		"plain PKCE":       {func(v url.Values) { v.Set("code_challenge_method", "plain") }, "invalid_request"},
		"no PKCE":          {func(v url.Values) { v.Del("code_challenge"); v.Del("code_challenge_method") }, "invalid_request"},
		"token flow":       {func(v url.Values) { v.Set("response_type", "token") }, "unsupported_response_type"},
		"unknown scope":    {func(v url.Values) { v.Set("scope", "openid admin") }, "invalid_scope"},
		"foreign resource": {func(v url.Values) { v.Set("resource", "https://elsewhere.example/mcp") }, "invalid_target"},
		"graphql resource": {func(v url.Values) { v.Set("resource", env.URL+"/financial/v1/graphql") }, "invalid_target"},
	} {
		p := h.open(h.authorizeURL(c.change))
		location, _ := url.Parse(p.header.Get("Location"))
		if p.status != http.StatusSeeOther || location.Query().Get("error") != c.error || location.Query().Get("state") != "state-123" {
			t.Errorf("%s: %d Location %q", name, p.status, p.header.Get("Location"))
		}
	}
	// An endpoint of this server is a resource it serves.
	p = h.open(h.authorizeURL(func(v url.Values) { v.Set("resource", env.Endpoint("default")) }))
	if p.status != http.StatusOK {
		t.Fatalf("the endpoint as resource: %d %s", p.status, p.body)
	}
	// Declining tells the client so.
	if redirect := h.redirected(h.submit(p.form, "deny", "ada", nil)); redirect.Get("error") != "access_denied" || redirect.Get("code") != "" {
		t.Fatalf("declined: %v", redirect)
	}
	// A subject that is not a plain name is asked again, with no code.
	p = h.open(h.authorizeURL(nil))
	resp := h.submit(p.form, "approve", "<script>", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Fatalf("a bad subject: %d", resp.StatusCode)
	}
}

// The consent page cannot be framed or cached, and its form cannot be
// posted from another site: without the CSRF cookie, with another token,
// from another origin, or as a cross-site fetch.
func TestConsentPageIsSameOriginOnly(t *testing.T) {
	env := at.New(t, store.SQLite, at.Options{})
	h := newHost(t, env.URL, nil)
	p := h.open(h.authorizeURL(nil))
	csp := p.header.Get("Content-Security-Policy")
	for _, want := range []string{"frame-ancestors 'none'", "default-src 'none'", "form-action 'self' http://127.0.0.1:33418"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if p.header.Get("X-Frame-Options") != "DENY" || p.header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", p.header)
	}
	cookie := p.header.Get("Set-Cookie")
	if !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Strict") {
		t.Errorf("cookie %q", cookie)
	}

	forged := url.Values{}
	for k, v := range p.form {
		forged[k] = v
	}
	forged.Set("csrf", "forged")
	for name, c := range map[string]struct {
		form   url.Values
		header map[string]string
	}{
		"another token":    {forged, nil},
		"another origin":   {p.form, map[string]string{"Origin": "http://evil.example"}},
		"cross-site fetch": {p.form, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"null origin":      {p.form, map[string]string{"Origin": "null"}},
	} {
		resp := h.submit(c.form, "approve", "ada", c.header)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
			t.Errorf("%s: %d Location %q", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	// A browser without the cookie (another site's page cannot send it).
	stranger := &host{t: t, base: env.URL, browser: &http.Client{CheckRedirect: noRedirects}}
	resp := stranger.submit(p.form, "approve", "ada", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("without the cookie: %d", resp.StatusCode)
	}
	// The real form still works afterwards.
	if redirect := h.redirected(h.submit(p.form, "approve", "ada", nil)); redirect.Get("code") == "" {
		t.Fatal("the page's own form was refused")
	}
}

// RFC 7009: revoking a refresh token ends its sign-in; an unknown token is
// not an error; an access token cannot be revoked and the endpoint says so;
// another client's token is not revoked.
func TestRevocation(t *testing.T) {
	env := at.New(t, store.SQLite, at.Options{})
	h := newHost(t, env.URL, nil)
	tokens := h.signIn("ada")
	other := newHost(t, env.URL, nil)
	if status, body := other.revoke(str(tokens["refresh_token"])); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("another client revoking: %d %v", status, body)
	}
	if status, body := h.revoke(str(tokens["access_token"])); status != http.StatusBadRequest || body["error"] != "unsupported_token_type" {
		t.Fatalf("revoking an access token: %d %v", status, body)
	}
	if status, _ := h.revoke("never-issued"); status != http.StatusOK {
		t.Fatalf("revoking an unknown token: %d", status)
	}
	if status, _ := h.revoke(str(tokens["refresh_token"])); status != http.StatusOK {
		t.Fatalf("revoke: %d", status)
	}
	if status, body := h.refresh(str(tokens["refresh_token"])); status != http.StatusBadRequest || body["error"] != "invalid_grant" || !strings.Contains(str(body["error_description"]), "revoked") {
		t.Fatalf("a revoked refresh token: %d %v", status, body)
	}
}

// A client registered without token_endpoint_auth_method is confidential
// (RFC 7591's default, client_secret_basic): it gets a secret and must
// present it; a wrong one is refused. client_secret_post works when
// registered.
func TestConfidentialClients(t *testing.T) {
	env := at.New(t, store.SQLite, at.Options{})
	basic := newHost(t, env.URL, map[string]any{"redirect_uris": []string{"http://localhost:4000/cb"}, "grant_types": []string{"authorization_code", "refresh_token"}})
	basic.redirect = "http://localhost:4000/cb"
	if basic.secret == "" {
		t.Fatal("no client secret for a confidential client")
	}
	tokens := basic.signIn("ada")
	secret := basic.secret
	basic.secret = "wrong"
	if status, body := basic.refresh(str(tokens["refresh_token"])); status != http.StatusUnauthorized || body["error"] != "invalid_client" {
		t.Fatalf("a wrong secret: %d %v", status, body)
	}
	basic.secret = ""
	if status, body := basic.refresh(str(tokens["refresh_token"])); status != http.StatusUnauthorized || body["error"] != "invalid_client" {
		t.Fatalf("no secret: %d %v", status, body)
	}
	basic.secret = secret
	if status, body := basic.refresh(str(tokens["refresh_token"])); status != http.StatusOK {
		t.Fatalf("the right secret: %d %v", status, body)
	}

	post := newHost(t, env.URL, map[string]any{"redirect_uris": []string{"http://localhost:4000/cb"}, "token_endpoint_auth_method": "client_secret_post"})
	post.redirect = "http://localhost:4000/cb"
	code := post.approve("ada").Get("code")
	postSecret := post.secret
	post.secret = "" // sent in the body, not as Basic
	status, body := post.tokenRequest("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {post.redirect},
		"code_verifier": {post.verifier}, "client_id": {post.clientID}, "client_secret": {postSecret}})
	if status != http.StatusOK || body["refresh_token"] != nil {
		t.Fatalf("client_secret_post: %d %v (a client that did not register for refresh_token gets none)", status, body)
	}
	// It registered for authorization_code only: refreshing is refused.
	if status, body := post.tokenRequest("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {str(body["refresh_token"])},
		"client_id": {post.clientID}, "client_secret": {postSecret}}); status != http.StatusBadRequest || body["error"] != "unauthorized_client" {
		t.Fatalf("refresh by a client that did not register for it: %d %v", status, body)
	}
}

// Registration accepts only loopback http redirect URIs and the grants,
// response types and methods this server has; a clear error names what is
// wrong.
func TestRegistrationRules(t *testing.T) {
	env := at.New(t, store.SQLite, at.Options{})
	h := &host{t: t, base: env.URL}
	for name, c := range map[string]struct {
		registration map[string]any
		error, names string
	}{
		"no redirect URIs":   {map[string]any{"client_name": "x"}, "invalid_redirect_uri", "redirect_uris"},
		"https elsewhere":    {map[string]any{"redirect_uris": []string{"https://host.example/cb"}}, "invalid_redirect_uri", "https://host.example/cb"},
		"http elsewhere":     {map[string]any{"redirect_uris": []string{"http://10.0.0.1/cb"}}, "invalid_redirect_uri", "not on loopback"},
		"fragment":           {map[string]any{"redirect_uris": []string{"http://127.0.0.1/cb#x"}}, "invalid_redirect_uri", "fragment"},
		"custom scheme":      {map[string]any{"redirect_uris": []string{"myapp://cb"}}, "invalid_redirect_uri", "myapp://cb"},
		"implicit grant":     {map[string]any{"redirect_uris": []string{"http://127.0.0.1/cb"}, "grant_types": []string{"implicit"}}, "invalid_client_metadata", "implicit"},
		"token response":     {map[string]any{"redirect_uris": []string{"http://127.0.0.1/cb"}, "response_types": []string{"token"}}, "invalid_client_metadata", "response_types"},
		"unknown auth":       {map[string]any{"redirect_uris": []string{"http://127.0.0.1/cb"}, "token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata", "private_key_jwt"},
		"unknown scope":      {map[string]any{"redirect_uris": []string{"http://127.0.0.1/cb"}, "scope": "admin"}, "invalid_client_metadata", "admin"},
		"control characters": {map[string]any{"redirect_uris": []string{"http://127.0.0.1/cb"}, "client_name": "a\u202eb"}, "invalid_client_metadata", "client_name"},
		"not an object":      {nil, "invalid_client_metadata", "JSON"},
	} {
		var document any = c.registration
		if c.registration == nil {
			document = []int{1}
		}
		status, body := h.postJSON("/oauth/register", document)
		if status != http.StatusBadRequest || body["error"] != c.error || !strings.Contains(str(body["error_description"]), c.names) {
			t.Errorf("%s: %d %v", name, status, body)
		}
	}
	// Unknown metadata is ignored; the response echoes what was kept.
	status, body := h.postJSON("/oauth/register", map[string]any{"redirect_uris": []string{"http://[::1]:8000/cb"}, "token_endpoint_auth_method": "none", "logo_uri": "x", "client_name": "Host"})
	raw, _ := json.Marshal(body)
	if status != http.StatusCreated || body["client_secret"] != nil || body["client_name"] != "Host" || strings.Contains(string(raw), "logo_uri") {
		t.Fatalf("a public client: %d %s", status, raw)
	}
}

// The sign-in is served only to loopback requests addressed by a loopback
// name, and offered only while the public URL is a loopback URL.
func TestSignInOnlyOnLoopback(t *testing.T) {
	env := at.New(t, store.SQLite, at.Options{})
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/oauth/register", strings.NewReader(`{}`))
	req.Host = "actiond.attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a rebound Host: %d", resp.StatusCode)
	}

	public := at.New(t, store.SQLite, at.Options{PublicURL: "https://actiond.example.com"})
	metadata := getJSON(t, public.HTTP.URL+"/.well-known/oauth-authorization-server")
	if _, offered := metadata["authorization_endpoint"]; offered {
		t.Fatalf("a public server offers the sign-in: %v", metadata)
	}
	resp, err = http.Get(public.HTTP.URL + "/oauth/authorize")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/oauth/authorize on a public server: %d", resp.StatusCode)
	}
}
