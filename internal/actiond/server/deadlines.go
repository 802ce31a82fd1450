package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/graph"
)

// mcpRoute is where the MCP endpoints are mounted.
const mcpRoute = "/mcp/v1/"

// HTTPOptions bound how long a connection may take. A zero field takes its
// default.
type HTTPOptions struct {
	// HeaderTimeout bounds reading a request's headers (default 10 s).
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers (default 30 s): a body trickled a byte at a time is cut off.
	BodyTimeout time.Duration
	// WriteTimeout bounds a request's answer, from the end of its headers
	// (default 1 min); LongWriteTimeout that of the MCP endpoint and of
	// GraphQL, whose requests run as long as a server's response timeout
	// (default that maximum, 10 min, and 1 min more).
	WriteTimeout, LongWriteTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request (default 2 min).
	IdleTimeout time.Duration
}

func (o HTTPOptions) withDefaults() HTTPOptions {
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = 10 * time.Second
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = time.Minute
	}
	if o.LongWriteTimeout <= 0 {
		o.LongWriteTimeout = action.MaxResponseTimeout + time.Minute
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	return o
}

// HTTPServer is the HTTP server for the handler, with the deadlines of
// Options.HTTP: headers and idle connections bounded by the server, each
// request's body and answer by the handler (withDeadlines), since how
// long an answer may take depends on the route.
func (s *Server) HTTPServer() *http.Server {
	o := s.opts.HTTP
	return &http.Server{Handler: s.handler, ReadHeaderTimeout: o.HeaderTimeout, IdleTimeout: o.IdleTimeout}
}

// withDeadlines sets each request's read deadline to the end of its body
// timeout and its write deadline to that of its route. Once the handler
// has read the body to its end, net/http lifts the read deadline for its
// background read (which notices a client that goes away), so a long
// answer is bounded by the write deadline alone. Deadlines are the
// socket's, so they are taken from the real clock.
func withDeadlines(next http.Handler, o HTTPOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		write := o.WriteTimeout
		if strings.HasPrefix(r.URL.Path, mcpRoute) || r.URL.Path == graph.Path {
			write = o.LongWriteTimeout
		}
		rc := http.NewResponseController(w)
		// A writer that cannot take deadlines (a test's recorder) has none.
		_ = rc.SetReadDeadline(now.Add(o.BodyTimeout))
		_ = rc.SetWriteDeadline(now.Add(write))
		next.ServeHTTP(w, r)
	})
}
