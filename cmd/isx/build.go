package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/instance"
)

func newBuildCommand(a *app) *cobra.Command {
	var req build.Request
	var verbose bool
	cmd := &cobra.Command{
		Use:   "build [TEMPLATE...] [--with-parents] [--all]",
		Short: "Build template instances, parents first",
		Long: "build builds each named template: it makes an instance from the root image or\n" +
			"the parent template, runs the template's steps, stamps it and stops it, and only\n" +
			"then replaces the old template instance. A parent that is not built, or is\n" +
			"stale, is built first; --with-parents rebuilds every parent. A failing step\n" +
			"leaves nothing behind and prints its output.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !req.All {
				return usageError{fmt.Errorf("name the templates to build, or give --all")}
			}
			req.Templates = args
			return a.runBuild(cmd, req, verbose)
		},
	}
	cmd.Flags().BoolVar(&req.WithParents, "with-parents", false, "rebuild every parent template too, even a current one")
	cmd.Flags().BoolVar(&req.All, "all", false, "build every template there is")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every step's output")
	return cmd
}

func (a *app) runBuild(cmd *cobra.Command, req build.Request, verbose bool) error {
	set, err := a.templates()
	if err != nil {
		return err
	}
	client, err := a.incus()
	if err != nil {
		return err
	}
	owner, err := instance.CurrentOwner()
	if err != nil {
		return err
	}
	home, err := a.homeDir()
	if err != nil {
		return err
	}
	builder := &build.Builder{Client: client, Set: set, Owner: owner, Out: a.stdout, Verbose: verbose, Clock: a.clock,
		NPMCache: build.NPMCacheDir(home), Proxy: buildProxy{a}, ProxyDir: config.ProxyDir(home)}
	results, err := builder.Build(cmd.Context(), req)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Built %d template(s) in project %s.\n", len(results), client.ProjectName())
	return nil
}

// buildProxy is the host proxy for a build that clones repositories,
// started only when a build needs it.
type buildProxy struct{ a *app }

func (p buildProxy) Admit(ctx context.Context, name string) error {
	_, err := mcpProxy(p).Admit(ctx, name)
	return err
}
