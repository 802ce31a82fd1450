package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/incusspawn/isx/internal/clock"
)

// acceptedAlgorithms are the only signature algorithms a token may use.
// none and the HMAC family are never accepted: with HS256 anyone who knows
// the public key could sign.
var acceptedAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// Defaults of VerifierOptions.
const (
	// DefaultLeeway is how far past exp (and before nbf and iat) a token is
	// still accepted: enough for the clocks of processes sharing a database,
	// small enough that an expired token is refused within seconds.
	DefaultLeeway          = 5 * time.Second
	MaxLeeway              = 60 * time.Second
	DefaultRefreshInterval = 30 * time.Second
	DefaultJWKSMaxAge      = time.Hour
	DefaultFetchTimeout    = 5 * time.Second
	DefaultCacheSize       = 10_000
	DefaultCacheTTL        = 5 * time.Minute
)

// maxTokenBytes bounds the work an arbitrary string can cause before its
// signature is checked.
const maxTokenBytes = 16 << 10

// IssuerConfig is one trusted token issuer.
type IssuerConfig struct {
	// Issuer must equal the token's iss exactly.
	Issuer string `json:"issuer"`
	// JWKSURL is where the issuer publishes its keys: https, or http on a
	// loopback host. Exactly one of JWKSURL and JWKS is set.
	JWKSURL string `json:"jwksURL,omitempty"`
	// JWKS is the issuer's key set inline.
	JWKS json.RawMessage `json:"jwks,omitempty"`
	// Principal is the principal of every token of this issuer. Exactly one
	// of Principal and PrincipalClaim is set.
	Principal string `json:"principal,omitempty"`
	// PrincipalClaim names the string claim holding the principal.
	PrincipalClaim string `json:"principalClaim,omitempty"`
	// Audiences lists the endpoint audiences this issuer's tokens are
	// accepted at (MCPAudience, GraphQLAudience). An issuer not listing an
	// endpoint's audience is unknown there even if its token names that
	// audience: that is how the platform's IAM token exchange is kept out of
	// the MCP endpoints (ACT-063).
	Audiences []string `json:"audiences"`
}

// VerifierOptions configures NewVerifier. Zero values take the defaults.
type VerifierOptions struct {
	Issuers []IssuerConfig
	Clock   clock.Clock // default clock.Real{}
	// HTTPClient fetches JWKS documents; default a client whose timeout is
	// FetchTimeout.
	HTTPClient   *http.Client
	FetchTimeout time.Duration
	// Leeway is the clock skew allowed on exp, nbf and iat: 0 means
	// DefaultLeeway, negative means none, more than MaxLeeway is refused.
	Leeway time.Duration
	// RefreshInterval is the least time between two fetches of one issuer's
	// JWKS (prompted by an unknown kid or by age).
	RefreshInterval time.Duration
	// JWKSMaxAge is how long fetched keys are used before being refreshed.
	JWKSMaxAge time.Duration
	// CacheSize bounds the verification cache: 0 means DefaultCacheSize,
	// negative disables the cache.
	CacheSize int
	// CacheTTL is the longest a verification is reused (never past exp).
	CacheTTL time.Duration
}

type issuer struct {
	config IssuerConfig
	keys   *keySet
}

func (i *issuer) accepts(audience string) bool {
	return slices.Contains(i.config.Audiences, audience)
}

// Verifier checks bearer JWTs. It is safe for concurrent use.
type Verifier struct {
	issuers  map[string]*issuer
	ordered  []*issuer
	clock    clock.Clock
	leeway   time.Duration
	cacheTTL time.Duration
	cache    *verifiedCache
	cold     atomic.Int64 // full verifications performed; tests read it
}

// NewVerifier checks the configuration and returns a verifier. It fetches
// nothing yet: remote key sets are fetched on first use.
func NewVerifier(opts VerifierOptions) (*Verifier, error) {
	opts = withDefaults(opts)
	if opts.Leeway > MaxLeeway {
		return nil, fmt.Errorf("auth: leeway %s is more than the %s allowed", opts.Leeway, MaxLeeway)
	}
	if len(opts.Issuers) == 0 {
		return nil, errors.New("auth: no token issuer is configured; configure at least one issuer")
	}
	v := &Verifier{
		issuers:  map[string]*issuer{},
		clock:    opts.Clock,
		leeway:   max(opts.Leeway, 0),
		cacheTTL: opts.CacheTTL,
		cache:    newVerifiedCache(opts.CacheSize),
	}
	for _, config := range opts.Issuers {
		iss, err := newIssuer(config, opts)
		if err != nil {
			return nil, err
		}
		if _, dup := v.issuers[config.Issuer]; dup {
			return nil, fmt.Errorf("auth: issuer %q is configured twice; merge its entries", config.Issuer)
		}
		v.issuers[config.Issuer] = iss
		v.ordered = append(v.ordered, iss)
	}
	return v, nil
}

