// Package server assembles actiond: the store, the local issuer and token
// verification, the GraphQL API, the MCP endpoint, the explorer page and the
// local environment's default actions, behind one HTTP handler.
package server

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/agent"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/explorer"
	"github.com/incusspawn/isx/internal/actiond/gateway"
	"github.com/incusspawn/isx/internal/actiond/graph"
	"github.com/incusspawn/isx/internal/actiond/metrics"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/signin"
	"github.com/incusspawn/isx/internal/actiond/starlark"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/tasks"
	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/tracing"
)

// Options configure a server.
type Options struct {
	Store store.Options
	// PublicURL is where clients reach this server; it names the token
	// audiences and the endpoints' resource URLs.
	PublicURL string
	// Listen is the address the server listens on; unauthenticated GraphQL
	// is the local root only when it is a loopback address.
	Listen string
	// Issuers are token issuers besides the local one.
	Issuers []auth.IssuerConfig
	// SignIn configures the sign-in MCP hosts complete by themselves, offered
	// while PublicURL is a loopback URL.
	SignIn SignIn
	// CORSOrigins are the exact origins whose pages may call the MCP
	// endpoints and the sign-in's token, registration and revocation
	// (NewCORS); none by default.
	CORSOrigins []string
	// Metrics serves Prometheus metrics at GET /metrics (off by default:
	// they name servers and show how busy they are).
	Metrics bool
	// Models are the model providers callable agents may name; the
	// environment may add anthropic and openai (agent.NewProviders).
	Models []agent.Provider
	// Getenv reads the environment (os.Getenv when nil; tests pass their
	// own so that the machine's variables never reach them).
	Getenv func(string) string
	// Tasks configure the task workers.
	Tasks TaskOptions
	// HTTP bounds how long a connection may take (HTTPServer).
	HTTP HTTPOptions
	// Programs bound the Starlark runs: programs and Starlark tools.
	Programs ProgramOptions
	Clock    clock.Clock
	Random   io.Reader
	Logger   *slog.Logger
	// Version is the running build's, which its trace spans name.
	Version string
}

// SignIn configures the local authorization server.
type SignIn struct {
	// DefaultSubject fills the sign-in page's subject field.
	DefaultSubject string
	// AccessTTL is how long a signed-in host's access token lasts (default
	// signin.DefaultAccessTTL); RefreshTTL how long each refresh token does.
	AccessTTL  time.Duration
	RefreshTTL time.Duration
	// Clients caps client registrations and prunes unused clients (the
	// store's defaults when zero).
	Clients store.ClientLimits
	// NoClientDocuments turns Client ID Metadata Documents off: hosts
	// register instead.
	NoClientDocuments bool
	// DocumentRoots verify the servers of clients' metadata documents
	// (nil: the system's roots).
	DocumentRoots *x509.CertPool
}

// ProgramOptions bound the Starlark runs of this process.
type ProgramOptions struct {
	// MaxAllocBytes is what one run may allocate in all, with the Starlark
	// tools it calls (default starlark.DefaultMaxAllocBytes, 64 MiB).
	MaxAllocBytes int64
	// Concurrency is how many runs go on at once; the next waits for a
	// place until its deadline (default starlark.DefaultConcurrency).
	Concurrency int
}

// TaskOptions configure the task workers (see package tasks).
type TaskOptions struct {
	// Workers bounds the attempts this process runs at once (default 4).
	Workers int
	// Liveness is how long a process may go silent before others settle
	// its work (default 15 s).
	Liveness time.Duration
	// Poll is how often this process looks for tasks others queued and for
	// cancellations (default 1 s).
	Poll time.Duration
}

// Server is a running actiond.
type Server struct {
	Store  *store.Store
	Issuer *auth.LocalIssuer
	// SignIn is the authorization server, nil when the public URL is not a
	// loopback URL.
	SignIn *signin.Server
	// ReplacedPublicURL is the public URL an earlier actiond recorded in
	// this database, when it differed from this one's.
	ReplacedPublicURL string
	Tasks             *tasks.Service
	// Process names this process in the store.
	Process  string
	handler  http.Handler
	endpoint *gateway.Handler
	opts     Options
	// lock holds a SQLite data directory for this process (nil on Postgres).
	lock *store.DirLock
	// tracing exports the requests' spans (tracing.Off unless the
	// environment names an OTLP endpoint).
	tracing *tracing.Provider
}

