package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/isx/warm"
	"github.com/incusspawn/isx/internal/spelling"
	"github.com/incusspawn/isx/internal/usage"
)

func newBranchCommand(a *app) *cobra.Command {
	var (
		from                                  string
		proxyOnly, airgap, mcpClient, useWarm bool
	)
	cmd := &cobra.Command{
		Use:   "branch NAME --from TEMPLATE [--proxy-only | --airgap] [--mcp-client] [--warm]",
		Short: "Make an instance from a built template and start it",
		Long: "branch makes instance NAME as a copy of the built template TEMPLATE and starts\n" +
			"it. By default it has the default profile's network; --proxy-only lets it out\n" +
			"only through the host proxy, --airgap gives it no network at all.\n" +
			"--mcp-client makes it a coordinator: isx mcp is served to it (and to no copy\n" +
			"of it) at https://mcp.isx.internal/mcp. --warm takes a ready copy from the warm\n" +
			"pool isx mcp keeps (mcp.yaml's warm:) when it has one of the template as built\n" +
			"now, and copies the template as usual when it has none.",
		Args:              exactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			network := instance.NetworkDefault
			switch {
			case proxyOnly && airgap:
				return usage.Error{Err: errors.New("--proxy-only and --airgap exclude each other")}
			case proxyOnly:
				network = instance.NetworkProxyOnly
			case airgap:
				network = instance.NetworkAirgap
			}
			if mcpClient && airgap {
				return usage.Error{Err: errors.New("an --airgap instance cannot reach isx mcp, so --mcp-client needs a network (--proxy-only is enough)")}
			}
			return a.runBranch(cmd.Context(), args[0], from, network, branchFlags{mcpClient: mcpClient, warm: useWarm})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the built template to copy (required)")
	cmd.Flags().BoolVar(&proxyOnly, "proxy-only", false, "reach the network only through the host proxy")
	cmd.Flags().BoolVar(&airgap, "airgap", false, "no network at all")
	cmd.Flags().BoolVar(&mcpClient, "mcp-client", false, "let it call isx mcp at https://mcp.isx.internal/mcp (a coordinator)")
	cmd.Flags().BoolVar(&useWarm, "warm", false, "take a ready copy from isx mcp's warm pool when it has one")
	if err := cmd.MarkFlagRequired("from"); err != nil {
		panic(err) // the flag was just defined
	}
	if err := cmd.RegisterFlagCompletionFunc("from", a.completeBranchSource); err != nil {
		panic(err) // the flag was just defined
	}
	return cmd
}

// branchFlags are isx branch's switches besides the network.
type branchFlags struct{ mcpClient, warm bool }

func (a *app) runBranch(ctx context.Context, name, from string, network instance.Network, flags branchFlags) error {
	mcpClient := flags.mcpClient
	ws, err := a.open()
	if err != nil {
		return err
	}
	client := ws.client
	if err := a.checkProject(ctx, client); err != nil {
		return err
	}
	if strings.HasPrefix(name, "mcp-") {
		a.warnf("names starting with mcp- are the ones isx mcp gives its instances; %s may be mistaken for one", name)
	}
	if err := a.checkBranchSource(ctx, client, from); err != nil {
		return err
	}
	if err := a.checkBranchName(ctx, client, name, from); err != nil {
		return err
	}
	manager := &instance.Manager{Client: client, Clock: a.clock}
	if network != instance.NetworkAirgap {
		if manager.ProxyDir, err = a.proxyDir(); err != nil {
			return err
		}
	}
	var warmCopy string
	if flags.warm {
		pool := &warm.Pool{Client: client, Owner: ws.owner}
		if warmCopy, err = pool.Pick(ctx, from); err != nil {
			a.warnf("the warm pool of %s cannot be read (%v); copying the template instead", from, err)
		}
	}
	show := a.showPhases(name)
	defer show.close()
	// A coordinator is granted before its first start, so that the
	// start registers isx mcp in it.
	copied := "copy " + from + " to " + name
	if warmCopy != "" {
		copied = "take warm copy " + warmCopy + " of " + from + " as " + name
	}
	if !mcpClient {
		copied += " and start it"
	}
	err = show.phase(copied, func() error {
		return manager.Branch(ctx, instance.BranchOptions{Name: name, From: from, Network: network, Owner: ws.owner, NoStart: mcpClient, Warm: warmCopy})
	})
	if err != nil {
		return err
	}
	if mcpClient {
		if err := show.phase("make "+name+" a coordinator and start it", func() error { return a.grant(ctx, manager, name) }); err != nil {
			return err
		}
	}
	var admitted error
	if network != instance.NetworkAirgap {
		admitted = show.phase("have the host proxy serve "+name, func() error { return a.admit(ctx, name) })
	}
	var probe coordinatorProbe
	if mcpClient {
		_ = show.phase("reach isx mcp from inside "+name, func() error {
			probe = a.probeCoordinator(ctx, client, name, admitted)
			return probe.err
		})
	}
	show.close()
	fmt.Fprintf(a.stdout, "Made %s from %s (network: %s) and started it; `isx shell %s` opens a shell in it.\n", name, from, network, name)
	if mcpClient {
		fmt.Fprint(a.stdout, probe.report(name))
	}
	return nil
}

// phases shows, on a terminal, each part of making an instance as isx
// build shows its steps, counting the seconds it takes: the first branch
// starts the host proxy, and a copy can take a while. Through a pipe
// nothing is shown but the outcome, as before; the TUI shows its own.
type phases struct {
	progress buildProgress // nil: show nothing
	name     string
	stderr   io.Writer // the app's own, while the phases reroute it
	a        *app
}

func (a *app) showPhases(name string) *phases {
	out, ok := a.stdout.(*os.File)
	errOut, errOK := a.stderr.(*os.File)
	if !ok || !errOK || !isTerminal(out) || !isTerminal(errOut) {
		return &phases{}
	}
	p := &phases{progress: newTerminalProgress(out, a.clock, false, terminalWidth(out)), name: name, stderr: a.stderr, a: a}
	// Warnings and notes written meanwhile (the proxy started, say) go
	// above the status line rather than onto it.
	a.stderr = lineWriter{p.progress}
	return p
}

func (p *phases) phase(label string, do func() error) error {
	if p.progress == nil {
		return do()
	}
	step := build.Step{Template: p.name, Tag: "[isx]", Label: label}
	p.progress.StepStarted(step)
	began := p.a.clock.Now()
	err := do()
	p.progress.StepEnded(step, build.StepEnd{Took: p.a.clock.Since(began), Err: err})
	return err
}

// close ends the display and gives the app its stderr back; it may be
// called more than once.
func (p *phases) close() {
	if p.progress == nil {
		return
	}
	p.progress.Close()
	p.a.stderr = p.stderr
	p.progress = nil
}

// lineWriter hands each line written to it to Progress.Line.
type lineWriter struct{ progress build.Progress }

func (w lineWriter) Write(b []byte) (int, error) {
	for line := range strings.Lines(string(b)) {
		w.progress.Line(strings.TrimSuffix(line, "\n"))
	}
	return len(b), nil
}

// grant makes the new, stopped instance a coordinator and starts it; on
// failure nothing is left.
func (a *app) grant(ctx context.Context, manager *instance.Manager, name string) error {
	err := manager.Grant(ctx, name)
	if err == nil {
		err = manager.Client.StartInstance(ctx, name)
	}
	if err != nil {
		if cleanup := manager.Client.DeleteInstance(ctx, name, true); cleanup != nil {
			return errors.Join(err, cleanup)
		}
		return fmt.Errorf("making %s a coordinator failed, and it was removed again: %w", name, err)
	}
	return nil
}

// checkBranchSource explains an unbuilt template and a name that is
// neither a template nor an instance (suggesting the nearest), and warns
// about a stale template (branching from it still works).
func (a *app) checkBranchSource(ctx context.Context, client *incus.Client, from string) error {
	set := a.templatesOrWarn()
	if set == nil {
		return nil
	}
	if _, err := set.Get(from); err != nil {
		if coded.CodeOf(err) == template.CodeNotFound {
			return a.checkSourceInstance(ctx, client, set, from)
		}
		a.warnf("cannot tell whether template %s is stale: %v", from, err)
		return nil
	}
	status, err := build.Status(ctx, client, set, from)
	var defErr *template.Error
	switch {
	case errors.As(err, &defErr) && status.Instance == nil:
		if _, _, getErr := client.GetInstance(ctx, from); errors.Is(getErr, incus.ErrNotFound) {
			return instance.NewError(instance.CodeNotBuilt, from, err, "template %s is not built, and cannot be until its definition is fixed", from)
		}
		a.warnf("cannot tell whether template %s is stale: %v", from, err)
		return nil
	case errors.As(err, &defErr):
		a.warnf("cannot tell whether template %s is stale: %v", from, err)
		return nil
	case err != nil:
		return err
	case !status.Built:
		return instance.NewError(instance.CodeNotBuilt, from, nil, "template %s is not built; run `isx build %s` first", from, from)
	case status.Stale:
		a.warnf("template %s is stale (%s); branching from it as it is", from, status.Reason)
	}
	return nil
}

// checkSourceInstance accepts a name that is no template when it is an
// instance (Branch checks that isx made it); otherwise it says there is
// neither, suggesting the nearest template or instance name.
func (a *app) checkSourceInstance(ctx context.Context, client *incus.Client, set *template.Set, from string) error {
	entries, err := (&instance.Manager{Client: client}).List(ctx)
	if err != nil {
		return err
	}
	names := set.Names()
	for _, e := range entries {
		if e.Name == from {
			return nil
		}
		if e.Stamps.Managed() && !slices.Contains(names, e.Name) {
			names = append(names, e.Name)
		}
	}
	notFound := instance.NewError(instance.CodeNotBuilt, from, nil, "there is no template or instance named %s in project %s", from, client.ProjectName())
	if near := spelling.Nearest(from, names); near != "" {
		notFound.Hint = "did you mean " + near + "?"
	} else {
		notFound.Hint = "`isx list` shows the templates and instances there are"
	}
	return notFound
}

// checkBranchName refuses a template's name for the new instance: the
// template's own instance has it, or will once it is built, and the
// conflict Incus would report points at destroying the template.
func (a *app) checkBranchName(ctx context.Context, client *incus.Client, name, from string) error {
	taken := false
	if set := a.templatesOrWarn(); set != nil {
		_, err := set.Get(name)
		taken = err == nil || coded.CodeOf(err) != template.CodeNotFound
	}
	if !taken {
		inst, _, err := client.GetInstance(ctx, name)
		switch {
		case errors.Is(err, incus.ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		taken = instance.ParseStamps(inst.Config).IsTemplate()
	}
	if !taken {
		return nil // Branch says the name is taken
	}
	refused := instance.NewError(instance.CodeExists, name, nil, "%s is the name of a template, so an instance cannot have it", name)
	refused.Hint = fmt.Sprintf("give the instance a name of its own, e.g. `isx branch work --from %s`", from)
	return refused
}
