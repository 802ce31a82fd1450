package proxy

import (
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

// SecretHeader carries the instance secret on a plain request (and is
// removed before anything goes upstream, as is every X-Isx- header).
const SecretHeader = "X-Isx-Instance-Secret"

// injectedHosts are the hosts whose TLS the proxy terminates to put an
// account's credential in the requests, by the kind of account.
var injectedHosts = map[string]string{
	"api.anthropic.com": template.AccountClaude,
	"api.openai.com":    template.AccountOpenAI,
	"github.com":        template.AccountGitHub,
	"api.github.com":    template.AccountGitHub,
}

// routeHosts are the hosts the routes answer as.
var routeHosts = map[string]string{
	AnthropicRoute: "api.anthropic.com",
	OpenAIRoute:    "api.openai.com",
}

// target is where a request goes.
type target struct {
	scheme string // how the instance addressed it: http or https
	host   string // as addressed, lowercase, without the scheme's port
	base   *url.URL
	// configured: config.yaml names the upstream, so it is reached
	// wherever it is.
	configured bool
	// kind is the account kind injected into its requests, or "".
	kind string
}

// targetFor is the upstream of a host as an instance addressed it.
func (s *Server) targetFor(scheme, hostport string) target {
	host := strings.ToLower(hostport)
	if h, port, err := net.SplitHostPort(host); err == nil && port == schemePort(scheme) {
		host = h
	}
	t := target{scheme: scheme, host: host, kind: injectedHosts[host]}
	if u, ok := s.opts.Upstreams[host]; ok {
		base := *u.URL
		t.base, t.configured = &base, true
		return t
	}
	t.base = &url.URL{Scheme: scheme, Host: host}
	return t
}

func schemePort(scheme string) string {
	if scheme == "http" {
		return "80"
	}
	return "443"
}

// address is where a tunnel to the target connects.
func (t target) address() string {
	if _, _, err := net.SplitHostPort(t.base.Host); err == nil {
		return t.base.Host
	}
	return net.JoinHostPort(t.base.Host, schemePort(t.base.Scheme))
}

// modelCall reports whether a request is an Anthropic Messages call.
func (t target) modelCall(r *http.Request, path string) bool {
	return t.kind == template.AccountClaude && r.Method == http.MethodPost && strings.TrimSuffix(path, "/") == "/v1/messages"
}

// serveInstance is every request that arrives on an instance's socket.
func (s *Server) serveInstance(w http.ResponseWriter, r *http.Request) {
	name := linkOf(r.Context())
	e := s.current(name)
	if e == nil {
		// A socket outlives its instance's entry only briefly; nothing is
		// counted for a request that proves nothing.
		writeError(w, http.StatusForbidden, "permission_error", "the isx host proxy serves no instance on this socket now")
		return
	}
	proxyForm := r.Method == http.MethodConnect || r.URL.IsAbs()
	if !proves(r, e.secret) {
		s.opts.Log.Info("refused a request without this start's instance secret", "instance", name, "method", r.Method, "host", r.Host)
		if proxyForm {
			w.Header().Set("Proxy-Authenticate", `Basic realm="isx host proxy"`)
			writeError(w, http.StatusProxyAuthRequired, "authentication_error", "the isx host proxy needs this instance's current secret (the file $"+instance.SecretFileEnv+" names) as the proxy password")
			return
		}
		writeError(w, http.StatusUnauthorized, "authentication_error", "the isx host proxy needs this instance's current secret (the file $"+instance.SecretFileEnv+" names) as the API key or in "+SecretHeader)
		return
	}
	switch {
	case r.Method == http.MethodConnect:
		s.connect(w, r, e)
	case r.URL.IsAbs():
		if s.routeFor(r.URL.Hostname()) != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "the isx host proxy serves "+r.URL.Hostname()+" at https:// only")
			return
		}
		if r.URL.Scheme != "http" {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "the isx host proxy forwards http:// URLs; for https:// use CONNECT (HTTPS_PROXY)")
			return
		}
		t := s.targetFor("http", r.URL.Host)
		if t.kind != "" && !t.configured {
			// The account's credential would go to port 80 in clear.
			s.opts.Log.Warn("refused a plain http:// request to a host that gets credentials", "instance", name, "host", t.host)
			writeError(w, http.StatusBadRequest, "invalid_request_error", "isx host proxy: http://"+t.host+" would carry "+t.host+"'s credential in clear; use https://"+t.host+" (through HTTPS_PROXY), or name an upstream for "+t.host+" under proxy: upstreams: in config.yaml")
			return
		}
		s.forward(w, r, e, t, r.URL.Path)
	default:
		s.route(w, r, e)
	}
}

// route serves the base-URL routes: /anthropic/... as api.anthropic.com.
func (s *Server) route(w http.ResponseWriter, r *http.Request, e *entry) {
	for prefix, host := range routeHosts {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if ok && (rest == "" || rest[0] == '/') {
			s.forward(w, r, e, s.targetFor("https", host), rest)
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found_error", "the isx host proxy has no route "+r.URL.Path+"; use "+AnthropicBaseURL+" or "+OpenAIBaseURL+", or the proxy itself as HTTPS_PROXY")
}

// proves reports whether the request carries the secret, in any of the
// places a client can put it: the secret header, the proxy password, or
// the API key a client was given.
func proves(r *http.Request, secret string) bool {
	for _, given := range presented(r) {
		if sameSecret(given, secret) {
			return true
		}
	}
	return false
}

func presented(r *http.Request) []string {
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	add(r.Header.Get(SecretHeader))
	add(r.Header.Get("X-Api-Key"))
	for _, header := range []string{"Proxy-Authorization", "Authorization"} {
		scheme, value, _ := strings.Cut(r.Header.Get(header), " ")
		switch strings.ToLower(scheme) {
		case "bearer":
			add(value)
		case "basic":
			raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
			if _, password, ok := strings.Cut(string(raw), ":"); err == nil && ok {
				add(password)
			}
		}
	}
	return out
}

// writeError answers in the shape of the Messages API's errors, which
// every client of the proxy reads well enough.
func writeError(w http.ResponseWriter, status int, kind, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Isx-Proxy-Error", "1")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": message}})
	w.Write(append(body, '\n')) //nolint:errcheck // the client may be gone
}
