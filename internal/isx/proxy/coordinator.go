package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/deadline"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// CoordinatorCommand makes the command of the host isx mcp that serves a
// coordinator instance: Streamable HTTP on the unix socket given. The
// proxy starts it at the instance's first request and keeps it (one per
// coordinator) until the instance is gone or the proxy stops.
type CoordinatorCommand func(name, socket string) *exec.Cmd

// backend is one coordinator's host isx mcp.
type backend struct {
	cmd    *exec.Cmd
	socket string
	proxy  *httputil.ReverseProxy
	exited chan struct{}
}

// serveCoordinator serves https://mcp.isx.internal/... to a coordinator:
// its current secret in X-Isx-Instance-Secret on its own socket, and the
// grant checked again at every new connection.
func (s *Server) serveCoordinator(w http.ResponseWriter, r *http.Request, e *entry) {
	refuse := func(status int, kind, why string) {
		s.opts.Log.Info("refused a request to isx mcp", "instance", e.name, "why", why)
		writeError(w, status, kind, "isx host proxy: "+why)
	}
	if !sameSecret(strings.TrimSpace(r.Header.Get(SecretHeader)), e.secret) {
		refuse(http.StatusUnauthorized, "authentication_error", instance.CoordinatorHost+" needs this instance's current secret (the file $"+instance.SecretFileEnv+" names) in "+SecretHeader)
		return
	}
	if !s.granted(r.Context(), e, r.Header.Get("Mcp-Session-Id") == "") {
		refuse(http.StatusForbidden, "permission_error", e.name+" may not call isx mcp: only `isx branch --mcp-client` grants it, never to a copy or to an instance made through MCP")
		return
	}
	if s.opts.Coordinator == nil {
		refuse(http.StatusServiceUnavailable, "api_error", "this host proxy serves no isx mcp to coordinators")
		return
	}
	b, err := s.backendFor(e.name)
	if err != nil {
		s.opts.Log.Warn("isx mcp for a coordinator could not be started", "instance", e.name, "error", err)
		writeError(w, http.StatusBadGateway, "api_error", "isx host proxy: isx mcp could not be started for "+e.name+" (the proxy's log says why)")
		return
	}
	c := e.counters
	c.trafficStarted(s.opts.Clock.Now())
	defer func() { c.trafficEnded(s.opts.Clock.Now()) }()
	cleanOutbound(r.Header, e.secret)
	b.proxy.ServeHTTP(w, r)
}

// grantFresh is how long what Incus said of a coordinator's grant is
// trusted before it is read again; an update of the instance, seen on
// Incus's event stream, ends that trust at once.
const grantFresh = 2 * time.Second

// granted reports whether the instance holds the coordinator grant for
// this very start. Every request needs it, whatever session it says it
// belongs to (a header the client chooses), so a withdrawn grant counts
// within grantFresh on every connection. A request opening a session
// (opening) always reads Incus afresh: a coordinator told its grant was
// withdrawn cannot reconnect on the strength of a cached yes.
func (s *Server) granted(ctx context.Context, e *entry, opening bool) bool {
	now := s.opts.Clock.Now()
	if ok, fresh := e.grant.seen(now); fresh && !opening {
		return ok
	}
	inst, _, err := s.opts.Client.GetInstance(ctx, e.name)
	ok := err == nil && instance.Coordinator(inst) && incarnation(inst) == e.incarnation
	e.grant.saw(ok, now)
	return ok
}

// grantSeen is the coordinator grant as last read from Incus.
type grantSeen struct {
	mu      sync.Mutex
	ok      bool
	checked time.Time
}

func (g *grantSeen) seen(now time.Time) (ok, fresh bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ok, !g.checked.IsZero() && now.Sub(g.checked) < grantFresh && !now.Before(g.checked)
}

// stale makes the next request read the grant from Incus again.
func (g *grantSeen) stale() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.checked = time.Time{}
}

func (g *grantSeen) saw(ok bool, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ok, g.checked = ok, now
}

