package signin

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
)

// Client authentication methods (RFC 7591 token_endpoint_auth_method).
const (
	authNone               = "none"
	authBasic              = "client_secret_basic"
	authPost               = "client_secret_post"
	grantAuthorizationCode = "authorization_code"
	grantRefreshToken      = "refresh_token"
)

var authMethods = []string{authNone, authBasic, authPost}

// Client is a registered client's metadata, as it is stored and echoed.
type Client struct {
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	ClientName              string   `json:"client_name,omitempty"`
	ClientURI               string   `json:"client_uri,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
	SoftwareID              string   `json:"software_id,omitempty"`
	SoftwareVersion         string   `json:"software_version,omitempty"`
}

func (c *Client) allows(grant string) bool {
	for _, g := range c.GrantTypes {
		if g == grant {
			return true
		}
	}
	return false
}

// registered is a client as the endpoints see it.
type registered struct {
	id         string
	secretHash string
	// document says the client is described by the metadata document at
	// its id rather than registered here.
	document bool
	Client
}

// clientByID loads a registered client.
func (s *Server) clientByID(r *http.Request, id string) (*registered, error) {
	if isDocumentID(id) && !s.documents.off {
		return s.documentClient(r.Context(), id)
	}
	stored, err := s.opts.Store.OAuthClient(r.Context(), id)
	if err != nil {
		return nil, err
	}
	c := &registered{id: stored.ID, secretHash: stored.SecretHash}
	if err := json.Unmarshal(stored.Metadata, &c.Client); err != nil {
		return nil, fmt.Errorf("signin: client %s: %w", id, err)
	}
	return c, nil
}

// errClient is a client that did not authenticate; its message is what the
// client is told.
type errClient struct {
	coded.Base
	basic bool
}

// codeInvalidClient is RFC 6749's error code for it.
const codeInvalidClient = "invalid_client"

func clientRefused(basic bool, description string) *errClient {
	return &errClient{Base: coded.Base{Code: codeInvalidClient, Message: description}, basic: basic}
}

// authenticateClient finds the client of a token or revocation request
// (RFC 6749 §2.3): HTTP Basic, or client_id with client_secret in the body,
// or client_id alone for a public client. The method must be the one the
// client registered; secrets are compared in constant time, as hashes.
func (s *Server) authenticateClient(r *http.Request) (*registered, error) {
	id, secret, basic := r.BasicAuth()
	method := authBasic
	if basic {
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			return nil, clientRefused(true, "The Basic credentials are not form-encoded as RFC 6749 §2.3.1 asks.")
		}
		if r.PostForm.Has("client_secret") {
			return nil, clientRefused(true, "Authenticate with one method only: Basic or client_secret, not both.")
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		method = authNone
		if r.PostForm.Has("client_secret") {
			method = authPost
		}
	}
	if id == "" {
		return nil, clientRefused(basic, "The request names no client: send client_id.")
	}
	if formID := r.PostForm.Get("client_id"); basic && formID != "" && formID != id {
		return nil, clientRefused(true, "client_id differs from the client that authenticated.")
	}
	c, err := s.clientByID(r, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, clientRefused(basic, "No client is registered with that client_id; register again.")
	}
	var unusable *documentError
	if errors.As(err, &unusable) {
		return nil, clientRefused(basic, unusable.Error())
	}
	if err != nil {
		return nil, err
	}
	if c.TokenEndpointAuthMethod != method {
		return nil, clientRefused(basic, fmt.Sprintf("This client registered %s as its authentication method, and must use it.", c.TokenEndpointAuthMethod))
	}
	if method != authNone && subtle.ConstantTimeCompare([]byte(hash(secret)), []byte(c.secretHash)) != 1 {
		return nil, clientRefused(basic, "The client secret is wrong.")
	}
	return c, nil
}

// writeClientError answers a failed client authentication: 401, with a
// Basic challenge when the client tried Basic (RFC 6749 §5.2).
func writeClientError(w http.ResponseWriter, err *errClient) {
	if err.basic {
		w.Header().Set("WWW-Authenticate", `Basic realm="actiond"`)
	}
	writeError(w, http.StatusUnauthorized, codeInvalidClient, err.Message)
}
