package proxy

import (
	"context"
	"crypto/rand"
	"errors"
	"go.opentelemetry.io/otel/trace"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/deadline"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/template"
)

// Defaults of Options.
const (
	// DefaultHeaderTimeout bounds the wait for an upstream's response
	// headers: a non-streamed model call may think for minutes.
	DefaultHeaderTimeout = 10 * time.Minute
	// DefaultStallTimeout is how long a response may send nothing before
	// the proxy gives up on it.
	DefaultStallTimeout = 5 * time.Minute
	// DefaultMaxModelRequest is the largest model call the proxy accepts
	// (the Messages API's own limit).
	DefaultMaxModelRequest = 32 << 20
)

// Files in the proxy's directory (config.ProxyDir).
const (
	ControlSocket = "control.sock"
	LogFile       = "proxy.log"
	lockFile      = "lock"
	pidFile       = "pid"
)

// Options configure a Server.
type Options struct {
	// Home is the user's home: accounts.yaml and the proxy's directory
	// are found from it.
	Home string
	// Client reaches Incus in the one project the proxy serves.
	Client *incus.Client
	// Owner is the host user; only instances stamped with it are served.
	Owner string
	// Upstreams are config.yaml's proxy: upstreams.
	Upstreams map[string]config.Upstream
	// HostRoutes are config.yaml's host-routes; a wrong one is skipped
	// with a warning in the log.
	HostRoutes []config.HostRoute
	// Coordinator starts the host isx mcp of a coordinator instance; nil
	// serves none.
	Coordinator CoordinatorCommand
	// Templates loads the trusted template definitions (never a
	// project-local one), for the accounts each template names.
	Templates func() (*template.Set, error)
	// Clock and Random default to the real clock and crypto/rand.
	Clock  clock.Clock
	Random io.Reader
	// Log receives what the proxy did and why it refused or gave up
	// (nil discards it).
	Log     *slog.Logger
	Version string

	HeaderTimeout   time.Duration
	StallTimeout    time.Duration
	MaxModelRequest int64
	// InstanceMemory and ProxyMemory are the bytes model calls may hold
	// in memory at once, per instance and in all (budget.go).
	InstanceMemory int64
	ProxyMemory    int64
	// Limits are how long a client of the proxy's listeners (instances,
	// the control socket) may keep a connection standing still: a body
	// that stops coming, a response nobody reads (deadline.Defaults).
	Limits deadline.Limits
	// TunnelIdle ends a tunnel nothing has crossed, either way, for this
	// long; default DefaultHeaderTimeout.
	TunnelIdle time.Duration
	// WatchInterval is how often the proxy checks that its control socket
	// is still its own (a removed directory ends it); default 15 s.
	WatchInterval time.Duration
	// Tracer, when set, makes a span of every model call, with its token
	// counts (tracing.go).
	Tracer trace.Tracer
}

// Server is the host proxy.
type Server struct {
	opts      Options
	dir       string
	ca        *authority
	transport *transports
	forwarder http.Handler
	// routes are the usable host routes, by name; owner is whom their
	// secrets' paths must belong to.
	routes         map[string]*hostRoute
	routeTransport *http.Transport
	owner          routeOwner

	// memory is the budget of every instance's model calls together.
	memory *budget

	backendMu sync.Mutex
	backends  map[string]*backend

	startedAt time.Time

	mu        sync.Mutex
	entries   map[string]*entry
	changed   *bell // rung when an entry or a count changes
	listeners map[string]net.Listener
	learning  map[string]*sync.Mutex
	secrets   *secretBook
	accounts  *config.Accounts
	// accountsSeen is accounts.yaml as last looked at.
	accountsSeen os.FileInfo

	instanceHTTP *http.Server
	// directHTTP serves coordinators' TLS sockets.
	directHTTP *http.Server
	hijacked   sync.Map // net.Conn → struct{}: tunnels, closed at shutdown
	work       sync.WaitGroup
	stop       context.CancelFunc
	stopOnce   sync.Once
}