// backendFor is the coordinator's running isx mcp, started when there is
// none.
func (s *Server) backendFor(name string) (*backend, error) {
	s.backendMu.Lock()
	defer s.backendMu.Unlock()
	if b := s.backends[name]; b != nil {
		select {
		case <-b.exited:
			delete(s.backends, name)
		default:
			return b, nil
		}
	}
	dir := filepath.Join(s.dir, "c")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, coded.Wrap(CodeState, err, "cannot make the coordinators' socket directory %s", dir)
	}
	socket := filepath.Join(dir, filepath.Base(s.socketOf(name)))
	os.Remove(socket)
	cmd := s.opts.Coordinator(name, socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, coded.Wrap(CodeState, err, "cannot start isx mcp for %s", name)
	}
	b := &backend{cmd: cmd, socket: socket, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		s.opts.Log.Info("isx mcp for a coordinator ended", "instance", name, "error", err)
		close(b.exited)
	}()
	if err := s.waitForSocket(socket, b.exited); err != nil {
		cmd.Process.Kill() //nolint:errcheck // it may be gone already
		<-b.exited
		return nil, err
	}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     time.Minute,
	}
	b.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "isx-mcp"
			pr.Out.Host = "isx-mcp"
		},
		Transport:     transport,
		FlushInterval: -1,
		BufferPool:    copyBuffers,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if deadline.TooSlow(err) || deadline.Cut(r.Context()) {
				tooSlow(w)
				return
			}
			if r.Context().Err() == nil {
				s.opts.Log.Warn("isx mcp for a coordinator did not answer", "instance", name, "error", err)
				writeError(w, http.StatusBadGateway, "api_error", "isx host proxy: isx mcp for "+name+" did not answer")
			}
		},
	}
	s.backends[name] = b
	s.opts.Log.Info("started isx mcp for a coordinator", "instance", name, "pid", cmd.Process.Pid)
	return b, nil
}

// waitForSocket waits until the backend listens, or ends, or 30 s pass.
func (s *Server) waitForSocket(socket string, exited <-chan struct{}) error {
	deadline := s.opts.Clock.After(30 * time.Second)
	for {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return coded.New(CodeState, "isx mcp for the coordinator ended before it listened on %s", socket)
		case <-deadline:
			return coded.New(CodeState, "isx mcp for the coordinator did not listen on %s within 30 s", socket)
		case <-s.opts.Clock.After(20 * time.Millisecond):
		}
	}
}

// stopBackend ends a coordinator's isx mcp: the instance is gone, or the
// proxy stops. Its instances stay held by the coordinator.
func (s *Server) stopBackend(name string) {
	s.backendMu.Lock()
	b := s.backends[name]
	delete(s.backends, name)
	s.backendMu.Unlock()
	if b == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may be gone already
	select {
	case <-b.exited:
	case <-s.opts.Clock.After(10 * time.Second):
		b.cmd.Process.Kill() //nolint:errcheck // it may be gone already
		<-b.exited
	}
	if err := os.Remove(b.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.opts.Log.Warn("cannot remove a coordinator's socket", "socket", b.socket, "error", err)
	}
}

func (s *Server) stopBackends() {
	s.backendMu.Lock()
	names := make([]string, 0, len(s.backends))
	for name := range s.backends {
		names = append(names, name)
	}
	s.backendMu.Unlock()
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() { s.stopBackend(name) })
	}
	wg.Wait()
}

// directSuffix keys a coordinator's TLS listener beside its plain one.
const directSuffix = "#tls"

func (s *Server) directSocketOf(name string) string {
	return instance.CoordinatorSocket(s.dir, s.opts.Client.ProjectName(), name)
}

// listenDirect serves a coordinator's TLS socket, once: what reaches
// https://mcp.isx.internal/ (or a host route's name) without a proxy.
func (s *Server) listenDirect(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := name + directSuffix
	if _, ok := s.listeners[key]; ok {
		return nil
	}
	l, err := privateSocket(s.directSocketOf(name), name)
	if err != nil {
		return err
	}
	named := &namedListener{Listener: l, name: name, log: s.opts.Log}
	s.listeners[key] = named
	tlsListener := tls.NewListener(named, &tls.Config{
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			host := strings.ToLower(hello.ServerName)
			if host != instance.CoordinatorHost && s.routes[host] == nil {
				return nil, fmt.Errorf("the isx host proxy answers %s and the host routes here, not %q", instance.CoordinatorHost, host)
			}
			return s.ca.leaf(host)
		},
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	s.work.Go(func() {
		_ = s.directHTTP.Serve(tlsListener)
	})
	return nil
}

// serveDirect is a request that came by TLS straight to a coordinator's
// port 443: isx mcp or a host route, by the name it was sent to.
func (s *Server) serveDirect(w http.ResponseWriter, r *http.Request) {
	e := s.current(linkOf(r.Context()))
	if e == nil {
		writeError(w, http.StatusForbidden, "permission_error", "the isx host proxy serves no instance on this socket now")
		return
	}
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == instance.CoordinatorHost {
		s.serveCoordinator(w, r, e)
		return
	}
	if route := s.routes[host]; route != nil {
		s.serveRoute(w, r, e, route)
		return
	}
	writeError(w, http.StatusNotFound, "not_found_error", "the isx host proxy answers "+instance.CoordinatorHost+" here, not "+host)
}
