package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/mcpserver"
)

func newDestroyCommand(a *app) *cobra.Command {
	var opts instance.DestroyOptions
	cmd := &cobra.Command{
		Use:   "destroy NAME... [--template]",
		Short: "Delete instances (stopping them first)",
		Long: "destroy deletes each named instance isx made, stopping it first. A built\n" +
			"template is destroyed only with --template; instances branched from it stay.",
		Args: minimumArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := a.incus()
			if err != nil {
				return err
			}
			manager := &instance.Manager{Client: client, Clock: a.clock}
			var errs []error
			owner, err := instance.CurrentOwner()
			if err != nil {
				return err
			}
			for _, name := range args {
				// A coordinator's instances become orphans with it.
				session := coordinatorSession(cmd.Context(), client, name)
				if err := manager.Destroy(cmd.Context(), name, opts); err != nil {
					errs = append(errs, err)
					continue
				}
				if session != "" {
					if err := mcpserver.ReleaseSession(cmd.Context(), client, a.clock, owner, session); err != nil {
						errs = append(errs, fmt.Errorf("%s is destroyed, but its instances could not be stamped orphaned (the next isx mcp sweep does it): %w", name, err))
					}
				}
				fmt.Fprintf(a.stdout, "Destroyed %s\n", name)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&opts.Template, "template", false, "allow destroying built templates")
	return cmd
}

// coordinatorSession is the session of a coordinator instance, or "".
func coordinatorSession(ctx context.Context, client *incus.Client, name string) string {
	inst, _, err := client.GetInstance(ctx, name)
	if err != nil || !instance.Coordinator(inst) {
		return ""
	}
	return instance.CoordinatorSession(inst)
}
