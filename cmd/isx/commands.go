package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/usage"
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

// subcommandArgs refuses an argument where a subcommand belongs, with the
// subcommands nearest it: cobra suggests them only for a command with no
// Args and no Run of its own, so `isx lst` got none.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	err := coded.New(codeUnknownCommand, "unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, set only where it suggests
	}
	if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
		err.WithHint(fmt.Sprintf("did you mean %s?", strings.Join(near, " or ")))
	} else {
		err.WithHint(fmt.Sprintf("`%s --help` lists the commands", cmd.CommandPath()))
	}
	return usage.Error{Err: err}
}

// codeUnknownCommand: a command line names no command isx has.
const codeUnknownCommand = "unknown_command"
