package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/isx/audit"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/mcpserver"
	"github.com/incusspawn/isx/internal/isx/template"
)

func newMCPCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve isx to an agent on this host over MCP (stdio)",
		Long: "mcp serves the Model Context Protocol on stdin and stdout, so that an agent\n" +
			"such as Claude Code can make disposable instances from the templates you approve\n" +
			"in ~/.config/incus-spawn/mcp.yaml, run commands and tasks in them, and hand them\n" +
			"back. Register it with `claude mcp add --scope user isx -- " + "<path to isx> mcp`\n" +
			"(isx init offers to). Every call is logged to ~/.local/state/incus-spawn/mcp.log.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runMCP(cmd)
		},
	}
}

func (a *app) runMCP(cmd *cobra.Command) error {
	ws, err := a.open()
	if err != nil {
		return err
	}
	home, cfg := ws.home, ws.cfg
	session, err := mcpserver.StdioSession()
	if err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("finding the working directory: %w", err)
	}
	log := audit.Open(filepath.Join(config.StateDir(home), audit.FileName), audit.Options{})
	defer log.Close()
	server, err := mcpserver.New(mcpserver.Options{
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
	})
	if err != nil {
		return err
	}
	return server.Run(cmd.Context(), a.stdin, a.stdout)
}
