package gateway

import (
	"net/http"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/mcpkit"
)

// Meter is told of each request the endpoint answered and of each
// admission it refused (the server's metrics). Every value it is given
// comes from a bounded set: a server the caller could see ("" otherwise),
// a method the endpoint knows ("other" otherwise), an HTTP status (0 when
// the client went away before an answer), a refusal's fixed code. Never a
// principal, a subject or anything from a request's arguments.
type Meter interface {
	Answered(server, method string, status int, elapsed time.Duration)
	Refused(reason string)
}

// ServeHTTP handles one request to an MCP server's endpoint, metered when
// the endpoint has a Meter.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.opts.Meter == nil {
		h.serveHTTP(w, r)
		return
	}
	started := h.opts.Clock.Now()
	m := &meteredWriter{ResponseWriter: w}
	h.serveHTTP(m, r)
	h.opts.Meter.Answered(m.server, m.method, m.status, h.opts.Clock.Since(started))
}

// meteredWriter keeps what the meter is told of a request: its status as
// written, and the server and method once they are known.
type meteredWriter struct {
	http.ResponseWriter
	status         int
	server, method string
}

func (m *meteredWriter) WriteHeader(status int) {
	if m.status == 0 {
		m.status = status
	}
	m.ResponseWriter.WriteHeader(status)
}

func (m *meteredWriter) Write(p []byte) (int, error) {
	if m.status == 0 {
		m.status = http.StatusOK
	}
	return m.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (m *meteredWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

// meterRequest notes the server a request resolved to and its method.
func meterRequest(w http.ResponseWriter, server, method string) {
	if m, ok := w.(*meteredWriter); ok {
		m.server, m.method = server, meteredMethod(method)
	}
}

// meterRefused counts a refusal by its fixed code.
func (h *Handler) meterRefused(code string) {
	if h.opts.Meter != nil {
		h.opts.Meter.Refused(code)
	}
}

// meteredMethod is method when the endpoint knows it, so that a client
// cannot mint label values.
func meteredMethod(method string) string {
	switch method {
	case "tools/list", "tools/call", "tasks/get", "tasks/update", "tasks/cancel",
		"resources/list", "resources/read", "resources/templates/list",
		"prompts/list", "prompts/get", mcpkit.MethodListSkills, mcpkit.MethodGetSkill,
		"server/discover", "initialize", "ping":
		return method
	}
	if strings.HasPrefix(method, "notifications/") {
		return "notifications"
	}
	return "other"
}
