package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/incusspawn/isx/internal/coded"
)

// The sign-in's records: the clients hosts registered (RFC 7591), the grants
// people approved, the authorization codes and refresh tokens that stand for
// a grant. Codes and refresh tokens are kept only as hashes, so a copy of the
// database does not hand out sessions.

// Codes of the sign-in's refusals.
const (
	CodeGrantSpent   = "store_grant_spent"
	CodeGrantRevoked = "store_grant_revoked"
	CodeGrantExpired = "store_grant_expired"
)

// Errors of RedeemCode, RotateRefresh and RevokeRefresh besides ErrNotFound.
var (
	// ErrSpent is a code or refresh token presented a second time. Its grant
	// is revoked by then: a second use means someone else holds a copy.
	ErrSpent = coded.New(CodeGrantSpent, "the code or refresh token was already used; its sign-in is revoked")
	// ErrRevoked is a grant that was revoked.
	ErrRevoked = coded.New(CodeGrantRevoked, "the sign-in was revoked")
	// ErrExpired is a code or refresh token past its expiry.
	ErrExpired = coded.New(CodeGrantExpired, "the code or refresh token has expired")
)

// OAuthClient is a registered client. Metadata is its registration as the
// client sent it, normalised; SecretHash is empty for a public client.
type OAuthClient struct {
	ID         string
	SecretHash string
	Metadata   json.RawMessage
	CreatedAt  time.Time
}

