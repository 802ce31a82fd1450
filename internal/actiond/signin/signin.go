// Package signin is the local environment's OAuth authorization server for
// its MCP endpoints, so that an MCP host signs in by itself: the host finds
// it through the endpoints' Protected Resource Metadata, reads its metadata
// (RFC 8414), registers itself (RFC 7591), sends the person to the sign-in
// and consent page, and exchanges the code it gets back, with PKCE (S256),
// for an access token and a refresh token. Refresh tokens rotate on every
// use; one presented twice revokes its sign-in. Revocation follows RFC 7009.
//
// Who may sign in: the page is served only to this machine, over loopback,
// while actiond's public URL is a loopback URL. There the person names the
// subject they act as, and the principal is the local environment's `local`,
// as the unauthenticated GraphQL API on loopback is the local root. What the
// page guards against is other web sites: the consent form carries a CSRF
// token bound to a SameSite=Strict cookie, a POST from another origin is
// refused, the page cannot be framed, and a code goes only to a redirect
// URI the client registered, on loopback.
//
// Access tokens are the local issuer's JWTs, with the same audience rule as
// `actiond token` (aud = <public-url>/mcp), the principal, the subject and
// the client in their claims. They cannot be revoked before they expire,
// which is why they are short-lived; revoking a refresh token ends its
// sign-in.
//
// One file per endpoint: metadata.go, register.go, authorize.go (with
// page.go), token.go, revoke.go; redirect.go holds the redirect URI rules
// and clients.go client authentication.
package signin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
)

// Paths of the endpoints, under the issuer URL.
const (
	AuthorizePath = "/oauth/authorize"
	TokenPath     = "/oauth/token"
	RegisterPath  = "/oauth/register"
	RevokePath    = "/oauth/revoke"
)

// Defaults of Options.
const (
	DefaultAccessTTL  = 15 * time.Minute
	DefaultRefreshTTL = 30 * 24 * time.Hour
	DefaultCodeTTL    = time.Minute
	// MinAccessTTL keeps a typo from minting tokens that expire before use.
	MinAccessTTL = time.Second
)

// Store keeps clients, grants, codes and refresh tokens; *store.Store is
// one.
type Store interface {
	RegisterOAuthClient(ctx context.Context, c store.OAuthClient, limits store.ClientLimits) error
	OAuthClient(ctx context.Context, id string) (*store.OAuthClient, error)
	CreateGrant(ctx context.Context, g store.Grant, code store.AuthorizationCode) error
	RedeemCode(ctx context.Context, hash string) (*store.AuthorizationCode, *store.Grant, error)
	IssueRefresh(ctx context.Context, t store.RefreshToken) error
	RotateRefresh(ctx context.Context, hash string, next store.RefreshToken) (*store.Grant, error)
	RefreshGrant(ctx context.Context, hash string) (*store.Grant, error)
	RevokeGrant(ctx context.Context, id string) error
}

// Minter signs access tokens; *auth.LocalIssuer is one.
type Minter interface {
	URL() string
	JWKSURL() string
	Mint(opts auth.MintOptions) (string, error)
}

// Options configure the authorization server.
type Options struct {
	Issuer Minter
	Store  Store
	// Principal is the principal of every sign-in; Accounts the accounts its
	// tokens reach.
	Principal string
	Accounts  []string
	// DefaultSubject fills the page's subject field: the user actiond runs
	// as, who is usually the person at the browser.
	DefaultSubject string
	AccessTTL      time.Duration // default DefaultAccessTTL
	RefreshTTL     time.Duration // default DefaultRefreshTTL
	CodeTTL        time.Duration // default DefaultCodeTTL
	// Clients caps registrations (per hour, in total) and says when a
	// client nobody signed in with is pruned; zero fields take the store's
	// defaults.
	Clients store.ClientLimits
	// Documents configure how clients' metadata documents are fetched
	// (document.go); loopback documents are allowed, as the sign-in is
	// the local environment's.
	Documents DocumentOptions
	Clock     clock.Clock
	Random    io.Reader
	Logger    *slog.Logger
}

// Server is the authorization server.
type Server struct {
	opts      Options
	issuer    string
	audience  string
	documents *documents
}

// New checks the options. The issuer URL must be a loopback URL: the
// sign-in is offered only where the person at the browser is at this
// machine (see Offered).
func New(opts Options) (*Server, error) {
	if opts.Issuer == nil || opts.Store == nil || opts.Principal == "" || len(opts.Accounts) == 0 {
		return nil, fmt.Errorf("signin: the authorization server needs an issuer, a store, a principal and its accounts")
	}
	if !Offered(opts.Issuer.URL()) {
		return nil, fmt.Errorf("signin: the sign-in is offered only at a loopback URL, not %s", opts.Issuer.URL())
	}
	if opts.AccessTTL == 0 {
		opts.AccessTTL = DefaultAccessTTL
	}
	if opts.AccessTTL < MinAccessTTL || opts.AccessTTL > auth.MaxTokenTTL {
		return nil, fmt.Errorf("signin: an access token's lifetime must lie within [%s, %s], not %s", MinAccessTTL, auth.MaxTokenTTL, opts.AccessTTL)
	}
	if opts.RefreshTTL <= 0 {
		opts.RefreshTTL = DefaultRefreshTTL
	}
	if opts.CodeTTL <= 0 {
		opts.CodeTTL = DefaultCodeTTL
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Random == nil {
		opts.Random = rand.Reader
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	issuer := strings.TrimRight(opts.Issuer.URL(), "/")
	// The issuer is a loopback URL (checked above): the local environment,
	// where a host may serve its document from this machine.
	opts.Documents.Loopback = true
	if opts.Documents.Clock == nil {
		opts.Documents.Clock = opts.Clock
	}
	return &Server{opts: opts, issuer: issuer, audience: auth.MCPAudience(issuer), documents: newDocuments(opts.Documents)}, nil
}

// Offered says whether actiond at publicURL offers the sign-in: only when
// the URL names this machine by a loopback name.
func Offered(publicURL string) bool {
	u, err := url.Parse(publicURL)
	return err == nil && u.Scheme == "http" && loopbackHost(u.Hostname())
}

// Mount adds the endpoints and the metadata to mux.
func (s *Server) Mount(mux *http.ServeMux) {
	metadata := s.MetadataHandler()
	mux.Handle(auth.AuthorizationServerMetadataPath, metadata)
	mux.Handle(auth.OpenIDConfigurationPath, metadata)
	mux.Handle(AuthorizePath, s.local(http.HandlerFunc(s.authorize)))
	mux.Handle(TokenPath, s.local(http.HandlerFunc(s.token)))
	mux.Handle(RegisterPath, s.local(http.HandlerFunc(s.register)))
	mux.Handle(RevokePath, s.local(http.HandlerFunc(s.revoke)))
}

// local serves only requests from this machine, addressed to it by a
// loopback name: not a reverse proxy's visitors, and not a web page that
// rebinds its own name to 127.0.0.1.
func (s *Server) local(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil || !loopbackHost(host) || !loopbackHost(hostOnly(r.Host)) {
			writeError(w, http.StatusForbidden, "access_denied", "The sign-in is served only to this machine, at a loopback address.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func hostOnly(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return strings.Trim(hostport, "[]")
}

func loopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secret returns n random bytes, base64url without padding.
func (s *Server) secret(n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(s.opts.Random, b); err != nil {
		return "", fmt.Errorf("signin: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// hash is how codes, refresh tokens and client secrets are kept.
func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
