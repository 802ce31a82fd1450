package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
)

func newDestroyCommand(a *app) *cobra.Command {
	var opts instance.DestroyOptions
	cmd := &cobra.Command{
		Use:   "destroy NAME... [--force] [--template]",
		Short: "Delete instances",
		Long: "destroy deletes each named instance isx made. A running instance is destroyed\n" +
			"only with --force, which stops it first, or once you confirm on a terminal, as\n" +
			"`incus delete` does. A built template is destroyed only with --template;\n" +
			"instances branched from it stay.",
		Args:              minimumArgs(1),
		ValidArgsFunction: a.completeInstances,
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := a.open()
			if err != nil {
				return err
			}
			manager := &instance.Manager{Client: ws.client, Clock: a.clock}
			var errs []error
			for _, name := range args {
				// A coordinator's instances become orphans with it.
				session := coordinatorSession(cmd.Context(), ws.client, name)
				if err := a.destroy(cmd.Context(), manager, name, opts); err != nil {
					errs = append(errs, err)
					continue
				}
				if session != "" {
					if err := holding.ReleaseSession(cmd.Context(), ws.client, a.clock, ws.owner, session); err != nil {
						errs = append(errs, fmt.Errorf("%s is destroyed, but its instances could not be stamped orphaned (the next isx mcp sweep does it): %w", name, err))
					}
				}
				fmt.Fprintf(a.stdout, "Destroyed %s\n", name)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVarP(&opts.Force, "force", "f", false, "stop a running instance and destroy it, without asking")
	cmd.Flags().BoolVar(&opts.Template, "template", false, "allow destroying built templates")
	return cmd
}

// destroy destroys one instance; a running one is stopped first once the
// person confirms, when isx can ask (stdin is a terminal).
func (a *app) destroy(ctx context.Context, manager *instance.Manager, name string, opts instance.DestroyOptions) error {
	err := manager.Destroy(ctx, name, opts)
	if coded.CodeOf(err) != instance.CodeRunning || !a.canAsk() {
		return err
	}
	fmt.Fprintf(a.stderr, "%s is running. Stop and destroy it? [y/N]: ", name)
	answer, readErr := readAnswer(a.stdin)
	if readErr != nil {
		return readErr
	}
	if !yes(answer) {
		return instance.NewError(instance.CodeRunning, name, nil, "%s is running, and was left as it is", name)
	}
	opts.Force = true
	return manager.Destroy(ctx, name, opts)
}

// canAsk reports whether isx may ask a question: stdin is a terminal.
func (a *app) canAsk() bool {
	f, ok := a.stdin.(*os.File)
	return ok && isTerminal(f)
}

// coordinatorSession is the session of a coordinator instance, or "".
func coordinatorSession(ctx context.Context, client *incus.Client, name string) string {
	inst, _, err := client.GetInstance(ctx, name)
	if err != nil || !instance.Coordinator(inst) {
		return ""
	}
	return instance.CoordinatorSession(inst)
}
