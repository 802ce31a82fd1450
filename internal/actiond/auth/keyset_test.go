package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// ACT-065: when the issuer rotates its key, a token signed with the new kid
// makes the verifier refetch the JWKS, no sooner than 30 s after the last
// fetch; tokens of the old key keep working while it is published.
func TestJWKSRefreshOnKeyRotation_ACT065(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	old := e.token(t, mcpAudience, nil)
	if _, err := e.verify(old, mcpAudience); err != nil {
		t.Fatal(err)
	}
	if hits := e.jwks.hits.Load(); hits != 1 {
		t.Fatalf("%d JWKS fetches for the first token; want 1", hits)
	}
	rotated := newTestKey(t, jose.EdDSA, "signin-2")
	e.jwks.setKeys(t, e.signIn.public(), rotated.public())

	e.clock.Advance(10 * time.Second)
	fresh := rotated.sign(t, claimsAt(e.clock.Now(), mcpAudience))
	_, err := e.verify(fresh, mcpAudience)
	wantReason(t, err, ReasonUnknownKey)
	if hits := e.jwks.hits.Load(); hits != 1 {
		t.Fatalf("refetched %d times within 30 s of the last fetch", hits-1)
	}

	e.clock.Advance(21 * time.Second)
	if _, err := e.verify(fresh, mcpAudience); err != nil {
		t.Fatalf("rotated key not picked up after 31 s: %v", err)
	}
	if hits := e.jwks.hits.Load(); hits != 2 {
		t.Fatalf("%d fetches; want 2", hits)
	}
	other := e.signIn.sign(t, claimsAt(e.clock.Now(), mcpAudience))
	if _, err := e.verify(other, mcpAudience); err != nil {
		t.Fatalf("old key still published but refused: %v", err)
	}
}

// A flood of tokens with made-up kids, concurrent, costs at most one JWKS
// fetch per 30 s.
func TestUnknownKidFloodIsRateLimited(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	if _, err := e.verify(e.token(t, mcpAudience, nil), mcpAudience); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(31 * time.Second)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			bogus := newTestKey(t, jose.EdDSA, "bogus-"+string(rune('A'+i%26))+string(rune('a'+i/26)))
			_, err := e.verify(bogus.sign(t, claimsAt(e.clock.Now(), mcpAudience)), mcpAudience)
			if ReasonOf(err) != ReasonUnknownKey {
				t.Errorf("bogus kid: %v", err)
			}
		})
	}
	wg.Wait()
	if hits := e.jwks.hits.Load(); hits != 2 {
		t.Fatalf("%d JWKS fetches for 64 bogus kids; want 2 (first use and one refresh)", hits)
	}
}

// When the JWKS cannot be fetched and no keys are known the token is refused
// as keys_unavailable, retried no sooner than the refresh interval.
func TestJWKSUnavailable(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	e.jwks.setStatus(http.StatusServiceUnavailable)
	token := e.token(t, mcpAudience, func(c map[string]any) { c["exp"] = start.Add(time.Hour).Unix() })
	_, err := e.verify(token, mcpAudience)
	wantReason(t, err, ReasonKeysUnavailable)
	e.jwks.setStatus(http.StatusOK)
	_, err = e.verify(token, mcpAudience)
	wantReason(t, err, ReasonKeysUnavailable)
	if hits := e.jwks.hits.Load(); hits != 1 {
		t.Fatalf("%d fetches; want 1", hits)
	}
	e.clock.Advance(30 * time.Second)
	if _, err := e.verify(token, mcpAudience); err != nil {
		t.Fatalf("not recovered after the refresh interval: %v", err)
	}
}

// A JWKS endpoint that hangs is cut off by the fetch timeout.
func TestJWKSFetchTimeout(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	key := newTestKey(t, jose.EdDSA, "k")
	v, err := NewVerifier(VerifierOptions{
		Clock:        clock0(),
		FetchTimeout: 100 * time.Millisecond,
		Issuers: []IssuerConfig{{Issuer: signInIssuer, JWKSURL: hang.URL, Principal: "p",
			Audiences: []string{mcpAudience}}},
	})
	must(t, err)
	began := time.Now()
	_, err = v.Verify(t.Context(), key.sign(t, claimsAt(start, mcpAudience)), mcpAudience)
	wantReason(t, err, ReasonKeysUnavailable)
	if waited := time.Since(began); waited > 5*time.Second {
		t.Fatalf("fetch not cut off: waited %s", waited)
	}
}

