package auth

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Identity is who a verified token speaks for. Accounts and Claims may be
// shared with other callers of the same token (verifications are cached):
// treat them as read-only.
type Identity struct {
	// Principal is the issuer-level identity: fixed per issuer, or read from
	// the issuer's principal claim (the local issuer's `principal`).
	Principal string
	// Subject is the `sub` claim: the user.
	Subject string
	// Client is the OAuth client: `client_id`, or `azp` when that is absent.
	Client string
	// Accounts is the `accounts` claim.
	Accounts []string
	// Claims holds every claim of the token as decoded JSON (numbers are
	// float64).
	Claims    map[string]any
	Issuer    string
	ExpiresAt time.Time
}

// HasAccount reports whether account is one of the identity's accounts: an
// MCP endpoint's <account_id> must be (ACT-069).
func (id Identity) HasAccount(account string) bool {
	return account != "" && slices.Contains(id.Accounts, account)
}

type identityKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity NewContext stored in ctx.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// MCPAudience is the audience of tokens for a region's MCP endpoints:
// <public-url>/mcp (ACT-059). One audience serves every MCP server of the
// region, so a token obtained at one server works at the others (ACT-060).
func MCPAudience(publicURL string) string {
	return trimURL(publicURL) + "/mcp"
}

// GraphQLAudience is the audience of tokens for the GraphQL API:
// <public-url>/financial/v1/graphql.
func GraphQLAudience(publicURL string) string {
	return trimURL(publicURL) + "/financial/v1/graphql"
}

func trimURL(u string) string { return strings.TrimRight(u, "/") }
