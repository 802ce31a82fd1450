package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const localURL = "http://127.0.0.1:8080"

func newLocal(t testing.TB, store KeyStore, algorithm jose.SignatureAlgorithm) *LocalIssuer {
	t.Helper()
	l, err := NewLocalIssuer(context.Background(), LocalIssuerOptions{
		URL: localURL, KeyStore: store, Algorithm: algorithm, Clock: clock0(),
	})
	must(t, err)
	return l
}

// `actiond token --principal P --subject S`: the defaults are account
// 000000000000, one hour, the MCP audience; the local issuer is a Verifier
// issuer with the principal read from the principal claim (ACT-059).
func TestLocalIssuerMintsVerifiableTokens_ACT059(t *testing.T) {
	for _, algorithm := range []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256} {
		t.Run(string(algorithm), func(t *testing.T) {
			l := newLocal(t, &memoryKeyStore{}, algorithm)
			if l.Algorithm() != algorithm {
				t.Fatalf("algorithm %s", l.Algorithm())
			}
			token, err := l.Mint(MintOptions{Principal: "P", Subject: "S"})
			must(t, err)
			mcp := MCPAudience(localURL)
			v, err := NewVerifier(VerifierOptions{Clock: clock0(), Issuers: []IssuerConfig{l.IssuerConfig(mcp)}})
			must(t, err)
			id, err := v.Verify(t.Context(), token, mcp)
			must(t, err)
			if id.Principal != "P" || id.Subject != "S" || id.Issuer != localURL || id.Client != "" {
				t.Fatalf("identity %+v", id)
			}
			if !slices.Equal(id.Accounts, []string{DefaultAccount}) || !id.ExpiresAt.Equal(start.Add(time.Hour)) {
				t.Fatalf("accounts %q, expires %v", id.Accounts, id.ExpiresAt)
			}
			_, err = v.Verify(t.Context(), token, GraphQLAudience(localURL))
			wantReason(t, err, ReasonUnknownIssuer)
		})
	}
}

func TestMintOptions(t *testing.T) {
	l := newLocal(t, &memoryKeyStore{}, jose.EdDSA)
	graphQL := GraphQLAudience(localURL)
	token, err := l.Mint(MintOptions{Principal: "P", Subject: "S", Client: "cli", Accounts: []string{"123456789012"},
		Audience: graphQL, TTL: 10 * time.Minute})
	must(t, err)
	v, err := NewVerifier(VerifierOptions{Clock: clock0(), Issuers: []IssuerConfig{l.IssuerConfig(graphQL)}})
	must(t, err)
	id, err := v.Verify(t.Context(), token, graphQL)
	must(t, err)
	if id.Client != "cli" || !slices.Equal(id.Accounts, []string{"123456789012"}) || !id.ExpiresAt.Equal(start.Add(10*time.Minute)) {
		t.Fatalf("identity %+v", id)
	}
	for name, opts := range map[string]MintOptions{
		"no principal":  {Subject: "S"},
		"no subject":    {Principal: "P"},
		"negative ttl":  {Principal: "P", Subject: "S", TTL: -time.Second},
		"ttl too long":  {Principal: "P", Subject: "S", TTL: MaxTokenTTL + time.Second},
		"empty account": {Principal: "P", Subject: "S", Accounts: []string{""}},
	} {
		if _, err := l.Mint(opts); err == nil {
			t.Fatalf("%s: minted", name)
		}
	}
}

// The key is made once and stored; the next start loads it.
func TestLocalIssuerKeepsItsKey(t *testing.T) {
	store := &memoryKeyStore{}
	a := newLocal(t, store, jose.EdDSA)
	b := newLocal(t, store, jose.ES256) // a stored key keeps its algorithm
	if a.KeyID() != b.KeyID() || b.Algorithm() != jose.EdDSA || store.saves != 1 {
		t.Fatalf("kids %s %s, algorithm %s, saves %d", a.KeyID(), b.KeyID(), b.Algorithm(), store.saves)
	}
	if bytes.Contains(a.JWKS(), []byte(`"d"`)) {
		t.Fatal("the JWKS publishes the private key")
	}
}

// Processes starting at once on one data directory agree on one key.
func TestFileKeyStoreConcurrentStartsAgree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	kids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range kids {
		wg.Go(func() {
			l, err := NewLocalIssuer(context.Background(), LocalIssuerOptions{URL: localURL, KeyStore: FileKeyStore(dir)})
			if err != nil {
				t.Error(err)
				return
			}
			kids[i] = l.KeyID()
		})
	}
	wg.Wait()
	for _, kid := range kids {
		if kid != kids[0] {
			t.Fatalf("issuers disagree on the key: %q", kids)
		}
	}
	info, err := os.Stat(filepath.Join(dir, SigningKeyFile))
	must(t, err)
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %04o; want 0600", info.Mode().Perm())
	}
	leftovers, err := filepath.Glob(filepath.Join(dir, ".signing-key-*"))
	must(t, err)
	if len(leftovers) != 0 {
		t.Fatalf("temporary files left: %q", leftovers)
	}
}

