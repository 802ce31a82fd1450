package signin_test

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

// publisher is a host's web site: an https server, on loopback, with a
// certificate from the test's own authority, serving client metadata
// documents and counting how often each is fetched.
type publisher struct {
	authority *at.Authority
	base      string
	mu        sync.Mutex
	documents map[string]document
	fetches   map[string]int
}

type document struct {
	body         map[string]any // client_id is filled in when absent
	cacheControl string
	raw          string // served instead of body when set
}

func newPublisher(t *testing.T) *publisher {
	p := &publisher{authority: at.NewAuthority(t), documents: map[string]document{}, fetches: map[string]int{}}
	server := p.authority.Serve(t, http.HandlerFunc(p.serve))
	p.base = server.URL
	return p
}

func (p *publisher) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	d, ok := p.documents[r.URL.Path]
	p.fetches[r.URL.Path]++
	p.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	body := []byte(d.raw)
	if d.raw == "" {
		if _, named := d.body["client_id"]; !named {
			d.body["client_id"] = p.base + r.URL.Path
		}
		body, _ = json.Marshal(d.body)
	}
	w.Header().Set("Content-Type", "application/json")
	if d.cacheControl != "" {
		w.Header().Set("Cache-Control", d.cacheControl)
	}
	w.Write(body)
}

// publish serves a document at path and returns its URL, the client_id.
func (p *publisher) publish(path string, d document) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.documents[path] = d
	return p.base + path
}

func (p *publisher) fetched(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fetches[path]
}

const documentRedirect = "http://127.0.0.1:33418/callback"

func hostDocument(name string) map[string]any {
	return map[string]any{"client_name": name, "redirect_uris": []string{documentRedirect},
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}, "token_endpoint_auth_method": "none"}
}

// documentHost is a host whose client_id is its document's URL: it
// registers nothing.
func documentHost(t *testing.T, base, clientID string) *host {
	jar, _ := cookiejar.New(nil)
	return &host{t: t, base: base, clientID: clientID, redirect: documentRedirect,
		verifier: strings.Repeat("d", 20) + "-verifier._~0123456789abcdef", browser: &http.Client{Jar: jar, CheckRedirect: noRedirects}}
}

// A host signs in with an https client_id (SEP-991): the metadata says
// documents are supported with none among the authentication methods; the
// document is fetched from the host's own https server, its name shown on
// the consent page beside its URL, its redirect URIs enforced; the code,
// the refresh and the call all work, and the request is recorded with the
// URL as its client. The document is fetched again only once its
// Cache-Control max-age has passed.
func TestHostSignsInByClientMetadataDocument(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		fake := clock.NewFake(at.Start)
		site := newPublisher(t)
		env := at.New(t, d, at.Options{Clock: fake, SignIn: server.SignIn{DocumentRoots: site.authority.Pool}})
		metadata := getJSON(t, env.URL+"/.well-known/oauth-authorization-server")
		methods, _ := metadata["token_endpoint_auth_methods_supported"].([]any)
		if metadata["client_id_metadata_document_supported"] != true || !slices.Contains(methods, any("none")) {
			t.Fatalf("the metadata does not offer client metadata documents: %v", metadata)
		}

		id := site.publish("/oauth/client.json", document{body: hostDocument("Document host"), cacheControl: "public, max-age=600"})
		h := documentHost(t, env.URL, id)
		p := h.open(h.authorizeURL(nil))
		if p.status != http.StatusOK || !strings.Contains(p.body, `<strong id="client">Document host</strong>`) ||
			!strings.Contains(p.body, `<dd id="client-document">`+id+`</dd>`) {
			t.Fatalf("consent page: %d %s", p.status, p.body)
		}
		redirect := h.redirected(h.submit(p.form, "approve", "ada", nil))
		status, tokens := h.exchange(redirect.Get("code"))
		if status != http.StatusOK || str(tokens["refresh_token"]) == "" {
			t.Fatalf("exchange: %d %v", status, tokens)
		}
		if reply := call(t, env, str(tokens["access_token"])); reply.Status != http.StatusOK {
			t.Fatalf("a call with the token: %s", reply)
		}
		records := env.Executions(server.DefaultServerID)
		if last := records[len(records)-1]; last["client"] != id || last["subject"] != "ada" {
			t.Fatalf("recorded as client %v subject %v", last["client"], last["subject"])
		}
		if n := site.fetched("/oauth/client.json"); n != 1 {
			t.Fatalf("the document was fetched %d times within its max-age, want 1", n)
		}
		fake.Advance(10*time.Minute + time.Second)
		status, refreshed := h.refresh(str(tokens["refresh_token"]))
		if status != http.StatusOK || str(refreshed["access_token"]) == "" {
			t.Fatalf("refresh: %d %v", status, refreshed)
		}
		if n := site.fetched("/oauth/client.json"); n != 2 {
			t.Fatalf("the document was fetched %d times after its max-age, want 2", n)
		}

		// A redirect URI the document does not list gets no code.
		refused := h.open(h.authorizeURL(func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:33418/elsewhere") }))
		if refused.status != http.StatusBadRequest || !strings.Contains(refused.body, "redirect_uri is not one") {
			t.Fatalf("an unlisted redirect URI: %d %s", refused.status, refused.body)
		}
	})
}

