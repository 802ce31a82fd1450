package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/isx/tui"
	"github.com/incusspawn/isx/internal/tracing"
)

func newProxyCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "The host proxy: how instances reach models, packages and git",
		Long: "The host proxy is one process per host user through which instances reach model\n" +
			"providers, package sources and git hosts. It injects the credentials of the\n" +
			"accounts in ~/.config/incus-spawn/accounts.yaml that each template names (accounts:),\n" +
			"so no credential enters an instance, and counts every instance's model calls and\n" +
			"traffic. isx branch and isx mcp start it when it is not running.",
		Args: subcommandArgs,
		// Runnable, so that a mistyped subcommand is refused (with the
		// nearest) rather than answered with this help and exit 0.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		&cobra.Command{Use: "start", Short: "Start the proxy unless it runs", Args: exactArgs(0),
			RunE: func(cmd *cobra.Command, _ []string) error { return a.proxyStart(cmd.Context()) }},
		&cobra.Command{Use: "stop", Short: "Stop the proxy", Args: exactArgs(0),
			RunE: func(cmd *cobra.Command, _ []string) error { return a.proxyStop(cmd.Context()) }},
		newProxyStatusCommand(a),
		&cobra.Command{Use: "restart", Short: "Stop and start the proxy: every count starts again from zero", Args: exactArgs(0),
			RunE: func(cmd *cobra.Command, _ []string) error { return a.proxyRestart(cmd.Context()) }},
		newProxyActivityCommand(a),
		newProxyMetricsCommand(a),
		&cobra.Command{Use: "serve", Hidden: true, Short: "Run the proxy in the foreground (what start runs, detached)", Args: exactArgs(0),
			RunE: func(cmd *cobra.Command, _ []string) error { return a.proxyServe(cmd.Context()) }},
	)
	return cmd
}

func newProxyStatusCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Say whether the proxy runs, since when, and where its log is",
		Long: "status says whether the host proxy runs: its pid and version, since when it counts,\n" +
			"the project it serves, how many instances and accounts, its log and its CA. It\n" +
			"exits 1 when the proxy is not running; --json prints the same for programs\n" +
			"({\"running\": false} when it is not running).",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.proxyStatus(cmd.Context(), asJSON) },
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for programs")
	return cmd
}

func newProxyActivityCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "activity [--json]",
		Short: "Show what the proxy counted of every instance",
		Long: "activity shows, for every instance the proxy knows, the counts instance_activity\n" +
			"reports: tokens of model calls, model calls made and in flight, idle time, and all\n" +
			"traffic, counted from counting_since. --json prints them for programs.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			home, err := a.homeDir()
			if err != nil {
				return err
			}
			report, err := proxy.Connect(home).Report(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(report)
			}
			return writeActivity(a.stdout, report)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for programs")
	return cmd
}

func newProxyMetricsCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "metrics",
		Short: "Print the proxy's counts as Prometheus metrics",
		Long: "metrics prints what activity shows in the Prometheus exposition format: per\n" +
			"instance, tokens by kind, model calls made and in flight, requests made and open,\n" +
			"bytes sent and received. The proxy serves them at GET /metrics on its control\n" +
			"socket, which only you can reach; a scraper that reads a unix socket, or a\n" +
			"textfile collector fed by this command, takes them from there.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			home, err := a.homeDir()
			if err != nil {
				return err
			}
			exposition, err := proxy.Connect(home).Metrics(cmd.Context())
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(exposition)
			return err
		},
	}
}

// launch is how this isx starts the proxy: its own binary, detached, in
// the project this command works in.
func (a *app) launch() (proxy.Launch, error) {
	exe, err := os.Executable()
	if err != nil {
		return proxy.Launch{}, fmt.Errorf("finding the isx binary to run the proxy: %w", err)
	}
	cfg, err := a.config()
	if err != nil {
		return proxy.Launch{}, err
	}
	return proxy.Launch{Executable: exe, Args: []string{"proxy", "serve", "--project", a.project(cfg)}, Clock: a.clock}, nil
}

