package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/spelling"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/usage"
)

func newBranchCommand(a *app) *cobra.Command {
	var (
		from                         string
		proxyOnly, airgap, mcpClient bool
	)
	cmd := &cobra.Command{
		Use:   "branch NAME --from TEMPLATE [--proxy-only | --airgap] [--mcp-client]",
		Short: "Make an instance from a built template and start it",
		Long: "branch makes instance NAME as a copy of the built template TEMPLATE and starts\n" +
			"it. By default it has the default profile's network; --proxy-only lets it out\n" +
			"only through the host proxy, --airgap gives it no network at all.\n" +
			"--mcp-client makes it a coordinator: isx mcp is served to it (and to no copy\n" +
			"of it) at https://mcp.isx.internal/mcp.",
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
			return a.runBranch(cmd.Context(), args[0], from, network, mcpClient)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the built template to copy (required)")
	cmd.Flags().BoolVar(&proxyOnly, "proxy-only", false, "reach the network only through the host proxy")
	cmd.Flags().BoolVar(&airgap, "airgap", false, "no network at all")
	cmd.Flags().BoolVar(&mcpClient, "mcp-client", false, "let it call isx mcp at https://mcp.isx.internal/mcp (a coordinator)")
	if err := cmd.MarkFlagRequired("from"); err != nil {
		panic(err) // the flag was just defined
	}
	if err := cmd.RegisterFlagCompletionFunc("from", a.completeBranchSource); err != nil {
		panic(err) // the flag was just defined
	}
	return cmd
}

func (a *app) runBranch(ctx context.Context, name, from string, network instance.Network, mcpClient bool) error {
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
	manager := &instance.Manager{Client: client, Clock: a.clock}
	if network != instance.NetworkAirgap {
		if manager.ProxyDir, err = a.proxyDir(); err != nil {
			return err
		}
	}
	// A coordinator is granted before its first start, so that the
	// start registers isx mcp in it.
	if err := manager.Branch(ctx, instance.BranchOptions{Name: name, From: from, Network: network, Owner: ws.owner, NoStart: mcpClient}); err != nil {
		return err
	}
	if mcpClient {
		if err := a.grant(ctx, manager, name); err != nil {
			return err
		}
	}
	var admitted error
	if network != instance.NetworkAirgap {
		admitted = a.admit(ctx, name)
	}
	fmt.Fprintf(a.stdout, "Made %s from %s (network: %s) and started it; `isx shell %s` opens a shell in it.\n", name, from, network, name)
	if mcpClient {
		fmt.Fprint(a.stdout, a.probeCoordinator(ctx, client, name, admitted).report(name))
	}
	return nil
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
