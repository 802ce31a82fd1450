// Command actiond serves MCP servers defined as actions through a GraphQL
// API, recording every request.
//
//	actiond serve [--addr 127.0.0.1:8080] [--data DIR | --postgres DSN]
//	actiond token --principal P --subject S
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
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/actiond/agent"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
)

func main() {
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "actiond:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "actiond",
		Short:         "Serve MCP servers defined as actions, recording every request",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.AddCommand(serveCommand(), tokenCommand())
	return cmd
}

// storeFlags are how every command finds the database.
type storeFlags struct {
	data     string
	postgres string
	schema   string
	public   string
}

func (f *storeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.data, "data", defaultDataDir(), "directory of the embedded SQLite database")
	cmd.Flags().StringVar(&f.postgres, "postgres", "", "Postgres DSN (instead of --data); any number of actiond processes may share one")
	cmd.Flags().StringVar(&f.schema, "postgres-schema", "", "keep actiond's tables in this Postgres schema (created if missing)")
	cmd.Flags().StringVar(&f.public, "public-url", "", "URL clients reach actiond at (default http://<addr>); tokens name it in aud")
}

func (f *storeFlags) options() store.Options {
	if f.postgres != "" {
		return store.Options{PostgresDSN: f.postgres, PostgresSchema: f.schema}
	}
	return store.Options{DataDir: f.data}
}

func defaultDataDir() string {
	if dir := os.Getenv("ACTIOND_DATA"); dir != "" {
		return dir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "actiond-data"
	}
	return filepath.Join(home, ".local", "share", "actiond")
}

func serveCommand() *cobra.Command {
	var flags storeFlags
	var addr, configPath, cpuProfile string
	var taskOptions server.TaskOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the GraphQL API at /financial/v1/graphql and MCP servers at /mcp/v1/<account>/<name>",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			config, err := loadConfig(configPath)
			if err != nil {
				return err
			}
			public := publicURL(flags.public, addr)
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv, err := server.New(ctx, server.Options{Store: flags.options(), PublicURL: public, Listen: addr, Issuers: config.Issuers,
				Models: config.Models, Tasks: taskOptions, Logger: logger})
			if err != nil {
				return err
			}
			defer srv.Close()
			if cpuProfile != "" {
				stopProfile, err := profileCPU(cpuProfile)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			listener, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", addr, err)
			}
			httpServer := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-ctx.Done()
				shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				httpServer.Shutdown(shutdown) // running requests finish and are recorded
			}()
			fmt.Fprintf(os.Stderr, "actiond: serving %s (GraphQL %s/financial/v1/graphql, default MCP server %s/mcp/v1/%s/default)\n",
				addr, public, public, auth.DefaultAccount)
			if err := httpServer.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "listen address")
	cmd.Flags().StringVar(&configPath, "config", "", "YAML file naming further token issuers")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (for benchmarks)")
	cmd.Flags().IntVar(&taskOptions.Workers, "task-workers", 4, "how many tasks (callable agents' runs) this process runs at once")
	cmd.Flags().DurationVar(&taskOptions.Liveness, "liveness", 15*time.Second, "how long a process may go silent before another settles what it left running")
	cmd.Flags().DurationVar(&taskOptions.Poll, "task-poll", time.Second, "how often this process looks for tasks other processes queued")
	return cmd
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

func tokenCommand() *cobra.Command {
	var flags storeFlags
	var principal, subject, client, audience string
	var accounts []string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "token --principal P --subject S",
		Short: "Print a bearer token signed by this actiond's local issuer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if principal == "" || subject == "" {
				return errors.New("--principal and --subject are required")
			}
			ctx := cmd.Context()
			public := publicURL(flags.public, "127.0.0.1:8080")
			st, err := store.Open(ctx, flags.options())
			if err != nil {
				return err
			}
			defer st.Close()
			issuer, err := auth.NewLocalIssuer(ctx, auth.LocalIssuerOptions{URL: public, KeyStore: st})
			if err != nil {
				return err
			}
			aud := auth.MCPAudience(public)
			switch audience {
			case "mcp":
			case "graphql":
				aud = auth.GraphQLAudience(public)
			default:
				return fmt.Errorf("--audience must be mcp or graphql, not %q", audience)
			}
			token, err := issuer.Mint(auth.MintOptions{Principal: principal, Subject: subject, Client: client, Accounts: accounts, Audience: aud, TTL: ttl})
			if err != nil {
				return err
			}
			fmt.Println(token)
			return nil
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVar(&principal, "principal", server.LocalPrincipal, "the principal the token acts as")
	cmd.Flags().StringVar(&subject, "subject", "", "the user (sub claim)")
	cmd.Flags().StringVar(&client, "client", "actiond-token", "the OAuth client (client_id claim)")
	cmd.Flags().StringSliceVar(&accounts, "account", []string{auth.DefaultAccount}, "accounts the token may reach")
	cmd.Flags().StringVar(&audience, "audience", "mcp", "mcp (the MCP endpoints) or graphql (the GraphQL API)")
	cmd.Flags().DurationVar(&ttl, "ttl", auth.DefaultTokenTTL, "how long the token is valid")
	return cmd
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
