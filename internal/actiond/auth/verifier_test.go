package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

var algorithms = []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256, jose.RS256}

// ACT-059: a sign-in token whose aud names the region's MCP endpoints is
// accepted, whatever the accepted algorithm, and the identity comes from the
// token.
func TestVerifyAcceptsSignInTokenAtMCP_ACT059(t *testing.T) {
	for _, algorithm := range algorithms {
		t.Run(string(algorithm), func(t *testing.T) {
			e := newEnv(t, algorithm)
			id, err := e.verify(e.token(t, mcpAudience, nil), mcpAudience)
			must(t, err)
			if id.Principal != signInName || id.Subject != "user-ada" || id.Client != "claude-code" || id.Issuer != signInIssuer {
				t.Fatalf("identity %+v", id)
			}
			if !slices.Equal(id.Accounts, []string{"000000000000", "111111111111"}) {
				t.Fatalf("accounts %q", id.Accounts)
			}
			if !id.ExpiresAt.Equal(start.Add(10 * time.Minute)) {
				t.Fatalf("expires at %v", id.ExpiresAt)
			}
			if id.Claims["sub"] != "user-ada" || id.Claims["iss"] != signInIssuer {
				t.Fatalf("claims %v", id.Claims)
			}
		})
	}
}

// ACT-059: every aud other than the MCP audience is refused, compared
// exactly; an aud array containing it is accepted.
func TestVerifyAudienceMustContainMCPAudienceExactly_ACT059(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	for _, aud := range []any{mcpAudience + "/", "https://api.r1.prod.twisp.example/MCP",
		publicURL, MCPResourceURL(publicURL, "000000000000", "fraud-ops"), []string{}, nil} {
		token := e.token(t, mcpAudience, func(c map[string]any) {
			if aud == nil {
				delete(c, "aud")
				return
			}
			c["aud"] = aud
		})
		_, err := e.verify(token, mcpAudience)
		wantReason(t, err, ReasonWrongAudience)
	}
	token := e.token(t, mcpAudience, func(c map[string]any) { c["aud"] = []string{"other", mcpAudience} })
	if _, err := e.verify(token, mcpAudience); err != nil {
		t.Fatalf("aud array holding the MCP audience refused: %v", err)
	}
}

// ACT-060: one token serves every MCP server of the region, since the
// audience does not name the server.
func TestOneTokenServesEveryMCPServerOfTheRegion_ACT060(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	token := e.token(t, mcpAudience, nil)
	for _, server := range []string{"fraud-ops", "default"} {
		if !strings.HasPrefix(MCPResourceURL(publicURL, "000000000000", server), mcpAudience+"/") {
			t.Fatalf("endpoint of %s is not under the MCP audience", server)
		}
		if _, err := e.verify(token, mcpAudience); err != nil {
			t.Fatalf("token refused for server %s: %v", server, err)
		}
	}
}

// ACT-061: an MCP token is refused at the GraphQL API.
func TestMCPTokenRefusedAtGraphQL_ACT061(t *testing.T) {
	e := newEnv(t, jose.ES256)
	token := e.token(t, mcpAudience, nil)
	_, err := e.verify(token, graphQLAudience)
	wantReason(t, err, ReasonWrongAudience)
	// The same issuer's GraphQL token is fine there: the refusal is the aud.
	if _, err := e.verify(e.token(t, graphQLAudience, nil), graphQLAudience); err != nil {
		t.Fatal(err)
	}
}

// ACT-066: a GraphQL token (wrongly addressed) is refused at MCP.
func TestGraphQLTokenRefusedAtMCP_ACT066(t *testing.T) {
	e := newEnv(t, jose.ES256)
	_, err := e.verify(e.token(t, graphQLAudience, nil), mcpAudience)
	wantReason(t, err, ReasonWrongAudience)
}

// ACT-062: a token for another region's MCP endpoints is refused.
func TestOtherRegionTokenRefused_ACT062(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	_, err := e.verify(e.token(t, MCPAudience(otherRegionURL), nil), mcpAudience)
	wantReason(t, err, ReasonWrongAudience)
}

