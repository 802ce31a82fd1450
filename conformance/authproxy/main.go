// Command authproxy is a loopback reverse proxy that adds a bearer token to
// every request it forwards.
//
// It exists because the official MCP conformance suite
// (@modelcontextprotocol/conformance 0.2.0-alpha.12) has no way to send an
// Authorization header to the server it tests: its server runner takes only
// --url, and it reaches the server through fetch, undici.request and
// http.request with headers it builds itself. actiond refuses every request
// without a bearer token, so scripts/conformance.sh points the suite at this
// proxy instead.
//
// The token is read from the CONFORMANCE_TOKEN environment variable, never
// from the command line, so it does not show in a process listing.
//
// Usage:
//
//	CONFORMANCE_TOKEN=... authproxy -target http://127.0.0.1:8080 [-listen 127.0.0.1:0] [-addr-file FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// tokenVariable names the environment variable that carries the token.
const tokenVariable = "CONFORMANCE_TOKEN"

type config struct {
	target   *url.URL
	listen   string
	addrFile string
	token    string
}

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "authproxy:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string, logOutput io.Writer) error {
	cfg, err := parseConfig(args, getenv)
	if err != nil {
		return err
	}
	listener, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.listen, err)
	}

	address := listener.Addr().String()
	logger := log.New(logOutput, "", log.LstdFlags|log.Lmicroseconds)
	server := &http.Server{
		Handler: newProxy(cfg.target, cfg.token, isOwnHost(address), logger),
		// No write timeout: subscriptions/listen and SSE responses stay open.
		ReadHeaderTimeout: 10 * time.Second,
	}
	// One connection per request from the suite. With keep-alive, the
	// suite's client (undici) now and then reused a connection whose
	// previous exchange it was still tearing down (it aborts every request's
	// signal once the body is read): about one request in 2,000, under the
	// concurrent tools/list, prompts/list and discovery a 2026-07-28 run
	// makes, was cut mid-body ("terminated"), though the server's answer was
	// whole. Without keep-alive, 8,000 of the same requests all arrived.
	server.SetKeepAlivesEnabled(false)
	// Serve owns the listener from here on and closes it when it returns.
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var failure error
	if cfg.addrFile != "" {
		failure = writeAddress(cfg.addrFile, "http://"+address)
	}
	if failure == nil {
		logger.Printf("forwarding http://%s to %s", address, cfg.target)
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case <-ctx.Done():
		}
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := server.Shutdown(shutdown); err != nil {
		failure = errors.Join(failure, fmt.Errorf("shut down: %w", err))
	}
	return failure
}

func parseConfig(args []string, getenv func(string) string) (config, error) {
	flags := flag.NewFlagSet("authproxy", flag.ContinueOnError)
	target := flags.String("target", "", "origin of the server under test, e.g. http://127.0.0.1:8080 (its path is ignored)")
	listen := flags.String("listen", "127.0.0.1:0", "loopback address to listen on")
	addrFile := flags.String("addr-file", "", "write the proxy's base URL to this file once it listens")
	if err := flags.Parse(args); err != nil {
		return config{}, err
	}

	token := strings.TrimSpace(getenv(tokenVariable))
	if token == "" {
		return config{}, fmt.Errorf("no token: set %s to the bearer token to add", tokenVariable)
	}
	if *target == "" {
		return config{}, errors.New("no target: pass -target with the origin of the server under test")
	}
	parsed, err := url.Parse(*target)
	if err != nil {
		return config{}, fmt.Errorf("parse -target %q: %w", *target, err)
	}
	if parsed.Scheme != "http" && parsed.Scheme != "https" {
		return config{}, fmt.Errorf("-target %q must be an http or https URL", *target)
	}
	if parsed.Host == "" {
		return config{}, fmt.Errorf("-target %q names no host", *target)
	}
	// A bearer token sent in clear text to another machine could be read on
	// the way; only the loopback interface is safe without TLS.
	if parsed.Scheme == "http" && !isLoopbackHost(parsed.Hostname()) {
		return config{}, fmt.Errorf("refusing to send a bearer token over plain http to %s: use https or a loopback address", parsed.Host)
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return config{}, fmt.Errorf("parse -listen %q: %w", *listen, err)
	}
	if !isLoopbackHost(host) {
		return config{}, fmt.Errorf("-listen %q is not a loopback address: the proxy would hand the token to anyone who can reach it", *listen)
	}
	return config{
		target:   &url.URL{Scheme: parsed.Scheme, Host: parsed.Host},
		listen:   *listen,
		addrFile: *addrFile,
		token:    token,
	}, nil
}

