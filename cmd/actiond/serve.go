package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/actiond/agent"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/explorer"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/signin"
	"github.com/incusspawn/isx/internal/actiond/starlark"
)

func (a *app) serveCommand() *cobra.Command {
	var db database
	var addr, public, configPath, cpuProfile string
	var accessTTL time.Duration
	var documents bool
	var corsOrigins []string
	var metrics bool
	var taskOptions server.TaskOptions
	var programs server.ProgramOptions
	var programMemoryMiB, memoryLimitMiB int64
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the GraphQL API, the MCP servers and the sign-in",
		Long: "Serve the GraphQL API at /financial/v1/graphql and every MCP server at\n" +
			"/mcp/v1/<account>/<name>. While the public URL is a loopback URL, MCP hosts\n" +
			"sign in by themselves: actiond is their OAuth authorization server.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if accessTTL < signin.MinAccessTTL || accessTTL > auth.MaxTokenTTL {
				return usagef("--access-token-ttl must lie within [%s, %s], not %s", signin.MinAccessTTL, auth.MaxTokenTTL, accessTTL)
			}
			config, err := loadConfig(configPath)
			if err != nil {
				return err
			}
			if programMemoryMiB < 1 || programMemoryMiB > 16<<10 {
				return usagef("--program-memory must be from 1 to 16384 MiB, not %d", programMemoryMiB)
			}
			if programs.Concurrency < 1 {
				return usagef("--programs must be at least 1, not %d", programs.Concurrency)
			}
			if memoryLimitMiB < 0 {
				return usagef("--memory-limit must be 0 (none) or more MiB, not %d", memoryLimitMiB)
			}
			if _, err := server.NewCORS("", corsOrigins); err != nil {
				return usagef("%s", err)
			}
			programs.MaxAllocBytes = programMemoryMiB << 20
			softMemoryLimit(memoryLimitMiB << 20)
			return a.serve(cmd.Context(), serveSettings{db: &db, addr: addr, public: publicURL(public, addr), config: config, cpuProfile: cpuProfile, accessTTL: accessTTL, documents: documents, corsOrigins: corsOrigins, metrics: metrics, tasks: taskOptions, programs: programs})
		},
	}
	db.register(cmd)
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "listen address")
	cmd.Flags().StringVar(&public, "public-url", "", "URL clients reach actiond at (default http://<addr>); tokens name it as issuer and in aud")
	cmd.Flags().StringVar(&configPath, "config", "", "YAML file naming further token issuers and the model providers callable agents use")
	cmd.Flags().DurationVar(&accessTTL, "access-token-ttl", signin.DefaultAccessTTL, "how long a signed-in host's access token lasts; the host refreshes it")
	cmd.Flags().BoolVar(&documents, "client-metadata-documents", true, "let hosts sign in with the https URL of their metadata document as client_id (SEP-991); off, they register")
	cmd.Flags().StringArrayVar(&corsOrigins, "cors-origin", nil, "an origin (scheme://host[:port]) whose pages may call the MCP endpoints and the sign-in's token, registration and revocation; repeat for more (default none)")
	cmd.Flags().BoolVar(&metrics, "metrics", false, "serve Prometheus metrics at GET /metrics to whoever reaches --addr (they name the servers and show their load)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (for benchmarks)")
	cmd.Flags().IntVar(&taskOptions.Workers, "task-workers", 4, "how many tasks (callable agents' runs) this process runs at once")
	cmd.Flags().DurationVar(&taskOptions.Liveness, "liveness", 15*time.Second, "how long a process may go silent before another settles what it left running")
	cmd.Flags().DurationVar(&taskOptions.Poll, "task-poll", time.Second, "how often this process looks for tasks other processes queued")
	cmd.Flags().Int64Var(&programMemoryMiB, "program-memory", starlark.DefaultMaxAllocBytes>>20, "MiB a Starlark program (or tool) may allocate in one run, with the Starlark tools it calls")
	cmd.Flags().IntVar(&programs.Concurrency, "programs", starlark.DefaultConcurrency, "how many Starlark programs and tools this process runs at once; more wait")
	cmd.Flags().Int64Var(&memoryLimitMiB, "memory-limit", defaultMemoryLimitMiB, "MiB of heap past which the garbage collector works harder to stay under (a soft limit, 0 for none; GOMEMLIMIT, when set, wins)")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml", "json")
	return cmd
}

// defaultMemoryLimitMiB is the soft heap limit: what actiond needs
// besides its Starlark runs, and --programs × --program-memory for them
// (2 × 64 MiB), with room to spare. Without it the collector lets the
// garbage of finished runs grow the heap to twice what is live.
const defaultMemoryLimitMiB = 192

