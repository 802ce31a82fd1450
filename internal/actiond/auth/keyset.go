package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/incusspawn/isx/internal/clock"
)

// maxJWKSBytes bounds a fetched JWKS document; real ones are a few KiB.
const maxJWKSBytes = 1 << 20

// minRSABits refuses RSA keys too short to trust.
const minRSABits = 2048

// publicKey is one usable verification key of an issuer.
type publicKey struct {
	id        string
	algorithm jose.SignatureAlgorithm // "" when the JWK does not pin one
	key       any                     // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// fits reports whether the key may verify a signature made with algorithm.
// Checking the key type against the header's alg is what stops algorithm
// confusion: an RSA key never verifies anything but RS256.
func (k publicKey) fits(algorithm jose.SignatureAlgorithm) bool {
	if k.algorithm != "" && k.algorithm != algorithm {
		return false
	}
	switch key := k.key.(type) {
	case *rsa.PublicKey:
		return algorithm == jose.RS256
	case *ecdsa.PublicKey:
		return algorithm == jose.ES256 && key.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return algorithm == jose.EdDSA
	}
	return false
}

type keyMap struct {
	byID      map[string][]publicKey
	all       []publicKey
	fetchedAt time.Time
}

func (m *keyMap) find(id string, algorithm jose.SignatureAlgorithm) []publicKey {
	candidates := m.all
	if id != "" {
		candidates = m.byID[id]
	}
	var found []publicKey
	for _, k := range candidates {
		if k.fits(algorithm) {
			found = append(found, k)
		}
	}
	return found
}

// parseKeySet keeps the usable public signing keys of a JWKS document. Keys
// it cannot use (encryption keys, symmetric keys, unknown types, short RSA
// keys, other curves) are skipped rather than failing the whole set, because
// real issuers publish such keys beside their signing keys.
func parseKeySet(document []byte) (*keyMap, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(document, &set); err != nil {
		return nil, fmt.Errorf("the JWKS is not a JSON object with a keys array: %w", err)
	}
	m := &keyMap{byID: map[string][]publicKey{}}
	for _, raw := range set.Keys {
		k, ok := usableKey(raw)
		if !ok {
			continue
		}
		m.all = append(m.all, k)
		m.byID[k.id] = append(m.byID[k.id], k)
	}
	if len(m.all) == 0 {
		return nil, errors.New("the JWKS has no usable signing key (RSA ≥ 2048 bits, P-256 or Ed25519)")
	}
	return m, nil
}

func usableKey(raw json.RawMessage) (publicKey, bool) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil || !jwk.Valid() {
		return publicKey{}, false
	}
	if jwk.Use != "" && jwk.Use != "sig" {
		return publicKey{}, false
	}
	public := jwk.Public()
	k := publicKey{id: jwk.KeyID, algorithm: jose.SignatureAlgorithm(jwk.Algorithm), key: public.Key}
	switch key := public.Key.(type) {
	case *rsa.PublicKey:
		if key.N.BitLen() < minRSABits {
			return publicKey{}, false
		}
	case *ecdsa.PublicKey:
		if key.Curve != elliptic.P256() {
			return publicKey{}, false
		}
	case ed25519.PublicKey:
	default:
		return publicKey{}, false
	}
	if k.algorithm != "" && !slices.Contains(acceptedAlgorithms, k.algorithm) {
		return publicKey{}, false
	}
	return k, true
}

// keySet is one issuer's keys: fixed (inline JWKS) or fetched from a URL and
// cached. Lookups read an atomic pointer, so the hot path takes no lock.
type keySet struct {
	url         string // "" for a fixed set
	client      *http.Client
	clock       clock.Clock
	minInterval time.Duration // least time between two fetches
	maxAge      time.Duration // fetched keys older than this are refreshed when next used
	timeout     time.Duration

	current atomic.Pointer[keyMap]

	fetchMu     sync.Mutex // one fetch at a time; guards lastAttempt and fetches
	lastAttempt time.Time
	fetches     int
}

func fixedKeySet(m *keyMap) *keySet {
	s := &keySet{}
	s.current.Store(m)
	return s
}

// lookup returns the keys that may verify a token with this kid and alg. An
// unknown kid, or keys older than maxAge, trigger a refresh of a fetched set,
// at most once per minInterval however many tokens ask, so that a flood of
// made-up kids cannot hammer the issuer.
func (s *keySet) lookup(ctx context.Context, id string, algorithm jose.SignatureAlgorithm) ([]publicKey, error) {
	m := s.current.Load()
	if m != nil {
		found := m.find(id, algorithm)
		if s.url == "" || (len(found) > 0 && !s.stale(m)) {
			return found, nil
		}
	}
	refreshed, err := s.refresh(ctx, m)
	if refreshed == nil {
		return nil, err
	}
	// A failed refresh of a stale set keeps the old keys working: an issuer
	// outage should not lock everyone out.
	return refreshed.find(id, algorithm), nil
}

func (s *keySet) stale(m *keyMap) bool {
	return s.maxAge > 0 && s.clock.Now().Sub(m.fetchedAt) >= s.maxAge
}

// refresh fetches the set unless another caller already replaced seen or the
// last attempt is too recent. It returns the newest known keys (possibly
// seen) and the fetch error, if any.
func (s *keySet) refresh(ctx context.Context, seen *keyMap) (*keyMap, error) {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	if m := s.current.Load(); m != seen {
		return m, nil
	}
	now := s.clock.Now()
	if !s.lastAttempt.IsZero() && now.Sub(s.lastAttempt) < s.minInterval {
		if seen == nil {
			return nil, fmt.Errorf("no keys yet for %s and the last fetch was under %s ago", s.url, s.minInterval)
		}
		return seen, nil
	}
	s.lastAttempt = now
	s.fetches++
	m, err := s.fetch(ctx)
	if err != nil {
		return seen, err
	}
	m.fetchedAt = now
	s.current.Store(m)
	return m, nil
}

// fetch reads the JWKS. It does not inherit the request's cancellation: a
// caller hanging up must not spend the rate limit on a fetch it aborted.
func (s *keySet) fetch(ctx context.Context) (*keyMap, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", s.url, err)
	}
	request.Header.Set("Accept", "application/json")
	response, err := s.client.Do(request)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", s.url, err)
	}
	defer response.Body.Close()
	if response.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS %s: HTTP %d", s.url, response.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(response.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", s.url, err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("fetch JWKS %s: document larger than %d bytes", s.url, maxJWKSBytes)
	}
	m, err := parseKeySet(body)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", s.url, err)
	}
	return m, nil
}

// fetchCount is for tests: how many fetches were attempted.
func (s *keySet) fetchCount() int {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	return s.fetches
}