// ACT-063: a token from the IAM token exchange is refused at MCP even when it
// names the MCP audience, because that issuer is not configured for it; it
// still works at GraphQL, where it is configured.
func TestIAMTokenExchangeRefusedAtMCP_ACT063(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	claims := claimsAt(start, mcpAudience)
	claims["iss"] = iamIssuer
	_, err := e.verify(e.iam.sign(t, claims), mcpAudience)
	wantReason(t, err, ReasonUnknownIssuer)

	claims["aud"] = graphQLAudience
	id, err := e.verify(e.iam.sign(t, claims), graphQLAudience)
	must(t, err)
	if id.Principal != iamName {
		t.Fatalf("principal %q", id.Principal)
	}
	if got := e.verifier.Issuers(mcpAudience); !slices.Equal(got, []string{signInIssuer}) {
		t.Fatalf("issuers at MCP %q", got)
	}
}

// ACT-065: a token from an issuer nobody configured is refused, even when
// signed by a key the verifier knows under another issuer.
func TestUnknownIssuerRefused_ACT065(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	for _, iss := range []any{"https://evil.example", signInIssuer + "/", nil, 42} {
		token := e.token(t, mcpAudience, func(c map[string]any) { c["iss"] = iss })
		_, err := e.verify(token, mcpAudience)
		wantReason(t, err, ReasonUnknownIssuer)
	}
}

// ACT-065: expiry, with the default leeway of five seconds.
func TestExpiredTokenRefused_ACT065(t *testing.T) {
	e := newEnv(t, jose.EdDSA, func(o *VerifierOptions) { o.CacheSize = -1 })
	token := e.token(t, mcpAudience, func(c map[string]any) { c["exp"] = start.Add(-4 * time.Second).Unix() })
	if _, err := e.verify(token, mcpAudience); err != nil {
		t.Fatalf("a token 4 s past exp is within the leeway: %v", err)
	}
	token = e.token(t, mcpAudience, func(c map[string]any) { c["exp"] = start.Add(-6 * time.Second).Unix() })
	_, err := e.verify(token, mcpAudience)
	wantReason(t, err, ReasonExpired)
	if !strings.Contains(err.Error(), "expired") {
		t.Fatalf("message %q does not say expired", err)
	}
}

// ACT-065: exp is required.
func TestTokenWithoutExpRefused_ACT065(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	for _, exp := range []any{nil, "tomorrow"} {
		token := e.token(t, mcpAudience, func(c map[string]any) {
			if exp == nil {
				delete(c, "exp")
				return
			}
			c["exp"] = exp
		})
		_, err := e.verify(token, mcpAudience)
		wantReason(t, err, ReasonMalformed)
	}
}

// ACT-065: nbf and iat must not lie in the future beyond the leeway.
func TestNotYetValidTokenRefused_ACT065(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	for _, claim := range []string{"nbf", "iat"} {
		ok := e.token(t, mcpAudience, func(c map[string]any) { c[claim] = start.Add(4 * time.Second).Unix() })
		if _, err := e.verify(ok, mcpAudience); err != nil {
			t.Fatalf("%s 4 s ahead is within the leeway: %v", claim, err)
		}
		bad := e.token(t, mcpAudience, func(c map[string]any) { c[claim] = start.Add(6 * time.Second).Unix() })
		_, err := e.verify(bad, mcpAudience)
		wantReason(t, err, ReasonNotYetValid)
	}
}

// ACT-065: a tampered payload or signature does not verify.
func TestTamperedTokenRefused_ACT065(t *testing.T) {
	for _, algorithm := range algorithms {
		t.Run(string(algorithm), func(t *testing.T) {
			e := newEnv(t, algorithm)
			header, _, signature := compact(e.token(t, mcpAudience, nil))
			claims := claimsAt(start, mcpAudience)
			claims["sub"] = "admin"
			_, err := e.verify(header+"."+encodeSegment(t, claims)+"."+signature, mcpAudience)
			wantReason(t, err, ReasonBadSignature)

			header, payload, signature := compact(e.token(t, mcpAudience, nil))
			raw, _ := base64.RawURLEncoding.DecodeString(signature)
			raw[len(raw)/2] ^= 0x01
			_, err = e.verify(header+"."+payload+"."+base64.RawURLEncoding.EncodeToString(raw), mcpAudience)
			wantReason(t, err, ReasonBadSignature)
		})
	}
}

// ACT-065: alg none is never accepted.
func TestAlgNoneRefused_ACT065(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	for _, alg := range []string{"none", "None", "NONE"} {
		header := encodeSegment(t, map[string]any{"alg": alg, "typ": "JWT", "kid": e.signIn.id})
		token := header + "." + encodeSegment(t, claimsAt(start, mcpAudience)) + "."
		_, err := e.verify(token, mcpAudience)
		if err == nil {
			t.Fatalf("alg %s accepted", alg)
		}
		if r := ReasonOf(err); r != ReasonBadSignature && r != ReasonMalformed {
			t.Fatalf("alg %s refused for %q", alg, r)
		}
	}
}

