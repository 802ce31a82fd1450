package auth

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
)

// endpoint is a stand-in for the gateway wired the way the report describes:
// bearer token, Verify for the MCP audience, 401 with the challenge, the
// account check, and Protected Resource Metadata beside it.
type endpoint struct {
	server   *httptest.Server
	issuer   *LocalIssuer
	verifier *Verifier
}

func newEndpoint(t testing.TB) *endpoint {
	t.Helper()
	mux := http.NewServeMux()
	e := &endpoint{server: httptest.NewServer(mux)}
	t.Cleanup(e.server.Close)
	public := e.server.URL
	issuer, err := NewLocalIssuer(context.Background(), LocalIssuerOptions{URL: public, KeyStore: &memoryKeyStore{}, Clock: clock.Real{}})
	must(t, err)
	e.issuer = issuer
	e.verifier, err = NewVerifier(VerifierOptions{Issuers: []IssuerConfig{issuer.IssuerConfig(MCPAudience(public), GraphQLAudience(public))}})
	must(t, err)
	mux.Handle(ProtectedResourcePrefix+"/mcp/v1/", ProtectedResourceHandler(public, e.verifier.Issuers(MCPAudience(public))))
	mux.HandleFunc("POST /mcp/v1/{account}/{name}", func(w http.ResponseWriter, r *http.Request) {
		account, name := r.PathValue("account"), r.PathValue("name")
		id, err := e.verifier.VerifyRequest(r, MCPAudience(public))
		if err != nil {
			Challenge(w, ResourceMetadataURL(public, account, name), err)
			return
		}
		if !id.HasAccount(account) {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, id.Principal+" "+id.Subject)
	})
	return e
}

func (e *endpoint) post(t testing.TB, path string, authorization ...string) (*http.Response, string) {
	t.Helper()
	request, err := http.NewRequest(http.MethodPost, e.server.URL+path, strings.NewReader(`{}`))
	must(t, err)
	for _, value := range authorization {
		request.Header.Add("Authorization", value)
	}
	response, err := http.DefaultClient.Do(request)
	must(t, err)
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	must(t, err)
	return response, string(body)
}

// ACT-064, ACT-067, ACT-068, ACT-056, ACT-047: without a token the endpoint
// answers 401 naming its own Protected Resource Metadata and scope openid;
// the metadata names the endpoint as the resource and the issuer as the
// authorization server.
func TestUnauthenticatedRequestDiscoversSignIn_ACT064_ACT067_ACT068_ACT056_ACT047(t *testing.T) {
	e := newEndpoint(t)
	response, _ := e.post(t, "/mcp/v1/000000000000/fraud-ops")
	if response.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d", response.StatusCode)
	}
	params := parseChallenge(t, response.Header.Get("WWW-Authenticate"))
	wantMetadata := e.server.URL + "/.well-known/oauth-protected-resource/mcp/v1/000000000000/fraud-ops"
	if params["resource_metadata"] != wantMetadata || params["scope"] != "openid" {
		t.Fatalf("challenge %v", params)
	}
	if _, presented := params["error"]; presented {
		t.Fatalf("error code on a request without a token: %v", params)
	}

	var metadata ProtectedResource
	getJSON(t, params["resource_metadata"], &metadata)
	if metadata.Resource != e.server.URL+"/mcp/v1/000000000000/fraud-ops" ||
		!slices.Equal(metadata.AuthorizationServers, []string{e.server.URL}) ||
		!slices.Equal(metadata.ScopesSupported, []string{"openid"}) ||
		!slices.Equal(metadata.BearerMethodsSupported, []string{"header"}) {
		t.Fatalf("metadata %+v", metadata)
	}
}

