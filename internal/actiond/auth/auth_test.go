package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"go.uber.org/goleak"

	"github.com/incusspawn/isx/internal/clock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Endpoints of two regions, as the seed names them.
const (
	publicURL      = "https://api.r1.prod.twisp.example"
	otherRegionURL = "https://api.r2.prod.twisp.example"
	signInIssuer   = "https://signin.twisp.example"
	iamIssuer      = "https://iam.twisp.example"
	signInName     = "org-signin-principal"
	iamName        = "iam-exchange-principal"
)

var (
	mcpAudience     = MCPAudience(publicURL)
	graphQLAudience = GraphQLAudience(publicURL)
)

var start = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// testKey is a real key pair signing real tokens.
type testKey struct {
	algorithm jose.SignatureAlgorithm
	id        string
	private   any
}

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

// newTestKey makes a key; RSA keys are slow to make, so one is shared.
func newTestKey(t testing.TB, algorithm jose.SignatureAlgorithm, id string) testKey {
	t.Helper()
	var private any
	switch algorithm {
	case jose.EdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		must(t, err)
		private = k
	case jose.ES256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(t, err)
		private = k
	case jose.RS256:
		rsaOnce.Do(func() {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			rsaKey = k
		})
		private = rsaKey
	default:
		t.Fatalf("no test key for %s", algorithm)
	}
	return testKey{algorithm: algorithm, id: id, private: private}
}

func (k testKey) public() jose.JSONWebKey {
	private := jose.JSONWebKey{Key: k.private, KeyID: k.id, Algorithm: string(k.algorithm), Use: "sig"}
	return private.Public()
}

func (k testKey) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.algorithm, Key: jose.JSONWebKey{Key: k.private, KeyID: k.id}},
		(&jose.SignerOptions{}).WithType("JWT"))
	must(t, err)
	token, err := jwt.Signed(signer).Claims(claims).Serialize()
	must(t, err)
	return token
}

func keySetJSON(t testing.TB, keys ...jose.JSONWebKey) []byte {
	t.Helper()
	data, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	must(t, err)
	return data
}

// claimsAt are the claims of a good sign-in token at now.
func claimsAt(now time.Time, audience string) map[string]any {
	return map[string]any{
		"iss":       signInIssuer,
		"sub":       "user-ada",
		"aud":       audience,
		"iat":       now.Unix(),
		"exp":       now.Add(10 * time.Minute).Unix(),
		"client_id": "claude-code",
		"accounts":  []string{"000000000000", "111111111111"},
	}
}

// jwksServer is an issuer's JWKS endpoint on loopback whose keys can be
// rotated and which counts its hits.
type jwksServer struct {
	*httptest.Server
	mu       sync.Mutex
	document []byte
	status   int
	hits     atomic.Int64
}

func newJWKSServer(t testing.TB, keys ...jose.JSONWebKey) *jwksServer {
	t.Helper()
	s := &jwksServer{document: keySetJSON(t, keys...), status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		document, status := s.document, s.status
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(document)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) setKeys(t testing.TB, keys ...jose.JSONWebKey) {
	document := keySetJSON(t, keys...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.document = document
}

func (s *jwksServer) setStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

// env is a verifier trusting the platform sign-in (JWKS over HTTP, accepted at
// MCP and GraphQL) and the IAM token exchange (accepted at GraphQL only).
type env struct {
	clock    *clock.Fake
	signIn   testKey
	iam      testKey
	jwks     *jwksServer
	verifier *Verifier
}

func newEnv(t testing.TB, algorithm jose.SignatureAlgorithm, tweak ...func(*VerifierOptions)) *env {
	t.Helper()
	e := &env{
		clock:  clock.NewFake(start),
		signIn: newTestKey(t, algorithm, "signin-1"),
		iam:    newTestKey(t, jose.ES256, "iam-1"),
	}
	e.jwks = newJWKSServer(t, e.signIn.public())
	opts := VerifierOptions{
		Clock: e.clock,
		Issuers: []IssuerConfig{
			{Issuer: signInIssuer, JWKSURL: e.jwks.URL + "/jwks.json", Principal: signInName,
				Audiences: []string{mcpAudience, graphQLAudience}},
			{Issuer: iamIssuer, JWKS: keySetJSON(t, e.iam.public()), Principal: iamName,
				Audiences: []string{graphQLAudience}},
		},
	}
	for _, f := range tweak {
		f(&opts)
	}
	v, err := NewVerifier(opts)
	must(t, err)
	e.verifier = v
	return e
}

func (e *env) token(t testing.TB, audience string, change func(map[string]any)) string {
	t.Helper()
	claims := claimsAt(e.clock.Now(), audience)
	if change != nil {
		change(claims)
	}
	return e.signIn.sign(t, claims)
}

func (e *env) verify(token, audience string) (Identity, error) {
	return e.verifier.Verify(context.Background(), token, audience)
}

// wantReason asserts a refusal with the given reason, typed as *Error.
func wantReason(t testing.TB, err error, reason Reason) {
	t.Helper()
	if err == nil {
		t.Fatalf("token accepted; want refusal %q", reason)
	}
	var refusal *Error
	if !errors.As(err, &refusal) {
		t.Fatalf("error %v (%T) is not an *auth.Error", err, err)
	}
	if refusal.Reason() != reason {
		t.Fatalf("refused for %q (%v); want %q", refusal.Reason(), err, reason)
	}
	if !errors.Is(err, sentinel(reason)) {
		t.Fatalf("errors.Is does not match reason %q", reason)
	}
}

// compact splits a compact JWS; tests use it to forge tokens by hand.
func compact(token string) (header, payload, signature string) {
	parts := strings.Split(token, ".")
	return parts[0], parts[1], parts[2]
}

func encodeSegment(t testing.TB, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	must(t, err)
	return base64.RawURLEncoding.EncodeToString(data)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// memoryKeyStore is the in-memory KeyStore the tests use beside the file one.
type memoryKeyStore struct {
	mu    sync.Mutex
	key   []byte
	saves int
}

func (s *memoryKeyStore) LoadSigningKey(context.Context) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, s.key != nil, nil
}

func (s *memoryKeyStore) SaveSigningKey(_ context.Context, jwk []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves++
	if s.key == nil {
		s.key = append([]byte{}, jwk...)
	}
	return s.key, nil
}

func clock0() *clock.Fake { return clock.NewFake(start) }