// ensureProxy starts the proxy when it does not answer, saying so.
func (a *app) ensureProxy(ctx context.Context) (*proxy.Control, error) {
	home, err := a.homeDir()
	if err != nil {
		return nil, err
	}
	launch, err := a.launch()
	if err != nil {
		return nil, err
	}
	c, started, err := proxy.Ensure(ctx, home, launch)
	if err != nil {
		return nil, err
	}
	if started {
		if status, err := c.Status(ctx); err == nil {
			fmt.Fprintf(a.stderr, "isx: started the host proxy (pid %d; log %s)\n", status.PID, status.Log)
		}
	}
	return c, nil
}

// proxyDir is the host proxy's directory, which new instances' proxy
// devices lead to.
func (a *app) proxyDir() (string, error) {
	home, err := a.homeDir()
	if err != nil {
		return "", err
	}
	return config.ProxyDir(home), nil
}

// admit has the proxy serve a new or started instance before isx says it
// is ready. A failure leaves the instance as it is and says why.
func (a *app) admit(ctx context.Context, name string) error {
	c, err := a.ensureProxy(ctx)
	if err == nil {
		_, err = c.Admit(ctx, name)
	}
	if err != nil {
		a.warnf("%s cannot reach model providers, packages or git until the host proxy serves it: %v", name, err)
	}
	return err
}

func (a *app) proxyStart(ctx context.Context) error {
	home, err := a.homeDir()
	if err != nil {
		return err
	}
	if status, err := proxy.Connect(home).Status(ctx); err == nil {
		fmt.Fprintf(a.stdout, "The isx host proxy already runs (pid %d, since %s).\n", status.PID, status.StartedAt)
		return nil
	}
	launch, err := a.launch()
	if err != nil {
		return err
	}
	status, err := proxy.Start(ctx, home, launch)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Started the isx host proxy (pid %d); it counts from %s. Log: %s\n", status.PID, status.StartedAt, status.Log)
	return nil
}

func (a *app) proxyStop(ctx context.Context) error {
	home, err := a.homeDir()
	if err != nil {
		return err
	}
	if err := proxy.StopAndWait(ctx, home, a.clock); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "Stopped the isx host proxy. Instances reach nothing through it until it starts again (isx branch, isx mcp or isx proxy start).")
	return nil
}

func (a *app) proxyRestart(ctx context.Context) error {
	home, err := a.homeDir()
	if err != nil {
		return err
	}
	if err := proxy.StopAndWait(ctx, home, a.clock); err != nil && !proxy.IsNotRunning(err) {
		return err
	}
	return a.proxyStart(ctx)
}

// proxyStatusJSON is `isx proxy status --json`: the control API's status,
// with whether it runs and the accounts file it reads.
type proxyStatusJSON struct {
	Running bool `json:"running"`
	*proxy.Status
	AccountsFile string `json:"accounts_file,omitempty"`
}

func (a *app) proxyStatus(ctx context.Context, asJSON bool) error {
	home, err := a.homeDir()
	if err != nil {
		return err
	}
	status, err := proxy.Connect(home).Status(ctx)
	if asJSON {
		out := proxyStatusJSON{Running: err == nil}
		if err == nil {
			out.Status, out.AccountsFile = &status, config.AccountsPath(home)
		}
		if writeErr := writeJSON(a.stdout, out); writeErr != nil {
			return writeErr
		}
	}
	if err != nil || asJSON {
		return err
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "running\tpid %d, isx %s\n", status.PID, status.Version)
	fmt.Fprintf(w, "counting since\t%s\n", status.StartedAt)
	fmt.Fprintf(w, "project\t%s\n", status.Project)
	fmt.Fprintf(w, "instances served\t%d\n", status.Instances)
	fmt.Fprintf(w, "accounts\t%d in %s\n", status.Accounts, config.AccountsPath(home))
	fmt.Fprintf(w, "log\t%s\n", status.Log)
	fmt.Fprintf(w, "CA\t%s\n", status.CA)
	return w.Flush()
}