// ACT-065, ACT-066, ACT-067: a presented but refused token gets 401 with
// error="invalid_token" and the public reason (body and error_description),
// never the audience, issuer or key it was checked against.
func TestRefusedTokenGets401WithPublicReason_ACT065_ACT066_ACT067(t *testing.T) {
	e := newEndpoint(t)
	graphQLToken, err := e.issuer.Mint(MintOptions{Principal: "P", Subject: "S", Audience: GraphQLAudience(e.server.URL)})
	must(t, err)
	good, err := e.issuer.Mint(MintOptions{Principal: "P", Subject: "S"})
	must(t, err)
	header, payload, _ := compact(good)
	for name, c := range map[string]struct {
		authorization []string
		reason        PublicReason
	}{
		"graphql token":  {[]string{"Bearer " + graphQLToken}, PublicWrongAudience},
		"tampered":       {[]string{"Bearer " + header + "." + payload + ".AAAA"}, PublicInvalidSignature},
		"two headers":    {[]string{"Bearer " + good, "Bearer " + good}, PublicMalformed},
		"two tokens":     {[]string{"Bearer " + good + " " + good}, PublicMalformed},
		"basic":          {[]string{"Basic dXNlcjpwYXNz"}, PublicMalformed},
		"empty bearer":   {[]string{"Bearer "}, PublicMalformed},
		"garbage":        {[]string{"Bearer garbage"}, PublicMalformed},
		"comma repeated": {[]string{"Bearer " + good + ", Bearer " + good}, PublicMalformed},
	} {
		response, body := e.post(t, "/mcp/v1/000000000000/fraud-ops", c.authorization...)
		if response.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: status %d", name, response.StatusCode)
		}
		params := parseChallenge(t, response.Header.Get("WWW-Authenticate"))
		_, sentence := Public(refuse(reasonFor(c.reason), ""))
		if params["error"] != "invalid_token" || params["scope"] != "openid" || params["resource_metadata"] == "" || params["error_description"] != sentence {
			t.Fatalf("%s: challenge %v", name, params)
		}
		var got map[string]string
		must(t, json.Unmarshal([]byte(body), &got))
		if got["error"] != "invalid_token" || got["reason"] != string(c.reason) || got["error_description"] != sentence || len(got) != 3 {
			t.Fatalf("%s: body %s, want reason %s", name, body, c.reason)
		}
		for _, secret := range []string{e.server.URL, e.issuer.KeyID(), "financial"} {
			if strings.Contains(body, secret) || strings.Contains(params["error_description"], secret) {
				t.Fatalf("%s: the response names %q: %s", name, secret, body)
			}
		}
	}
}

// reasonFor is an internal reason that maps to the public one.
func reasonFor(public PublicReason) Reason {
	switch public {
	case PublicWrongAudience:
		return ReasonWrongAudience
	case PublicInvalidSignature:
		return ReasonBadSignature
	}
	return ReasonMalformed
}

// Every internal reason has a public one with a sentence, and the public
// reasons are coarser than the internal ones, never finer.
func TestPublicReasons(t *testing.T) {
	want := map[Reason]PublicReason{
		ReasonMissing: PublicMissing, ReasonMalformed: PublicMalformed, ReasonBadSignature: PublicInvalidSignature,
		ReasonUnknownKey: PublicInvalidSignature, ReasonUnknownIssuer: PublicUnknownIssuer, ReasonExpired: PublicExpired,
		ReasonNotYetValid: PublicNotYetValid, ReasonWrongAudience: PublicWrongAudience, ReasonKeysUnavailable: PublicUnavailable,
	}
	for internal, public := range want {
		got, sentence := Public(refuse(internal, "detail that must not leak"))
		if got != public || sentence == "" || strings.Contains(sentence, "detail") {
			t.Errorf("%s: %s %q, want %s", internal, got, sentence, public)
		}
	}
	if got, _ := Public(nil); got != PublicMissing {
		t.Errorf("nil: %s", got)
	}
	if got, _ := Public(errors.New("not an auth error")); got != PublicMalformed {
		t.Errorf("foreign error: %s", got)
	}
}

// ACT-051, ACT-060, ACT-069: every request carries its own token; one token
// works at two servers; an account not the user's is refused.
func TestTokenWorksAtEveryServerPerRequest_ACT051_ACT060_ACT069(t *testing.T) {
	e := newEndpoint(t)
	token, err := e.issuer.Mint(MintOptions{Principal: "P", Subject: "S"})
	must(t, err)
	for _, path := range []string{"/mcp/v1/000000000000/fraud-ops", "/mcp/v1/000000000000/default"} {
		response, body := e.post(t, path, "bearer "+token)
		if response.StatusCode != http.StatusOK || body != "P S" {
			t.Fatalf("%s: %d %q", path, response.StatusCode, body)
		}
	}
	if response, _ := e.post(t, "/mcp/v1/000000000000/default"); response.StatusCode != http.StatusUnauthorized {
		t.Fatalf("second request without a token: %d", response.StatusCode)
	}
	if response, _ := e.post(t, "/mcp/v1/999999999999/default", "Bearer "+token); response.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign account: %d", response.StatusCode)
	}
}