// New checks what the proxy needs before it serves: its directory,
// accounts.yaml (refused when anyone but the user could read it) and its
// CA (made the first time).
func New(opts Options) (*Server, error) {
	switch {
	case opts.Home == "":
		return nil, errors.New("isx proxy: no home directory")
	case opts.Client == nil:
		return nil, errors.New("isx proxy: no Incus client")
	case opts.Owner == "":
		return nil, errors.New("isx proxy: no owner")
	case opts.Templates == nil:
		return nil, errors.New("isx proxy: no template loader")
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Random == nil {
		opts.Random = rand.Reader
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.HeaderTimeout == 0 {
		opts.HeaderTimeout = DefaultHeaderTimeout
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.MaxModelRequest == 0 {
		opts.MaxModelRequest = DefaultMaxModelRequest
	}
	if opts.InstanceMemory == 0 {
		opts.InstanceMemory = DefaultInstanceMemory
	}
	if opts.ProxyMemory == 0 {
		opts.ProxyMemory = DefaultProxyMemory
	}
	opts.Limits = opts.Limits.OrDefaults()
	if opts.TunnelIdle == 0 {
		opts.TunnelIdle = DefaultHeaderTimeout
	}
	if opts.WatchInterval == 0 {
		opts.WatchInterval = 15 * time.Second
	}
	dir := config.ProxyDir(opts.Home)
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	accounts, err := config.LoadAccounts(opts.Home)
	if err != nil {
		return nil, err
	}
	ca, err := loadAuthority(dir, opts.Clock, opts.Random)
	if err != nil {
		return nil, err
	}
	seen, _ := os.Stat(config.AccountsPath(opts.Home))
	s := &Server{
		opts: opts, dir: dir, ca: ca, accounts: accounts, accountsSeen: seen,
		backends: map[string]*backend{}, changed: newBell(), memory: newBudget(opts.ProxyMemory),
		entries: map[string]*entry{}, listeners: map[string]net.Listener{}, learning: map[string]*sync.Mutex{},
	}
	s.transport = newTransports(opts.Log)
	s.forwarder = s.newForwarder()
	s.owner = routeOwner{config.CurrentOwner()}
	s.loadRoutes(opts.HostRoutes)
	s.instanceHTTP = s.instanceServer(http.HandlerFunc(s.serveInstance))
	s.instanceHTTP.ConnContext = linkContext
	s.directHTTP = s.instanceServer(http.HandlerFunc(s.serveDirect))
	s.directHTTP.ConnContext = linkContext
	return s, nil
}

// instanceServer serves instances' requests with h, within the limits.
func (s *Server) instanceServer(h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:        h,
		MaxHeaderBytes: 1 << 20,
		ErrorLog:       slog.NewLogLogger(s.opts.Log.Handler(), slog.LevelDebug),
	}
	s.opts.Limits.Apply(srv)
	return srv
}

// privateDir makes the proxy's directory, readable by the user alone.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return coded.Wrap(CodeState, err, "cannot make the proxy's directory %s", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return coded.Wrap(CodeState, err, "cannot make the proxy's directory %s private", dir)
	}
	if err := os.MkdirAll(filepath.Join(dir, "i"), 0o700); err != nil {
		return coded.Wrap(CodeState, err, "cannot make the proxy's socket directory in %s", dir)
	}
	return nil
}

// Run serves until ctx ends or the control API is told to stop. It holds
// the lock that makes it the user's only proxy, serves the control
// socket, learns every running instance it serves and follows Incus's
// events for the ones that start later.
func (s *Server) Run(ctx context.Context) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	secrets, err := loadSecrets(s.dir)
	if err != nil {
		return err
	}
	s.secrets = secrets
	s.startedAt = s.opts.Clock.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.stop = cancel
	// Events first, so that no start is missed, then every running
	// instance, before the control socket answers: a proxy that answers
	// serves every instance that was running when it started.
	stream, err := s.opts.Client.Events(ctx, incus.EventLifecycle)
	if err == nil {
		s.learnAll(ctx)
	} else {
		s.opts.Log.Warn("cannot follow Incus's events yet; trying again", "error", err)
	}
	control, err := s.listenControl()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, pidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		control.Close()
		return coded.Wrap(CodeState, err, "cannot write the proxy's pid file in %s", s.dir)
	}
	s.opts.Log.Info("isx proxy started", "pid", os.Getpid(), "project", s.project(), "version", s.opts.Version, "accounts", s.accounts.Count())
	controlHTTP := &http.Server{Handler: s.controlHandler(), ErrorLog: slog.NewLogLogger(s.opts.Log.Handler(), slog.LevelDebug),
		// A watch of the activity ends when the proxy stops.
		BaseContext: func(net.Listener) context.Context { return ctx }}
	limits := s.opts.Limits
	limits.Header = min(limits.Header, 10*time.Second)
	limits.Apply(controlHTTP)
	s.work.Go(func() {
		if err := controlHTTP.Serve(control); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Log.Error("the control socket stopped serving", "error", err)
			cancel()
		}
	})
	s.work.Go(func() { s.follow(ctx, stream) })
	s.work.Go(func() { s.watchControl(ctx, control) })
	<-ctx.Done()
	s.shutdown(controlHTTP)
	s.opts.Log.Info("isx proxy stopped")
	return nil
}

// Stop makes Run return.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.stop != nil {
			s.stop()
		}
	})
}

// StartedAt is when Run began: the counting_since of every instance it
// knew at its start.
func (s *Server) StartedAt() time.Time { return s.startedAt }

func (s *Server) project() string {
	if p := s.opts.Client.ProjectName(); p != "" {
		return p
	}
	return "default"
}

