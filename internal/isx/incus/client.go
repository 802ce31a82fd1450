// Package incus is a small client for the Incus REST API over the daemon's
// unix socket. It keeps one HTTP connection pool per socket, targets one
// project per Client (see InProject), awaits background operations, and turns
// Incus failures into typed errors (ErrNotFound, ErrConflict, ErrUnavailable,
// *Error, *OperationError).
package incus

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/incusspawn/isx/internal/clock"
)

// DefaultSocketPath is where Incus listens unless INCUS_SOCKET says otherwise.
const DefaultSocketPath = "/var/lib/incus/unix.socket"

// maxErrorBody bounds how much of a non-JSON or error response is read.
const maxErrorBody = 1 << 20

// DefaultSocket is INCUS_SOCKET when set, else DefaultSocketPath.
func DefaultSocket() string {
	if s := os.Getenv("INCUS_SOCKET"); s != "" {
		return s
	}
	return DefaultSocketPath
}

// Client talks to one Incus daemon, in one project. It is safe for
// concurrent use; clients made with InProject share its connections.
type Client struct {
	socket  string
	setting socketSetting
	project string
	http    *http.Client
	random  io.Reader
	clock   clock.Clock
	pending *pending // shared by clients made with InProject
	logs    *logSweeper
}

// pending tracks clean-ups running in the background and their failures.
type pending struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// backgroundTimeout bounds one request of a background clean-up. Each
// request gets its own: a batch of deletes sharing one deadline ran out of
// time on a daemon slowed by other work, though every delete was answered.
const backgroundTimeout = time.Minute

// background runs a clean-up without making the caller wait for it; the
// clean-up bounds its own requests with backgroundTimeout.
func (c *Client) background(cleanup func() error) {
	c.pending.wg.Go(func() {
		if err := cleanup(); err != nil {
			c.pending.mu.Lock()
			c.pending.errs = append(c.pending.errs, err)
			c.pending.mu.Unlock()
		}
	})
}

// withBackgroundTimeout makes one request of a background clean-up, bounded
// by backgroundTimeout alone: the caller that started the clean-up may be
// gone.
func withBackgroundTimeout(request func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), backgroundTimeout)
	defer cancel()
	return request(ctx)
}

// Settle waits for the clean-ups Exec left running in the background
// (deleting its output logs) and returns the failures among them since the
// last call.
func (c *Client) Settle() error {
	c.flushLogs()
	c.pending.wg.Wait()
	c.pending.mu.Lock()
	defer c.pending.mu.Unlock()
	err := errors.Join(c.pending.errs...)
	c.pending.errs = nil
	return err
}

// Option configures a Client made by New.
type Option func(*Client)

// WithProject makes every request target the named project.
func WithProject(name string) Option { return func(c *Client) { c.project = name } }

// WithRandom sets the source of the random ids Exec uses for its helper
// files inside the instance (default crypto/rand).
func WithRandom(r io.Reader) Option { return func(c *Client) { c.random = r } }

// WithSocketSetting names the setting that chose the socket, as a person
// finds it and as it is written before the path ("INCUS_SOCKET=",
// "config.yaml's socket: "), and what to do about it, for the error a socket that is not there (or is no socket) gives: a
// wrong setting, rather than a daemon that is down.
func WithSocketSetting(name, fix string) Option {
	return func(c *Client) { c.setting = socketSetting{name: name, fix: fix} }
}

// socketSetting is what WithSocketSetting gives.
type socketSetting struct{ name, fix string }

// WithClock sets the clock Exec measures durations and timeouts with
// (default the real clock).
func WithClock(clk clock.Clock) Option { return func(c *Client) { c.clock = clk } }

// New returns a client for the daemon on socketPath (DefaultSocket() when
// empty). It does not connect until the first request.
func New(socketPath string, opts ...Option) *Client {
	if socketPath == "" {
		socketPath = DefaultSocket()
	}
	c := &Client{socket: socketPath, random: rand.Reader, clock: clock.Real{}, pending: &pending{}, logs: &logSweeper{}}
	for _, opt := range opts {
		opt(c)
	}
	c.http = &http.Client{Transport: newTransport(socketPath, c.setting)}
	return c
}

func newTransport(socket string, setting socketSetting) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "unix", socket)
			if err != nil {
				return nil, classifyDialError(socket, setting, err)
			}
			return conn, nil
		},
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

func classifyDialError(socket string, setting socketSetting, err error) error {
	switch {
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return noPermission(socket, err)
	case setting.name != "" && errors.Is(err, syscall.ENOENT):
		return unavailable(socket, setting, !isDir(filepath.Dir(socket)), err)
	case setting.name != "" && (errors.Is(err, syscall.ENOTSOCK) || errors.Is(err, syscall.ENOTDIR)):
		return unavailable(socket, setting, true, err)
	case setting.name != "" && errors.Is(err, syscall.ECONNREFUSED) && !isSocket(socket):
		// Linux refuses a connection to a file that is no socket.
		return unavailable(socket, setting, true, fmt.Errorf("it is not a socket: %w", err))
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ENOTSOCK), errors.Is(err, syscall.ENOTDIR):
		return unavailable(socket, socketSetting{}, false, err)
	}
	return err
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// isSocket reports whether path is there and is a socket.
func isSocket(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().Type() == os.ModeSocket
}

// InProject returns a client for the named project that shares this
// client's connections.
func (c *Client) InProject(name string) *Client {
	clone := *c
	clone.project = name
	return &clone
}

// ProjectName is the project requests target ("" means the daemon's default).
func (c *Client) ProjectName() string { return c.project }

// Socket is the unix socket path the client dials.
func (c *Client) Socket() string { return c.socket }