func TestBearerToken_ACT064(t *testing.T) {
	request := func(values ...string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp/v1/a/b", nil)
		for _, v := range values {
			r.Header.Add("Authorization", v)
		}
		return r
	}
	for _, value := range []string{"Bearer abc.def.ghi", "bearer abc.def.ghi", "BEARER abc.def.ghi", "Bearer  abc.def.ghi", " Bearer abc.def.ghi "} {
		token, err := BearerToken(request(value))
		if err != nil || token != "abc.def.ghi" {
			t.Fatalf("%q: %q, %v", value, token, err)
		}
	}
	_, err := BearerToken(request())
	wantReason(t, err, ReasonMissing)
	for _, values := range [][]string{{"Bearer a", "Bearer a"}, {"Bearer"}, {"Bearer a b"}, {"Bearer a,b"}, {"Token a"}, {""}, {"Bearer ==="}} {
		_, err := BearerToken(request(values...))
		wantReason(t, err, ReasonMalformed)
	}
}

func TestChallengeHeader_ACT067_ACT068(t *testing.T) {
	url := ResourceMetadataURL(publicURL, "000000000000", "fraud-ops")
	if url != publicURL+"/.well-known/oauth-protected-resource/mcp/v1/000000000000/fraud-ops" {
		t.Fatalf("metadata URL %s", url)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, `Bearer resource_metadata="` + url + `", scope="openid"`},
		{ErrMissing, `Bearer resource_metadata="` + url + `", scope="openid"`},
		{ErrExpired, `Bearer resource_metadata="` + url + `", scope="openid", error="invalid_token", error_description="The bearer token has expired; refresh it or sign in again."`},
	} {
		w := httptest.NewRecorder()
		Challenge(w, url, c.err)
		if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != c.want {
			t.Fatalf("%v: %d %q", c.err, w.Code, w.Header().Get("WWW-Authenticate"))
		}
	}
}

func TestProtectedResourceHandlerPaths_ACT047(t *testing.T) {
	h := ProtectedResourceHandler(publicURL+"/", []string{signInIssuer})
	for path, want := range map[string]int{
		ProtectedResourcePrefix + "/mcp/v1/000000000000/fraud-ops":    http.StatusOK,
		ProtectedResourcePrefix + "/mcp/v1/000000000000":              http.StatusNotFound,
		ProtectedResourcePrefix + "/mcp/v1/000000000000/":             http.StatusNotFound,
		ProtectedResourcePrefix + "/mcp/v1//fraud-ops":                http.StatusNotFound,
		ProtectedResourcePrefix + "/mcp/v1/000000000000/a/b":          http.StatusNotFound,
		ProtectedResourcePrefix + "/financial/v1/graphql":             http.StatusNotFound,
		"/.well-known/oauth-protected-resource-x/mcp/v1/000000000000": http.StatusNotFound,
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != want {
			t.Fatalf("%s: %d, want %d", path, w.Code, want)
		}
		if want == http.StatusOK && !strings.Contains(w.Body.String(), `"resource":"`+publicURL+`/mcp/v1/000000000000/fraud-ops"`) {
			t.Fatalf("body %s", w.Body)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, ProtectedResourcePrefix+"/mcp/v1/a/b", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", w.Code)
	}
}

// A verified token's identity travels in the request context.
func TestIdentityContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("identity in an empty context")
	}
	id := Identity{Principal: "P", Subject: "S", ExpiresAt: time.Unix(1, 0)}
	got, ok := FromContext(NewContext(context.Background(), id))
	if !ok || got.Principal != "P" || got.Subject != "S" {
		t.Fatalf("got %+v", got)
	}
}

// parseChallenge reads `Bearer k="v", k="v"` strictly enough for the tests.
func parseChallenge(t testing.TB, header string) map[string]string {
	t.Helper()
	rest, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		t.Fatalf("challenge %q is not Bearer", header)
	}
	params := map[string]string{}
	for part := range strings.SplitSeq(rest, ", ") {
		key, value, ok := strings.Cut(part, "=")
		if !ok || len(value) < 2 || value[0] != '"' || value[len(value)-1] != '"' {
			t.Fatalf("challenge %q: bad parameter %q", header, part)
		}
		params[key] = value[1 : len(value)-1]
	}
	return params
}
