package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/deadline"
	"github.com/incusspawn/isx/internal/isx/template"
)

// exchange is one request on its way through the proxy.
type exchange struct {
	s       *Server
	e       *entry
	t       target
	path    string
	model   bool
	account config.Account
	dog     *watchdog

	meter    *usageMeter
	memory   *hold
	trace    *modelTrace
	complete atomic.Bool
	finished sync.Once
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

func (s *Server) newForwarder() http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: s.rewrite,
		Transport: roundTripper(func(req *http.Request) (*http.Response, error) {
			return s.transport.forTarget(exchangeOf(req.Context()).t).RoundTrip(req)
		}),
		ModifyResponse: s.meterResponse,
		ErrorHandler:   s.upstreamFailed,
		BufferPool:     copyBuffers,
		ErrorLog:       slog.NewLogLogger(s.opts.Log.Handler(), slog.LevelDebug),
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// forward sends one request of the instance to the target, counting it
// as traffic, and as a model call when it is one.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, e *entry, t target, path string) {
	c := e.counters
	c.trafficStarted(s.opts.Clock.Now())
	defer func() { c.trafficEnded(s.opts.Clock.Now()) }()
	x := &exchange{s: s, e: e, t: t, path: path, model: t.modelCall(r, path)}
	if t.kind != "" {
		account, why := s.accountFor(e, t.kind)
		if why != "" && t.kind != template.AccountGitHub {
			s.opts.Log.Warn("refused a call that needs an account", "instance", e.name, "host", t.host, "why", why)
			writeError(w, http.StatusForbidden, "permission_error", "isx host proxy: "+why)
			return
		}
		x.account = account
	}
	if x.model {
		memory, ok := s.admit(e)
		defer memory.release()
		if !ok {
			memory.refuse(w)
			return
		}
		x.memory = memory
		if !s.readModelRequest(w, r, x) {
			return
		}
		// The proxy reads the usage of what comes back, so it asks for
		// it uncompressed; the client gets it that way too.
		r.Header.Del("Accept-Encoding")
		x.trace = s.startModelTrace(r, x)
		c.modelStarted(s.opts.Clock.Now())
		defer x.finish()
	} else if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countedRequest{ReadCloser: r.Body, c: c, clock: s.opts.Clock}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	x.dog = s.watch(cancel, s.opts.HeaderTimeout)
	defer x.dog.stop()
	s.forwarder.ServeHTTP(w, r.WithContext(context.WithValue(ctx, exchangeKey{}, x)))
}

// readModelRequest refuses a model call larger than the proxy accepts
// before anything goes upstream. A body of a known length streams
// through; one without (chunked) is read whole first, within the call's
// memory budget, since only then is its size known.
func (s *Server) readModelRequest(w http.ResponseWriter, r *http.Request, x *exchange) bool {
	limit := s.opts.MaxModelRequest
	tooLarge := func(size string) bool {
		s.opts.Log.Warn("refused a model call larger than the proxy accepts", "instance", x.e.name, "size", size, "limit", limit)
		writeError(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("isx host proxy: the request is larger than the %d bytes it accepts for a model call", limit))
		return false
	}
	if r.ContentLength > limit {
		return tooLarge(fmt.Sprint(r.ContentLength))
	}
	if r.ContentLength >= 0 || r.Body == nil || r.Body == http.NoBody {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &countedRequest{ReadCloser: r.Body, c: x.e.counters, clock: s.opts.Clock}
		}
		return true
	}
	var body bytes.Buffer
	var charged int
	for {
		body.Grow(memoryStep)
		if grown := body.Cap() - charged; grown > 0 {
			if !x.memory.use(int64(grown)) {
				x.memory.refuse(w)
				return false
			}
			charged += grown
		}
		// Read into the room just paid for, never more.
		room := body.AvailableBuffer()[:memoryStep]
		n, err := io.ReadFull(r.Body, room)
		body.Write(room[:n])
		x.e.counters.moved(int64(n), 0, s.opts.Clock.Now())
		if int64(body.Len()) > limit {
			return tooLarge(fmt.Sprintf("more than %d", limit))
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			s.opts.Log.Info("a model call's body could not be read", "instance", x.e.name, "error", err)
			if deadline.TooSlow(err) {
				tooSlow(w)
				return false
			}
			writeError(w, http.StatusBadRequest, "invalid_request_error", "isx host proxy: the request body could not be read")
			return false
		}
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body.Bytes())), int64(body.Len())
	return true
}

// DefaultAccount is the account of a kind used for a template that names
// none of that kind.
const DefaultAccount = "default"

