package auth

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// ProtectedResourcePrefix is the well-known prefix of Protected Resource
// Metadata (RFC 9728). An MCP endpoint's metadata lives at this prefix
// followed by the endpoint's path.
const ProtectedResourcePrefix = "/.well-known/oauth-protected-resource"

// Scope is the one scope an MCP host is told to request.
const Scope = "openid"

// MCPResourceURL is an MCP server's endpoint: the resource its tokens are
// issued for (ACT-045, ACT-047).
func MCPResourceURL(publicURL, account, name string) string {
	return trimURL(publicURL) + mcpPath(account, name)
}

// ResourceMetadataURL is where an MCP server's Protected Resource Metadata
// is served: the URL a 401 names (ACT-067).
func ResourceMetadataURL(publicURL, account, name string) string {
	return trimURL(publicURL) + ProtectedResourcePrefix + mcpPath(account, name)
}

// mcpPrefix is where every MCP endpoint's path starts.
const mcpPrefix = "/mcp/v1/"

func mcpPath(account, name string) string {
	return mcpPrefix + url.PathEscape(account) + "/" + url.PathEscape(name)
}

// ParseMCPPath splits an MCP endpoint's path, /mcp/v1/<account>/<name>; ok
// is false for any other path.
func ParseMCPPath(path string) (account, name string, ok bool) {
	rest, found := strings.CutPrefix(path, mcpPrefix)
	if !found {
		return "", "", false
	}
	account, name, found = strings.Cut(rest, "/")
	if !found || account == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return account, name, true
}

// BearerToken returns the request's bearer token. The scheme is matched
// without regard to case; there must be exactly one Authorization header
// carrying exactly one token. No header is ReasonMissing; anything else
// that is not one clean bearer token is ReasonMalformed. Tokens in the query
// string or body are not looked for (bearer_methods_supported: header).
func BearerToken(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", refuse(ReasonMissing, "no Authorization header")
	case 1:
	default:
		return "", refuse(ReasonMalformed, "%d Authorization headers; send exactly one", len(values))
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", refuse(ReasonMalformed, "the Authorization scheme is not Bearer")
	}
	token = strings.TrimLeft(token, " ")
	if token == "" {
		return "", refuse(ReasonMalformed, "the Authorization header has no token")
	}
	if !isToken68(token) {
		return "", refuse(ReasonMalformed, "the Authorization header does not hold exactly one token")
	}
	return token, nil
}

// isToken68 checks RFC 6750's b64token syntax, which also rules out a second
// token after a space or comma.
func isToken68(s string) bool {
	end := len(s)
	for end > 0 && s[end-1] == '=' {
		end--
	}
	if end == 0 {
		return false
	}
	for i := 0; i < end; i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}

// SetChallenge sets the WWW-Authenticate header of a 401 (ACT-067, ACT-068):
// the endpoint's Protected Resource Metadata and the scope to request, and,
// when a token was presented and refused (any reason but missing),
// error="invalid_token" with the public sentence as error_description, as
// RFC 6750 allows. Only the public reason's sentence is sent.
func SetChallenge(h http.Header, resourceMetadataURL string, err error) {
	value := `Bearer resource_metadata="` + quoted(resourceMetadataURL) + `", scope="` + Scope + `"`
	if reason, sentence := Public(err); reason != PublicMissing {
		value += `, error="invalid_token", error_description="` + quoted(sentence) + `"`
	}
	h.Set("WWW-Authenticate", value)
}

// Challenge answers 401 with SetChallenge's header and a small JSON body
// naming the public reason and its sentence, and nothing more.
func Challenge(w http.ResponseWriter, resourceMetadataURL string, err error) {
	SetChallenge(w.Header(), resourceMetadataURL, err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	reason, sentence := Public(err)
	code := "invalid_token"
	if reason == PublicMissing {
		code = "unauthorized"
	}
	body, _ := json.Marshal(map[string]string{"error": code, "reason": string(reason), "error_description": sentence})
	_, _ = w.Write(append(body, '\n'))
}

func quoted(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// ProtectedResource is an RFC 9728 metadata document.
type ProtectedResource struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
}

// ProtectedResourceHandler serves the metadata of every MCP endpoint, at
// ProtectedResourcePrefix + /mcp/v1/<account>/<name> (ACT-047, ACT-056).
// It answers for any well-formed endpoint path without asking whether that
// server exists, so the metadata cannot be used to discover servers; the
// endpoint itself decides that after the token check. Mount it on the
// prefix's subtree, e.g. mux.Handle(ProtectedResourcePrefix+"/mcp/v1/", h).
func ProtectedResourceHandler(publicURL string, authorizationServers []string) http.Handler {
	servers := append([]string{}, authorizationServers...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !readOnly(w, r) {
			return
		}
		account, name, ok := parseMetadataPath(r.URL.Path)
		if !ok {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, ProtectedResource{
			Resource:               MCPResourceURL(publicURL, account, name),
			AuthorizationServers:   servers,
			ScopesSupported:        []string{Scope},
			BearerMethodsSupported: []string{"header"},
		})
	})
}

func parseMetadataPath(path string) (account, name string, ok bool) {
	endpoint, found := strings.CutPrefix(path, ProtectedResourcePrefix)
	if !found {
		return "", "", false
	}
	return ParseMCPPath(endpoint)
}

// writeJSON serves public metadata: cacheable briefly, readable by browser
// based hosts from any origin.
func writeJSON(w http.ResponseWriter, document any) {
	body, err := json.Marshal(document)
	if err != nil {
		http.Error(w, "cannot encode metadata", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(append(body, '\n'))
}