func TestFileKeyStore(t *testing.T) {
	ctx := t.Context()
	store := FileKeyStore(t.TempDir())
	if _, ok, err := store.LoadSigningKey(ctx); ok || err != nil {
		t.Fatalf("empty store: ok %v, err %v", ok, err)
	}
	stored, err := store.SaveSigningKey(ctx, []byte("first"))
	must(t, err)
	again, err := store.SaveSigningKey(ctx, []byte("second"))
	must(t, err)
	loaded, ok, err := store.LoadSigningKey(ctx)
	must(t, err)
	if string(stored) != "first" || string(again) != "first" || !ok || string(loaded) != "first" {
		t.Fatalf("save-if-absent broken: %q %q %q", stored, again, loaded)
	}
}

// A key file others can read is refused, with a sentence saying what to do.
func TestFileKeyStoreRefusesReadableKey(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, SigningKeyFile), []byte("{}"), 0o644))
	_, _, err := FileKeyStore(dir).LoadSigningKey(t.Context())
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("chmod 600")) {
		t.Fatalf("got %v", err)
	}
}

func TestLocalIssuerRefusesBadStoredKey(t *testing.T) {
	for name, key := range map[string]string{
		"not json":   "nope",
		"public key": `{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`,
		"symmetric":  `{"kty":"oct","k":"c2VjcmV0"}`,
	} {
		store := &memoryKeyStore{key: []byte(key)}
		if _, err := NewLocalIssuer(t.Context(), LocalIssuerOptions{URL: localURL, KeyStore: store}); err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
}

// The random source passed in really makes the key.
func TestLocalIssuerKeyFromRandomSource(t *testing.T) {
	for _, algorithm := range []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256} {
		keyID := func() string {
			l, err := NewLocalIssuer(t.Context(), LocalIssuerOptions{URL: localURL, KeyStore: &memoryKeyStore{},
				Algorithm: algorithm, Random: bytes.NewReader(bytes.Repeat([]byte{7}, 256))})
			must(t, err)
			return l.KeyID()
		}
		if keyID() != keyID() {
			t.Fatalf("%s: the same random bytes gave different keys", algorithm)
		}
	}
	_, err := NewLocalIssuer(t.Context(), LocalIssuerOptions{URL: localURL, KeyStore: &memoryKeyStore{}, Algorithm: jose.RS256})
	if err == nil {
		t.Fatal("RS256 local key accepted")
	}
}

// The local issuer's JWKS and RFC 8414 metadata over real HTTP; a verifier
// fetching that JWKS accepts its tokens.
func TestLocalIssuerServesJWKSAndMetadata(t *testing.T) {
	mux := http.NewServeMux()
	server := httptest.NewServer(mux)
	defer server.Close()
	l, err := NewLocalIssuer(t.Context(), LocalIssuerOptions{URL: server.URL, KeyStore: FileKeyStore(t.TempDir()), Clock: clock0()})
	must(t, err)
	mux.Handle(JWKSPath, l.JWKSHandler())
	mux.Handle(AuthorizationServerMetadataPath, l.MetadataHandler())

	var metadata AuthorizationServer
	getJSON(t, server.URL+AuthorizationServerMetadataPath, &metadata)
	if metadata.Issuer != server.URL || metadata.JWKSURI != server.URL+JWKSPath ||
		len(metadata.ResponseTypesSupported) != 0 || len(metadata.GrantTypesSupported) != 0 {
		t.Fatalf("metadata %+v", metadata)
	}
	mcp := MCPAudience(server.URL)
	v, err := NewVerifier(VerifierOptions{Clock: clock0(), Issuers: []IssuerConfig{{Issuer: l.URL(),
		JWKSURL: metadata.JWKSURI, PrincipalClaim: PrincipalClaim, Audiences: []string{mcp}}}})
	must(t, err)
	token, err := l.Mint(MintOptions{Principal: "P", Subject: "S"})
	must(t, err)
	id, err := v.Verify(t.Context(), token, mcp)
	must(t, err)
	if id.Principal != "P" {
		t.Fatalf("identity %+v", id)
	}
	response, err := http.Post(server.URL+JWKSPath, "application/json", nil)
	must(t, err)
	response.Body.Close()
	if response.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST to the JWKS: %d", response.StatusCode)
	}
}

func getJSON(t testing.TB, url string, into any) *http.Response {
	t.Helper()
	response, err := http.Get(url)
	must(t, err)
	defer response.Body.Close()
	if response.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, response.StatusCode)
	}
	must(t, json.NewDecoder(response.Body).Decode(into))
	return response
}
