package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/incusspawn/isx/internal/clock"
)

// Paths the local issuer's handlers are meant to be mounted at, under its
// URL.
const (
	JWKSPath                        = "/.well-known/jwks.json"
	AuthorizationServerMetadataPath = "/.well-known/oauth-authorization-server"
	// OpenIDConfigurationPath serves the same metadata for hosts that only
	// try OpenID Connect discovery.
	OpenIDConfigurationPath = "/.well-known/openid-configuration"
)

// Defaults of MintOptions, and its limit.
const (
	DefaultAccount  = "000000000000"
	DefaultTokenTTL = time.Hour
	MaxTokenTTL     = 7 * 24 * time.Hour
)

// PrincipalClaim is the claim the local issuer puts the principal in.
const PrincipalClaim = "principal"

// LocalIssuerOptions configures NewLocalIssuer.
type LocalIssuerOptions struct {
	// URL is the issuer (the iss of its tokens): actiond's public URL.
	URL      string
	KeyStore KeyStore
	// Algorithm of a newly made key: jose.EdDSA (default, Ed25519) or
	// jose.ES256. A stored key keeps its own algorithm.
	Algorithm jose.SignatureAlgorithm
	Clock     clock.Clock // default clock.Real{}
	// Random feeds key generation and token ids; default crypto/rand.
	Random io.Reader
}

// LocalIssuer is actiond's own token issuer: it mints the tokens of
// `actiond token` and of the local sign-in (package signin), and publishes
// its public key.
type LocalIssuer struct {
	url       string
	private   jose.JSONWebKey
	algorithm jose.SignatureAlgorithm
	signer    jose.Signer
	jwks      []byte
	clock     clock.Clock
	random    io.Reader
}

// NewLocalIssuer loads the signing key from the key store, or makes one and
// stores it. When another process stored a key first, that key is used.
func NewLocalIssuer(ctx context.Context, opts LocalIssuerOptions) (*LocalIssuer, error) {
	if opts.URL == "" || opts.KeyStore == nil {
		return nil, errors.New("auth: the local issuer needs its URL and a key store")
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Random == nil {
		opts.Random = rand.Reader
	}
	stored, ok, err := opts.KeyStore.LoadSigningKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("auth: load the local signing key: %w", err)
	}
	if !ok {
		if stored, err = makeSigningKey(ctx, opts); err != nil {
			return nil, err
		}
	}
	private, algorithm, err := parseSigningKey(stored)
	if err != nil {
		return nil, err
	}
	return newLocalIssuer(opts, private, algorithm)
}

func makeSigningKey(ctx context.Context, opts LocalIssuerOptions) ([]byte, error) {
	key, err := generateKey(opts.Algorithm, opts.Random)
	if err != nil {
		return nil, err
	}
	jwk := jose.JSONWebKey{Key: key, Use: "sig"}
	if jwk.KeyID, err = thumbprint(jwk); err != nil {
		return nil, err
	}
	jwk.Algorithm = string(algorithmOf(key))
	encoded, err := jwk.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("auth: encode the local signing key: %w", err)
	}
	stored, err := opts.KeyStore.SaveSigningKey(ctx, encoded)
	if err != nil {
		return nil, fmt.Errorf("auth: save the local signing key: %w", err)
	}
	return stored, nil
}

func generateKey(algorithm jose.SignatureAlgorithm, random io.Reader) (crypto.Signer, error) {
	// Keys are derived from bytes read from random (rather than by the
	// Generate functions, which ignore their reader since Go 1.26) so the
	// source passed in really is the source.
	seed := make([]byte, 32)
	switch algorithm {
	case "", jose.EdDSA:
		if _, err := io.ReadFull(random, seed); err != nil {
			return nil, fmt.Errorf("auth: generate a signing key: %w", err)
		}
		return ed25519.NewKeyFromSeed(seed), nil
	case jose.ES256:
		for range 8 { // a scalar ≥ the group order is rejected: ~2⁻³² per try
			if _, err := io.ReadFull(random, seed); err != nil {
				return nil, fmt.Errorf("auth: generate a signing key: %w", err)
			}
			if key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), seed); err == nil {
				return key, nil
			}
		}
		return nil, errors.New("auth: generate a signing key: the random source gives no valid P-256 scalar")
	}
	return nil, fmt.Errorf("auth: the local issuer signs with EdDSA or ES256, not %s", algorithm)
}

func algorithmOf(key any) jose.SignatureAlgorithm {
	switch k := key.(type) {
	case ed25519.PrivateKey:
		return jose.EdDSA
	case *ecdsa.PrivateKey:
		if k.Curve == elliptic.P256() {
			return jose.ES256
		}
	}
	return ""
}

func thumbprint(jwk jose.JSONWebKey) (string, error) {
	sum, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("auth: key thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}

func parseSigningKey(stored []byte) (jose.JSONWebKey, jose.SignatureAlgorithm, error) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(stored); err != nil {
		return jose.JSONWebKey{}, "", fmt.Errorf("auth: the stored local signing key is not a JWK: %w", err)
	}
	algorithm := algorithmOf(jwk.Key)
	if algorithm == "" || !jwk.Valid() {
		return jose.JSONWebKey{}, "", errors.New("auth: the stored local signing key is not an Ed25519 or P-256 private key")
	}
	if jwk.KeyID == "" {
		id, err := thumbprint(jwk)
		if err != nil {
			return jose.JSONWebKey{}, "", err
		}
		jwk.KeyID = id
	}
	jwk.Algorithm = string(algorithm)
	return jwk, algorithm, nil
}

func newLocalIssuer(opts LocalIssuerOptions, private jose.JSONWebKey, algorithm jose.SignatureAlgorithm) (*LocalIssuer, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: algorithm, Key: private},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("auth: local signer: %w", err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{private.Public()}})
	if err != nil {
		return nil, fmt.Errorf("auth: encode the local JWKS: %w", err)
	}
	return &LocalIssuer{
		url:       trimURL(opts.URL),
		private:   private,
		algorithm: algorithm,
		signer:    signer,
		jwks:      jwks,
		clock:     opts.Clock,
		random:    opts.Random,
	}, nil
}

