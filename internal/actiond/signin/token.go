package signin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// verifierPattern is a PKCE code verifier (RFC 7636 §4.1).
var verifierPattern = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// tokenResponse is RFC 6749 §5.1.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
}

// token is the token endpoint: a code for tokens, or a refresh token for
// new ones.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if !s.readForm(w, r) {
		return
	}
	client, err := s.authenticateClient(r)
	if !s.clientOK(w, err) {
		return
	}
	grant := r.PostForm.Get("grant_type")
	if grant != grantAuthorizationCode && grant != grantRefreshToken {
		writeError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token.")
		return
	}
	if !client.allows(grant) {
		writeError(w, http.StatusBadRequest, "unauthorized_client", "This client did not register for the "+grant+" grant.")
		return
	}
	if grant == grantAuthorizationCode {
		s.exchangeCode(w, r, client)
		return
	}
	s.refresh(w, r, client)
}

// readForm reads a POSTed form, answering the request itself when it is
// not one.
func (s *Server) readForm(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request", "Send a POST with a form-encoded body.")
		return false
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		writeError(w, http.StatusBadRequest, "invalid_request", "The body must be application/x-www-form-urlencoded.")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "The form could not be read.")
		return false
	}
	for name, values := range r.PostForm {
		if len(values) > 1 {
			writeError(w, http.StatusBadRequest, "invalid_request", "The parameter "+name+" is repeated.")
			return false
		}
	}
	return true
}

// clientOK answers a failed client authentication.
func (s *Server) clientOK(w http.ResponseWriter, err error) bool {
	var refused *errClient
	switch {
	case errors.As(err, &refused):
		writeClientError(w, refused)
		return false
	case err != nil:
		s.serverError(w, "authenticate the client", err)
		return false
	}
	return true
}

func (s *Server) exchangeCode(w http.ResponseWriter, r *http.Request, client *registered) {
	form := r.PostForm
	code, verifier, redirectURI := form.Get("code"), form.Get("code_verifier"), form.Get("redirect_uri")
	if code == "" || redirectURI == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "code and redirect_uri are required.")
		return
	}
	if !verifierPattern.MatchString(verifier) {
		writeError(w, http.StatusBadRequest, "invalid_request", "code_verifier is required: 43 to 128 characters of A-Z a-z 0-9 . _ ~ -.")
		return
	}
	stored, g, err := s.opts.Store.RedeemCode(r.Context(), hash(code))
	if !s.grantOK(w, err, "code") {
		return
	}
	// The code is spent by now: a failed check below cannot be retried.
	switch {
	case g.ClientID != client.id:
		writeError(w, http.StatusBadRequest, "invalid_grant", "The code was issued to another client.")
	case stored.RedirectURI != redirectURI:
		writeError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the one the code was sent to.")
	case !pkceMatches(verifier, stored.CodeChallenge):
		writeError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge.")
	default:
		s.issue(w, r, g, client.allows(grantRefreshToken))
	}
}

// pkceMatches checks S256 in constant time.
func pkceMatches(verifier, challenge string) bool {
	sum := sha256.Sum256([]byte(verifier))
	computed := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(computed), []byte(challenge)) == 1
}

func (s *Server) refresh(w http.ResponseWriter, r *http.Request, client *registered) {
	presented := r.PostForm.Get("refresh_token")
	if presented == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "refresh_token is required.")
		return
	}
	// Another client's token is refused without spending it.
	owner, err := s.opts.Store.RefreshGrant(r.Context(), hash(presented))
	if !s.grantOK(w, err, "refresh token") {
		return
	}
	if owner.ClientID != client.id {
		writeError(w, http.StatusBadRequest, "invalid_grant", "The refresh token was issued to another client.")
		return
	}
	if _, err := checkScope(r.PostForm.Get("scope")); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_scope", err.Error())
		return
	}
	next, err := s.secret(32)
	if err != nil {
		s.serverError(w, "refresh the token", err)
		return
	}
	g, err := s.opts.Store.RotateRefresh(r.Context(), hash(presented), s.refreshToken(next))
	if !s.grantOK(w, err, "refresh token") {
		return
	}
	s.respond(w, g, next)
}

func (s *Server) refreshToken(secret string) store.RefreshToken {
	return store.RefreshToken{Hash: hash(secret), ExpiresAt: s.opts.Clock.Now().Add(s.opts.RefreshTTL)}
}

// grantOK answers a code or refresh token the store refused.
func (s *Server) grantOK(w http.ResponseWriter, err error, what string) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusBadRequest, "invalid_grant", "The "+what+" is not one this server issued.")
	case errors.Is(err, store.ErrSpent):
		s.opts.Logger.Warn("sign-in: a spent " + what + " was presented again; its sign-in is revoked")
		writeError(w, http.StatusBadRequest, "invalid_grant", "The "+what+" was already used, so its sign-in is revoked; sign in again.")
	case errors.Is(err, store.ErrRevoked):
		writeError(w, http.StatusBadRequest, "invalid_grant", "The sign-in was revoked; sign in again.")
	case errors.Is(err, store.ErrExpired):
		writeError(w, http.StatusBadRequest, "invalid_grant", "The "+what+" has expired; sign in again.")
	default:
		s.serverError(w, "check the "+what, err)
	}
	return false
}

// issue answers with an access token and, after a code, the grant's first
// refresh token when the client registered for refreshing.
func (s *Server) issue(w http.ResponseWriter, r *http.Request, g *store.Grant, refreshes bool) {
	if !refreshes {
		s.respond(w, g, "")
		return
	}
	next, err := s.secret(32)
	if err != nil {
		s.serverError(w, "issue tokens", err)
		return
	}
	t := s.refreshToken(next)
	t.GrantID = g.ID
	if err := s.opts.Store.IssueRefresh(r.Context(), t); err != nil {
		s.serverError(w, "issue tokens", err)
		return
	}
	s.respond(w, g, next)
}

func (s *Server) respond(w http.ResponseWriter, g *store.Grant, refresh string) {
	access, err := s.opts.Issuer.Mint(auth.MintOptions{
		Principal: g.Principal, Subject: g.Subject, Client: g.ClientID, Accounts: g.Accounts,
		Audience: s.audience, TTL: s.opts.AccessTTL,
	})
	if err != nil {
		s.serverError(w, "sign the access token", err)
		return
	}
	writeJSON(w, http.StatusOK, tokenResponse{
		AccessToken: access, TokenType: "Bearer", ExpiresIn: int64(s.opts.AccessTTL.Seconds()),
		RefreshToken: refresh, Scope: g.Scope,
	})
}
