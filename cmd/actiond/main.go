// Command actiond serves MCP servers defined as actions through a GraphQL
// API, recording every request, and reads that record back.
//
//	actiond serve [--addr 127.0.0.1:8080] [--data DIR | --postgres DSN]
//	actiond token --subject S
//	actiond sessions | executions | execution ID
//	actiond version | completion SHELL
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/usage"
)

// Exit codes, the same as isx's.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// app is what every command shares.
type app struct {
	stdout, stderr io.Writer
	clock          clock.Clock
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, clock: clock.Real{}}
	root := a.rootCommand()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if ctx.Err() != nil && !isUsage(err) {
		return exitInterrupted
	}
	return a.report(err)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "actiond",
		Short: "Serve MCP servers defined as actions, recording every request",
		Long: "actiond serves MCP servers defined as actions through its GraphQL API, over\n" +
			"stateless Streamable HTTP, records every request, and reads the record back.",
		Version:       versionLine(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cobra.EnableCommandSorting = false
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage.Error{Err: err} })
	root.AddCommand(a.serveCommand(), a.tokenCommand(), a.sessionsCommand(), a.executionsCommand(), a.executionCommand(), a.versionCommand())
	for _, cmd := range root.Commands() {
		cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage.Error{Err: err} })
	}
	return root
}

// usagef is a command line actiond cannot make sense of.
func usagef(format string, args ...any) error { return usage.Errorf(format, args...) }

func isUsage(err error) bool { return usage.Is(err) }

// report prints err for a person, its hint on a line of its own, and picks
// the exit code.
func (a *app) report(err error) int {
	fmt.Fprintf(a.stderr, "actiond: %v\n", err)
	if hint := coded.HintOf(err); hint != "" {
		fmt.Fprintf(a.stderr, "hint: %s\n", hint)
	}
	if isUsage(err) {
		fmt.Fprintln(a.stderr, "Run `actiond --help` for usage.")
		return exitUsage
	}
	return exitFailure
}

// noArgs refuses arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}
