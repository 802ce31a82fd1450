package signin_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/incusspawn/isx/internal/actiond/actiondtest"
)

// A goroutine the package's code leaves running fails the package.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// host plays an MCP host signing in: it registers, sends its person to the
// consent page (browser plays the person), and exchanges codes and refresh
// tokens, all over HTTP, as a real host does.
type host struct {
	t        *testing.T
	base     string // where actiond listens
	clientID string
	secret   string
	redirect string
	verifier string
	browser  *http.Client
}

// noRedirects keeps the browser from following the redirect to the host's
// loopback listener, which the test reads instead.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func newHost(t *testing.T, base string, registration map[string]any) *host {
	t.Helper()
	h := &host{t: t, base: base, redirect: "http://127.0.0.1:33418/callback", verifier: strings.Repeat("v", 20) + "-verifier._~0123456789abcdef"}
	if registration == nil {
		registration = map[string]any{"client_name": "Test host", "redirect_uris": []string{h.redirect},
			"grant_types": []string{"authorization_code", "refresh_token"}, "token_endpoint_auth_method": "none"}
	}
	status, body := h.postJSON("/oauth/register", registration)
	if status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}
	h.clientID, _ = body["client_id"].(string)
	h.secret, _ = body["client_secret"].(string)
	jar, _ := cookiejar.New(nil)
	h.browser = &http.Client{Jar: jar, CheckRedirect: noRedirects}
	return h
}

func (h *host) postJSON(path string, document any) (int, map[string]any) {
	h.t.Helper()
	raw, _ := json.Marshal(document)
	resp, err := http.Post(h.base+path, "application/json", strings.NewReader(string(raw)))
	if err != nil {
		h.t.Fatal(err)
	}
	return readJSON(h.t, resp)
}

func readJSON(t *testing.T, resp *http.Response) (int, map[string]any) {
	t.Helper()
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%s: %d body %q is not JSON", resp.Request.URL, resp.StatusCode, body)
		}
	}
	return resp.StatusCode, out
}

func challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorizeURL is the URL the host opens in the browser.
func (h *host) authorizeURL(change func(url.Values)) string {
	q := url.Values{
		"response_type": {"code"}, "client_id": {h.clientID}, "redirect_uri": {h.redirect},
		"code_challenge": {challenge(h.verifier)}, "code_challenge_method": {"S256"},
		"state": {"state-123"}, "scope": {"openid"},
	}
	if change != nil {
		change(q)
	}
	return h.base + "/oauth/authorize?" + q.Encode()
}

// page is the consent page as the browser got it.
type page struct {
	status int
	header http.Header
	body   string
	form   url.Values
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

func (h *host) open(rawURL string) page {
	h.t.Helper()
	resp, err := h.browser.Get(rawURL)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	p := page{status: resp.StatusCode, header: resp.Header, body: string(body), form: url.Values{}}
	for _, m := range hiddenField.FindAllStringSubmatch(p.body, -1) {
		p.form.Add(m[1], htmlUnescape(m[2]))
	}
	return p
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&#43;", "+").Replace(s)
}

// submit posts the consent form as the browser does, from the page's
// origin, and returns the response without following its redirect.
func (h *host) submit(form url.Values, decision, subject string, header map[string]string) *http.Response {
	h.t.Helper()
	values := url.Values{}
	for k, v := range form {
		values[k] = v
	}
	values.Set("decision", decision)
	values.Set("subject", subject)
	req, _ := http.NewRequest(http.MethodPost, h.base+"/oauth/authorize", strings.NewReader(values.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", h.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := h.browser.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// approve signs in as subject and returns the redirect's parameters.
func (h *host) approve(subject string) url.Values {
	h.t.Helper()
	p := h.open(h.authorizeURL(nil))
	if p.status != http.StatusOK {
		h.t.Fatalf("consent page: %d %s", p.status, p.body)
	}
	resp := h.submit(p.form, "approve", subject, nil)
	resp.Body.Close()
	return h.redirected(resp)
}

// redirected checks a 303 to the host's redirect URI and returns its query.
func (h *host) redirected(resp *http.Response) url.Values {
	h.t.Helper()
	location, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil {
		h.t.Fatalf("consent: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if location.Scheme+"://"+location.Host+location.Path != h.redirect {
		h.t.Fatalf("redirected to %s, want %s", location, h.redirect)
	}
	return location.Query()
}

// tokenRequest posts to the token endpoint as the client.
func (h *host) tokenRequest(path string, form url.Values) (int, map[string]any) {
	h.t.Helper()
	if h.secret == "" && form.Get("client_id") == "" {
		form.Set("client_id", h.clientID)
	}
	req, _ := http.NewRequest(http.MethodPost, h.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if h.secret != "" {
		req.SetBasicAuth(url.QueryEscape(h.clientID), url.QueryEscape(h.secret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return readJSON(h.t, resp)
}

func (h *host) exchange(code string) (int, map[string]any) {
	return h.tokenRequest("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {h.redirect}, "code_verifier": {h.verifier}})
}

func (h *host) refresh(token string) (int, map[string]any) {
	return h.tokenRequest("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}})
}

func (h *host) revoke(token string) (int, map[string]any) {
	return h.tokenRequest("/oauth/revoke", url.Values{"token": {token}})
}

// signIn runs the whole sign-in and returns the token response.
func (h *host) signIn(subject string) map[string]any {
	h.t.Helper()
	params := h.approve(subject)
	status, tokens := h.exchange(params.Get("code"))
	if status != http.StatusOK {
		h.t.Fatalf("exchange: %d %v", status, tokens)
	}
	return tokens
}

// call makes an MCP request with token and returns its status.
func call(t *testing.T, env *actiondtest.Env, token string) actiondtest.Reply {
	t.Helper()
	return env.Post("default", token, actiondtest.Request{Method: "tools/list", Revision: actiondtest.Revision2026})
}

func str(v any) string { s, _ := v.(string); return s }