// Grant is one approval: a person let a client act as a subject.
type Grant struct {
	ID        string   `json:"id"`
	ClientID  string   `json:"clientId"`
	Principal string   `json:"principal"`
	Subject   string   `json:"subject"`
	Accounts  []string `json:"accounts"`
	Scope     string   `json:"scope"`
	// Resource is the RFC 8707 resource the client named, if any.
	Resource  string    `json:"resource,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
}

// AuthorizationCode is a grant's one-time code, as its hash, with what the
// token request must match.
type AuthorizationCode struct {
	Hash          string
	GrantID       string
	RedirectURI   string
	CodeChallenge string
	ExpiresAt     time.Time
}

// RefreshToken is one refresh token of a grant, as its hash. A grant's
// refresh tokens form a chain: each use spends one and issues the next.
type RefreshToken struct {
	Hash      string
	GrantID   string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// ClientLimits bound the registered clients, so that whoever may reach the
// registration endpoint cannot fill the table: at most PerHour
// registrations in any hour and Total clients in all, after the clients
// never used (no sign-in ever completed) for Unused are pruned. A zero
// field takes its default.
type ClientLimits struct {
	PerHour int
	Total   int
	Unused  time.Duration
}

// Defaults of ClientLimits.
const (
	DefaultClientsPerHour = 60
	DefaultClientsTotal   = 1000
	DefaultClientUnused   = 7 * 24 * time.Hour
)

func (l ClientLimits) withDefaults() ClientLimits {
	if l.PerHour <= 0 {
		l.PerHour = DefaultClientsPerHour
	}
	if l.Total <= 0 {
		l.Total = DefaultClientsTotal
	}
	if l.Unused <= 0 {
		l.Unused = DefaultClientUnused
	}
	return l
}

// CodeClientLimit is a registration past ClientLimits.
const CodeClientLimit = "store_client_limit"

// ClientLimitError is a registration refused by ClientLimits; RetryAfter is
// when one may succeed again, zero when only pruning (or an
// administrator) can make room.
type ClientLimitError struct {
	coded.Base
	RetryAfter time.Duration
}

// RegisterOAuthClient stores a new client within limits: it first prunes
// the clients never used for limits.Unused, then refuses with a
// *ClientLimitError past the hour's or the total cap.
func (s *Store) RegisterOAuthClient(ctx context.Context, c OAuthClient, limits ClientLimits) error {
	limits = limits.withDefaults()
	return s.Write(ctx, func(tx *Tx) error {
		if err := tx.pruneUnusedClients(ctx, limits.Unused); err != nil {
			return err
		}
		var total, lastHour int
		var oldest sql.NullInt64
		hourAgo := micros(tx.now.Add(-time.Hour))
		if err := tx.queryRow(ctx, "SELECT COUNT(*) FROM oauth_clients").Scan(&total); err != nil {
			return fmt.Errorf("store: count OAuth clients: %w", err)
		}
		if err := tx.queryRow(ctx, "SELECT COUNT(*), MIN(created_at) FROM oauth_clients WHERE created_at > ?", hourAgo).Scan(&lastHour, &oldest); err != nil {
			return fmt.Errorf("store: count OAuth clients: %w", err)
		}
		if total >= limits.Total {
			return &ClientLimitError{Base: coded.Base{Code: CodeClientLimit,
				Message: fmt.Sprintf("%d clients are registered, the most this server keeps; a client that never signs in is forgotten after %s", total, limits.Unused),
				Hint:    "Sign in with a client you registered before, or wait until unused registrations are pruned."}}
		}
		if lastHour >= limits.PerHour {
			retry := time.Hour
			if oldest.Valid {
				retry = fromMicros(oldest.Int64).Add(time.Hour).Sub(tx.now)
			}
			return &ClientLimitError{Base: coded.Base{Code: CodeClientLimit,
				Message: fmt.Sprintf("%d clients registered in the last hour, the most this server accepts in an hour", lastHour),
				Hint:    "Register again later; a host registers once and keeps its client_id."}, RetryAfter: max(retry, time.Second)}
		}
		_, err := tx.exec(ctx, "INSERT INTO oauth_clients (id, secret_hash, metadata, created_at) VALUES (?, ?, ?, ?)",
			c.ID, c.SecretHash, string(c.Metadata), micros(tx.now))
		if err != nil {
			return fmt.Errorf("store: register OAuth client: %w", err)
		}
		return nil
	})
}

// pruneUnusedClients deletes the clients registered longer than unused ago
// with which nobody ever signed in.
func (tx *Tx) pruneUnusedClients(ctx context.Context, unused time.Duration) error {
	_, err := tx.exec(ctx, `DELETE FROM oauth_clients WHERE created_at < ?
		AND NOT EXISTS (SELECT 1 FROM oauth_grants WHERE oauth_grants.client_id = oauth_clients.id)`, micros(tx.now.Add(-unused)))
	if err != nil {
		return fmt.Errorf("store: prune unused OAuth clients: %w", err)
	}
	return nil
}

// OAuthClient reads a registered client.
func (s *Store) OAuthClient(ctx context.Context, id string) (*OAuthClient, error) {
	c := &OAuthClient{ID: id}
	var metadata string
	var created int64
	err := s.reader.QueryRowContext(ctx, rebind(s.dialect, "SELECT secret_hash, metadata, created_at FROM oauth_clients WHERE id = ?"), id).
		Scan(&c.SecretHash, &metadata, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: OAuth client %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read OAuth client: %w", err)
	}
	c.Metadata, c.CreatedAt = json.RawMessage(metadata), fromMicros(created)
	return c, nil
}

// CreateGrant stores an approval and its authorization code together.
func (s *Store) CreateGrant(ctx context.Context, g Grant, code AuthorizationCode) error {
	accounts, err := json.Marshal(g.Accounts)
	if err != nil {
		return fmt.Errorf("store: encode grant: %w", err)
	}
	return s.Write(ctx, func(tx *Tx) error {
		if err := tx.pruneSignIn(ctx); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `INSERT INTO oauth_grants (id, client_id, principal, subject, accounts, scope, resource, created_at, revoked_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)`, g.ID, g.ClientID, g.Principal, g.Subject, string(accounts), g.Scope, g.Resource, micros(tx.now))
		if err != nil {
			return fmt.Errorf("store: create grant: %w", err)
		}
		_, err = tx.exec(ctx, `INSERT INTO oauth_codes (hash, grant_id, redirect_uri, code_challenge, expires_at, used_at)
			VALUES (?, ?, ?, ?, ?, 0)`, code.Hash, g.ID, code.RedirectURI, code.CodeChallenge, micros(code.ExpiresAt))
		if err != nil {
			return fmt.Errorf("store: create authorization code: %w", err)
		}
		return nil
	})
}

// RedeemCode spends an authorization code and returns it with its grant.
// A code is spent by its first presentation, whatever follows: a second one
// revokes the grant and everything issued from it (ErrSpent).
func (s *Store) RedeemCode(ctx context.Context, hash string) (*AuthorizationCode, *Grant, error) {
	var code *AuthorizationCode
	var grant *Grant
	var refusal error
	// A refusal that revokes must still commit: the function reports it
	// through refusal and returns nil.
	err := s.Write(ctx, func(tx *Tx) error {
		code, grant, refusal = nil, nil, nil
		res, err := tx.exec(ctx, "UPDATE oauth_codes SET used_at = ? WHERE hash = ? AND used_at = 0", micros(tx.now), hash)
		if err != nil {
			return fmt.Errorf("store: redeem code: %w", err)
		}
		won, _ := res.RowsAffected()
		c, used, err := tx.readCode(ctx, hash)
		if err != nil {
			return err
		}
		if c == nil {
			refusal = fmt.Errorf("store: authorization code: %w", ErrNotFound)
			return nil
		}
		if won == 0 && used {
			refusal = ErrSpent
			return tx.revokeGrant(ctx, c.GrantID)
		}
		g, err := tx.readGrant(ctx, c.GrantID)
		if err != nil {
			return err
		}
		switch {
		case !g.RevokedAt.IsZero():
			refusal = ErrRevoked
		case !tx.now.Before(c.ExpiresAt):
			refusal = ErrExpired
		default:
			code, grant = c, g
		}
		return nil
	})
	if err == nil {
		err = refusal
	}
	return code, grant, err
}

func (tx *Tx) readCode(ctx context.Context, hash string) (*AuthorizationCode, bool, error) {
	c := &AuthorizationCode{Hash: hash}
	var expires, used int64
	err := tx.queryRow(ctx, "SELECT grant_id, redirect_uri, code_challenge, expires_at, used_at FROM oauth_codes WHERE hash = ?", hash).
		Scan(&c.GrantID, &c.RedirectURI, &c.CodeChallenge, &expires, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: read authorization code: %w", err)
	}
	c.ExpiresAt = fromMicros(expires)
	return c, used != 0, nil
}

func (tx *Tx) readGrant(ctx context.Context, id string) (*Grant, error) {
	g := &Grant{ID: id}
	var accounts string
	var created, revoked int64
	err := tx.queryRow(ctx, "SELECT client_id, principal, subject, accounts, scope, resource, created_at, revoked_at FROM oauth_grants WHERE id = ?", id).
		Scan(&g.ClientID, &g.Principal, &g.Subject, &accounts, &g.Scope, &g.Resource, &created, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: grant %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read grant: %w", err)
	}
	if err := json.Unmarshal([]byte(accounts), &g.Accounts); err != nil {
		return nil, fmt.Errorf("store: read grant %s: accounts: %w", id, err)
	}
	g.CreatedAt, g.RevokedAt = fromMicros(created), fromMicros(revoked)
	return g, nil
}

func (tx *Tx) revokeGrant(ctx context.Context, id string) error {
	if _, err := tx.exec(ctx, "UPDATE oauth_grants SET revoked_at = ? WHERE id = ? AND revoked_at = 0", micros(tx.now), id); err != nil {
		return fmt.Errorf("store: revoke grant: %w", err)
	}
	return nil
}

// IssueRefresh stores the first refresh token of a grant.
func (s *Store) IssueRefresh(ctx context.Context, t RefreshToken) error {
	return s.Write(ctx, func(tx *Tx) error { return tx.insertRefresh(ctx, t) })
}

func (tx *Tx) insertRefresh(ctx context.Context, t RefreshToken) error {
	_, err := tx.exec(ctx, "INSERT INTO oauth_refresh_tokens (hash, grant_id, created_at, expires_at, used_at) VALUES (?, ?, ?, ?, 0)",
		t.Hash, t.GrantID, micros(tx.now), micros(t.ExpiresAt))
	if err != nil {
		return fmt.Errorf("store: issue refresh token: %w", err)
	}
	return nil
}

// RotateRefresh spends the refresh token whose hash is given and stores next
// in its place, in the same grant; it returns the grant. A token presented
// a second time revokes the grant (ErrSpent); a revoked grant's or an
// expired token is refused and issues nothing.
func (s *Store) RotateRefresh(ctx context.Context, hash string, next RefreshToken) (*Grant, error) {
	var grant *Grant
	var refusal error
	err := s.Write(ctx, func(tx *Tx) error {
		grant, refusal = nil, nil
		res, err := tx.exec(ctx, "UPDATE oauth_refresh_tokens SET used_at = ? WHERE hash = ? AND used_at = 0", micros(tx.now), hash)
		if err != nil {
			return fmt.Errorf("store: rotate refresh token: %w", err)
		}
		won, _ := res.RowsAffected()
		current, used, err := tx.readRefresh(ctx, hash)
		if err != nil {
			return err
		}
		if current == nil {
			refusal = fmt.Errorf("store: refresh token: %w", ErrNotFound)
			return nil
		}
		if won == 0 && used {
			refusal = ErrSpent
			return tx.revokeGrant(ctx, current.GrantID)
		}
		g, err := tx.readGrant(ctx, current.GrantID)
		if err != nil {
			return err
		}
		switch {
		case !g.RevokedAt.IsZero():
			refusal = ErrRevoked
			return nil
		case !tx.now.Before(current.ExpiresAt):
			refusal = ErrExpired
			return nil
		}
		next.GrantID = g.ID
		if err := tx.pruneSignIn(ctx); err != nil {
			return err
		}
		if err := tx.insertRefresh(ctx, next); err != nil {
			return err
		}
		grant = g
		return nil
	})
	if err == nil {
		err = refusal
	}
	return grant, err
}

func (tx *Tx) readRefresh(ctx context.Context, hash string) (*RefreshToken, bool, error) {
	t := &RefreshToken{Hash: hash}
	var created, expires, used int64
	err := tx.queryRow(ctx, "SELECT grant_id, created_at, expires_at, used_at FROM oauth_refresh_tokens WHERE hash = ?", hash).
		Scan(&t.GrantID, &created, &expires, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: read refresh token: %w", err)
	}
	t.CreatedAt, t.ExpiresAt = fromMicros(created), fromMicros(expires)
	return t, used != 0, nil
}

// RefreshGrant returns the grant of a refresh token, spent or not.
func (s *Store) RefreshGrant(ctx context.Context, hash string) (*Grant, error) {
	var grant *Grant
	err := s.Read(ctx, func(tx *Tx) error {
		t, _, err := tx.readRefresh(ctx, hash)
		if err != nil {
			return err
		}
		if t == nil {
			return fmt.Errorf("store: refresh token: %w", ErrNotFound)
		}
		grant, err = tx.readGrant(ctx, t.GrantID)
		return err
	})
	return grant, err
}

// RevokeGrant revokes a grant: none of its refresh tokens works again.
func (s *Store) RevokeGrant(ctx context.Context, id string) error {
	return s.Write(ctx, func(tx *Tx) error { return tx.revokeGrant(ctx, id) })
}

// spentKeep is how long spent codes and tokens are kept past their expiry:
// a copy presented within it is recognised as a second use.
const spentKeep = 24 * time.Hour

// pruneSignIn deletes codes and refresh tokens long past their expiry, so
// that rotating every few minutes does not grow the tables for ever.
func (tx *Tx) pruneSignIn(ctx context.Context) error {
	before := micros(tx.now.Add(-spentKeep))
	if _, err := tx.exec(ctx, "DELETE FROM oauth_codes WHERE expires_at < ?", before); err != nil {
		return fmt.Errorf("store: prune authorization codes: %w", err)
	}
	if _, err := tx.exec(ctx, "DELETE FROM oauth_refresh_tokens WHERE expires_at < ?", before); err != nil {
		return fmt.Errorf("store: prune refresh tokens: %w", err)
	}
	return nil
}

// schemaSignIn holds the sign-in's tables and the settings every process on
// one database shares.
const schemaSignIn = `
CREATE TABLE IF NOT EXISTS settings (
	name       TEXT PRIMARY KEY,
	value      TEXT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS oauth_clients (
	id          TEXT PRIMARY KEY,
	secret_hash TEXT NOT NULL,
	metadata    TEXT NOT NULL,
	created_at  BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS oauth_grants (
	id         TEXT PRIMARY KEY,
	client_id  TEXT NOT NULL,
	principal  TEXT NOT NULL,
	subject    TEXT NOT NULL,
	accounts   TEXT NOT NULL,
	scope      TEXT NOT NULL,
	resource   TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	revoked_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS oauth_codes (
	hash           TEXT PRIMARY KEY,
	grant_id       TEXT NOT NULL,
	redirect_uri   TEXT NOT NULL,
	code_challenge TEXT NOT NULL,
	expires_at     BIGINT NOT NULL,
	used_at        BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS oauth_codes_expiry ON oauth_codes (expires_at);
CREATE TABLE IF NOT EXISTS oauth_refresh_tokens (
	hash       TEXT PRIMARY KEY,
	grant_id   TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	used_at    BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS oauth_refresh_tokens_expiry ON oauth_refresh_tokens (expires_at);
`
