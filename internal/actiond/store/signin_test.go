package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

func grantAndCode(id string, expires time.Time) (store.Grant, store.AuthorizationCode) {
	return store.Grant{ID: id, ClientID: "client-1", Principal: "local", Subject: "ada", Accounts: []string{account}, Scope: "openid"},
		store.AuthorizationCode{Hash: "code-" + id, GrantID: id, RedirectURI: "http://127.0.0.1:5000/cb", CodeChallenge: "challenge", ExpiresAt: expires}
}

// A code is spent by its first presentation; a second one revokes the
// grant, so the refresh token issued from the first no longer works.
func TestAuthorizationCodeIsSingleUse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		fake := clock.NewFake(start)
		s := storetest.Open(t, d, fake)
		must(t, s.RegisterOAuthClient(ctx, store.OAuthClient{ID: "client-1", Metadata: json.RawMessage(`{"client_name":"host"}`)}, store.ClientLimits{}))
		client, err := s.OAuthClient(ctx, "client-1")
		if err != nil || string(client.Metadata) != `{"client_name":"host"}` || client.SecretHash != "" {
			t.Fatalf("client %+v, %v", client, err)
		}
		if _, err := s.OAuthClient(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown client: %v", err)
		}
		grant, code := grantAndCode("g1", start.Add(time.Minute))
		must(t, s.CreateGrant(ctx, grant, code))

		redeemed, g, err := s.RedeemCode(ctx, code.Hash)
		if err != nil || redeemed.RedirectURI != code.RedirectURI || redeemed.CodeChallenge != "challenge" || g.Subject != "ada" || g.Accounts[0] != account {
			t.Fatalf("first redemption: %+v %+v %v", redeemed, g, err)
		}
		must(t, s.IssueRefresh(ctx, store.RefreshToken{Hash: "r1", GrantID: g.ID, ExpiresAt: start.Add(time.Hour)}))
		if _, _, err := s.RedeemCode(ctx, code.Hash); !errors.Is(err, store.ErrSpent) {
			t.Fatalf("second redemption: %v, want ErrSpent", err)
		}
		if _, err := s.RotateRefresh(ctx, "r1", store.RefreshToken{Hash: "r2", ExpiresAt: start.Add(time.Hour)}); !errors.Is(err, store.ErrRevoked) {
			t.Fatalf("refresh after the code was replayed: %v, want ErrRevoked", err)
		}
		if _, _, err := s.RedeemCode(ctx, "never-issued"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown code: %v", err)
		}
		// An expired code is refused.
		grant, code = grantAndCode("g2", start.Add(time.Minute))
		must(t, s.CreateGrant(ctx, grant, code))
		fake.Advance(time.Minute)
		if _, _, err := s.RedeemCode(ctx, code.Hash); !errors.Is(err, store.ErrExpired) {
			t.Fatalf("expired code: %v", err)
		}
	})
}