// softMemoryLimit sets the collector's soft limit, unless the environment
// names one.
func softMemoryLimit(bytes int64) {
	if bytes > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(bytes)
	}
}

type serveSettings struct {
	db         *database
	addr       string
	public     string
	config     config
	cpuProfile string
	accessTTL  time.Duration
	documents  bool
	// corsOrigins are the origins of browser-based hosts (--cors-origin).
	corsOrigins []string
	// metrics serves GET /metrics (--metrics).
	metrics  bool
	tasks    server.TaskOptions
	programs server.ProgramOptions
}

func (a *app) serve(ctx context.Context, s serveSettings) error {
	if s.db.both() {
		fmt.Fprintf(a.stderr, "actiond: using %s (--postgres); --data %s is ignored\n", s.db.describe(), s.db.data)
	}
	logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := server.New(ctx, server.Options{
		Store: s.db.options(false), PublicURL: s.public, Listen: s.addr, Issuers: s.config.Issuers, Logger: logger,
		SignIn: server.SignIn{DefaultSubject: currentUser(), AccessTTL: s.accessTTL, NoClientDocuments: !s.documents},
		Models: s.config.Models, Tasks: s.tasks, Programs: s.programs, CORSOrigins: s.corsOrigins, Metrics: s.metrics,
		Version: readBuildInfo().Version,
	})
	if err != nil {
		return fmt.Errorf("cannot start on %s: %w", s.db.describe(), err)
	}
	defer srv.Close()
	if s.cpuProfile != "" {
		stopProfile, err := profileCPU(s.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	listener, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.addr, err)
	}
	httpServer := srv.HTTPServer()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		httpServer.Shutdown(shutdown) // running requests finish and are recorded
	}()
	a.announce(s, srv)
	if err := httpServer.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// announce says where everything is, and the exact command that gives a
// token for this server.
func (a *app) announce(s serveSettings, srv *server.Server) {
	w := a.stderr
	fmt.Fprintf(w, "actiond: serving %s on %s, database %s\n", s.public, s.addr, s.db.describe())
	if srv.ReplacedPublicURL != "" {
		fmt.Fprintf(w, "actiond: this database was last served at %s; tokens naming it are not accepted here\n", srv.ReplacedPublicURL)
	}
	fmt.Fprintf(w, "actiond: GraphQL           %s/financial/v1/graphql\n", s.public)
	fmt.Fprintf(w, "actiond: MCP server        %s\n", auth.MCPResourceURL(s.public, auth.DefaultAccount, "default"))
	fmt.Fprintf(w, "actiond: explorer          %s%s\n", s.public, explorer.Path)
	if srv.SignIn != nil {
		fmt.Fprintf(w, "actiond: sign-in           MCP hosts sign in by themselves (%s%s)\n", s.public, auth.AuthorizationServerMetadataPath)
	} else {
		fmt.Fprintf(w, "actiond: sign-in           not offered: the public URL is not a loopback URL\n")
	}
	command := "actiond token " + s.db.flags() + " --subject " + shellQuote(defaultSubject())
	if s.db.postgres != "" && hasPassword(s.db.postgres) {
		command = "PGPASSWORD=… " + command
	}
	fmt.Fprintf(w, "actiond: a token for scripts: %s\n", command)
}

func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

func defaultSubject() string {
	if u := currentUser(); u != "" {
		return u
	}
	return "me"
}

func publicURL(flag, addr string) string {
	if flag != "" {
		return strings.TrimRight(flag, "/")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// config is the optional YAML (or JSON) file of further token issuers and
// of the model providers callable agents name:
//
//	issuers:
//	  - issuer: https://login.example.com
//	    jwksURL: https://login.example.com/.well-known/jwks.json
//	    principal: signin
//	    audiences: [http://localhost:8080/mcp]
//	models:
//	  - name: anthropic
//	    api: anthropic          # or openai: an OpenAI-compatible chat API
//	    baseURL: https://api.anthropic.com
//	    apiKeyEnv: ANTHROPIC_API_KEY
type config struct {
	Issuers []auth.IssuerConfig `json:"issuers"`
	Models  []agent.Provider    `json:"models"`
}

func loadConfig(path string) (config, error) {
	var c config
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read config %s: %w", path, err)
	}
	// The issuer fields are named as in JSON; YAML is read into plain values
	// and decoded as JSON, unknown keys refused.
	var plain any
	if err := yaml.Unmarshal(data, &plain); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	asJSON, err := json.Marshal(plain)
	if err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	decoder := json.NewDecoder(bytes.NewReader(asJSON))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// profileCPU writes a CPU profile until the returned function is called.
func profileCPU(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
