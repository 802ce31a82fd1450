package auth

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// What a request must show to be served as someone on this machine. A web
// page the person has open can make the browser send requests to a
// loopback port, either to 127.0.0.1 directly (the page's own origin then
// comes as Origin) or through a name of its own that it rebinds to
// 127.0.0.1 (the Host is then that name): neither may be the local root.

// LocalCaller reports whether r may be served with the authority of this
// machine's user: it came from a loopback address to a loopback listener,
// its Host names this machine by a loopback name with the port the
// connection reached, and its Origin, when it has one, is that same place.
// A request for which the listener's address is unknown is not local.
func LocalCaller(r *http.Request) bool {
	port, ok := loopbackListener(r)
	if !ok || !fromLoopback(r) {
		return false
	}
	if host, hostPort := splitHost(r.Host, "80"); !LoopbackName(host) || hostPort != port {
		return false
	}
	return !ForeignOrigin(r, port)
}

// Rebound reports whether r reached a loopback listener under a Host that
// is not a loopback name: a name some page rebound to 127.0.0.1.
func Rebound(r *http.Request) bool {
	if _, ok := loopbackListener(r); !ok {
		return false
	}
	host, _ := splitHost(r.Host, "80")
	return !LoopbackName(host)
}

// ForeignOrigin reports whether r carries an Origin other than a loopback
// name at port over plain HTTP, which is where actiond's own pages are.
// "null" (a sandboxed frame, a file) is foreign.
func ForeignOrigin(r *http.Request, port string) bool {
	origins := r.Header.Values("Origin")
	if len(origins) == 0 {
		return false
	}
	if len(origins) > 1 {
		return true
	}
	u, err := url.Parse(origins[0])
	if err != nil || u.Scheme != "http" || u.Path != "" || u.User != nil {
		return true
	}
	host, originPort := splitHost(u.Host, "80")
	return !LoopbackName(host) || originPort != port
}

// LoopbackName reports whether host (no port) names this machine:
// localhost or a loopback address, bracketed or not.
func LoopbackName(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoopbackPort is the port of the loopback address r's connection reached,
// when it reached one.
func LoopbackPort(r *http.Request) (string, bool) { return loopbackListener(r) }

// loopbackListener is the port of the loopback address r's connection
// reached, when it reached one.
func loopbackListener(r *http.Request) (string, bool) {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return "", false
	}
	host, port, err := net.SplitHostPort(local.String())
	if err != nil || !LoopbackName(host) {
		return "", false
	}
	return port, true
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	return err == nil && LoopbackName(host)
}

// splitHost splits host[:port], giving fallback as the port when there is
// none; the port is normalised as a number.
func splitHost(hostport, fallback string) (string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return strings.Trim(hostport, "[]"), fallback
	}
	if n, err := strconv.ParseUint(port, 10, 16); err == nil {
		port = strconv.FormatUint(n, 10)
	}
	return host, port
}