// proxyServe is the proxy process itself.
func (a *app) proxyServe(ctx context.Context) error {
	ws, err := a.open()
	if err != nil {
		return err
	}
	home, cfg := ws.home, ws.cfg
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the isx program: %w", err)
	}
	logFile, err := proxy.OpenLog(home)
	if err != nil {
		return err
	}
	defer logFile.Close()
	traces, err := tracing.FromEnv(ctx, os.Getenv, "isx-proxy", build.Version)
	if err != nil {
		return err
	}
	defer a.shutdownTracing(traces)
	server, err := proxy.New(proxy.Options{
		Tracer:     traces.Tracer(),
		Home:       home,
		Client:     ws.client,
		Owner:      ws.owner,
		Upstreams:  cfg.Upstreams,
		HostRoutes: cfg.HostRoutes,
		// Only trusted definitions: a project-local one never names the
		// accounts an instance gets.
		Templates: func() (*template.Set, error) {
			return template.Load(template.Options{Home: home, SearchPaths: cfg.TemplateDirs()})
		},
		Clock:   a.clock,
		Log:     slog.New(slog.NewTextHandler(logFile, nil)),
		Version: build.Version,
		// A coordinator's isx mcp is this very program, as the user.
		Coordinator: func(name, socket string) *exec.Cmd {
			cmd := exec.Command(self, "mcp", "--coordinator", name, "--listen", socket)
			cmd.Stdout, cmd.Stderr = logFile, logFile
			cmd.Dir = "/"
			return cmd
		},
	})
	if err != nil {
		return err
	}
	return server.Run(ctx)
}

// writeActivity is the table a person reads at a glance.
func writeActivity(out io.Writer, report proxy.Report) error {
	if len(report.Instances) == 0 {
		fmt.Fprintf(out, "The host proxy (counting since %s) knows no instance yet.\n", report.StartedAt)
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	// Every column says its unit: tokens, model calls, requests; IDLE is
	// a duration and SENT and RECEIVED are bytes, whose cells say so.
	// TOKENS PER MINUTE draws the last 15 minutes' spend, the newest
	// right.
	fmt.Fprintln(w, "INSTANCE\tCOUNTING SINCE\tTOKENS IN\tTOKENS OUT\tCACHE READ TOKENS\tCACHE WRITE TOKENS\tTOKENS PER MINUTE\tMODEL CALLS\tCALLS IN FLIGHT\tIDLE\tREQUESTS\tREQUESTS OPEN\tSENT\tRECEIVED")
	for _, act := range report.Instances {
		idle := "-"
		if act.IdleSeconds != nil {
			idle = (time.Duration(*act.IdleSeconds) * time.Second).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\n", act.Instance, act.CountingSince,
			act.InputTokens, act.OutputTokens, act.CacheReadInputTokens, act.CacheCreationInputTokens, tui.Sparkline(act.TokensPerMinute),
			act.Requests, act.RequestsInFlight, idle, act.TrafficRequests, act.TrafficInFlight,
			bytesText(act.TrafficBytesSent), bytesText(act.TrafficBytesReceived))
	}
	return w.Flush()
}

func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	value, suffix := float64(n), "B"
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if value < unit {
			break
		}
		value, suffix = value/unit, s
	}
	return fmt.Sprintf("%.1f %s", value, suffix)
}

// mcpProxy is the host proxy for isx mcp: started when it does not
// answer, so the next call after a crash of the proxy brings it back.
type mcpProxy struct{ a *app }

func (p mcpProxy) Admit(ctx context.Context, name string) (proxy.Activity, error) {
	c, err := p.a.ensureProxy(ctx)
	if err != nil {
		return proxy.Activity{}, err
	}
	return c.Admit(ctx, name)
}

func (p mcpProxy) Activity(ctx context.Context, name string) (proxy.Activity, error) {
	c, err := p.a.ensureProxy(ctx)
	if err != nil {
		return proxy.Activity{}, err
	}
	return c.Activity(ctx, name)
}

// shutdownTracing sends the spans still queued, saying so when it cannot.
func (a *app) shutdownTracing(p *tracing.Provider) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tracing.Shutdown(ctx, p); err != nil {
		a.warnf("%v", err)
	}
}