func withDefaults(opts VerifierOptions) VerifierOptions {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: opts.FetchTimeout, CheckRedirect: checkRedirect}
	}
	if opts.Leeway == 0 {
		opts.Leeway = DefaultLeeway
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.JWKSMaxAge <= 0 {
		opts.JWKSMaxAge = DefaultJWKSMaxAge
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	return opts
}

func newIssuer(config IssuerConfig, opts VerifierOptions) (*issuer, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("auth: issuer %q: %s", config.Issuer, fmt.Sprintf(format, args...))
	}
	if u, err := url.Parse(config.Issuer); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fail("the issuer must be an absolute URL")
	}
	if (config.Principal == "") == (config.PrincipalClaim == "") {
		return nil, fail("set exactly one of principal and principalClaim")
	}
	if len(config.Audiences) == 0 || slices.Contains(config.Audiences, "") {
		return nil, fail("list the endpoint audiences its tokens are accepted at")
	}
	switch {
	case config.JWKSURL != "" && len(config.JWKS) > 0, config.JWKSURL == "" && len(config.JWKS) == 0:
		return nil, fail("set exactly one of jwksURL and jwks")
	case len(config.JWKS) > 0:
		m, err := parseKeySet(config.JWKS)
		if err != nil {
			return nil, fail("inline jwks: %v", err)
		}
		return &issuer{config: config, keys: fixedKeySet(m)}, nil
	}
	if err := checkJWKSURL(config.JWKSURL); err != nil {
		return nil, fail("%v", err)
	}
	return &issuer{config: config, keys: &keySet{
		url:         config.JWKSURL,
		client:      opts.HTTPClient,
		clock:       opts.Clock,
		minInterval: opts.RefreshInterval,
		maxAge:      opts.JWKSMaxAge,
		timeout:     opts.FetchTimeout,
	}}, nil
}

// checkJWKSURL refuses plain HTTP except on loopback, where the local issuer
// and tests live: keys fetched in the clear could be swapped in transit.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("jwksURL %q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if host == "localhost" {
			return nil
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return nil
		}
		return fmt.Errorf("jwksURL %q must use https (plain http only on loopback)", raw)
	}
	return fmt.Errorf("jwksURL %q must use https", raw)
}

// checkRedirect holds a redirected JWKS fetch to the rules of jwksURL, so a
// redirect cannot downgrade it to plain HTTP.
func checkRedirect(request *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	return checkJWKSURL(request.URL.String())
}

// Issuers returns the configured issuer URLs accepted at audience, in
// configuration order: the authorization servers an endpoint's Protected
// Resource Metadata names.
func (v *Verifier) Issuers(audience string) []string {
	var urls []string
	for _, iss := range v.ordered {
		if iss.accepts(audience) {
			urls = append(urls, iss.config.Issuer)
		}
	}
	return urls
}

// VerifyRequest verifies the request's bearer token for audience.
func (v *Verifier) VerifyRequest(r *http.Request, audience string) (Identity, error) {
	token, err := BearerToken(r)
	if err != nil {
		return Identity{}, err
	}
	return v.Verify(r.Context(), token, audience)
}

// Verify checks token and returns its identity if it is valid for the
// endpoint whose audience is given (MCPAudience or GraphQLAudience). Every
// failure is an *Error.
func (v *Verifier) Verify(ctx context.Context, token, audience string) (Identity, error) {
	if token == "" {
		return Identity{}, refuse(ReasonMissing, "no bearer token")
	}
	if audience == "" {
		return Identity{}, refuse(ReasonWrongAudience, "the endpoint's expected audience was not given")
	}
	if len(token) > maxTokenBytes {
		return Identity{}, refuse(ReasonMalformed, "token longer than %d bytes", maxTokenBytes)
	}
	now := v.clock.Now()
	key := sha256.Sum256([]byte(token))
	entry, ok := v.cache.get(key, now)
	if !ok {
		var err error
		entry, err = v.verifyToken(ctx, token, now)
		if err != nil {
			return Identity{}, err
		}
		if now.Before(entry.until) {
			v.cache.put(key, entry)
		}
	}
	return admit(entry, audience)
}

// admit is the per-endpoint part of verification, run on cached entries too.
func admit(entry *verified, audience string) (Identity, error) {
	if !entry.issuer.accepts(audience) {
		return Identity{}, refuseFrom(ReasonUnknownIssuer, entry.identity.Issuer, nil, "issuer is not accepted at audience %q", audience)
	}
	if !slices.Contains(entry.audiences, audience) {
		return Identity{}, refuseFrom(ReasonWrongAudience, entry.identity.Issuer, nil, "aud %q does not contain %q", entry.audiences, audience)
	}
	return entry.identity, nil
}

func (v *Verifier) verifyToken(ctx context.Context, token string, now time.Time) (*verified, error) {
	v.cold.Add(1)
	signature, err := jose.ParseSignedCompact(token, acceptedAlgorithms)
	if err != nil {
		var unexpected *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &unexpected) {
			return nil, refuseFrom(ReasonBadSignature, "", err, "signature algorithm not accepted")
		}
		return nil, refuseFrom(ReasonMalformed, "", err, "not a compact JWS")
	}
	header := signature.Signatures[0].Header
	claims := map[string]any{}
	if err := json.Unmarshal(signature.UnsafePayloadWithoutVerification(), &claims); err != nil {
		return nil, refuseFrom(ReasonMalformed, "", err, "payload is not a JSON object")
	}
	issuerURL, _ := claims["iss"].(string)
	iss, ok := v.issuers[issuerURL]
	if !ok {
		return nil, refuseFrom(ReasonUnknownIssuer, issuerURL, nil, "issuer %q is not configured", issuerURL)
	}
	if err := verifySignature(ctx, iss, signature, header); err != nil {
		return nil, err
	}
	result, refusal := v.checkClaims(iss, claims, now)
	if refusal != nil {
		refusal.Issuer = issuerURL
		return nil, refusal
	}
	return result, nil
}

