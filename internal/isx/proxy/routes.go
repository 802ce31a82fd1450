package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/deadline"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// Headers the proxy sets on a host route's requests.
const (
	InstanceHeader    = "X-Isx-Instance"
	TemplateHeader    = "X-Isx-Template"
	RouteSecretHeader = "X-Isx-Route-Secret"
)

// hostRoute is one usable entry of config.yaml's host-routes.
type hostRoute struct {
	config.HostRoute
	proxy *httputil.ReverseProxy
}

type routeKey struct{}

// routeCall is what a route's forwarder needs of the request.
type routeCall struct {
	e      *entry
	route  *hostRoute
	secret string
}

// loadRoutes keeps the usable host routes and logs each one skipped,
// saying why, so that one wrong entry never stops the others.
func (s *Server) loadRoutes(routes []config.HostRoute) {
	s.routes = map[string]*hostRoute{}
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		Proxy:               nil,
	}
	s.routeTransport = transport
	for _, r := range routes {
		if r.Err != nil {
			s.opts.Log.Warn("skipped a host route that is wrong", "route", r.Name, "error", r.Err)
			continue
		}
		route := &hostRoute{HostRoute: r}
		route.proxy = &httputil.ReverseProxy{
			Rewrite:        s.rewriteRoute,
			Transport:      transport,
			ModifyResponse: removeRouteSecret,
			ErrorHandler:   s.controllerFailed,
			BufferPool:     copyBuffers,
			FlushInterval:  -1,
		}
		s.routes[r.Name] = route
		s.opts.Log.Info("serving a host route", "route", r.Name, "target", r.Target, "templates", r.Templates)
	}
}

// routeFor is the host route an instance addressed, if any.
func (s *Server) routeFor(hostport string) *hostRoute {
	host := strings.ToLower(hostport)
	if h, port, err := net.SplitHostPort(host); err == nil {
		if port != "443" {
			return nil
		}
		host = h
	}
	return s.routes[host]
}

// serveRoute checks a request to a host route and forwards it to the
// controller. Whatever is refused never reaches the controller.
func (s *Server) serveRoute(w http.ResponseWriter, r *http.Request, e *entry, route *hostRoute) {
	refuse := func(status int, kind, why string) {
		s.opts.Log.Info("refused a host route request", "instance", e.name, "route", route.Name, "why", why)
		writeError(w, status, kind, "isx host proxy: "+why)
	}
	switch {
	case !sameSecret(strings.TrimSpace(r.Header.Get(SecretHeader)), e.secret):
		refuse(http.StatusUnauthorized, "authentication_error", route.Name+" needs this instance's current secret (the file $"+instance.SecretFileEnv+" names) in "+SecretHeader)
		return
	case e.projectLocal:
		refuse(http.StatusForbidden, "permission_error", e.name+" was built from a project-local definition of "+e.template+"; host routes serve only instances of trusted templates")
		return
	case !slices.Contains(route.Templates, e.template):
		refuse(http.StatusForbidden, "permission_error", route.Name+" does not serve instances of "+e.template+" (its templates: "+strings.Join(route.Templates, ", ")+")")
		return
	case upgrading(r):
		refuse(http.StatusBadRequest, "invalid_request_error", route.Name+" carries plain HTTP requests; the proxy does not forward WebSockets or other protocol upgrades to a host route")
		return
	}
	secret, err := s.routeSecret(route.Name)
	if err != nil {
		s.opts.Log.Warn("refused a host route whose secret is not safe", "instance", e.name, "route", route.Name, "error", err)
		status := http.StatusServiceUnavailable
		if coded.CodeOf(err) != CodeUnsafeRouteSecret {
			status = http.StatusInternalServerError
		}
		writeError(w, status, "api_error", "isx host proxy: the route "+route.Name+" is refused until its secret is safe on the host (the proxy's log says why)")
		return
	}
	c := e.counters
	c.trafficStarted(s.opts.Clock.Now())
	defer func() { c.trafficEnded(s.opts.Clock.Now()) }()
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countedRequest{ReadCloser: r.Body, c: c, clock: s.opts.Clock}
	}
	call := &routeCall{e: e, route: route, secret: secret}
	route.proxy.ServeHTTP(&countedResponse{ResponseWriter: w, c: c, s: s}, r.WithContext(context.WithValue(r.Context(), routeKey{}, call)))
}

// upgrading reports whether the request asks to switch protocols.
func upgrading(r *http.Request) bool {
	if r.Header.Get("Upgrade") != "" {
		return true
	}
	for _, v := range r.Header.Values("Connection") {
		for _, token := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(token), "upgrade") {
				return true
			}
		}
	}
	return false
}

// rewriteRoute sends the request to the controller over plain HTTP, with
// what the instance sent as X-Isx-* replaced by who called, and no header
// that carries the instance secret.
func (s *Server) rewriteRoute(pr *httputil.ProxyRequest) {
	call := pr.In.Context().Value(routeKey{}).(*routeCall)
	u := pr.Out.URL
	u.Scheme, u.Host = "http", call.route.Target
	u.Path, u.RawPath = pr.In.URL.Path, pr.In.URL.RawPath
	u.RawQuery = pr.In.URL.RawQuery
	pr.Out.Host = call.route.Name
	h := pr.Out.Header
	cleanOutbound(h, call.e.secret)
	h.Set(InstanceHeader, call.e.name)
	h.Set(TemplateHeader, call.e.template)
	h.Set(RouteSecretHeader, call.secret)
}

// removeRouteSecret keeps the route secret out of what the instance gets
// back, should the controller echo it in a header.
func removeRouteSecret(resp *http.Response) error {
	call := resp.Request.Context().Value(routeKey{}).(*routeCall)
	for name, values := range resp.Header {
		if strings.EqualFold(name, RouteSecretHeader) || slices.ContainsFunc(values, func(v string) bool { return strings.Contains(v, call.secret) }) {
			delete(resp.Header, name)
		}
	}
	for name := range resp.Trailer {
		if strings.EqualFold(name, RouteSecretHeader) {
			delete(resp.Trailer, name)
		}
	}
	return nil
}

// controllerFailed answers when the controller could not be reached.
func (s *Server) controllerFailed(w http.ResponseWriter, r *http.Request, err error) {
	call := r.Context().Value(routeKey{}).(*routeCall)
	if deadline.TooSlow(err) || deadline.Cut(r.Context()) {
		s.opts.Log.Info("cut a host route request whose body came too slowly", "instance", call.e.name, "route", call.route.Name)
		tooSlow(w)
		return
	}
	if r.Context().Err() != nil {
		s.opts.Log.Info("the instance went away before the controller answered", "instance", call.e.name, "route", call.route.Name)
		return
	}
	s.opts.Log.Warn("the controller of a host route could not be reached", "instance", call.e.name, "route", call.route.Name, "target", call.route.Target, "error", err)
	writeError(w, http.StatusBadGateway, "api_error", "isx host proxy: the program behind "+call.route.Name+" does not answer")
}

// countedResponse counts the bytes a route's controller sends back.
type countedResponse struct {
	http.ResponseWriter
	c *counters
	s *Server
}

func (w *countedResponse) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if n > 0 {
		w.c.moved(0, int64(n), w.s.opts.Clock.Now())
	}
	return n, err
}

func (w *countedResponse) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *countedResponse) Unwrap() http.ResponseWriter { return w.ResponseWriter }