// New opens the store, makes sure the local environment's actions exist and
// assembles the handlers.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Random == nil {
		opts.Random = rand.Reader
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.PublicURL = strings.TrimRight(opts.PublicURL, "/")
	opts.HTTP = opts.HTTP.withDefaults()
	cors, err := NewCORS(opts.PublicURL, opts.CORSOrigins)
	if err != nil {
		return nil, err
	}
	opts.Store.Clock = opts.Clock
	var meter *metrics.Metrics
	if opts.Metrics {
		meter = metrics.New()
		opts.Store.ObserveCommit = meter.ObserveCommit
	}
	var lock *store.DirLock
	if opts.Store.PostgresDSN == "" && opts.Store.DataDir != "" {
		var err error
		lock, err = store.LockDataDir(opts.Store.DataDir, store.Holder{PID: os.Getpid(), Listen: opts.Listen, PublicURL: opts.PublicURL, StartedAt: opts.Clock.Now()})
		if err != nil {
			return nil, err
		}
	}
	started := false
	defer func() {
		if !started {
			lock.Release()
		}
	}()
	st, err := store.Open(ctx, opts.Store)
	if err != nil {
		return nil, err
	}
	issuer, err := auth.NewLocalIssuer(ctx, auth.LocalIssuerOptions{URL: opts.PublicURL, KeyStore: st, Clock: opts.Clock, Random: opts.Random})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("local issuer: %w", err)
	}
	issuers := append([]auth.IssuerConfig{issuer.IssuerConfig(auth.MCPAudience(opts.PublicURL), auth.GraphQLAudience(opts.PublicURL))}, opts.Issuers...)
	verifier, err := auth.NewVerifier(auth.VerifierOptions{Issuers: issuers, Clock: opts.Clock})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("token issuers: %w", err)
	}
	ids := uuidSource{random: opts.Random}
	s := &Server{Store: st, Issuer: issuer, Process: ids.New(), opts: opts, lock: lock}
	// `actiond token` signs as the server recorded here, so the two cannot
	// disagree about the issuer and the audience; and no process starts at
	// another public URL while one serves the database.
	host, _ := os.Hostname()
	s.ReplacedPublicURL, err = st.ServeAs(ctx, s.Process, store.ProcessInfo{PID: os.Getpid(), Host: host, Listen: opts.Listen, PublicURL: opts.PublicURL}, liveness(opts.Tasks))
	if err != nil {
		st.Close()
		return nil, err
	}
	if err := installLocalEnvironment(ctx, st, opts.Clock); err != nil {
		st.Close()
		return nil, err
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	models, err := agent.NewProviders(opts.Models, getenv, &http.Client{})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("model providers: %w", err)
	}
	if s.tracing, err = tracing.FromEnv(ctx, getenv, "actiond", opts.Version); err != nil {
		st.Close()
		return nil, err
	}
	compiled := action.NewCache(4096)
	reader := registry.NewCached(st)
	runner := &engine.Runner{GraphQL: graphQL{store: st, clock: opts.Clock, ids: ids}, Registry: reader, Compiled: compiled, IDs: ids, Clock: opts.Clock, Random: opts.Random,
		Starlark: starlark.Limits{MaxAllocBytes: opts.Programs.MaxAllocBytes, Gate: starlark.NewGate(opts.Programs.Concurrency)}}
	s.Tasks = tasks.New(tasks.Options{
		Store: st, IDs: ids, Clock: opts.Clock, Logger: opts.Logger, Process: s.Process, Sole: st.Dialect() == store.SQLite,
		Workers: opts.Tasks.Workers, Liveness: opts.Tasks.Liveness, Poll: opts.Tasks.Poll,
		Runner: &agent.Runner{Store: st, Engine: runner, Registry: reader, Compiled: compiled, Models: models, IDs: ids, Clock: opts.Clock},
	})
	runner.Tasks = s.Tasks
	if err := s.Tasks.Open(ctx); err != nil {
		st.Close()
		return nil, err
	}
	endpointOptions := gateway.Options{
		Store: st, Directory: gateway.Resolve(st, reader, compiled), Verifier: verifier, Runner: runner, Tasks: s.Tasks,
		Process: s.Process, IDs: ids, Clock: opts.Clock, PublicURL: opts.PublicURL, Logger: opts.Logger,
	}
	endpointOptions.Tracer = s.tracing.Tracer()
	if meter != nil {
		meter.ReadFrom(st)
		endpointOptions.Meter = meter
	}
	endpoint := gateway.New(endpointOptions)
	s.endpoint = endpoint
	api := graph.NewHandler(graph.Options{Store: st, Verifier: verifier, PublicURL: opts.PublicURL, LocalRoot: isLoopback(opts.Listen), Clock: opts.Clock, IDs: ids, Natives: nativeTools, Replayer: replayer{endpoint}})

	page, err := explorer.Handler()
	if err != nil {
		st.Close()
		return nil, err
	}

	mux := http.NewServeMux()
	mux.Handle(explorer.Path, page)
	mux.Handle("GET /explorer", http.RedirectHandler(explorer.Path, http.StatusMovedPermanently))
	// A person who opens actiond's address in a browser wants the page
	// made for people, not a 404.
	mux.Handle("GET /{$}", http.RedirectHandler(explorer.Path, http.StatusFound))
	mux.Handle(mcpRoute, endpoint)
	mux.Handle("POST /financial/v1/graphql", api)
	mux.Handle(auth.ProtectedResourcePrefix+"/mcp/v1/", auth.ProtectedResourceHandler(opts.PublicURL, verifier.Issuers(auth.MCPAudience(opts.PublicURL))))
	mux.Handle(auth.JWKSPath, issuer.JWKSHandler())
	if signin.Offered(opts.PublicURL) {
		s.SignIn, err = signin.New(signin.Options{
			Issuer: issuer, Store: st, Principal: LocalPrincipal, Accounts: []string{auth.DefaultAccount},
			DefaultSubject: opts.SignIn.DefaultSubject, AccessTTL: opts.SignIn.AccessTTL, RefreshTTL: opts.SignIn.RefreshTTL, Clients: opts.SignIn.Clients,
			Clock: opts.Clock, Random: opts.Random, Logger: opts.Logger,
			Documents: signin.DocumentOptions{Roots: opts.SignIn.DocumentRoots, Off: opts.SignIn.NoClientDocuments},
		})
		if err != nil {
			st.Close()
			return nil, err
		}
		s.SignIn.Mount(mux)
	} else {
		mux.Handle(auth.AuthorizationServerMetadataPath, issuer.MetadataHandler())
		mux.Handle(auth.OpenIDConfigurationPath, issuer.MetadataHandler())
	}
	mux.HandleFunc("GET /healthcheck", s.healthcheck)
	if meter != nil {
		mux.Handle("GET "+metrics.Path, meter.Handler())
	}
	s.handler = cors.Wrap(withDeadlines(mux, opts.HTTP))
	if isLoopback(opts.Listen) {
		s.handler = loopbackOnly(s.handler)
	}
	started = true
	return s, nil
}

// liveness is how old another process's heartbeat may be while it counts
// as alive: the task workers' setting, or their default.
func liveness(o TaskOptions) time.Duration {
	if o.Liveness > 0 {
		return o.Liveness
	}
	return defaultLiveness
}

// defaultLiveness is package tasks' default for TaskOptions.Liveness.
const defaultLiveness = 15 * time.Second

// Handler serves every endpoint of the server.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops the task workers (their running attempts are given back to
// be claimed again) and the endpoint's background work, then closes the
// store.
func (s *Server) Close() error {
	s.endpoint.Close()
	s.Tasks.Close()
	err := s.Store.Close()
	s.lock.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(err, tracing.Shutdown(ctx, s.tracing))
}

func (s *Server) healthcheck(w http.ResponseWriter, r *http.Request) {
	if _, err := s.Store.Generation(r.Context(), auth.DefaultAccount); err != nil {
		http.Error(w, `{"status":"unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// uuidSource makes execution and action IDs.
type uuidSource struct{ random io.Reader }

func (u uuidSource) New() string {
	id, err := uuid.NewRandomFromReader(u.random)
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
