package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/usage"
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
	// quiet keeps warnings off stderr, for shell completion.
	quiet bool
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
	if ctx.Err() != nil && !errors.As(err, &exit) && !isUsage(err) {
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
		Version:       versionLine(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          subcommandArgs,
		RunE:          a.runDefault, // the TUI on a terminal, else this help
	}
	cobra.EnableCommandSorting = false
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&a.projectFlag, "project", "", "Incus project to work in (overrides config.yaml and "+envProject+")")
	if err := root.PersistentFlags().MarkHidden("project"); err != nil {
		panic(err) // the flag was just defined
	}
	if err := root.RegisterFlagCompletionFunc("project", a.completeProjects); err != nil {
		panic(err) // the flag was just defined
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage.Error{Err: err} })
	root.AddCommand(commands(a)...)
	return root
}

// usagef is a command line isx cannot make sense of.
func usagef(format string, args ...any) error { return usage.Errorf(format, args...) }

// exitError carries an exit code through, as from the shell isx ran.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// report prints err for a person, its hint on a line of its own, and picks
// the exit code.
func (a *app) report(err error) int {
	var exit exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	var step *build.StepError
	if errors.As(err, &step) && !step.Shown {
		fmt.Fprint(a.stderr, step.Output())
	}
	fmt.Fprintf(a.stderr, "isx: %v\n", err)
	for _, hint := range hints(err) {
		fmt.Fprintf(a.stderr, "hint: %s\n", hint)
	}
	switch {
	case isUsage(err):
		fmt.Fprintln(a.stderr, "Run `isx --help` for usage.")
		return exitUsage
	case errors.Is(err, incus.ErrUnavailable):
		return exitUnavailable
	}
	return exitFailure
}

// hints are the hints of err, and of each error joined in it (destroy
// reports one error per name), each once.
func hints(err error) []string {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range joined.Unwrap() {
			for _, h := range hints(e) {
				if !slices.Contains(out, h) {
					out = append(out, h)
				}
			}
		}
		return out
	}
	if hint := coded.HintOf(err); hint != "" {
		return []string{hint}
	}
	return nil
}

func isUsage(err error) bool { return usage.Is(err) }

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

// workspace is what every command that works with Incus starts from:
// the user's home and settings, the client for the socket and project in
// use, and the host user stamped on what it makes.
type workspace struct {
	home   string
	cfg    *config.Config
	client *incus.Client
	owner  string
}

// open reads the settings and makes the client, once for the whole run.
func (a *app) open() (*workspace, error) {
	home, err := a.homeDir()
	if err != nil {
		return nil, err
	}
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	client, err := a.incus()
	if err != nil {
		return nil, err
	}
	owner, err := instance.CurrentOwner()
	if err != nil {
		return nil, err
	}
	return &workspace{home: home, cfg: cfg, client: client, owner: owner}, nil
}

// project is --project, else ISX_PROJECT, else config.yaml's project.
func (a *app) project(cfg *config.Config) string {
	project, _ := a.projectSetting(cfg)
	return project
}

// projectSetting is the project in use and what chose it: the --project
// flag, ISX_PROJECT, or "" for config.yaml (or its default).
func (a *app) projectSetting(cfg *config.Config) (project, origin string) {
	switch {
	case a.projectFlag != "":
		return a.projectFlag, "--project"
	case os.Getenv(envProject) != "":
		return os.Getenv(envProject), envProject
	}
	return configuredProject(cfg), ""
}

// incus returns the client for the socket and project in use.
func (a *app) incus() (*incus.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	a.client = a.dial(cfg, a.project(cfg))
	return a.client, nil
}

// dial makes a client for the socket cfg and the environment choose, in
// project.
func (a *app) dial(cfg *config.Config, project string) *incus.Client {
	socket := a.socketSetting(cfg)
	return incus.New(socket.path, append(socket.options(), incus.WithProject(project))...)
}

// checkProject says when the project a client works in does not exist:
// Incus lists nothing in a project that is not there rather than failing,
// so a mistyped project would look like an empty one.
func (a *app) checkProject(ctx context.Context, client *incus.Client) error {
	_, _, err := client.GetProject(ctx, client.ProjectName())
	if !errors.Is(err, incus.ErrNotFound) {
		return err
	}
	project := client.ProjectName()
	return coded.New(codeNoProject, "Incus has no project %q, which isx works in", project).
		WithHint(fmt.Sprintf("create it with `incus project create %s`, or choose another with `isx init --project NAME`%s", project, a.projectOverride()))
}

// codeNoProject: the project isx works in does not exist.
const codeNoProject = "no_project"

// projectOverride names what overrides config.yaml's project, for hints.
func (a *app) projectOverride() string {
	cfg, err := a.config()
	if err != nil {
		return ""
	}
	switch _, origin := a.projectSetting(cfg); origin {
	case "--project":
		return " (this run's --project chose it)"
	case envProject:
		return " (" + envProject + " chose it; unset it to use config.yaml's project)"
	}
	return ""
}

// templates loads the definitions once, printing the loader's warnings
// and the definition files it could not use: one bad file does not keep
// isx from the others.
func (a *app) templates() (*template.Set, error) {
	if a.setRead {
		return a.set, a.setErr
	}
	a.setRead = true
	a.set, a.setErr = a.loadTemplates()
	if a.set != nil && !a.quiet {
		for _, w := range a.set.Warnings() {
			a.warnf("%s", w.Message)
		}
		for _, b := range a.set.Broken() {
			a.warnf("%v; isx leaves it out until it is fixed", b.Err)
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
	return template.Load(template.Options{Home: home, SearchPaths: cfg.TemplateDirs(), WorkDir: wd, KeepGoing: true})
}

// templatesOrWarn is templates for commands that can do without them:
// a broken definition file is reported and the command goes on.
func (a *app) templatesOrWarn() *template.Set {
	set, err := a.templates()
	if err != nil {
		a.warnf("template definitions could not be read, so isx cannot tell whether templates are stale: %v", err)
		return nil
	}
	return set
}

func (a *app) warnf(format string, args ...any) {
	if !a.quiet {
		fmt.Fprintf(a.stderr, "warning: "+format+"\n", args...)
	}
}
