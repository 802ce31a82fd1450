package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/isx/deadline"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// connect answers CONNECT: for a host the proxy injects credentials into
// (on port 443) it terminates TLS with a certificate of its CA and serves
// the requests inside as its own; for any other host it opens a tunnel,
// counted as one request in flight for as long as it is open.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, e *entry) {
	if isCoordinatorHost(r.Host) {
		s.intercept(w, e, instance.CoordinatorHost, func(w http.ResponseWriter, r *http.Request) {
			s.serveCoordinator(w, r, e)
		})
		return
	}
	if route := s.routeFor(r.Host); route != nil {
		s.intercept(w, e, route.Name, func(w http.ResponseWriter, r *http.Request) {
			s.serveRoute(w, r, e, route)
		})
		return
	}
	t := s.targetFor("https", r.Host)
	if t.kind != "" {
		s.intercept(w, e, t.host, func(w http.ResponseWriter, r *http.Request) {
			s.forward(w, r, e, t, r.URL.Path)
		})
		return
	}
	s.tunnel(w, r, e, t)
}

// hijack takes the client connection over after a 200 to the CONNECT.
func hijack(w http.ResponseWriter) (net.Conn, *bufio.Reader, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be taken over")
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	// The connection is a stream of its own now: its user sets its limits.
	conn.SetDeadline(time.Time{}) //nolint:errcheck // a conn without deadlines has none to clear
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, rw.Reader, nil
}

func (s *Server) tunnel(w http.ResponseWriter, r *http.Request, e *entry, t target) {
	c := e.counters
	c.trafficStarted(s.opts.Clock.Now())
	defer func() { c.trafficEnded(s.opts.Clock.Now()) }()
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	upstream, err := s.transport.dial(ctx, t)
	cancel()
	if err != nil {
		s.opts.Log.Info("a tunnel could not be opened", "instance", e.name, "host", t.host, "error", err)
		writeError(w, http.StatusBadGateway, "api_error", "isx host proxy: cannot reach "+t.host+": "+err.Error())
		return
	}
	defer upstream.Close()
	client, buffered, err := hijack(w)
	if err != nil {
		s.opts.Log.Info("a tunnel could not be taken over", "instance", e.name, "error", err)
		return
	}
	defer client.Close()
	defer s.track(client)()
	defer s.track(upstream)()
	s.splice(e, client, buffered, upstream)
}

// splice copies both ways until either side ends, counting the bytes,
// or until nothing has crossed either way for TunnelIdle.
func (s *Server) splice(e *entry, client net.Conn, buffered *bufio.Reader, upstream net.Conn) {
	var wg sync.WaitGroup
	quiet := deadline.NewQuiet(s.opts.TunnelIdle)
	up := &countingWriter{w: upstream, count: func(n int64) { e.counters.moved(n, 0, s.opts.Clock.Now()) }}
	down := &countingWriter{w: client, count: func(n int64) { e.counters.moved(0, n, s.opts.Clock.Now()) }}
	idle := func(err error) {
		if errors.Is(err, deadline.ErrIdle) {
			s.opts.Log.Info("closed a tunnel nothing crossed for too long", "instance", e.name, "idle", s.opts.TunnelIdle)
			client.Close()
			upstream.Close()
		}
	}
	wg.Go(func() {
		_, err := io.Copy(up, quiet.Reader(buffered, client))
		idle(err)
		closeWrite(upstream)
		// An upstream that does not close after the instance did is given
		// a minute to finish.
		quiet.Finish(time.Minute)
	})
	wg.Go(func() {
		_, err := io.Copy(down, quiet.Reader(upstream, upstream))
		idle(err)
		closeWrite(client)
	})
	wg.Wait()
}

// closeWrite half-closes where the connection can, so that the other
// direction finishes what it sends; otherwise it closes.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	c.Close()
}

type countingWriter struct {
	w     io.Writer
	count func(int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if n > 0 {
		c.count(int64(n))
	}
	return n, err
}

// intercept terminates the instance's TLS to a host the proxy answers for
// (an injected host, a host route) and serves the requests inside with
// serve; the CONNECT proved the instance, so an injected host's requests
// need no secret of their own.
func (s *Server) intercept(w http.ResponseWriter, e *entry, host string, serve http.HandlerFunc) {
	client, buffered, err := hijack(w)
	if err != nil {
		s.opts.Log.Info("a connection could not be taken over", "instance", e.name, "error", err)
		return
	}
	defer s.track(client)()
	conn := tls.Server(&bufferedConn{Conn: client, r: buffered}, &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.ca.leaf(host) },
		NextProtos:     []string{"http/1.1"},
		MinVersion:     tls.VersionTLS12,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = conn.HandshakeContext(ctx)
	cancel()
	if err != nil {
		s.opts.Log.Info("TLS with the instance failed (does it trust the proxy's CA?)", "instance", e.name, "host", host, "error", err)
		conn.Close()
		return
	}
	inner := s.instanceServer(serve)
	inner.Serve(newOneConnListener(conn)) //nolint:errcheck // ends when the connection does
	inner.Close()
}

// bufferedConn reads first what the CONNECT's reader already holds.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// oneConnListener hands out one connection, then waits for it to close.
type oneConnListener struct {
	conn   chan net.Conn
	closed chan struct{}
	addr   net.Addr
	once   sync.Once
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{conn: make(chan net.Conn, 1), closed: make(chan struct{}), addr: c.LocalAddr()}
	l.conn <- &closeNotifyConn{Conn: c, l: l}
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conn:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.addr }

type closeNotifyConn struct {
	net.Conn
	l *oneConnListener
}

func (c *closeNotifyConn) Close() error {
	err := c.Conn.Close()
	c.l.Close()
	return err
}

// isCoordinatorHost reports whether a CONNECT is for mcp.isx.internal:443.
func isCoordinatorHost(hostport string) bool {
	return strings.EqualFold(hostport, instance.CoordinatorHost+":443") || strings.EqualFold(hostport, instance.CoordinatorHost)
}