// accountFor is the credential of the kind the instance's template
// names, or why there is none.
func (s *Server) accountFor(e *entry, kind string) (config.Account, string) {
	name := e.accounts[kind]
	if e.projectLocal {
		return config.Account{}, fmt.Sprintf("%s was built from a project-local definition of %s, and such instances never get credentials; build it from a trusted definition", e.name, e.template)
	}
	accounts := s.currentAccounts()
	if name == "" {
		// A template that names none uses the kind's default account.
		if account, ok := accounts.Get(kind, DefaultAccount); ok {
			return account, ""
		}
		return config.Account{}, fmt.Sprintf("template %s names no %s account and accounts.yaml has no %s account named %s; add `accounts: {%s: NAME}` to its definition, NAME an account in accounts.yaml", e.template, kind, kind, DefaultAccount, kind)
	}
	account, ok := accounts.Get(kind, name)
	if !ok {
		return config.Account{}, fmt.Sprintf("template %s uses %s account %s, which accounts.yaml does not have", e.template, kind, name)
	}
	return account, ""
}

// rewrite points the request at its upstream, removes every credential
// the instance sent and puts the account's in.
func (s *Server) rewrite(pr *httputil.ProxyRequest) {
	x := exchangeOf(pr.In.Context())
	u := pr.Out.URL
	u.Scheme, u.Host = x.t.base.Scheme, x.t.base.Host
	u.Path, u.RawPath = x.t.base.Path+x.path, ""
	u.RawQuery = pr.In.URL.RawQuery
	pr.Out.Host = ""
	stripCredentials(pr.Out.Header, x.e.secret)
	inject(pr.Out.Header, x.t, x.account)
}

// dropSecretBearing removes every header that carries the instance
// secret, under whatever name the instance put it: the secret is for the
// proxy alone, and an upstream (or its request logs) should never hold
// a credential for this instance's way out.
func dropSecretBearing(h http.Header, secret string) {
	if secret == "" {
		return
	}
	encoded := base64.StdEncoding.EncodeToString([]byte(secret))
	for name, values := range h {
		for _, v := range values {
			if strings.Contains(v, secret) || strings.Contains(v, encoded) {
				delete(h, name)
				break
			}
		}
	}
}

// stripCredentials removes, on the way to a provider, what an instance may
// have sent as a credential: the provider's credential is the proxy's to
// add.
func stripCredentials(h http.Header, instanceSecret string) {
	cleanOutbound(h, instanceSecret)
	for _, name := range []string{"Authorization", "X-Api-Key", "Api-Key"} {
		h.Del(name)
	}
}

// cleanOutbound is what every request leaving the proxy loses, to a
// provider, a host route and a coordinator's isx mcp alike: every X-Isx-
// header (only the proxy sets those), every proxy header, and any header
// carrying the instance secret.
func cleanOutbound(h http.Header, instanceSecret string) {
	removeIsxHeaders(h)
	for name := range h {
		if proxyHeader(name) {
			delete(h, name)
		}
	}
	dropSecretBearing(h, instanceSecret)
}

// proxyHeader reports whether a header is Proxy or a Proxy- one, as a CGI
// program reads names: such a program takes Proxy for its own HTTP_PROXY
// (httpoxy), and the Proxy- headers were for this hop alone.
func proxyHeader(name string) bool {
	return strings.EqualFold(name, "proxy") || hasPrefixAsCGI(name, "proxy-")
}

// hasPrefixAsCGI reports whether a header's name begins with prefix
// (lowercase, with '-') as a CGI or WSGI program reads names: any case,
// and '_' the same as '-'. Go keeps X_Isx_Instance apart from
// X-Isx-Instance; such a program does not.
func hasPrefixAsCGI(name, prefix string) bool {
	if len(name) < len(prefix) {
		return false
	}
	return strings.EqualFold(strings.ReplaceAll(name[:len(prefix)], "_", "-"), prefix)
}

// removeIsxHeaders removes every header an instance sent under an isx
// name, however spelled: only the proxy sets those.
func removeIsxHeaders(h http.Header) {
	for name := range h {
		if hasPrefixAsCGI(name, "x-isx-") {
			delete(h, name)
		}
	}
}

// inject puts the account's credential in the form its host expects.
func inject(h http.Header, t target, a config.Account) {
	switch a.Kind {
	case template.AccountClaude:
		if a.APIKey != "" {
			h.Set("X-Api-Key", a.APIKey)
			return
		}
		h.Set("Authorization", "Bearer "+a.OAuthToken)
		if beta := h.Get("Anthropic-Beta"); !strings.Contains(beta, "oauth-2025-04-20") {
			h.Set("Anthropic-Beta", strings.TrimPrefix(beta+",oauth-2025-04-20", ","))
		}
	case template.AccountOpenAI:
		h.Set("Authorization", "Bearer "+a.APIKey)
	case template.AccountGitHub:
		if t.host == "github.com" {
			h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("x-access-token:"+a.Token)))
			return
		}
		h.Set("Authorization", "Bearer "+a.Token)
	}
}

// meterResponse counts the response as it passes: its bytes, and a model
// call's usage.
func (s *Server) meterResponse(resp *http.Response) error {
	x := exchangeOf(resp.Request.Context())
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// A WebSocket: in flight for as long as it is open, however quiet.
		x.dog.stop()
		rw, ok := resp.Body.(io.ReadWriteCloser)
		if !ok {
			return errors.New("a protocol switch without a writable connection")
		}
		resp.Body = &switchedBody{ReadWriteCloser: rw, x: x}
		return nil
	}
	x.dog.reset(s.opts.StallTimeout)
	if x.model {
		x.trace.answered(resp.StatusCode)
		x.meter = newUsageMeter(resp.Header.Get("Content-Type"), func(u Usage) {
			x.e.counters.addUsage(u, s.opts.Clock.Now())
			x.trace.credited(u)
		})
		x.meter.memory = x.memory
	}
	resp.Body = &meteredBody{ReadCloser: resp.Body, x: x}
	return nil
}

