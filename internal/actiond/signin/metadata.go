package signin

import (
	"encoding/json"
	"net/http"

	"github.com/incusspawn/isx/internal/actiond/auth"
)

// Metadata is the RFC 8414 authorization server metadata.
type Metadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint"`
	TokenEndpoint                              string   `json:"token_endpoint"`
	RegistrationEndpoint                       string   `json:"registration_endpoint"`
	RevocationEndpoint                         string   `json:"revocation_endpoint"`
	JWKSURI                                    string   `json:"jwks_uri"`
	ResponseTypesSupported                     []string `json:"response_types_supported"`
	ResponseModesSupported                     []string `json:"response_modes_supported"`
	GrantTypesSupported                        []string `json:"grant_types_supported"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethodsSupported     []string `json:"revocation_endpoint_auth_methods_supported"`
	ScopesSupported                            []string `json:"scopes_supported"`
	AuthorizationResponseIssParameterSupported bool     `json:"authorization_response_iss_parameter_supported"`
	// ClientIDMetadataDocumentSupported says a client_id may be the https
	// URL of the client's metadata document (SEP-991).
	ClientIDMetadataDocumentSupported bool `json:"client_id_metadata_document_supported"`
}

// Metadata is this server's metadata document.
func (s *Server) Metadata() Metadata {
	return Metadata{
		Issuer:                                     s.issuer,
		AuthorizationEndpoint:                      s.issuer + AuthorizePath,
		TokenEndpoint:                              s.issuer + TokenPath,
		RegistrationEndpoint:                       s.issuer + RegisterPath,
		RevocationEndpoint:                         s.issuer + RevokePath,
		JWKSURI:                                    s.opts.Issuer.JWKSURL(),
		ResponseTypesSupported:                     []string{"code"},
		ResponseModesSupported:                     []string{"query"},
		GrantTypesSupported:                        []string{grantAuthorizationCode, grantRefreshToken},
		CodeChallengeMethodsSupported:              []string{"S256"},
		TokenEndpointAuthMethodsSupported:          authMethods,
		RevocationEndpointAuthMethodsSupported:     authMethods,
		ScopesSupported:                            []string{auth.Scope},
		AuthorizationResponseIssParameterSupported: true,
		ClientIDMetadataDocumentSupported:          !s.documents.off,
	}
}

// MetadataHandler serves the metadata (mount at
// auth.AuthorizationServerMetadataPath and auth.OpenIDConfigurationPath).
func (s *Server) MetadataHandler() http.Handler {
	body, err := json.Marshal(s.Metadata())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if err != nil {
			http.Error(w, "cannot encode the metadata", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_, _ = w.Write(append(body, '\n'))
	})
}

// writeError answers with an OAuth error (RFC 6749 §5.2).
func writeError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

func writeJSON(w http.ResponseWriter, status int, document any) {
	body, err := json.Marshal(document)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"server_error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