// ACT-065: HS256 signed with the issuer's public key as the secret (the
// algorithm-confusion attack) is refused, whichever encoding of the public
// key an attacker guesses the verifier would use.
func TestHS256WithPublicKeyAsSecretRefused_ACT065(t *testing.T) {
	e := newEnv(t, jose.RS256)
	jwk, err := e.signIn.public().MarshalJSON()
	must(t, err)
	der, err := x509.MarshalPKIXPublicKey(e.signIn.public().Key)
	must(t, err)
	for _, secret := range [][]byte{jwk, der, e.jwks.document} {
		header := encodeSegment(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": e.signIn.id})
		signingInput := header + "." + encodeSegment(t, claimsAt(start, mcpAudience))
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(signingInput))
		token := signingInput + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
		_, err := e.verify(token, mcpAudience)
		wantReason(t, err, ReasonBadSignature)
	}
}

// ACT-065: a key embedded in the token's own header is never trusted.
func TestEmbeddedHeaderKeyIgnored_ACT065(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	attacker := newTestKey(t, jose.EdDSA, e.signIn.id)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: attacker.private},
		&jose.SignerOptions{EmbedJWK: true, ExtraHeaders: map[jose.HeaderKey]any{"kid": e.signIn.id}})
	must(t, err)
	payload := encodeSegment(t, claimsAt(start, mcpAudience))
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	must(t, err)
	signed, err := signer.Sign(raw)
	must(t, err)
	token, err := signed.CompactSerialize()
	must(t, err)
	_, err = e.verify(token, mcpAudience)
	wantReason(t, err, ReasonBadSignature)
}

// ACT-065: a kid the issuer never published is refused.
func TestUnknownKidRefused_ACT065(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	stranger := newTestKey(t, jose.EdDSA, "never-published")
	_, err := e.verify(stranger.sign(t, claimsAt(start, mcpAudience)), mcpAudience)
	wantReason(t, err, ReasonUnknownKey)
}

// A header claiming RS256 for an EC key's kid finds no key: a key verifies
// only its own algorithm.
func TestKeyTypeMustMatchAlgorithm(t *testing.T) {
	e := newEnv(t, jose.ES256)
	_, payload, signature := compact(e.token(t, mcpAudience, nil))
	header := encodeSegment(t, map[string]any{"alg": "RS256", "kid": e.signIn.id})
	_, err := e.verify(header+"."+payload+"."+signature, mcpAudience)
	wantReason(t, err, ReasonUnknownKey)
}

// ACT-064: no token at all is "missing", which the 401 reports without
// error="invalid_token".
func TestMissingTokenRefused_ACT064(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	_, err := e.verify("", mcpAudience)
	wantReason(t, err, ReasonMissing)
}

func TestMalformedTokensRefused_ACT065(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	good := e.token(t, mcpAudience, nil)
	header, _, signature := compact(good)
	for name, token := range map[string]string{
		"garbage":      "not-a-jwt",
		"two parts":    "a.b",
		"json":         `{"payload":"e30","signatures":[]}`,
		"huge":         strings.Repeat("a", maxTokenBytes+1),
		"array claims": header + "." + base64.RawURLEncoding.EncodeToString([]byte(`[1,2]`)) + "." + signature,
	} {
		_, err := e.verify(token, mcpAudience)
		if r := ReasonOf(err); r != ReasonMalformed && r != ReasonBadSignature {
			t.Fatalf("%s: refused for %q (%v)", name, r, err)
		}
	}
	// Claims of the wrong shape are malformed even when correctly signed.
	for name, change := range map[string]func(map[string]any){
		"no sub":          func(c map[string]any) { delete(c, "sub") },
		"accounts string": func(c map[string]any) { c["accounts"] = "000000000000" },
		"accounts mixed":  func(c map[string]any) { c["accounts"] = []any{"000000000000", 7} },
		"aud mixed":       func(c map[string]any) { c["aud"] = []any{mcpAudience, 7} },
		"client number":   func(c map[string]any) { c["client_id"] = 12 },
	} {
		_, err := e.verify(e.token(t, mcpAudience, change), mcpAudience)
		if ReasonOf(err) != ReasonMalformed {
			t.Fatalf("%s: got %v, want malformed", name, err)
		}
	}
}