// upstreamFailed answers when no response came, saying why.
func (s *Server) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	x := exchangeOf(r.Context())
	defer x.finish()
	switch {
	case x.dog.fired.Load():
		s.opts.Log.Warn("the upstream stalled; gave up", "instance", x.e.name, "host", x.t.host)
		writeError(w, http.StatusGatewayTimeout, "timeout_error", "isx host proxy: "+x.t.host+" sent nothing in time")
	case deadline.TooSlow(err) || deadline.Cut(r.Context()):
		s.opts.Log.Info("cut a request whose body came too slowly", "instance", x.e.name, "host", x.t.host)
		tooSlow(w)
	case errors.Is(err, context.Canceled):
		s.opts.Log.Info("the instance went away before the upstream answered", "instance", x.e.name, "host", x.t.host)
	default:
		s.opts.Log.Warn("the upstream could not be reached or answered badly", "instance", x.e.name, "host", x.t.host, "error", err)
		writeError(w, http.StatusBadGateway, "api_error", "isx host proxy: "+x.t.host+": "+err.Error())
	}
}

// finish ends the exchange once: a model call stops being in flight, and
// its usage is read.
func (x *exchange) finish() {
	x.finished.Do(func() {
		if x.dog != nil {
			x.dog.stop()
		}
		if !x.model {
			return
		}
		log := x.s.opts.Log
		if x.meter != nil {
			x.meter.finish(x.complete.Load())
			if p := x.meter.Problem(); p != nil {
				log.Warn("the usage of a model call could not be read", "instance", x.e.name, "error", p)
			}
		}
		if x.meter != nil && !x.complete.Load() {
			why := "the instance went away or the upstream broke off"
			if x.dog != nil && x.dog.fired.Load() {
				why = "the upstream stalled"
			}
			log.Info("a model call ended before its response did", "instance", x.e.name, "why", why)
		}
		x.e.counters.modelEnded(x.s.opts.Clock.Now())
		x.trace.end(x.complete.Load())
	})
}

// meteredBody is a response body that counts what passes.
type meteredBody struct {
	io.ReadCloser
	x *exchange
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	x := b.x
	if n > 0 {
		x.e.counters.moved(0, int64(n), x.s.opts.Clock.Now())
		x.dog.reset(x.s.opts.StallTimeout)
		if x.meter != nil {
			x.meter.Write(p[:n]) //nolint:errcheck // never fails
		}
	}
	if errors.Is(err, io.EOF) {
		x.complete.Store(true)
	}
	return n, err
}

func (b *meteredBody) Close() error {
	err := b.ReadCloser.Close()
	b.x.finish()
	return err
}

// switchedBody is the upstream side of a WebSocket.
type switchedBody struct {
	io.ReadWriteCloser
	x *exchange
}

func (b *switchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadWriteCloser.Read(p)
	b.x.e.counters.moved(0, int64(n), b.x.s.opts.Clock.Now())
	return n, err
}

func (b *switchedBody) Write(p []byte) (int, error) {
	n, err := b.ReadWriteCloser.Write(p)
	b.x.e.counters.moved(int64(n), 0, b.x.s.opts.Clock.Now())
	return n, err
}

// countedRequest is a request body that counts what the instance sends.
type countedRequest struct {
	io.ReadCloser
	c     *counters
	clock clock.Clock
}

func (r *countedRequest) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.c.moved(int64(n), 0, r.clock.Now())
	}
	return n, err
}

// watchdog cancels a request whose upstream has been silent too long.
type watchdog struct {
	timer   clock.Timer
	done    chan struct{}
	stopped sync.Once
	fired   atomic.Bool
}

func (s *Server) watch(cancel context.CancelFunc, d time.Duration) *watchdog {
	w := &watchdog{timer: s.opts.Clock.NewTimer(d), done: make(chan struct{})}
	go func() {
		select {
		case <-w.timer.C():
			w.fired.Store(true)
			cancel()
		case <-w.done:
		}
	}()
	return w
}

func (w *watchdog) reset(d time.Duration) {
	select {
	case <-w.done:
	default:
		w.timer.Reset(d)
	}
}

func (w *watchdog) stop() {
	w.stopped.Do(func() {
		w.timer.Stop()
		close(w.done)
	})
}

// copyBuffers are the buffers bodies are copied through.
var copyBuffers = &bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte  { return *p.pool.Get().(*[]byte) }
func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// tooSlow answers a request whose body stood still; the connection ends.
func tooSlow(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestTimeout, "timeout_error", "isx host proxy: "+deadline.ErrTooSlow.Error())
}
