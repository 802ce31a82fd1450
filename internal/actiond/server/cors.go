package server

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/signin"
	"github.com/incusspawn/isx/internal/coded"
)

// Cross-origin requests from browser-based MCP hosts (an inspector, a web
// host). The discovery metadata is public and readable from any origin,
// without credentials, as MCP's authorization asks. The MCP endpoints and
// the sign-in's token, registration and revocation answer a page only when
// its origin is one the operator named (--cors-origin); a request to an
// MCP endpoint with any other foreign Origin is refused with 403, as the
// Streamable HTTP transport requires of a server. GraphQL, the explorer and
// the consent page offer nothing cross-origin: the local root must never
// answer a page.

// The headers a browser-based host sends and must read.
const (
	corsAllowHeaders  = "Authorization, Content-Type, Mcp-Session-Id, Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID"
	corsExposeHeaders = "Mcp-Session-Id, WWW-Authenticate"
	// corsMaxAge lets a browser keep a preflight's answer for ten minutes.
	corsMaxAge = "600"
	// mcpParamHeader starts the headers a tool's x-mcp-header parameters
	// travel in (revision 2026-07-28); a preflight may name any of them.
	mcpParamHeader = "mcp-param-"
)

// Header values shared by every response, so that setting them allocates
// nothing (full slice expressions: an Add elsewhere copies).
var (
	varyOrigin      = []string{"Origin"}[:1:1]
	anyOrigin       = []string{"*"}[:1:1]
	exposeHeaders   = []string{corsExposeHeaders}[:1:1]
	maxAge          = []string{corsMaxAge}[:1:1]
	methodsMetadata = []string{"GET, HEAD"}[:1:1]
	methodsPOST     = []string{"POST"}[:1:1]
)

// CORS is the cross-origin policy: the exact origins (scheme://host[:port])
// allowed to call the MCP endpoints and the sign-in's endpoints.
type CORS struct {
	allowed map[string]bool
	// own is the public URL's origin: a page actiond serves itself is not
	// cross-origin.
	own string
}

// ErrCORSOrigin is the code of an origin --cors-origin cannot allow.
const ErrCORSOrigin = "actiond_cors_origin"

// NewCORS checks each origin: an http or https URL with a host and nothing
// after it, written as browsers send it (lower case, no default port).
func NewCORS(publicURL string, origins []string) (*CORS, error) {
	c := &CORS{allowed: map[string]bool{}, own: originOf(publicURL)}
	for _, origin := range origins {
		if err := checkOrigin(origin); err != nil {
			return nil, err
		}
		c.allowed[origin] = true
	}
	return c, nil
}

func checkOrigin(origin string) error {
	u, err := url.Parse(origin)
	bad := func(why string) error {
		return coded.New(ErrCORSOrigin, "--cors-origin %q %s", origin, why).
			WithHint("name an origin exactly as a browser sends it, e.g. http://localhost:6274 or https://inspector.example")
	}
	switch {
	case err != nil:
		return bad("is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("is not an http or https origin")
	case u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(origin, "?") || strings.HasSuffix(origin, "#"):
		return bad("is not an origin: only scheme://host[:port], without a path or a trailing slash")
	case originOf(origin) != origin:
		return bad("is not written as browsers send it: lower case, without the scheme's default port")
	}
	return nil
}

// originOf is the origin of rawURL in its serialised form ("" when it has
// none).
func originOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname())
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host
}

// corsRoute is what the policy makes of a path.
type corsRoute int

const (
	corsNone     corsRoute = iota // nothing cross-origin
	corsMetadata                  // public metadata: any origin
	corsMCP                       // an MCP endpoint: allowed origins, others refused
	corsSignIn                    // token, registration, revocation: allowed origins
)

func routeOf(path string) corsRoute {
	switch {
	case strings.HasPrefix(path, "/.well-known/"):
		return corsMetadata
	case strings.HasPrefix(path, mcpRoute):
		return corsMCP
	case path == signin.TokenPath || path == signin.RegisterPath || path == signin.RevokePath:
		return corsSignIn
	}
	return corsNone
}

// Wrap serves next behind the policy.
func (c *CORS) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := routeOf(r.URL.Path)
		if route == corsNone {
			next.ServeHTTP(w, r)
			return
		}
		header := w.Header()
		if route != corsMetadata {
			// The answer differs by Origin, so a cache must keep them apart.
			header["Vary"] = varyOrigin
		}
		origins := r.Header.Values("Origin")
		if len(origins) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if route == corsMetadata {
			header["Access-Control-Allow-Origin"] = anyOrigin
			if preflight {
				c.answerPreflight(w, r, methodsMetadata)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		origin := origins[0]
		if len(origins) == 1 && c.allowed[origin] {
			header["Access-Control-Allow-Origin"] = origins[:1:1]
			header["Access-Control-Expose-Headers"] = exposeHeaders
			if preflight {
				c.answerPreflight(w, r, methodsPOST)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if route == corsMCP && c.foreign(r, origins) {
			refuseOrigin(w)
			return
		}
		if preflight {
			// Nothing to allow: the browser keeps the request from leaving.
			header.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// foreign reports whether r's Origin is neither actiond's own (its public
// URL's, or on loopback the served port's) nor allowed.
func (c *CORS) foreign(r *http.Request, origins []string) bool {
	if len(origins) != 1 {
		return true
	}
	if origins[0] == c.own {
		return false
	}
	port, onLoopback := auth.LoopbackPort(r)
	return !onLoopback || auth.ForeignOrigin(r, port)
}

// answerPreflight allows the method asked for among methods and the headers
// a host sends.
func (c *CORS) answerPreflight(w http.ResponseWriter, r *http.Request, methods []string) {
	header := w.Header()
	header["Access-Control-Allow-Methods"] = methods
	header["Access-Control-Max-Age"] = maxAge
	header.Set("Access-Control-Allow-Headers", allowHeaders(r.Header.Get("Access-Control-Request-Headers")))
	w.WriteHeader(http.StatusNoContent)
}

// allowHeaders is the fixed list, plus the Mcp-Param-* headers requested,
// which no fixed list can name.
func allowHeaders(requested string) string {
	if !strings.Contains(strings.ToLower(requested), mcpParamHeader) {
		return corsAllowHeaders
	}
	allow := corsAllowHeaders
	for _, name := range strings.Split(requested, ",") {
		name = strings.TrimSpace(name)
		if len(name) > len(mcpParamHeader) && strings.EqualFold(name[:len(mcpParamHeader)], mcpParamHeader) && validToken(name) {
			allow += ", " + name
		}
	}
	return allow
}

// validToken reports whether name is an HTTP token, so that nothing else
// is echoed into a header.
func validToken(name string) bool {
	for _, c := range name {
		if !(c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			return false
		}
	}
	return true
}

// refuseOrigin answers an MCP request from a page of another site with 403
// and a JSON-RPC error without an id.
func refuseOrigin(w http.ResponseWriter) {
	header := w.Header()
	header.Set("Content-Type", "application/json")
	header.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusForbidden)
	w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"forbidden: this MCP endpoint does not accept requests from pages of the origin this request came from; actiond serve --cors-origin allows an origin"}}` + "\n"))
}