// Rotation spends each refresh token once: the next works, the spent one
// presented again revokes the whole chain; expiry and revocation refuse.
func TestRefreshTokensRotate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		fake := clock.NewFake(start)
		s := storetest.Open(t, d, fake)
		grant, code := grantAndCode("g1", start.Add(time.Minute))
		must(t, s.CreateGrant(ctx, grant, code))
		must(t, s.IssueRefresh(ctx, store.RefreshToken{Hash: "r1", GrantID: "g1", ExpiresAt: start.Add(time.Hour)}))
		g, err := s.RotateRefresh(ctx, "r1", store.RefreshToken{Hash: "r2", ExpiresAt: start.Add(2 * time.Hour)})
		if err != nil || g.ID != "g1" || g.Subject != "ada" {
			t.Fatalf("rotation: %+v %v", g, err)
		}
		if _, err := s.RotateRefresh(ctx, "r2", store.RefreshToken{Hash: "r3", ExpiresAt: start.Add(2 * time.Hour)}); err != nil {
			t.Fatalf("rotating the next token: %v", err)
		}
		if _, err := s.RotateRefresh(ctx, "r1", store.RefreshToken{Hash: "x", ExpiresAt: start.Add(2 * time.Hour)}); !errors.Is(err, store.ErrSpent) {
			t.Fatalf("reusing a spent token: %v, want ErrSpent", err)
		}
		if _, err := s.RotateRefresh(ctx, "r3", store.RefreshToken{Hash: "r4", ExpiresAt: start.Add(2 * time.Hour)}); !errors.Is(err, store.ErrRevoked) {
			t.Fatalf("the chain after a reuse: %v, want ErrRevoked", err)
		}
		if g, err := s.RefreshGrant(ctx, "r3"); err != nil || g.RevokedAt.IsZero() {
			t.Fatalf("grant of r3: %+v %v", g, err)
		}

		grant, code = grantAndCode("g2", start.Add(time.Minute))
		must(t, s.CreateGrant(ctx, grant, code))
		must(t, s.IssueRefresh(ctx, store.RefreshToken{Hash: "s1", GrantID: "g2", ExpiresAt: start.Add(time.Hour)}))
		must(t, s.RevokeGrant(ctx, "g2"))
		if _, err := s.RotateRefresh(ctx, "s1", store.RefreshToken{Hash: "s2", ExpiresAt: start.Add(2 * time.Hour)}); !errors.Is(err, store.ErrRevoked) {
			t.Fatalf("revoked: %v", err)
		}
		grant, code = grantAndCode("g3", start.Add(time.Minute))
		must(t, s.CreateGrant(ctx, grant, code))
		must(t, s.IssueRefresh(ctx, store.RefreshToken{Hash: "t1", GrantID: "g3", ExpiresAt: start.Add(time.Hour)}))
		fake.Advance(time.Hour)
		if _, err := s.RotateRefresh(ctx, "t1", store.RefreshToken{Hash: "t2", ExpiresAt: start.Add(3 * time.Hour)}); !errors.Is(err, store.ErrExpired) {
			t.Fatalf("expired: %v", err)
		}
	})
}

// Two hosts presenting one refresh token at once: exactly one rotation
// wins; the other is a reuse, which revokes the chain.
func TestConcurrentRefreshHasOneWinner(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := storetest.Open(t, d, clock.NewFake(start))
		grant, code := grantAndCode("g1", start.Add(time.Minute))
		must(t, s.CreateGrant(ctx, grant, code))
		must(t, s.IssueRefresh(ctx, store.RefreshToken{Hash: "r1", GrantID: "g1", ExpiresAt: start.Add(time.Hour)}))
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.RotateRefresh(ctx, "r1", store.RefreshToken{Hash: "next-" + string(rune('a'+i)), ExpiresAt: start.Add(time.Hour)})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrSpent):
				t.Fatalf("unexpected error %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d rotations won, want 1: %v", won, errs)
		}
	})
}

// Settings are shared through the database: the second writer learns what
// it replaced.
func TestSettings(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := storetest.Open(t, d, clock.NewFake(start))
		if _, ok, err := s.Setting(ctx, store.SettingPublicURL); ok || err != nil {
			t.Fatalf("unset: %v %v", ok, err)
		}
		if previous, err := s.PutSetting(ctx, store.SettingPublicURL, "http://a"); previous != "" || err != nil {
			t.Fatalf("first put: %q %v", previous, err)
		}
		if previous, err := s.PutSetting(ctx, store.SettingPublicURL, "http://b"); previous != "http://a" || err != nil {
			t.Fatalf("second put: %q %v", previous, err)
		}
		if v, ok, err := s.Setting(ctx, store.SettingPublicURL); v != "http://b" || !ok || err != nil {
			t.Fatalf("read: %q %v %v", v, ok, err)
		}
	})
}

// Open with Existing refuses a place that holds no database, creating
// nothing, and opens one that does.
func TestOpenExisting(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		opts := storetest.Options(t, d)
		opts.Existing = true
		_, err := store.Open(ctx, opts)
		if !errors.Is(err, store.ErrNoDatabase) || !strings.Contains(err.Error(), "no actiond database") {
			t.Fatalf("empty: %v", err)
		}
		if d == store.SQLite {
			if _, err := os.Stat(filepath.Join(opts.DataDir, store.DatabaseFile)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a database was created: %v", err)
			}
		}
		opts.Existing = false
		s, err := store.Open(ctx, opts)
		must(t, err)
		s.Close()
		opts.Existing = true
		s, err = store.Open(ctx, opts)
		must(t, err)
		s.Close()
	})
}
