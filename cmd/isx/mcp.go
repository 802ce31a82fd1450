package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/isx/audit"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/mcpserver"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/tracing"
	"github.com/incusspawn/isx/internal/usage"
)

func newMCPCommand(a *app) *cobra.Command {
	var coordinator, listen string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve isx to an agent on this host over MCP (stdio)",
		Long: "mcp serves the Model Context Protocol on stdin and stdout, so that an agent\n" +
			"such as Claude Code can make disposable instances from the templates you approve\n" +
			"in ~/.config/incus-spawn/mcp.yaml, run commands and tasks in them, and hand them\n" +
			"back. Register it with `claude mcp add --scope user isx -- " + "<path to isx> mcp`\n" +
			"(isx init offers to). Every call is logged to ~/.local/state/incus-spawn/mcp.log.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if coordinator != "" || listen != "" {
				if coordinator == "" || listen == "" {
					return usage.Error{Err: errors.New("--coordinator and --listen go together")}
				}
				return a.runMCPCoordinator(cmd, coordinator, listen)
			}
			return a.runMCP(cmd)
		},
	}
	// The host proxy runs isx mcp this way for a coordinator instance,
	// whose requests it has checked; nobody else needs these.
	cmd.Flags().StringVar(&coordinator, "coordinator", "", "serve the coordinator instance NAME (the host proxy's use)")
	cmd.Flags().StringVar(&listen, "listen", "", "serve Streamable HTTP on this unix socket (with --coordinator)")
	cmd.Flags().MarkHidden("coordinator") //nolint:errcheck // defined above
	cmd.Flags().MarkHidden("listen")      //nolint:errcheck // defined above
	return cmd
}

func (a *app) runMCP(cmd *cobra.Command) error {
	session, err := holding.StdioSession()
	if err != nil {
		return err
	}
	server, closeLog, err := a.mcpServer(cmd, session, false)
	if err != nil {
		return err
	}
	defer closeLog()
	a.sayWhatMCPIs()
	stdio := newAnsweringStdio(a.stdin, a.stdout)
	defer stdio.Stop()
	return server.Run(cmd.Context(), stdio.Reader(), stdio)
}

// sayWhatMCPIs tells a person who ran isx mcp on a terminal what it is
// waiting for, on stderr: its stdout is the protocol's.
func (a *app) sayWhatMCPIs() {
	in, ok := a.stdin.(*os.File)
	if !ok || !isTerminal(in) {
		return
	}
	fmt.Fprintf(a.stderr, "isx mcp is an MCP server on stdin and stdout, for an agent such as Claude Code to start;\n"+
		"it waits for JSON-RPC messages, one a line (Ctrl-D ends it). Register it with Claude Code:\n"+
		"  claude %s\n", shellWords(mcpAddArgs(registeredPath())))
}

// runMCPCoordinator serves one coordinator instance on a unix socket
// only the user can reach; its session is the instance.
func (a *app) runMCPCoordinator(cmd *cobra.Command, name, socket string) error {
	client, err := a.incus()
	if err != nil {
		return err
	}
	session, err := holding.CoordinatorSession(cmd.Context(), client, name)
	if err != nil {
		return err
	}
	server, closeLog, err := a.mcpServer(cmd, session, true)
	if err != nil {
		return err
	}
	defer closeLog()
	os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", socket, err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("making %s private: %w", socket, err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return server.ServeHTTP(ctx, l)
}

// mcpServer makes the isx mcp server of a session.
func (a *app) mcpServer(_ *cobra.Command, session string, coordinator bool) (*mcpserver.Server, func(), error) {
	ws, err := a.open()
	if err != nil {
		return nil, nil, err
	}
	home, cfg := ws.home, ws.cfg
	wd, err := os.Getwd()
	if err != nil {
		return nil, nil, fmt.Errorf("finding the working directory: %w", err)
	}
	if coordinator {
		// Project-local definitions are found from the host working
		// directory; a coordinator has none, so it sees none.
		wd = ""
	}
	log := audit.Open(filepath.Join(config.StateDir(home), audit.FileName), audit.Options{})
	traces, err := tracing.FromEnv(context.Background(), os.Getenv, "isx-mcp", build.Version)
	if err != nil {
		log.Close()
		return nil, nil, err
	}
	server, err := mcpserver.New(mcpserver.Options{
		Tracer: traces.Tracer(),
		Home:   home,
		Client: ws.client,
		// Definitions are read afresh on every call that needs them,
		// project-local ones included, so that they can be recognised and
		// refused.
		Templates: func() (*template.Set, error) {
			return template.Load(template.Options{Home: home, SearchPaths: cfg.TemplateDirs(), WorkDir: wd})
		},
		Owner:        ws.owner,
		Session:      session,
		Clock:        a.clock,
		Version:      build.Version,
		Log:          log,
		Stderr:       a.stderr,
		Proxy:        mcpProxy{a},
		SweepAtStart: true,
		Warm:         true,
		Coordinator:  coordinator,
	})
	if err != nil {
		log.Close()
		a.shutdownTracing(traces)
		return nil, nil, err
	}
	return server, func() { log.Close(); a.shutdownTracing(traces) }, nil
}