// URL is the issuer URL (iss).
func (l *LocalIssuer) URL() string { return l.url }

// KeyID is the signing key's kid, its RFC 7638 thumbprint.
func (l *LocalIssuer) KeyID() string { return l.private.KeyID }

// Algorithm is the signing algorithm: EdDSA or ES256.
func (l *LocalIssuer) Algorithm() jose.SignatureAlgorithm { return l.algorithm }

// JWKS is the public key set document.
func (l *LocalIssuer) JWKS() []byte { return append([]byte{}, l.jwks...) }

// JWKSURL is where JWKSHandler is expected to be mounted.
func (l *LocalIssuer) JWKSURL() string { return l.url + JWKSPath }

// IssuerConfig makes the local issuer a Verifier issuer, with its keys
// inline, accepted at the given audiences, the principal read from the
// `principal` claim.
func (l *LocalIssuer) IssuerConfig(audiences ...string) IssuerConfig {
	return IssuerConfig{
		Issuer:         l.url,
		JWKS:           l.JWKS(),
		PrincipalClaim: PrincipalClaim,
		Audiences:      append([]string{}, audiences...),
	}
}

// MintOptions describes a token to mint.
type MintOptions struct {
	Principal string // required
	Subject   string // required
	Client    string // client_id, optional
	Accounts  []string
	// Audience defaults to MCPAudience(issuer URL): the issuer is actiond's
	// public URL.
	Audience string
	TTL      time.Duration // default DefaultTokenTTL, at most MaxTokenTTL
}

// Mint signs a token. Defaults: accounts [DefaultAccount], TTL one hour,
// audience the MCP endpoints of the issuer's URL.
func (l *LocalIssuer) Mint(opts MintOptions) (string, error) {
	opts, err := l.mintDefaults(opts)
	if err != nil {
		return "", err
	}
	id := make([]byte, 16)
	if _, err := io.ReadFull(l.random, id); err != nil {
		return "", fmt.Errorf("auth: token id: %w", err)
	}
	now := l.clock.Now()
	claims := map[string]any{
		"iss":          l.url,
		"sub":          opts.Subject,
		"aud":          opts.Audience,
		"iat":          now.Unix(),
		"nbf":          now.Unix(),
		"exp":          now.Add(opts.TTL).Unix(),
		"jti":          hex.EncodeToString(id),
		PrincipalClaim: opts.Principal,
		"accounts":     opts.Accounts,
	}
	if opts.Client != "" {
		claims["client_id"] = opts.Client
	}
	token, err := jwt.Signed(l.signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("auth: sign token: %w", err)
	}
	return token, nil
}

func (l *LocalIssuer) mintDefaults(opts MintOptions) (MintOptions, error) {
	if opts.Principal == "" || opts.Subject == "" {
		return opts, errors.New("auth: a token needs a principal and a subject")
	}
	if opts.Audience == "" {
		opts.Audience = MCPAudience(l.url)
	}
	if len(opts.Accounts) == 0 {
		opts.Accounts = []string{DefaultAccount}
	}
	for _, account := range opts.Accounts {
		if account == "" {
			return opts, errors.New("auth: an account id is empty")
		}
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTokenTTL
	}
	if opts.TTL < 0 || opts.TTL > MaxTokenTTL {
		return opts, fmt.Errorf("auth: token lifetime %s is outside (0, %s]", opts.TTL, MaxTokenTTL)
	}
	return opts, nil
}

// JWKSHandler serves the public key set (mount at JWKSPath).
func (l *LocalIssuer) JWKSHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !readOnly(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_, _ = w.Write(l.jwks)
	})
}

// AuthorizationServer is the RFC 8414 metadata the local issuer publishes.
type AuthorizationServer struct {
	Issuer                 string   `json:"issuer"`
	JWKSURI                string   `json:"jwks_uri"`
	ResponseTypesSupported []string `json:"response_types_supported"`
	GrantTypesSupported    []string `json:"grant_types_supported"`
	ScopesSupported        []string `json:"scopes_supported"`
}

// MetadataHandler serves minimal authorization server metadata (RFC 8414;
// mount at AuthorizationServerMetadataPath and OpenIDConfigurationPath). It
// names the JWKS and declares no response or grant types: it is what a
// server that does not offer the sign-in serves, whose tokens come from
// `actiond token` or another issuer.
func (l *LocalIssuer) MetadataHandler() http.Handler {
	document := AuthorizationServer{
		Issuer:                 l.url,
		JWKSURI:                l.JWKSURL(),
		ResponseTypesSupported: []string{},
		GrantTypesSupported:    []string{},
		ScopesSupported:        []string{Scope},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if readOnly(w, r) {
			writeJSON(w, document)
		}
	})
}

func readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}
