// Command route-controller is the smallest program a host route can lead
// to: it answers only requests that carry the route's secret, compared in
// constant time, and trusts X-Isx-Instance and X-Isx-Template only then.
//
//	route-controller -listen 127.0.0.1:7070 -route work.isx.internal
//
// It reads the secret file at every request, so deleting the file (the
// proxy makes a new one at once) rotates the secret without a restart.
package main

import (
	"crypto/subtle"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:7070", "where to listen: on loopback only, never 0.0.0.0")
	route := flag.String("route", "work.isx.internal", "the route's name in config.yaml's host-routes")
	flag.Parse()
	home, err := os.UserHomeDir()
	if err != nil {
		log.Fatal(err)
	}
	secretFile := filepath.Join(home, ".config", "incus-spawn", "host-routes", *route+".secret")
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on %s\n", l.Addr())
	log.Fatal(http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		expected, err := os.ReadFile(secretFile)
		given := r.Header.Get("X-Isx-Route-Secret")
		if err != nil || len(strings.TrimSpace(string(expected))) == 0 ||
			subtle.ConstantTimeCompare([]byte(given), []byte(strings.TrimSpace(string(expected)))) != 1 {
			// Not through the proxy: another program on this host, say.
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		instance, template := r.Header.Get("X-Isx-Instance"), r.Header.Get("X-Isx-Template")
		fmt.Printf("%s %s from %s (%s)\n", r.Method, r.URL.Path, instance, template)
		fmt.Fprintf(w, "hello %s\n", instance)
	})))
}
