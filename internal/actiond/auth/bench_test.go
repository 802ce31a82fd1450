package auth

import (
	"context"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/incusspawn/isx/internal/clock"
)

// benchVerifier trusts key inline; cacheSize -1 makes every verification
// cold (parse, signature, claims).
func benchVerifier(b *testing.B, key testKey, cacheSize int) *Verifier {
	b.Helper()
	v, err := NewVerifier(VerifierOptions{
		Clock:     clock.NewFake(start),
		CacheSize: cacheSize,
		Issuers: []IssuerConfig{{Issuer: signInIssuer, JWKS: keySetJSON(b, key.public()),
			Principal: signInName, Audiences: []string{mcpAudience, graphQLAudience}}},
	})
	must(b, err)
	return v
}

// BenchmarkVerifyCold is one full verification per request, per algorithm.
func BenchmarkVerifyCold(b *testing.B) {
	for _, algorithm := range algorithms {
		b.Run(string(algorithm), func(b *testing.B) {
			key := newTestKey(b, algorithm, "k")
			v := benchVerifier(b, key, -1)
			token := key.sign(b, claimsAt(start, mcpAudience))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, token, mcpAudience); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifyColdParallel is the same on all cores: requests per second
// when no token repeats.
func BenchmarkVerifyColdParallel(b *testing.B) {
	for _, algorithm := range algorithms {
		b.Run(string(algorithm), func(b *testing.B) {
			key := newTestKey(b, algorithm, "k")
			v := benchVerifier(b, key, -1)
			token := key.sign(b, claimsAt(start, mcpAudience))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := v.Verify(context.Background(), token, mcpAudience); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkVerifyCached is the hot path: a host repeating its token.
func BenchmarkVerifyCached(b *testing.B) {
	key := newTestKey(b, jose.EdDSA, "k")
	v := benchVerifier(b, key, DefaultCacheSize)
	token := key.sign(b, claimsAt(start, mcpAudience))
	ctx := context.Background()
	must(b, first(v.Verify(ctx, token, mcpAudience)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, token, mcpAudience); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyCachedParallel(b *testing.B) {
	key := newTestKey(b, jose.EdDSA, "k")
	v := benchVerifier(b, key, DefaultCacheSize)
	tokens := make([]string, 64) // many hosts, each repeating its token
	for i := range tokens {
		claims := claimsAt(start, mcpAudience)
		claims["jti"] = i
		tokens[i] = key.sign(b, claims)
		must(b, first(v.Verify(context.Background(), tokens[i], mcpAudience)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := v.Verify(context.Background(), tokens[i%len(tokens)], mcpAudience); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