// Close settles background clean-ups and drops idle connections. The client
// stays usable.
func (c *Client) Close() error {
	err := c.Settle()
	c.http.CloseIdleConnections()
	return err
}

// request describes one API call. body is JSON-encoded unless it is an
// io.Reader, which is sent as is.
type request struct {
	method string
	path   string // already escaped, e.g. "/1.0/instances/web"
	query  url.Values
	body   any
	header http.Header
	etag   string // sent as If-Match when not empty
	global bool   // the endpoint is not per project: send no project=
	size   int64  // Content-Length of a streamed body, when known
}

// envelope is the JSON wrapper of every Incus API response.
type envelope struct {
	Type       string          `json:"type"`
	Status     string          `json:"status"`
	StatusCode int             `json:"status_code"`
	Operation  string          `json:"operation"`
	ErrorCode  int             `json:"error_code"`
	Error      string          `json:"error"`
	Metadata   json.RawMessage `json:"metadata"`
}

// apiPath joins escaped segments under /1.0, so names such as the image
// alias "isx/busybox" stay one path segment.
func apiPath(segments ...string) string {
	var b strings.Builder
	b.WriteString("/1.0")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// send performs the request and returns the raw response; the caller closes
// its body. Only transport failures are errors here.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	query := url.Values{}
	for k, v := range r.query {
		query[k] = v
	}
	if c.project != "" && !r.global && query.Get("project") == "" {
		query.Set("project", c.project)
	}
	target := "http://incus" + r.path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case io.Reader:
		body = b
	default:
		encoded, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("incus: encoding %s %s: %w", r.method, r.path, err)
		}
		body = bytes.NewReader(encoded)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("incus: %s %s: %w", r.method, r.path, err)
	}
	if r.size > 0 {
		req.ContentLength = r.size
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.etag != "" {
		req.Header.Set("If-Match", r.etag)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(r, err)
	}
	return resp, nil
}

func transportError(r request, err error) error {
	var unavailable *unavailableError
	if errors.As(err, &unavailable) {
		return unavailable
	}
	var permission *permissionError
	if errors.As(err, &permission) {
		return permission
	}
	// url.Error repeats the whole URL; keep the method and path instead.
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return fmt.Errorf("incus: %s %s: %w", r.method, r.path, err)
}

// call performs the request and decodes the envelope; an error envelope or
// a non-2xx status becomes an *Error.
func (c *Client) call(ctx context.Context, r request) (*envelope, http.Header, error) {
	resp, err := c.send(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	env, err := decodeEnvelope(resp)
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return nil, nil, apiErr
	}
	if err != nil {
		return nil, nil, fmt.Errorf("incus: %s %s: %w", r.method, r.path, err)
	}
	return env, resp.Header, nil
}

// decodeEnvelope reads an API response. Error envelopes and non-2xx
// statuses come back as *Error.
func decodeEnvelope(resp *http.Response) (*envelope, error) {
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading response: %w", err)
	}
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		if resp.StatusCode >= 300 {
			return nil, newError(resp.StatusCode, strings.TrimSpace(truncate(string(data), 512)))
		}
		return nil, fmt.Errorf("decoding response (HTTP %d): %w", resp.StatusCode, err)
	}
	if env.Type == "error" || resp.StatusCode >= 300 {
		status := env.ErrorCode
		if status == 0 {
			status = resp.StatusCode
		}
		message := env.Error
		if message == "" {
			message = http.StatusText(status)
		}
		return nil, newError(status, message)
	}
	return &env, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// get performs a synchronous request and decodes its metadata into out
// (when not nil). It returns the response's ETag.
func (c *Client) get(ctx context.Context, r request, out any) (string, error) {
	env, header, err := c.call(ctx, r)
	if err != nil {
		return "", err
	}
	if out != nil && len(env.Metadata) > 0 {
		if err := json.Unmarshal(env.Metadata, out); err != nil {
			return "", fmt.Errorf("incus: decoding %s %s: %w", r.method, r.path, err)
		}
	}
	return header.Get("ETag"), nil
}

// run performs a request that may answer synchronously or with a background
// operation, and waits for that operation to finish.
func (c *Client) run(ctx context.Context, r request) (*Operation, error) {
	env, _, err := c.call(ctx, r)
	if err != nil {
		return nil, err
	}
	if env.Type != "async" {
		return nil, nil
	}
	var started Operation
	if err := json.Unmarshal(env.Metadata, &started); err != nil {
		return nil, fmt.Errorf("incus: decoding operation of %s %s: %w", r.method, r.path, err)
	}
	op, err := c.WaitOperation(ctx, operationID(env.Operation))
	var opErr *OperationError
	if errors.As(err, &opErr) && opErr.Description == "" {
		opErr.Description = started.Description
	}
	return op, err
}

// start performs a request that answers with a background operation and
// returns that operation without waiting.
func (c *Client) start(ctx context.Context, r request) (*Operation, error) {
	env, _, err := c.call(ctx, r)
	if err != nil {
		return nil, err
	}
	if env.Type != "async" {
		return nil, fmt.Errorf("incus: %s %s: expected a background operation, got a %q response", r.method, r.path, env.Type)
	}
	var op Operation
	if err := json.Unmarshal(env.Metadata, &op); err != nil {
		return nil, fmt.Errorf("incus: decoding operation of %s %s: %w", r.method, r.path, err)
	}
	if op.ID == "" {
		op.ID = operationID(env.Operation)
	}
	return &op, nil
}

func operationID(path string) string {
	path, _, _ = strings.Cut(path, "?")
	return path[strings.LastIndexByte(path, '/')+1:]
}