func verifySignature(ctx context.Context, iss *issuer, signature *jose.JSONWebSignature, header jose.Header) error {
	algorithm := jose.SignatureAlgorithm(header.Algorithm)
	keys, err := iss.keys.lookup(ctx, header.KeyID, algorithm)
	if err != nil && len(keys) == 0 {
		return refuseFrom(ReasonKeysUnavailable, iss.config.Issuer, err, "cannot get the issuer's keys")
	}
	if len(keys) == 0 {
		return refuseFrom(ReasonUnknownKey, iss.config.Issuer, nil, "no %s key with kid %q", algorithm, header.KeyID)
	}
	for _, k := range keys {
		if _, err := signature.Verify(k.key); err == nil {
			return nil
		}
	}
	return refuseFrom(ReasonBadSignature, iss.config.Issuer, nil, "signature does not verify with kid %q", header.KeyID)
}

// checkClaims applies the time checks and reads the identity. exp is
// required: a token that never expires could never be revoked.
func (v *Verifier) checkClaims(iss *issuer, claims map[string]any, now time.Time) (*verified, *Error) {
	expires, present, ok := numericDate(claims, "exp")
	if !present || !ok {
		return nil, refuse(ReasonMalformed, "exp is missing or not a number")
	}
	if now.After(expires.Add(v.leeway)) {
		return nil, refuse(ReasonExpired, "expired at %s", expires.UTC().Format(time.RFC3339))
	}
	for _, name := range []string{"nbf", "iat"} {
		at, present, ok := numericDate(claims, name)
		if present && !ok {
			return nil, refuse(ReasonMalformed, "%s is not a number", name)
		}
		if present && at.After(now.Add(v.leeway)) {
			return nil, refuse(ReasonNotYetValid, "%s is %s, in the future", name, at.UTC().Format(time.RFC3339))
		}
	}
	audiences, ok := stringList(claims["aud"], true)
	if !ok {
		return nil, refuse(ReasonMalformed, "aud is neither a string nor an array of strings")
	}
	identity, err := readIdentity(iss, claims)
	if err != nil {
		return nil, err
	}
	identity.ExpiresAt = expires
	return &verified{
		identity:  identity,
		audiences: audiences,
		issuer:    iss,
		until:     earliest(expires, now.Add(v.cacheTTL)),
	}, nil
}

func readIdentity(iss *issuer, claims map[string]any) (Identity, *Error) {
	id := Identity{Principal: iss.config.Principal, Issuer: iss.config.Issuer, Claims: claims}
	if name := iss.config.PrincipalClaim; name != "" {
		id.Principal, _ = claims[name].(string)
		if id.Principal == "" {
			return Identity{}, refuse(ReasonMalformed, "principal claim %q is missing or not a string", name)
		}
	}
	id.Subject, _ = claims["sub"].(string)
	if id.Subject == "" {
		return Identity{}, refuse(ReasonMalformed, "sub is missing or not a string")
	}
	for _, name := range []string{"client_id", "azp"} {
		value, present := claims[name]
		client, ok := value.(string)
		if present && !ok {
			return Identity{}, refuse(ReasonMalformed, "%s is not a string", name)
		}
		if id.Client == "" {
			id.Client = client
		}
	}
	accounts, ok := stringList(claims["accounts"], false)
	if !ok {
		return Identity{}, refuse(ReasonMalformed, "accounts is not an array of strings")
	}
	id.Accounts = accounts
	return id, nil
}

// numericDate reads a NumericDate claim (seconds since the epoch).
func numericDate(claims map[string]any, name string) (at time.Time, present, ok bool) {
	value, present := claims[name]
	if !present {
		return time.Time{}, false, true
	}
	seconds, ok := value.(float64)
	if !ok || math.IsNaN(seconds) || math.Abs(seconds) > 1e12 {
		return time.Time{}, true, false
	}
	whole, fraction := math.Modf(seconds)
	return time.Unix(int64(whole), int64(fraction*1e9)), true, true
}

// stringList reads a claim that is an array of strings (or, when
// singleAllowed, one string). An absent claim is an empty list.
func stringList(value any, singleAllowed bool) ([]string, bool) {
	switch v := value.(type) {
	case nil:
		return nil, true
	case string:
		return []string{v}, singleAllowed
	case []any:
		list := make([]string, 0, len(v))
		for _, item := range v {
			s, ok := item.(string)
			if !ok {
				return nil, false
			}
			list = append(list, s)
		}
		return list, true
	}
	return nil, false
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