// lock takes the user's proxy lock, or says which proxy holds it.
func (s *Server) lock() (func(), error) {
	path := filepath.Join(s.dir, lockFile)
	file, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, coded.Wrap(CodeState, err, "cannot open the proxy's lock %s", path)
	}
	if err := syscall.Flock(int(file.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		file.Close()
		pid, _ := os.ReadFile(filepath.Join(s.dir, pidFile))
		return nil, coded.New(CodeRunning, "an isx proxy already runs for this user (pid %s); `isx proxy status` shows it", trimSpace(pid))
	}
	return func() { file.Close() }, nil
}

func trimSpace(b []byte) string {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return "unknown"
	}
	return string(b)
}

// listenControl listens on the control socket, removing one a dead proxy
// left (the lock says none runs).
func (s *Server) listenControl() (net.Listener, error) {
	path := filepath.Join(s.dir, ControlSocket)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, coded.Wrap(CodeState, err, "cannot remove the old control socket %s", path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, coded.Wrap(CodeState, err, "cannot listen on the control socket %s", path)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, coded.Wrap(CodeState, err, "cannot make the control socket %s private", path)
	}
	return l, nil
}

// watchControl ends the proxy once its control socket is no longer its
// own: its directory was removed (a test's home, a wiped state) or the
// socket replaced. A proxy nobody can reach must not live on.
func (s *Server) watchControl(ctx context.Context, control net.Listener) {
	path := filepath.Join(s.dir, ControlSocket)
	mine, err := os.Stat(path)
	if err != nil {
		s.opts.Log.Error("cannot look at the control socket", "error", err)
		s.Stop()
		return
	}
	ticker := s.opts.Clock.NewTicker(s.opts.WatchInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		now, err := os.Stat(path)
		if err != nil || !os.SameFile(mine, now) {
			s.opts.Log.Warn("the control socket is gone or replaced; stopping", "socket", path)
			s.Stop()
			return
		}
	}
}

// shutdown ends everything Run started: the control API, every instance
// listener, open tunnels, and the requests in flight.
func (s *Server) shutdown(control *http.Server) {
	// The control request that asked for the stop gets its answer.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	control.Shutdown(ctx) //nolint:errcheck // closed below either way
	cancel()
	control.Close()
	s.mu.Lock()
	for name, l := range s.listeners {
		l.Close()
		delete(s.listeners, name)
	}
	s.mu.Unlock()
	s.instanceHTTP.Close()
	s.directHTTP.Close()
	s.stopBackends()
	s.hijacked.Range(func(c, _ any) bool {
		c.(net.Conn).Close()
		return true
	})
	s.work.Wait()
	s.transport.close()
	s.routeTransport.CloseIdleConnections()
	os.Remove(filepath.Join(s.dir, ControlSocket))
	os.Remove(filepath.Join(s.dir, pidFile))
}

// track keeps a hijacked connection for shutdown, until it is released.
func (s *Server) track(c net.Conn) func() {
	s.hijacked.Store(c, struct{}{})
	return func() { s.hijacked.Delete(c) }
}

// currentAccounts is accounts.yaml, read again when it changed. A file
// that became unusable keeps the accounts read before, and is logged once
// per change.
func (s *Server) currentAccounts() *config.Accounts {
	info, err := os.Stat(config.AccountsPath(s.opts.Home))
	s.mu.Lock()
	current, seen := s.accounts, s.accountsSeen
	s.mu.Unlock()
	switch {
	case err != nil && !current.Exists:
		return current
	case err == nil && seen != nil && sameVersion(seen, info):
		return current
	}
	fresh, loadErr := config.LoadAccounts(s.opts.Home)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accountsSeen = info
	if loadErr != nil {
		s.opts.Log.Error("accounts.yaml changed and cannot be used; keeping the accounts read before", "error", loadErr)
		return s.accounts
	}
	if fresh.Stamp != s.accounts.Stamp {
		s.opts.Log.Info("accounts.yaml read again", "accounts", fresh.Count())
	}
	s.accounts = fresh
	return fresh
}

// sameVersion reports whether two looks at a file saw the same version.
func sameVersion(a, b os.FileInfo) bool {
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode()
}

// logProblem logs a problem with the instance it concerns.
func (s *Server) logProblem(name, what string, err error) {
	s.opts.Log.Warn(what, "instance", name, "error", err)
}

// activityOf reads the current incarnation's counts of an instance.
func (s *Server) activityOf(name string) Activity {
	s.mu.Lock()
	e := s.entries[name]
	s.mu.Unlock()
	if e == nil {
		return Unknown(name)
	}
	return e.counters.activity(name, s.opts.Clock.Now())
}

// Activity is every known instance's counts, by name.
func (s *Server) Activity() []Activity {
	s.mu.Lock()
	names := make([]string, 0, len(s.entries))
	for name := range s.entries {
		names = append(names, name)
	}
	s.mu.Unlock()
	slices.Sort(names)
	out := make([]Activity, 0, len(names))
	for _, name := range names {
		out = append(out, s.activityOf(name))
	}
	return out
}
