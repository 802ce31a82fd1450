package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/spelling"
)

func newBuildCommand(a *app) *cobra.Command {
	var req build.Request
	var verbose bool
	cmd := &cobra.Command{
		Use:   "build [TEMPLATE...] [--with-parents] [--all] [-v]",
		Short: "Build template instances, parents first",
		Long: "build builds each named template: it makes an instance from the root image or\n" +
			"the parent template, runs the template's steps, stamps it and stops it, and only\n" +
			"then replaces the old template instance. A parent that is not built, or is\n" +
			"stale, is built first; --with-parents rebuilds every parent. A failing step\n" +
			"leaves nothing behind and prints its output.\n\n" +
			"Each step is shown as it starts; on a terminal its line counts the time it has\n" +
			"taken. -v shows every step's output as it is printed. A definition file that\n" +
			"cannot be read keeps only its own template from being built: --all builds the\n" +
			"others, then fails naming it.",
		ValidArgsFunction: a.completeTemplates,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !req.All {
				return usagef("name the templates to build, or give --all")
			}
			if len(args) > 0 && req.All {
				return usagef("name templates or give --all, not both")
			}
			req.Templates = args
			return a.runBuild(cmd, req, verbose)
		},
	}
	cmd.Flags().BoolVar(&req.WithParents, "with-parents", false, "rebuild every parent template too, even a current one")
	cmd.Flags().BoolVar(&req.All, "all", false, "build every template there is")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "show every step's output as it is printed")
	return cmd
}

func (a *app) runBuild(cmd *cobra.Command, req build.Request, verbose bool) error {
	ws, err := a.open()
	if err != nil {
		return err
	}
	set, err := a.templates()
	if err != nil {
		return err
	}
	if err := a.checkProject(cmd.Context(), ws.client); err != nil {
		return err
	}
	var left []string // what --all cannot build, and why
	if req.All {
		req, left = buildable(set)
		if len(req.Templates) == 0 {
			return notAllBuilt(left)
		}
	}
	home, err := a.homeDir()
	if err != nil {
		return err
	}
	for _, name := range req.Templates {
		if _, err := set.Chain(name); err != nil {
			return withSuggestion(err, name, set.Names())
		}
	}
	progress := a.buildProgress(verbose)
	builder := &build.Builder{Client: ws.client, Set: set, Owner: ws.owner, Progress: progress, Verbose: verbose, Clock: a.clock,
		NPMCache: build.NPMCacheDir(home), Proxy: buildProxy{a}, ProxyDir: config.ProxyDir(home)}
	results, err := builder.Build(cmd.Context(), req)
	progress.Close()
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Built %d template(s) in project %s.\n", len(results), ws.client.ProjectName())
	if len(left) > 0 {
		return notAllBuilt(left)
	}
	return nil
}

// buildProxy is the host proxy for a build that clones repositories,
// started only when a build needs it.
type buildProxy struct{ a *app }

func (p buildProxy) Admit(ctx context.Context, name string) error {
	_, err := mcpProxy(p).Admit(ctx, name)
	return err
}

func notAllBuilt(left []string) error {
	return coded.New(codeNotAllBuilt, "%d template definition(s) could not be built:\n  %s", len(left), strings.Join(left, "\n  ")).
		WithHint("fix the files named, then run `isx build --all` again")
}

// codeNotAllBuilt: --all built what it could, and some definitions were
// broken.
const codeNotAllBuilt = "not_all_built"

// buildable is the request --all makes: every template whose definition
// and parents can be used, and a line for each file or chain that cannot.
func buildable(set *template.Set) (build.Request, []string) {
	var req build.Request
	var left []string
	for _, b := range set.Broken() {
		left = append(left, b.Err.Error())
	}
	for _, name := range set.Names() {
		if _, err := set.Chain(name); err != nil {
			left = append(left, err.Error())
			continue
		}
		req.Templates = append(req.Templates, name)
	}
	return req, left
}

// withSuggestion adds "did you mean" to an unknown template's error when
// a known name is near the one given.
func withSuggestion(err error, name string, known []string) error {
	if coded.CodeOf(err) != template.CodeNotFound {
		return err
	}
	near := spelling.Nearest(name, known)
	if near == "" {
		return err
	}
	return coded.Wrap(template.CodeNotFound, err, "").WithHint("did you mean " + near + "?")
}
