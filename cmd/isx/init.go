package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
)

// initStep is a further step of `isx init`, run after config.yaml is
// written and Incus answers (setting up isx mcp is one). interactive is
// false under --non-interactive, when a step must not ask anything.
type initStep func(ctx context.Context, a *app, interactive bool) error

// initSteps run in order; a file adding a step appends to this list from
// an init function.
var initSteps []initStep

func newInitCommand(a *app) *cobra.Command {
	var (
		nonInteractive  bool
		socket, project string
	)
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write ~/.config/incus-spawn/config.yaml and check that Incus answers",
		Long: "init writes ~/.config/incus-spawn/config.yaml (keeping what is already in it)\n" +
			"and checks that the Incus daemon answers and the project exists. Without\n" +
			"--non-interactive it asks for each setting, offering the current value.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runInit(cmd.Context(), !nonInteractive, socket, project)
		},
	}
	cmd.Flags().BoolVar(&nonInteractive, "non-interactive", false, "ask nothing; take settings from the flags and keep the rest")
	cmd.Flags().StringVar(&socket, "socket", "", "Incus unix socket (default "+incus.DefaultSocketPath+")")
	cmd.Flags().StringVar(&project, "project", "", "Incus project isx works in (default \"default\")")
	if err := cmd.RegisterFlagCompletionFunc("project", a.completeProjects); err != nil {
		panic(err) // the flag was just defined
	}
	return cmd
}

func (a *app) runInit(ctx context.Context, interactive bool, socket, project string) error {
	home, err := a.homeDir()
	if err != nil {
		return err
	}
	cfg, err := config.Load(home)
	if err != nil {
		return fmt.Errorf("%w (fix or remove it, then run isx init again)", err)
	}
	before := *cfg
	if socket != "" {
		cfg.Socket = socket
	}
	if project != "" {
		cfg.Project = project
	}
	if interactive {
		if err := a.askSettings(cfg); err != nil {
			return err
		}
	}
	// A daemon that is down does not make the settings wrong, so they are
	// saved anyway; a project the daemon lacks does, so they are not.
	server, checkErr := a.checkIncus(ctx, cfg)
	if checkErr != nil && !errors.Is(checkErr, incus.ErrUnavailable) {
		return fmt.Errorf("config.yaml is left as it was: %w", checkErr)
	}
	if changed := !cfg.Exists || cfg.Socket != before.Socket || configuredProject(cfg) != configuredProject(&before); changed {
		if err := config.Save(home, cfg); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "Wrote %s\n", config.ConfigPath(home))
	} else {
		fmt.Fprintf(a.stdout, "Kept %s as it was: nothing in it changed.\n", config.ConfigPath(home))
	}
	a.cfg = cfg
	if checkErr != nil {
		return fmt.Errorf("config.yaml is written, but Incus does not answer; run isx init again once it does: %w", checkErr)
	}
	if err := a.reportInUse(ctx, cfg, server); err != nil {
		return err
	}
	for _, step := range initSteps {
		if err := step(ctx, a, interactive); err != nil {
			return err
		}
	}
	fmt.Fprintln(a.stdout, a.nextStep(ctx, cfg))
	return nil
}

// nextStep is what to do after isx init: build the default template
// unless it is built and current, then branch from it.
func (a *app) nextStep(ctx context.Context, cfg *config.Config) string {
	name := cfg.DefaultTemplate
	if name == "" {
		name = defaultTemplate
	}
	branch := fmt.Sprintf("`isx branch work --from %s` and `isx shell work`", name)
	status, err := a.templateStatus(ctx, name)
	switch {
	case err != nil || !status.Built:
		return fmt.Sprintf("Next: `isx build %s`, then %s.", name, branch)
	case status.Stale:
		return fmt.Sprintf("Next: `isx build %s`, which is stale, then %s.", name, branch)
	}
	return fmt.Sprintf("%s is built. Next: %s.", name, branch)
}

// defaultTemplate is the built-in template isx init points at.
const defaultTemplate = "tpl-dev"

func (a *app) templateStatus(ctx context.Context, name string) (build.TemplateStatus, error) {
	client, err := a.incus()
	if err != nil {
		return build.TemplateStatus{}, err
	}
	set := a.templatesOrWarn()
	if set == nil {
		return build.TemplateStatus{}, errors.New("the template definitions cannot be read")
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return build.Status(ctx, client, set, name)
}

// askSettings offers each setting with its current value as the default.
func (a *app) askSettings(cfg *config.Config) error {
	ask := func(question, current string) (string, error) {
		fmt.Fprintf(a.stdout, "%s [%s]: ", question, current)
		// One line and no more, so that the MCP step's questions get theirs.
		answer, err := readAnswer(a.stdin)
		if err != nil {
			return "", err
		}
		if answer != "" {
			return answer, nil
		}
		return current, nil
	}
	socket, err := ask("Incus socket", a.socket(cfg))
	if err != nil {
		return err
	}
	if socket != incus.DefaultSocketPath || cfg.Socket != "" {
		cfg.Socket = socket
	}
	cfg.Project, err = ask("Incus project", configuredProject(cfg))
	return err
}

// configuredProject is the project config.yaml names: what init writes and
// checks, whatever ISX_PROJECT says for this one run.
func configuredProject(cfg *config.Config) string {
	if cfg.Project != "" {
		return cfg.Project
	}
	return config.DefaultProject
}

// checkIncus makes sure the daemon answers on the socket in use and has
// the project config.yaml names.
func (a *app) checkIncus(ctx context.Context, cfg *config.Config) (*incus.Server, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	project := configuredProject(cfg)
	client := a.dial(cfg, project)
	server, err := client.Server(ctx)
	if err != nil {
		return nil, err
	}
	_, _, err = client.GetProject(ctx, project)
	if errors.Is(err, incus.ErrNotFound) {
		return nil, fmt.Errorf("Incus has no project %q: create it with `incus project create %s`, or choose another with `isx init --project NAME`", project, project)
	}
	if err != nil {
		return nil, err
	}
	return server, nil
}

// checkTimeout bounds what isx init and isx doctor wait for Incus.
const checkTimeout = 30 * time.Second

// reportInUse says which Incus and which project isx works with from now
// on: ISX_PROJECT (or --project) and INCUS_SOCKET override config.yaml for
// as long as they are set, and a project they name must exist too.
func (a *app) reportInUse(ctx context.Context, cfg *config.Config, server *incus.Server) error {
	socket := a.socketSetting(cfg)
	on := socket.path
	if socket.origin == envSocket {
		on = fmt.Sprintf("%s (%s, which overrides config.yaml's socket while it is set)", socket.path, envSocket)
	}
	project, origin := a.projectSetting(cfg)
	if origin == "" {
		fmt.Fprintf(a.stdout, "Incus %s answers on %s; isx works in project %s.\n", server.Environment.ServerVersion, on, project)
		return nil
	}
	fmt.Fprintf(a.stdout, "Incus %s answers on %s; config.yaml names project %s, but %s overrides it: isx works in project %s while it is set.\n",
		server.Environment.ServerVersion, on, configuredProject(cfg), origin, project)
	client := a.dial(cfg, project)
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if err := a.checkProject(ctx, client); err != nil {
		if coded.CodeOf(err) != codeNoProject {
			return err
		}
		a.warnf("%v; %s", err, coded.HintOf(err))
	}
	return nil
}
