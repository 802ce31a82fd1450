package signin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// maxRegistrationBytes bounds a registration request.
const maxRegistrationBytes = 64 << 10

// maxNameLength bounds client_name, which the consent page shows.
const maxNameLength = 100

// registration is the RFC 7591 response.
type registration struct {
	ClientID              string `json:"client_id"`
	ClientSecret          string `json:"client_secret,omitempty"`
	ClientIDIssuedAt      int64  `json:"client_id_issued_at"`
	ClientSecretExpiresAt *int64 `json:"client_secret_expires_at,omitempty"`
	Client
}

// register is RFC 7591 dynamic client registration: anyone on this machine
// may register; what a client may do is decided at the consent page.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request", "Register with a POST of the client's metadata as JSON.")
		return
	}
	// A page of another site may POST text/plain without asking; a JSON
	// body it may send only after a preflight, which nothing here answers.
	if media, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || media != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "invalid_client_metadata", "Send the client's metadata as application/json.")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRegistrationBytes+1))
	if err != nil || len(body) > maxRegistrationBytes {
		writeError(w, http.StatusBadRequest, "invalid_client_metadata", fmt.Sprintf("The registration must be a JSON object of at most %d bytes.", maxRegistrationBytes))
		return
	}
	client, code, err := parseClient(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, code, err.Error())
		return
	}
	id, err := s.secret(18)
	if err != nil {
		s.serverError(w, "register a client", err)
		return
	}
	response := registration{ClientID: id, ClientIDIssuedAt: s.opts.Clock.Now().Unix(), Client: client}
	var secretHash string
	if client.TokenEndpointAuthMethod != authNone {
		secret, err := s.secret(32)
		if err != nil {
			s.serverError(w, "register a client", err)
			return
		}
		never := int64(0)
		response.ClientSecret, response.ClientSecretExpiresAt, secretHash = secret, &never, hash(secret)
	}
	metadata, err := json.Marshal(client)
	if err != nil {
		s.serverError(w, "register a client", err)
		return
	}
	err = s.opts.Store.RegisterOAuthClient(r.Context(), store.OAuthClient{ID: id, SecretHash: secretHash, Metadata: metadata}, s.opts.Clients)
	var limited *store.ClientLimitError
	if errors.As(err, &limited) {
		s.opts.Logger.Warn("sign-in: registration refused", "reason", limited.Message)
		if limited.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(limited.RetryAfter.Seconds()))))
		}
		writeError(w, http.StatusTooManyRequests, "temporarily_unavailable", limited.Message+". "+limited.Hint)
		return
	}
	if err != nil {
		s.serverError(w, "register a client", err)
		return
	}
	s.opts.Logger.Info("sign-in: client registered", "client_id", id, "client_name", client.ClientName)
	writeJSON(w, http.StatusCreated, response)
}

// parseClient reads and checks a registration, filling RFC 7591's defaults.
// Unknown fields are ignored, as RFC 7591 asks. The code is the RFC 7591
// error code.
func parseClient(body []byte) (Client, string, error) {
	var c Client
	decoder := json.NewDecoder(bytes.NewReader(body))
	if err := decoder.Decode(&c); err != nil {
		return c, "invalid_client_metadata", fmt.Errorf("The registration is not a JSON object of client metadata: %v.", err)
	}
	if len(c.RedirectURIs) == 0 {
		return c, "invalid_redirect_uri", fmt.Errorf("redirect_uris is required: list the loopback URIs the client receives its code at.")
	}
	if len(c.RedirectURIs) > maxRedirectURIs {
		return c, "invalid_redirect_uri", fmt.Errorf("redirect_uris lists %d URIs; at most %d are allowed.", len(c.RedirectURIs), maxRedirectURIs)
	}
	for _, uri := range c.RedirectURIs {
		if err := checkRedirectURI(uri); err != nil {
			return c, "invalid_redirect_uri", err
		}
	}
	if c.TokenEndpointAuthMethod == "" {
		c.TokenEndpointAuthMethod = authBasic // RFC 7591's default
	}
	if !slices.Contains(authMethods, c.TokenEndpointAuthMethod) {
		return c, "invalid_client_metadata", fmt.Errorf("token_endpoint_auth_method %q is not one of %s.", c.TokenEndpointAuthMethod, strings.Join(authMethods, ", "))
	}
	if len(c.GrantTypes) == 0 {
		c.GrantTypes = []string{grantAuthorizationCode}
	}
	for _, g := range c.GrantTypes {
		if g != grantAuthorizationCode && g != grantRefreshToken {
			return c, "invalid_client_metadata", fmt.Errorf("grant_types lists %q; this server grants only authorization_code and refresh_token.", g)
		}
	}
	if !slices.Contains(c.GrantTypes, grantAuthorizationCode) {
		return c, "invalid_client_metadata", fmt.Errorf("grant_types must include authorization_code: it is the only way to sign in.")
	}
	if len(c.ResponseTypes) == 0 {
		c.ResponseTypes = []string{"code"}
	}
	if len(c.ResponseTypes) != 1 || c.ResponseTypes[0] != "code" {
		return c, "invalid_client_metadata", fmt.Errorf("response_types must be [\"code\"].")
	}
	if err := checkName(c.ClientName); err != nil {
		return c, "invalid_client_metadata", err
	}
	if c.ClientURI != "" {
		if u, err := url.Parse(c.ClientURI); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return c, "invalid_client_metadata", fmt.Errorf("client_uri %q is not an http or https URL.", c.ClientURI)
		}
	}
	if _, err := checkScope(c.Scope); err != nil {
		return c, "invalid_client_metadata", err
	}
	for name, v := range map[string]string{"software_id": c.SoftwareID, "software_version": c.SoftwareVersion} {
		if len(v) > 200 {
			return c, "invalid_client_metadata", fmt.Errorf("%s is longer than 200 characters.", name)
		}
	}
	return c, "", nil
}

func checkName(name string) error {
	if len([]rune(name)) > maxNameLength {
		return fmt.Errorf("client_name is longer than %d characters.", maxNameLength)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("client_name holds a control or invisible character (%U).", r)
		}
	}
	return nil
}

// checkScope reads a space-separated scope; every scope must be one this
// server offers. An empty scope is the default, openid.
func checkScope(scope string) (string, error) {
	if strings.TrimSpace(scope) == "" {
		return auth.Scope, nil
	}
	for _, s := range strings.Fields(scope) {
		if s != auth.Scope {
			return "", fmt.Errorf("scope %q is not offered; this server offers only %q.", s, auth.Scope)
		}
	}
	return auth.Scope, nil
}

func (s *Server) serverError(w http.ResponseWriter, what string, err error) {
	s.opts.Logger.Error("sign-in: cannot "+what, "err", err)
	writeError(w, http.StatusInternalServerError, "server_error", "The server failed to "+what+"; retry, and see actiond's log if it fails again.")
}
