package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/template"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitUnavailable = 3   // the Incus daemon does not answer
	exitInterrupted = 130 // SIGINT or SIGTERM, as shells report it
)

// Environment variables isx reads besides HOME.
const (
	// envSocket overrides config.yaml's socket (the incus CLI reads it too).
	envSocket = "INCUS_SOCKET"
	// envProject overrides config.yaml's project, like --project.
	envProject = "ISX_PROJECT"
)

// app is what every command shares: the streams, the user's home and
// settings, and the way to Incus and the template definitions.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	clock          clock.Clock

	projectFlag string

	home    string
	cfg     *config.Config
	client  *incus.Client
	set     *template.Set
	setErr  error
	setRead bool
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{stdin: stdin, stdout: stdout, stderr: stderr, clock: clock.Real{}}
}

// run executes one isx command line and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := newApp(stdin, stdout, stderr)
	root := a.rootCommand()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := a.report(err)
	var exit exitError
	if ctx.Err() != nil && !errors.As(err, &exit) {
		return exitInterrupted
	}
	return code
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "isx",
		Short: "Disposable Incus instances from templates",
		Long: "isx builds template instances from YAML definitions and makes disposable\n" +
			"instances from them in Incus.",
		Version:           build.Version,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		Args:              cobra.NoArgs,
		RunE:              a.runDefault, // the TUI on a terminal, else this help
	}
	cobra.EnableCommandSorting = false
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.PersistentFlags().StringVar(&a.projectFlag, "project", "", "Incus project to work in (overrides config.yaml and "+envProject+")")
	if err := root.PersistentFlags().MarkHidden("project"); err != nil {
		panic(err) // the flag was just defined
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(commands(a)...)
	return root
}

// usageError is a command line isx cannot make sense of.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitError carries an exit code through, as from the shell isx ran.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// report prints err for a person and picks the exit code.
func (a *app) report(err error) int {
	var exit exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	var step *build.StepError
	if errors.As(err, &step) {
		fmt.Fprint(a.stderr, step.Output())
	}
	fmt.Fprintf(a.stderr, "isx: %v\n", err)
	var usage usageError
	switch {
	case errors.As(err, &usage) || cobraUsage(err):
		fmt.Fprintln(a.stderr, "Run `isx --help` for usage.")
		return exitUsage
	case errors.Is(err, incus.ErrUnavailable):
		return exitUnavailable
	}
	return exitFailure
}

// cobraUsage recognises the usage errors cobra makes itself, which carry
// no type to match.
func cobraUsage(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "required flag")
}

// homeDir is the user's home, where config.yaml and the state live.
func (a *app) homeDir() (string, error) {
	if a.home != "" {
		return a.home, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding your home directory: %w", err)
	}
	a.home = home
	return home, nil
}

// config reads config.yaml once.
func (a *app) config() (*config.Config, error) {
	if a.cfg != nil {
		return a.cfg, nil
	}
	home, err := a.homeDir()
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(home)
	if err != nil {
		return nil, err
	}
	a.cfg = cfg
	return cfg, nil
}

// socket is INCUS_SOCKET, else config.yaml's socket, else the default.
func (a *app) socket(cfg *config.Config) string {
	if s := os.Getenv(envSocket); s != "" {
		return s
	}
	if cfg.Socket != "" {
		return cfg.Socket
	}
	return incus.DefaultSocketPath
}

// project is --project, else ISX_PROJECT, else config.yaml's project.
func (a *app) project(cfg *config.Config) string {
	switch {
	case a.projectFlag != "":
		return a.projectFlag
	case os.Getenv(envProject) != "":
		return os.Getenv(envProject)
	case cfg.Project != "":
		return cfg.Project
	}
	return config.DefaultProject
}

// incus returns the client for the configured socket and project.
func (a *app) incus() (*incus.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	a.client = incus.New(a.socket(cfg), incus.WithProject(a.project(cfg)))
	return a.client, nil
}

// templates loads the definitions once, printing the loader's warnings.
func (a *app) templates() (*template.Set, error) {
	if a.setRead {
		return a.set, a.setErr
	}
	a.setRead = true
	a.set, a.setErr = a.loadTemplates()
	if a.set != nil {
		for _, w := range a.set.Warnings() {
			fmt.Fprintf(a.stderr, "warning: %s\n", w.Message)
		}
	}
	return a.set, a.setErr
}

func (a *app) loadTemplates() (*template.Set, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	home, err := a.homeDir()
	if err != nil {
		return nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("finding the working directory: %w", err)
	}
	return template.Load(template.Options{Home: home, SearchPaths: cfg.TemplateDirs(), WorkDir: wd})
}

// templatesOrWarn is templates for commands that can do without them:
// a broken definition file is reported and the command goes on.
func (a *app) templatesOrWarn() *template.Set {
	set, err := a.templates()
	if err != nil {
		fmt.Fprintf(a.stderr, "warning: template definitions could not be read, so isx cannot tell whether templates are stale: %v\n", err)
		return nil
	}
	return set
}

func (a *app) warnf(format string, args ...any) {
	fmt.Fprintf(a.stderr, "warning: "+format+"\n", args...)
}
