package main

// These tests cover harness tooling, not an ACT requirement: the proxy that
// lets the conformance suite reach actiond with a bearer token (see README in
// conformance/). They run real HTTP servers on loopback.

import (
	"bufio"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// seen is what the upstream server observed of the last request.
type seen struct {
	mu            sync.Mutex
	authorization string
	host          string
	origin        string
	path          string
}

func (s *seen) record(request *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authorization = request.Header.Get("Authorization")
	s.host = request.Host
	s.origin = request.Header.Get("Origin")
	s.path = request.URL.RequestURI()
}

func (s *seen) snapshot() seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seen{authorization: s.authorization, host: s.host, origin: s.origin, path: s.path}
}

// startPair starts an upstream that records requests and the proxy in front
// of it, and returns the upstream, the proxy and what the upstream saw.
func startPair(t *testing.T, upstreamHandler http.HandlerFunc) (*httptest.Server, *httptest.Server, *seen) {
	t.Helper()
	return startPairLogging(t, upstreamHandler, io.Discard)
}

func startPairLogging(t *testing.T, upstreamHandler http.HandlerFunc, logOutput io.Writer) (*httptest.Server, *httptest.Server, *seen) {
	t.Helper()
	observed := &seen{}
	upstream := httptest.NewServer(http.HandlerFunc(func(writer http.ResponseWriter, request *http.Request) {
		observed.record(request)
		if upstreamHandler != nil {
			upstreamHandler(writer, request)
			return
		}
		writer.Header().Set("Content-Type", "application/json")
		io.WriteString(writer, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	t.Cleanup(upstream.Close)

	target, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatalf("parse upstream URL: %v", err)
	}
	proxy := httptest.NewUnstartedServer(nil)
	proxy.Config.Handler = newProxy(target, "test-token", isOwnHost(proxy.Listener.Addr().String()), log.New(logOutput, "", 0))
	proxy.Start()
	t.Cleanup(proxy.Close)
	return upstream, proxy, observed
}

func send(t *testing.T, request *http.Request) *http.Response {
	t.Helper()
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatalf("%s %s: %v", request.Method, request.URL, err)
	}
	t.Cleanup(func() { response.Body.Close() })
	return response
}

func newPost(t *testing.T, address string) *http.Request {
	t.Helper()
	request, err := http.NewRequest(http.MethodPost, address, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	return request
}

func TestProxyAddsBearerTokenWhenMissing(t *testing.T) {
	_, proxy, observed := startPair(t, nil)

	response := send(t, newPost(t, proxy.URL+"/mcp/v1/000000000000/conformance?x=1"))
	if response.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", response.StatusCode)
	}
	got := observed.snapshot()
	if got.authorization != "Bearer test-token" {
		t.Errorf("upstream Authorization = %q, want %q", got.authorization, "Bearer test-token")
	}
	if got.path != "/mcp/v1/000000000000/conformance?x=1" {
		t.Errorf("upstream path = %q, want the request's path and query unchanged", got.path)
	}
}

func TestProxyKeepsAnAuthorizationTheClientSent(t *testing.T) {
	_, proxy, observed := startPair(t, nil)

	request := newPost(t, proxy.URL+"/mcp")
	request.Header.Set("Authorization", "Bearer from-client")
	send(t, request)
	if got := observed.snapshot().authorization; got != "Bearer from-client" {
		t.Errorf("upstream Authorization = %q, want the client's own", got)
	}
}

func TestProxyRewritesHostAndOriginThatNameTheProxy(t *testing.T) {
	upstream, proxy, observed := startPair(t, nil)
	proxyURL, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatalf("parse proxy URL: %v", err)
	}
	upstreamURL, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatalf("parse upstream URL: %v", err)
	}

	// The suite may name the proxy as localhost rather than 127.0.0.1.
	request := newPost(t, proxy.URL+"/mcp")
	request.Host = "localhost:" + proxyURL.Port()
	request.Header.Set("Origin", "http://localhost:"+proxyURL.Port())
	send(t, request)

	got := observed.snapshot()
	if got.host != upstreamURL.Host {
		t.Errorf("upstream Host = %q, want the upstream's own %q", got.host, upstreamURL.Host)
	}
	if got.origin != upstream.URL {
		t.Errorf("upstream Origin = %q, want %q", got.origin, upstream.URL)
	}
}

// The suite's dns-rebinding-protection scenario sends a foreign Host and
// Origin; the server under test must see them as sent to be measured.
func TestProxyPassesAForeignHostAndOriginThrough(t *testing.T) {
	_, proxy, observed := startPair(t, nil)

	request := newPost(t, proxy.URL+"/mcp")
	request.Host = "evil.example.com"
	request.Header.Set("Origin", "http://evil.example.com")
	send(t, request)

	got := observed.snapshot()
	if got.host != "evil.example.com" {
		t.Errorf("upstream Host = %q, want evil.example.com", got.host)
	}
	if got.origin != "http://evil.example.com" {
		t.Errorf("upstream Origin = %q, want http://evil.example.com", got.origin)
	}
}

