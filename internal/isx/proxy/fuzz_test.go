package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/template"
)

const (
	fuzzSecret  = "isx-fuzz-instance-secret-0123456789abcdef"
	fuzzKeys    = "sk-ant-api03-FUZZKEY"
	fuzzOpenAI  = "sk-proj-FUZZKEY"
	fuzzGitHub  = "ghp_FUZZKEY"
	fuzzAccount = "claude:\n  default: {api-key: " + fuzzKeys + "}\nopenai:\n  default: {api-key: " + fuzzOpenAI + "}\ngithub:\n  default: {token: " + fuzzGitHub + "}\n"
)

// FuzzInstanceRequest: whatever bytes an instance sends on its socket, the
// proxy answers without a panic; nothing reaches an upstream without this
// start's secret; what reaches one never carries the secret or an X-Isx-
// header; no answer carries an account's credential; and the proxy's own
// refusals are errors in the Messages API's shape. Every upstream the
// proxy may inject into is a real HTTP server on loopback, named in
// config.yaml's upstreams; any other host is refused at dialling, so that
// nothing leaves the machine.
func FuzzInstanceRequest(f *testing.F) {
	f.Add("POST", "/anthropic/v1/messages", "Host: isx-proxy\nX-Api-Key: $SECRET\nContent-Type: application/json", []byte(`{"model":"m","messages":[]}`))
	f.Add("GET", "http://api.openai.com/v1/models?x=1", "Host: api.openai.com\nProxy-Authorization: Basic $BASIC\nX-Isx-Route-Secret: s\nX-Isx-Instance-Secret: $SECRET", []byte(nil))
	f.Add("GET", "http://github.com/o/r.git/info/refs", "Host: github.com\nAuthorization: Bearer $SECRET\nAuthorization: Bearer other", []byte(nil))
	f.Add("POST", "/openai/v1/responses", "Host: x\nX-Isx-Instance-Secret: wrong\nTransfer-Encoding: chunked", []byte("5\r\nhello\r\n0\r\n\r\n"))
	f.Add("CONNECT", "api.anthropic.com:443", "Host: api.anthropic.com:443\nProxy-Authorization: Basic $BASIC", []byte(nil))
	f.Add("CONNECT", "example.com:22", "Host: example.com:22\nProxy-Authorization: Basic $BASIC", []byte(nil))
	f.Add("GET", "https://api.anthropic.com/v1/messages", "Host: api.anthropic.com\nX-Api-Key: $SECRET", []byte(nil))
	f.Add("GET", "/anthropic", "Host: isx-proxy\nX-Api-Key: $SECRET\nUpgrade: websocket\nConnection: Upgrade", []byte(nil))
	f.Add("POST", "/anthropic/v1/messages/", "Host: isx-proxy\nAuthorization: bearer  $SECRET \nX-Isx-Proxy-Error: 1\nApi-Key: k", bytes.Repeat([]byte("{"), 64))
	w := newFuzzWorld(f)
	f.Fuzz(func(t *testing.T, method, target, headers string, body []byte) {
		proved := strings.Contains(headers, "$SECRET") || strings.Contains(headers, "$BASIC") || strings.Contains(target, "$SECRET") || bytes.Contains(body, []byte(fuzzSecret))
		input := w.inputs.Add(1)
		w.proved.Store(input, proved)
		request := w.rawRequest(method, target, headers+"\n"+inputHeader+": "+strconv.FormatInt(input, 10), body)
		answer := w.send(t, request)
		if bad := w.takeProblem(); bad != "" {
			t.Fatalf("%s\nfor %q", bad, request)
		}
		for _, key := range []string{fuzzKeys, fuzzOpenAI, fuzzGitHub, base64.StdEncoding.EncodeToString([]byte("x-access-token:" + fuzzGitHub))} {
			if bytes.Contains(answer, []byte(key)) {
				t.Fatalf("an answer carries an account's credential:\n%q\nfor %q", answer, request)
			}
		}
		checkOwnErrors(t, answer)
	})
}

type fuzzWorld struct {
	server  *Server
	address string
	// inputs numbers the inputs; each request carries its number in
	// inputHeader, so that an upstream tells whose request it got even when
	// it arrives after its input's answer (a request the proxy abandoned
	// when the fuzzer's half-closed connection read as the instance going
	// away), and proved says whether that input held the secret.
	inputs   atomic.Int64
	proved   sync.Map // int64 → bool
	mu       sync.Mutex
	problems []string
}

