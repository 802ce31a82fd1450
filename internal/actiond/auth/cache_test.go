package auth

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// A cached verification is reused until exp, never past it: after exp the
// token is verified afresh (the leeway applies) and then refused.
func TestCacheHonoursExp(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	token := e.token(t, mcpAudience, func(c map[string]any) { c["exp"] = start.Add(2 * time.Minute).Unix() })
	for range 3 {
		if _, err := e.verify(token, mcpAudience); err != nil {
			t.Fatal(err)
		}
	}
	if cold := e.verifier.cold.Load(); cold != 1 {
		t.Fatalf("%d full verifications of one token; want 1", cold)
	}
	e.clock.Advance(time.Minute + 59*time.Second)
	if _, err := e.verify(token, mcpAudience); err != nil || e.verifier.cold.Load() != 1 {
		t.Fatalf("cached token before exp: %v, cold %d", err, e.verifier.cold.Load())
	}
	e.clock.Advance(2 * time.Second) // past exp, within the leeway
	if _, err := e.verify(token, mcpAudience); err != nil {
		t.Fatalf("within the leeway: %v", err)
	}
	if cold := e.verifier.cold.Load(); cold != 2 {
		t.Fatalf("cache served a token past its exp (cold %d)", cold)
	}
	e.clock.Advance(time.Minute)
	_, err := e.verify(token, mcpAudience)
	wantReason(t, err, ReasonExpired)
}

// A long-lived token is cached for five minutes at most, so a withdrawn key
// stops working within that time.
func TestCacheEntriesLiveFiveMinutesAtMost(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	token := e.token(t, mcpAudience, func(c map[string]any) { c["exp"] = start.Add(time.Hour).Unix() })
	must(t, first(e.verify(token, mcpAudience)))
	e.clock.Advance(4*time.Minute + 59*time.Second)
	must(t, first(e.verify(token, mcpAudience)))
	if cold := e.verifier.cold.Load(); cold != 1 {
		t.Fatalf("cold %d; want 1", cold)
	}
	e.clock.Advance(time.Second)
	must(t, first(e.verify(token, mcpAudience)))
	if cold := e.verifier.cold.Load(); cold != 2 {
		t.Fatalf("cold %d; want 2 after five minutes", cold)
	}
}

// ACT-061, ACT-063: the cache is keyed by token, and the per-endpoint checks
// run on every hit.
func TestCachedTokenStillCheckedPerEndpoint_ACT061_ACT063(t *testing.T) {
	e := newEnv(t, jose.EdDSA)
	token := e.token(t, mcpAudience, nil)
	must(t, first(e.verify(token, mcpAudience)))
	_, err := e.verify(token, graphQLAudience)
	wantReason(t, err, ReasonWrongAudience)

	claims := claimsAt(start, mcpAudience)
	claims["iss"] = iamIssuer
	claims["aud"] = []string{mcpAudience, graphQLAudience}
	iam := e.iam.sign(t, claims)
	must(t, first(e.verify(iam, graphQLAudience)))
	_, err = e.verify(iam, mcpAudience)
	wantReason(t, err, ReasonUnknownIssuer)
	if cold := e.verifier.cold.Load(); cold != 2 {
		t.Fatalf("cold %d; want 2 (each token verified once)", cold)
	}
}

// The cache holds at most CacheSize entries and drops the oldest first.
func TestCacheIsBounded(t *testing.T) {
	e := newEnv(t, jose.EdDSA, func(o *VerifierOptions) { o.CacheSize = 3 })
	var tokens []string
	for i := range 4 {
		tokens = append(tokens, e.token(t, mcpAudience, func(c map[string]any) { c["jti"] = fmt.Sprint(i) }))
		must(t, first(e.verify(tokens[i], mcpAudience)))
	}
	if n := e.verifier.cache.len(); n != 3 {
		t.Fatalf("cache holds %d; want 3", n)
	}
	must(t, first(e.verify(tokens[3], mcpAudience)))
	if cold := e.verifier.cold.Load(); cold != 4 {
		t.Fatalf("newest token not cached (cold %d)", cold)
	}
	must(t, first(e.verify(tokens[0], mcpAudience)))
	if cold := e.verifier.cold.Load(); cold != 5 {
		t.Fatalf("oldest token not evicted (cold %d)", cold)
	}
}

// An entry dropped on expiry and inserted again is not evicted by the ring's
// record of its first insertion.
func TestCacheReinsertedKeySurvivesStaleRingRecord(t *testing.T) {
	c := newVerifiedCache(2)
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	c.put(a, &verified{until: start.Add(time.Second)})
	if _, ok := c.get(a, start.Add(2*time.Second)); ok {
		t.Fatal("expired entry served")
	}
	c.put(a, &verified{until: start.Add(time.Hour)})
	c.put(b, &verified{until: start.Add(time.Hour)})
	if _, ok := c.get(a, start); !ok {
		t.Fatal("re-inserted entry evicted by its stale ring record")
	}
	if _, ok := c.get(b, start); !ok {
		t.Fatal("newest entry missing")
	}
}

func TestCacheDisabled(t *testing.T) {
	e := newEnv(t, jose.EdDSA, func(o *VerifierOptions) { o.CacheSize = -1 })
	token := e.token(t, mcpAudience, nil)
	must(t, first(e.verify(token, mcpAudience)))
	must(t, first(e.verify(token, mcpAudience)))
	if cold := e.verifier.cold.Load(); cold != 2 {
		t.Fatalf("cold %d with the cache disabled; want 2", cold)
	}
}

func first(_ Identity, err error) error { return err }
