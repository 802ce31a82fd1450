package signin

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"regexp"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// csrfCookie carries the consent form's CSRF token. SameSite=Strict keeps
// it off any request another site starts.
const csrfCookie = "actiond_signin_csrf"

// challengePattern is an S256 code challenge: base64url of 32 bytes.
var challengePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// subjectPattern is a subject a person may name on the page.
var subjectPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$`)

// request is an authorization request, checked.
type request struct {
	client      *registered
	redirectURI string
	state       string
	challenge   string
	scope       string
	resource    string
}

// params are the request's parameters, for the form to carry through.
func (q *request) params() url.Values {
	v := url.Values{
		"response_type":         {"code"},
		"client_id":             {q.client.id},
		"redirect_uri":          {q.redirectURI},
		"code_challenge":        {q.challenge},
		"code_challenge_method": {"S256"},
		"scope":                 {q.scope},
	}
	if q.state != "" {
		v.Set("state", q.state)
	}
	if q.resource != "" {
		v.Set("resource", q.resource)
	}
	return v
}

// refusal is an authorization request that cannot go on. When redirect is
// set the client is told through its redirect URI (RFC 6749 §4.1.2.1);
// otherwise the person is shown the page, since the redirect URI cannot be
// trusted.
type refusal struct {
	status      int
	code        string
	description string
	redirect    bool
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		q, refused := s.readRequest(r, r.URL.Query())
		if refused != nil {
			s.refuse(w, r, q, refused)
			return
		}
		s.showConsent(w, q, "", http.StatusOK)
	case http.MethodPost:
		s.decide(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// readRequest checks an authorization request: first what decides whether
// the client may be redirected to, then the rest.
func (s *Server) readRequest(r *http.Request, v url.Values) (*request, *refusal) {
	q := &request{state: v.Get("state"), redirectURI: v.Get("redirect_uri")}
	client, err := s.clientByID(r, v.Get("client_id"))
	var unusable *documentError
	switch {
	case v.Get("client_id") == "":
		return nil, &refusal{http.StatusBadRequest, "invalid_request", "The request names no client (client_id is missing).", false}
	case errors.As(err, &unusable):
		return nil, &refusal{http.StatusBadRequest, "invalid_client", unusable.Error(), false}
	case errors.Is(err, store.ErrNotFound):
		return nil, &refusal{http.StatusBadRequest, "invalid_client", "No client is registered with this client_id. Ask the program that sent you here to register again.", false}
	case err != nil:
		return nil, &refusal{http.StatusInternalServerError, "server_error", "The server could not read the client; retry.", false}
	}
	q.client = client
	if !matchRedirectURI(client.RedirectURIs, q.redirectURI) {
		return nil, &refusal{http.StatusBadRequest, "invalid_request", "The redirect_uri is not one this client registered (or its metadata document lists), so no code can be sent there.", false}
	}
	fail := func(code, description string) (*request, *refusal) {
		return q, &refusal{http.StatusBadRequest, code, description, true}
	}
	if v.Get("response_type") != "code" {
		return fail("unsupported_response_type", "response_type must be code.")
	}
	if v.Get("code_challenge_method") != "S256" {
		return fail("invalid_request", "PKCE is required with code_challenge_method S256 (plain is not accepted).")
	}
	if q.challenge = v.Get("code_challenge"); !challengePattern.MatchString(q.challenge) {
		return fail("invalid_request", "code_challenge must be the base64url SHA-256 of the code verifier: 43 characters.")
	}
	scope, err := checkScope(v.Get("scope"))
	if err != nil {
		return fail("invalid_scope", err.Error())
	}
	q.scope = scope
	if q.resource = v.Get("resource"); q.resource != "" && !s.isResource(q.resource) {
		return fail("invalid_target", "resource must be one of this server's MCP endpoints.")
	}
	if !client.allows(grantAuthorizationCode) {
		return fail("unauthorized_client", "This client did not register for the authorization_code grant.")
	}
	return q, nil
}

// isResource says whether resource (RFC 8707) names this server's MCP
// endpoints: the audience itself or one endpoint under it.
func (s *Server) isResource(resource string) bool {
	if resource == s.audience {
		return true
	}
	_, _, ok := auth.ParseMCPPath(trimPrefix(resource, s.issuer))
	return ok
}

func trimPrefix(s, prefix string) string {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return ""
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, q *request, refused *refusal) {
	if refused.redirect && q != nil {
		params := url.Values{"error": {refused.code}, "error_description": {refused.description}, "iss": {s.issuer}}
		if q.state != "" {
			params.Set("state", q.state)
		}
		http.Redirect(w, r, withParams(q.redirectURI, params), http.StatusSeeOther)
		return
	}
	s.showError(w, refused.status, refused.description)
}

// decide handles the consent form.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.showError(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	if !sameOrigin(r) || !s.csrfMatches(r) {
		s.showError(w, http.StatusForbidden, "This form was not sent from this sign-in page. Start the sign-in again from your MCP host.")
		return
	}
	q, refused := s.readRequest(r, r.PostForm)
	if refused != nil {
		s.refuse(w, r, q, refused)
		return
	}
	if r.PostForm.Get("decision") != "approve" {
		s.refuse(w, r, q, &refusal{http.StatusForbidden, "access_denied", "The person declined the sign-in.", true})
		return
	}
	subject := r.PostForm.Get("subject")
	if !subjectPattern.MatchString(subject) {
		s.showConsent(w, q, "Name yourself with 1 to 128 letters, digits and . _ @ + - (starting with a letter or digit).", http.StatusBadRequest)
		return
	}
	code, err := s.grant(r, q, subject)
	if err != nil {
		s.serverError(w, "record the sign-in", err)
		return
	}
	params := url.Values{"code": {code}, "iss": {s.issuer}}
	if q.state != "" {
		params.Set("state", q.state)
	}
	http.Redirect(w, r, withParams(q.redirectURI, params), http.StatusSeeOther)
}

// grant records the approval and returns its one-time code.
func (s *Server) grant(r *http.Request, q *request, subject string) (string, error) {
	id, err := s.secret(16)
	if err != nil {
		return "", err
	}
	code, err := s.secret(32)
	if err != nil {
		return "", err
	}
	g := store.Grant{ID: id, ClientID: q.client.id, Principal: s.opts.Principal, Subject: subject,
		Accounts: s.opts.Accounts, Scope: q.scope, Resource: q.resource}
	c := store.AuthorizationCode{Hash: hash(code), GrantID: id, RedirectURI: q.redirectURI, CodeChallenge: q.challenge,
		ExpiresAt: s.opts.Clock.Now().Add(s.opts.CodeTTL)}
	if err := s.opts.Store.CreateGrant(r.Context(), g, c); err != nil {
		return "", err
	}
	s.opts.Logger.Info("sign-in: approved", "client_id", q.client.id, "client_name", q.client.ClientName, "subject", subject)
	return code, nil
}

// sameOrigin refuses a POST another site started. Browsers send Origin on
// every form POST and Sec-Fetch-Site on every request; a request without
// either (a test, a command-line client) cannot carry the SameSite cookie
// from a foreign page anyway.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	return origin == "" || origin == "http://"+r.Host
}

func (s *Server) csrfMatches(r *http.Request) bool {
	cookie, err := r.Cookie(csrfCookie)
	if err != nil || cookie.Value == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(cookie.Value), []byte(r.PostForm.Get("csrf"))) == 1
}