// An event must reach the client while the upstream still holds the
// response open, as a subscriptions/listen stream does.
func TestProxyDeliversStreamedEventsBeforeTheResponseEnds(t *testing.T) {
	release := make(chan struct{})
	_, proxy, _ := startPair(t, func(writer http.ResponseWriter, request *http.Request) {
		writer.Header().Set("Content-Type", "text/event-stream")
		writer.WriteHeader(http.StatusOK)
		io.WriteString(writer, "data: {\"first\":true}\n\n")
		if err := http.NewResponseController(writer).Flush(); err != nil {
			t.Errorf("upstream flush: %v", err)
			return
		}
		select {
		case <-release:
		case <-request.Context().Done():
		}
		io.WriteString(writer, "data: {\"second\":true}\n\n")
	})
	defer close(release)

	// The deadline only stops a buffering proxy from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	request := newPost(t, proxy.URL+"/mcp").WithContext(ctx)
	response := send(t, request)

	line, err := bufio.NewReader(response.Body).ReadString('\n')
	if err != nil {
		t.Fatalf("read first event while the upstream holds the stream open: %v", err)
	}
	if line != "data: {\"first\":true}\n" {
		t.Errorf("first line = %q, want the first event", line)
	}
}

// lineWriter hands each log line to a channel, so a test can wait for one
// without sleeping.
type lineWriter chan string

func (lines lineWriter) Write(p []byte) (int, error) {
	lines <- string(p)
	return len(p), nil
}

// The suite abandons every subscriptions/listen stream it opens; the proxy
// must still log the request (ReverseProxy aborts such a response by panic).
func TestProxyLogsAStreamTheClientAbandons(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	lines := make(lineWriter, 16)
	_, proxy, _ := startPairLogging(t, func(writer http.ResponseWriter, request *http.Request) {
		writer.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(writer, "data: {}\n\n")
		if err := http.NewResponseController(writer).Flush(); err != nil {
			t.Errorf("upstream flush: %v", err)
			return
		}
		select {
		case <-release:
		case <-request.Context().Done():
		}
	}, lines)

	ctx, cancel := context.WithCancel(context.Background())
	request := newPost(t, proxy.URL+"/mcp").WithContext(ctx)
	request.Header.Set("Mcp-Method", "subscriptions/listen")
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	if _, err := bufio.NewReader(response.Body).ReadString('\n'); err != nil {
		t.Fatalf("read first event: %v", err)
	}
	cancel()
	response.Body.Close()

	deadline := time.After(10 * time.Second)
	for {
		select {
		case line := <-lines:
			if strings.Contains(line, `mcp-method="subscriptions/listen"`) {
				if !strings.Contains(line, "stream cut short") {
					t.Errorf("log line = %q, want it to say the stream was cut short", line)
				}
				return
			}
		case <-deadline:
			t.Fatal("no log line for the abandoned stream")
		}
	}
}

func TestProxyAnswersBadGatewayWhenTheUpstreamIsDown(t *testing.T) {
	upstream, proxy, _ := startPair(t, nil)
	upstream.Close()

	response := send(t, newPost(t, proxy.URL+"/mcp"))
	if response.StatusCode != http.StatusBadGateway {
		t.Errorf("status = %d, want 502", response.StatusCode)
	}
}

func TestParseConfig(t *testing.T) {
	withToken := func(name string) string {
		if name == tokenVariable {
			return "secret"
		}
		return ""
	}
	noToken := func(string) string { return "" }

	cases := []struct {
		name       string
		args       []string
		getenv     func(string) string
		wantError  string
		wantTarget string
	}{
		{name: "loopback http target, path dropped", args: []string{"-target", "http://127.0.0.1:8080/mcp/v1/a/b"}, getenv: withToken, wantTarget: "http://127.0.0.1:8080"},
		{name: "localhost target", args: []string{"-target", "http://localhost:8080"}, getenv: withToken, wantTarget: "http://localhost:8080"},
		{name: "remote https target", args: []string{"-target", "https://api.example.com/mcp"}, getenv: withToken, wantTarget: "https://api.example.com"},
		{name: "no token", args: []string{"-target", "http://127.0.0.1:8080"}, getenv: noToken, wantError: "no token"},
		{name: "no target", args: nil, getenv: withToken, wantError: "no target"},
		{name: "remote plain http", args: []string{"-target", "http://api.example.com"}, getenv: withToken, wantError: "plain http"},
		{name: "not http", args: []string{"-target", "ftp://127.0.0.1"}, getenv: withToken, wantError: "http or https"},
		{name: "listen beyond loopback", args: []string{"-target", "http://127.0.0.1:8080", "-listen", "0.0.0.0:0"}, getenv: withToken, wantError: "not a loopback"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(tc.args, tc.getenv)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if cfg.target.String() != tc.wantTarget {
				t.Errorf("target = %q, want %q", cfg.target, tc.wantTarget)
			}
			if cfg.token != "secret" {
				t.Errorf("token = %q, want the environment's", cfg.token)
			}
		})
	}
}

func TestWriteAddressReplacesTheFileWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "addr")
	if err := os.WriteFile(path, []byte("stale\n"), 0o600); err != nil {
		t.Fatalf("seed file: %v", err)
	}
	if err := writeAddress(path, "http://127.0.0.1:4321"); err != nil {
		t.Fatalf("writeAddress: %v", err)
	}
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if string(content) != "http://127.0.0.1:4321\n" {
		t.Errorf("content = %q", content)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatalf("read dir: %v", err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the address file (no temporary left)", len(entries))
	}
}
