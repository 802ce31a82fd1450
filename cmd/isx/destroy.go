package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/isx/instance"
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
			for _, name := range args {
				if err := manager.Destroy(cmd.Context(), name, opts); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(a.stdout, "Destroyed %s\n", name)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&opts.Template, "template", false, "allow destroying built templates")
	return cmd
}