// newProxy forwards every request to target with its path unchanged and adds
// "Authorization: Bearer token" when the request carries no Authorization.
//
// Host and Origin are rewritten to the target only when they name the proxy
// itself. Any other value passes through untouched, so the suite's DNS
// rebinding probe (Host: evil.example.com) reaches the server as sent, and
// the server's own Host/Origin checks are what the suite measures.
func newProxy(target *url.URL, token string, ownHost func(string) bool, logger *log.Logger) http.Handler {
	origin := target.Scheme + "://" + target.Host
	proxy := &httputil.ReverseProxy{
		Rewrite: func(request *httputil.ProxyRequest) {
			request.SetURL(target)
			if !ownHost(request.In.Host) {
				request.Out.Host = request.In.Host
			}
			if value := request.In.Header.Get("Origin"); value != "" && ownOrigin(value, ownHost) {
				request.Out.Header.Set("Origin", origin)
			}
			if request.In.Header.Get("Authorization") == "" {
				request.Out.Header.Set("Authorization", "Bearer "+token)
			}
		},
		// Flush every write at once: SSE frames and subscriptions/listen
		// notifications must reach the suite while the response is open.
		FlushInterval: -1,
		ErrorHandler: func(writer http.ResponseWriter, request *http.Request, err error) {
			logger.Printf("%s %s: upstream error: %v", request.Method, request.URL.Path, err)
			http.Error(writer, "authproxy: upstream unreachable: "+err.Error(), http.StatusBadGateway)
		},
	}
	return http.HandlerFunc(func(writer http.ResponseWriter, request *http.Request) {
		started := time.Now()
		recorder := &statusRecorder{ResponseWriter: writer, status: http.StatusOK}
		// ReverseProxy panics with http.ErrAbortHandler when a stream ends
		// mid-body, as every subscriptions/listen stream the suite abandons
		// does; log it too, then let net/http finish the abort.
		defer func() {
			ending := ""
			recovered := recover()
			if recovered != nil {
				ending = ", stream cut short"
			}
			logger.Printf("%s %s host=%q mcp-method=%q -> %d in %s%s",
				request.Method, request.URL.Path, request.Host, request.Header.Get("Mcp-Method"),
				recorder.status, time.Since(started).Round(time.Millisecond), ending)
			if recovered != nil {
				panic(recovered)
			}
		}()
		proxy.ServeHTTP(recorder, request)
	})
}

// statusRecorder remembers the status for the access log; Unwrap keeps
// http.ResponseController (and so flushing) working through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (recorder *statusRecorder) WriteHeader(status int) {
	recorder.status = status
	recorder.ResponseWriter.WriteHeader(status)
}

func (recorder *statusRecorder) Unwrap() http.ResponseWriter { return recorder.ResponseWriter }

// isOwnHost reports whether a Host header names the proxy: its port on any
// loopback name, since the suite may write localhost, 127.0.0.1 or [::1].
func isOwnHost(listenAddress string) func(string) bool {
	_, port, err := net.SplitHostPort(listenAddress)
	if err != nil {
		return func(string) bool { return false }
	}
	return func(host string) bool {
		name, hostPort, err := net.SplitHostPort(host)
		return err == nil && hostPort == port && isLoopbackHost(name)
	}
}

func ownOrigin(value string, ownHost func(string) bool) bool {
	parsed, err := url.Parse(value)
	return err == nil && parsed.Scheme == "http" && ownHost(parsed.Host)
}

func isLoopbackHost(name string) bool {
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(name, "[]"))
	return ip != nil && ip.IsLoopback()
}

// writeAddress writes through a temporary file and a rename so a reader
// polling for the file never sees it half written.
func writeAddress(path, address string) (err error) {
	temporary, err := os.CreateTemp(filepath.Dir(path), ".authproxy-addr-*")
	if err != nil {
		return fmt.Errorf("write address file: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreMissing(os.Remove(temporary.Name())))
		}
	}()
	if _, err := temporary.WriteString(address + "\n"); err != nil {
		return errors.Join(fmt.Errorf("write address file: %w", err), temporary.Close())
	}
	if err := temporary.Close(); err != nil {
		return fmt.Errorf("write address file: %w", err)
	}
	if err := os.Rename(temporary.Name(), path); err != nil {
		return fmt.Errorf("write address file: %w", err)
	}
	return nil
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
