package server

import (
	"net/http"

	"github.com/incusspawn/isx/internal/actiond/auth"
)

// loopbackOnly refuses, on every route, a request that reached a loopback
// listener under a Host that is not a loopback name: a page that rebinds
// its own name to 127.0.0.1 gets neither the API, the MCP servers, the
// sign-in nor the explorer's page under its origin, where a token pasted
// into the page would be the page's to read.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth.Rebound(r) {
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "forbidden: actiond listens on loopback and answers only requests whose Host names this machine (127.0.0.1, [::1] or localhost)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