// A document under no-store is fetched on every use.
func TestClientMetadataDocumentNoStore(t *testing.T) {
	site := newPublisher(t)
	env := at.New(t, store.SQLite, at.Options{SignIn: server.SignIn{DocumentRoots: site.authority.Pool}})
	id := site.publish("/client", document{body: hostDocument("Uncached"), cacheControl: "no-store"})
	h := documentHost(t, env.URL, id)
	for range 2 {
		if p := h.open(h.authorizeURL(nil)); p.status != http.StatusOK {
			t.Fatalf("consent page: %d %s", p.status, p.body)
		}
	}
	if n := site.fetched("/client"); n != 2 {
		t.Fatalf("a no-store document was fetched %d times for two pages, want 2", n)
	}
}

// A document that cannot be trusted is refused on the page and at the
// token endpoint, saying why: one naming another client, one with a secret
// or a secret-based method, one too large, one whose redirect URIs are not
// on loopback, one not found, one served by a certificate no configured
// authority signed, and client_ids that are not https URLs with a path.
func TestClientMetadataDocumentRefusals(t *testing.T) {
	site := newPublisher(t)
	stranger := newPublisher(t) // trusted by no one here
	env := at.New(t, store.SQLite, at.Options{SignIn: server.SignIn{DocumentRoots: site.authority.Pool}})
	with := func(change func(map[string]any)) document {
		body := hostDocument("Bad host")
		change(body)
		return document{body: body}
	}
	cases := map[string]struct {
		id   string
		want string
	}{
		"another client":  {site.publish("/other", with(func(b map[string]any) { b["client_id"] = "https://example.com/client" })), "names the client"},
		"a secret":        {site.publish("/secret", with(func(b map[string]any) { b["client_secret"] = "s" })), "client_secret"},
		"a secret method": {site.publish("/basic", with(func(b map[string]any) { b["token_endpoint_auth_method"] = "client_secret_basic" })), "authenticates with none"},
		"too large":       {site.publish("/large", with(func(b map[string]any) { b["software_id"] = strings.Repeat("x", 6000) })), "larger than 5120 bytes"},
		"remote redirect": {site.publish("/remote", with(func(b map[string]any) { b["redirect_uris"] = []string{"https://example.com/cb"} })), "loopback"},
		"not found":       {site.base + "/missing", "404"},
		"untrusted":       {stranger.publish("/client", document{body: hostDocument("Stranger")}), "certificate"},
		"http":            {"http://127.0.0.1:1/client", "No client is registered"},
		"root":            {site.base + "/", "must have a path"},
		"dot segment":     {site.base + "/a/../client", "segments"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := documentHost(t, env.URL, c.id)
			p := h.open(h.authorizeURL(nil))
			if p.status != http.StatusBadRequest || !strings.Contains(p.body, c.want) || strings.Contains(p.body, `name="csrf"`) {
				t.Fatalf("consent page for %s: %d %s", c.id, p.status, p.body)
			}
			status, body := h.tokenRequest("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {"x"},
				"redirect_uri": {documentRedirect}, "code_verifier": {h.verifier}})
			if status != http.StatusUnauthorized || body["error"] != "invalid_client" {
				t.Fatalf("token endpoint for %s: %d %v", c.id, status, body)
			}
		})
	}
}

// With documents turned off, the metadata does not offer them and an https
// client_id is a client no one registered: its document is never fetched.
func TestClientMetadataDocumentsOff(t *testing.T) {
	site := newPublisher(t)
	env := at.New(t, store.SQLite, at.Options{SignIn: server.SignIn{DocumentRoots: site.authority.Pool, NoClientDocuments: true}})
	if metadata := getJSON(t, env.URL+"/.well-known/oauth-authorization-server"); metadata["client_id_metadata_document_supported"] != false {
		t.Fatalf("metadata offers documents while they are off: %v", metadata)
	}
	id := site.publish("/client", document{body: hostDocument("Off host")})
	h := documentHost(t, env.URL, id)
	if p := h.open(h.authorizeURL(nil)); p.status != http.StatusBadRequest || !strings.Contains(p.body, "No client is registered") || site.fetched("/client") != 0 {
		t.Fatalf("an https client_id with documents off: %d (fetched %d) %s", p.status, site.fetched("/client"), p.body)
	}
}