func newFuzzWorld(f *testing.F) *fuzzWorld {
	w := &fuzzWorld{}
	upstream := httptest.NewServer(http.HandlerFunc(w.upstream))
	f.Cleanup(upstream.Close)
	base, _ := url.Parse(upstream.URL)
	upstreams := map[string]config.Upstream{}
	for host := range injectedHosts {
		upstreams[host] = config.Upstream{Host: host, URL: base}
	}
	home := f.TempDir()
	accounts := config.AccountsPath(home)
	if err := os.MkdirAll(filepath.Dir(accounts), 0o700); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(accounts, []byte(fuzzAccount), 0o600); err != nil {
		f.Fatal(err)
	}
	s, err := New(Options{Home: home, Client: incus.New(filepath.Join(home, "no-incus.sock")), Owner: "fuzz",
		Templates: func() (*template.Set, error) { return template.NewSet() },
		Upstreams: upstreams, Log: slog.New(&panicSpotter{w: w}), HeaderTimeout: 5 * time.Second, StallTimeout: 5 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	// Nothing but the configured upstreams: a host the fuzzer names is
	// refused before any lookup or connection.
	refuse := func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("the fuzz test reaches no public host")
	}
	s.transport.public.DialContext = refuse
	s.transport.dialPublic = &net.Dialer{
		Resolver: &net.Resolver{PreferGo: true, Dial: refuse},
		Control:  func(string, string, syscall.RawConn) error { return errors.New("the fuzz test reaches no public host") },
	}
	s.entries["fuzz"] = &entry{name: "fuzz", incarnation: "i", secret: fuzzSecret, template: "tpl-fuzz", counters: newCounters(time.Now(), s.changed), memory: newBudget(s.opts.InstanceMemory)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	named := &namedListener{Listener: l, name: "fuzz", log: s.opts.Log}
	go s.instanceHTTP.Serve(named) //nolint:errcheck // ends at Close
	f.Cleanup(func() {
		s.instanceHTTP.Close()
		s.transport.close()
	})
	w.server, w.address = s, l.Addr().String()
	return w
}

// upstream is every upstream: it notes what the proxy must never send.
func (w *fuzzWorld) upstream(rw http.ResponseWriter, r *http.Request) {
	if !w.provedBy(r) {
		w.problem("a request without the instance secret reached an upstream: " + r.Method + " " + r.URL.String())
	}
	io.Copy(io.Discard, r.Body) //nolint:errcheck // only its headers matter
	if strings.Contains(r.URL.String(), fuzzSecret) {
		w.problem("an upstream got the instance secret in the URL " + r.URL.String())
	}
	for name, values := range r.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(name), "X-Isx-") {
			w.problem("an upstream got the header " + name)
		}
		for _, v := range values {
			if strings.Contains(v, fuzzSecret) || strings.Contains(v, base64.StdEncoding.EncodeToString([]byte(fuzzSecret))) {
				w.problem("an upstream got the instance secret in " + name)
			}
		}
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Write([]byte(`{"ok":true}`)) //nolint:errcheck // the proxy may be gone
}

// inputHeader numbers a fuzz input's request; the proxy passes it on as
// any header of the instance's own.
const inputHeader = "X-Fuzz-Input"

// provedBy says whether the input that sent r held the instance secret. A
// request inside a CONNECT tunnel carries no number of the harness: it is
// the current input's.
func (w *fuzzWorld) provedBy(r *http.Request) bool {
	input := w.inputs.Load()
	if values := r.Header.Values(inputHeader); len(values) > 0 {
		if n, err := strconv.ParseInt(values[len(values)-1], 10, 64); err == nil {
			input = n
		}
	}
	proved, _ := w.proved.Load(input)
	return proved == true
}

func (w *fuzzWorld) problem(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.problems = append(w.problems, s)
}

func (w *fuzzWorld) takeProblem() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := strings.Join(w.problems, "\n")
	w.problems = nil
	return out
}

func (w *fuzzWorld) rawRequest(method, target, headers string, body []byte) []byte {
	replace := strings.NewReplacer("$SECRET", fuzzSecret, "$BASIC", base64.StdEncoding.EncodeToString([]byte("x:"+fuzzSecret)))
	var b bytes.Buffer
	b.WriteString(method + " " + replace.Replace(target) + " HTTP/1.1\r\n")
	for _, line := range strings.Split(replace.Replace(headers), "\n") {
		if line != "" {
			b.WriteString(line + "\r\n")
		}
	}
	lower := strings.ToLower(headers)
	if len(body) > 0 && !strings.Contains(lower, "content-length") && !strings.Contains(lower, "transfer-encoding") {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.Write(body)
	return b.Bytes()
}

// send writes the request and reads everything the proxy answers until
// it closes the connection.
func (w *fuzzWorld) send(t *testing.T, request []byte) []byte {
	conn, err := net.Dial("tcp", w.address)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second)) //nolint:errcheck // a deadline on a fresh conn
	if _, err := conn.Write(request); err != nil {
		return nil
	}
	conn.(*net.TCPConn).CloseWrite() //nolint:errcheck // the answer is read either way
	answer, err := io.ReadAll(conn)
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		t.Fatalf("the proxy neither answered nor closed in 20 s:\n%q\nafter %q", answer, request)
	}
	return answer
}

// checkOwnErrors: a response the proxy made itself is a Messages API error.
func checkOwnErrors(t *testing.T, answer []byte) {
	reader := bufio.NewReader(bytes.NewReader(answer))
	for {
		resp, err := http.ReadResponse(reader, nil)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("X-Isx-Proxy-Error") == "" {
			continue
		}
		var shape struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &shape); err != nil || shape.Type != "error" || shape.Error.Type == "" || shape.Error.Message == "" || resp.StatusCode < 400 {
			t.Fatalf("the proxy's own answer %d is not an error of the Messages API: %q", resp.StatusCode, body)
		}
	}
}

// panicSpotter notes a handler's panic, which net/http recovers and logs.
type panicSpotter struct{ w *fuzzWorld }

func (p *panicSpotter) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicSpotter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panic") {
		p.w.problem("the proxy panicked: " + r.Message)
	}
	return nil
}
func (p *panicSpotter) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicSpotter) WithGroup(string) slog.Handler      { return p }