// The OAuth client falls back to azp; a principal claim issuer reads it from
// the token and refuses a token without it.
func TestClientFromAzpAndPrincipalFromClaim(t *testing.T) {
	key := newTestKey(t, jose.EdDSA, "k")
	v, err := NewVerifier(VerifierOptions{
		Clock: clock0(),
		Issuers: []IssuerConfig{{Issuer: signInIssuer, JWKS: keySetJSON(t, key.public()),
			PrincipalClaim: "org", Audiences: []string{mcpAudience}}},
	})
	must(t, err)
	claims := claimsAt(start, mcpAudience)
	delete(claims, "client_id")
	claims["azp"] = "vscode"
	claims["org"] = "org-7"
	id, err := v.Verify(t.Context(), key.sign(t, claims), mcpAudience)
	must(t, err)
	if id.Client != "vscode" || id.Principal != "org-7" {
		t.Fatalf("identity %+v", id)
	}
	delete(claims, "org")
	_, err = v.Verify(t.Context(), key.sign(t, claims), mcpAudience)
	wantReason(t, err, ReasonMalformed)
}

// ACT-069: the endpoint's account must be one of the token's accounts.
func TestIdentityHasAccount_ACT069(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	id, err := e.verify(e.token(t, mcpAudience, nil), mcpAudience)
	must(t, err)
	if !id.HasAccount("111111111111") || id.HasAccount("222222222222") || id.HasAccount("") {
		t.Fatalf("HasAccount wrong for accounts %q", id.Accounts)
	}
}

func TestErrorsAreTypedAndSayWhy(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	token := e.token(t, mcpAudience, func(c map[string]any) { c["exp"] = start.Add(-time.Hour).Unix() })
	_, err := e.verify(token, mcpAudience)
	if !errors.Is(err, ErrExpired) || errors.Is(err, ErrBadSignature) {
		t.Fatalf("errors.Is by reason broken for %v", err)
	}
	if ReasonOf(err) != ReasonExpired || ReasonOf(nil) != "" {
		t.Fatal("ReasonOf wrong")
	}
	var refusal *Error
	if !errors.As(err, &refusal) || refusal.Issuer != signInIssuer {
		t.Fatalf("issuer not recorded: %+v", refusal)
	}
}

func TestNewVerifierRefusesBadConfiguration(t *testing.T) {
	good := func() IssuerConfig {
		return IssuerConfig{Issuer: signInIssuer, JWKSURL: "https://signin.twisp.example/jwks.json",
			Principal: "p", Audiences: []string{mcpAudience}}
	}
	cases := map[string]func(*VerifierOptions){
		"no issuers":        func(o *VerifierOptions) { o.Issuers = nil },
		"leeway too long":   func(o *VerifierOptions) { o.Leeway = 2 * time.Minute },
		"relative issuer":   func(o *VerifierOptions) { o.Issuers[0].Issuer = "signin" },
		"both principals":   func(o *VerifierOptions) { o.Issuers[0].PrincipalClaim = "org" },
		"no principal":      func(o *VerifierOptions) { o.Issuers[0].Principal = "" },
		"no audiences":      func(o *VerifierOptions) { o.Issuers[0].Audiences = nil },
		"both key sources":  func(o *VerifierOptions) { o.Issuers[0].JWKS = []byte(`{"keys":[]}`) },
		"no key source":     func(o *VerifierOptions) { o.Issuers[0].JWKSURL = "" },
		"plain http remote": func(o *VerifierOptions) { o.Issuers[0].JWKSURL = "http://signin.twisp.example/jwks" },
		"duplicate issuer":  func(o *VerifierOptions) { o.Issuers = append(o.Issuers, good()) },
		"empty inline jwks": func(o *VerifierOptions) {
			o.Issuers[0].JWKSURL = ""
			o.Issuers[0].JWKS = []byte(`{"keys":[]}`)
		},
	}
	for name, change := range cases {
		opts := VerifierOptions{Issuers: []IssuerConfig{good()}}
		change(&opts)
		if _, err := NewVerifier(opts); err == nil {
			t.Fatalf("%s: configuration accepted", name)
		}
	}
	if _, err := NewVerifier(VerifierOptions{Issuers: []IssuerConfig{good()}}); err != nil {
		t.Fatalf("good configuration refused: %v", err)
	}
}