// Fetched keys are refreshed once older than JWKSMaxAge: a key the issuer
// withdrew stops verifying, and an outage keeps the old keys.
func TestJWKSMaxAgeRefresh(t *testing.T) {
	e := newEnv(t, jose.EdDSA, func(o *VerifierOptions) { o.CacheSize = -1 })
	if _, err := e.verify(e.token(t, mcpAudience, nil), mcpAudience); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(DefaultJWKSMaxAge)
	e.jwks.setStatus(http.StatusBadGateway)
	if _, err := e.verify(e.token(t, mcpAudience, nil), mcpAudience); err != nil {
		t.Fatalf("an outage at refresh time locked out a known key: %v", err)
	}
	e.clock.Advance(DefaultRefreshInterval)
	e.jwks.setStatus(http.StatusOK)
	successor := newTestKey(t, jose.EdDSA, "signin-2")
	e.jwks.setKeys(t, successor.public())
	_, err := e.verify(e.token(t, mcpAudience, nil), mcpAudience)
	wantReason(t, err, ReasonUnknownKey)
	if hits := e.jwks.hits.Load(); hits != 3 {
		t.Fatalf("%d fetches; want 3", hits)
	}
}

// Keys the verifier cannot or must not use are skipped; the usable key in
// the same set still works.
func TestJWKSSkipsUnusableKeys(t *testing.T) {
	key := newTestKey(t, jose.ES256, "good")
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	must(t, err)
	good, err := key.public().MarshalJSON()
	must(t, err)
	document, err := json.Marshal(map[string]any{"keys": []any{
		map[string]any{"kty": "oct", "kid": "good", "k": "c2VjcmV0"},
		map[string]any{"kty": "unknown", "kid": "x"},
		json.RawMessage(mustJSON(t, jose.JSONWebKey{Key: &weak.PublicKey, KeyID: "good", Use: "sig"})),
		json.RawMessage(mustJSON(t, jose.JSONWebKey{Key: key.public().Key, KeyID: "good", Use: "enc"})),
		json.RawMessage(good),
	}})
	must(t, err)
	m, err := parseKeySet(document)
	must(t, err)
	if len(m.all) != 1 {
		t.Fatalf("kept %d keys; want only the usable one", len(m.all))
	}
	v, err := NewVerifier(VerifierOptions{Clock: clock0(), Issuers: []IssuerConfig{{Issuer: signInIssuer,
		JWKS: document, Principal: "p", Audiences: []string{mcpAudience}}}})
	must(t, err)
	if _, err := v.Verify(t.Context(), key.sign(t, claimsAt(start, mcpAudience)), mcpAudience); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t testing.TB, k jose.JSONWebKey) []byte {
	t.Helper()
	data, err := k.MarshalJSON()
	must(t, err)
	return data
}

// A JWKS fetch is not redirected to plain HTTP off loopback.
func TestJWKSRedirectMayNotDowngrade(t *testing.T) {
	redirect := httptest.NewServer(http.RedirectHandler("http://jwks.invalid/keys", http.StatusFound))
	defer redirect.Close()
	key := newTestKey(t, jose.EdDSA, "k")
	v, err := NewVerifier(VerifierOptions{Clock: clock0(), Issuers: []IssuerConfig{{Issuer: signInIssuer,
		JWKSURL: redirect.URL, Principal: "p", Audiences: []string{mcpAudience}}}})
	must(t, err)
	_, err = v.Verify(t.Context(), key.sign(t, claimsAt(start, mcpAudience)), mcpAudience)
	wantReason(t, err, ReasonKeysUnavailable)
	if !strings.Contains(err.Error(), "must use https") {
		t.Fatalf("refused for another reason: %v", err)
	}
}
