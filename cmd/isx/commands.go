package main

import (
	"github.com/incusspawn/isx/internal/usage"
	"github.com/spf13/cobra"
)

// commands lists isx's subcommands, in the order `isx --help` shows them.
// A new subcommand is a constructor taking the shared *app (config,
// Incus client, templates, streams) added here, e.g. newMCPCommand(a)
// for `isx mcp` in its own file mcp.go.
func commands(a *app) []*cobra.Command {
	return []*cobra.Command{
		newInitCommand(a),
		newBuildCommand(a),
		newBranchCommand(a),
		newListCommand(a),
		newShellCommand(a),
		newDestroyCommand(a),
		newMCPCommand(a),
		newProxyCommand(a),
		newTUICommand(a),
		newDoctorCommand(a),
		newVersionCommand(a),
	}
}

// exactArgs is cobra.ExactArgs whose failure is a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usage.Error{Err: err}
		}
		return nil
	}
}

// minimumArgs is cobra.MinimumNArgs whose failure is a usage error.
func minimumArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.MinimumNArgs(n)(cmd, args); err != nil {
			return usage.Error{Err: err}
		}
		return nil
	}
}
