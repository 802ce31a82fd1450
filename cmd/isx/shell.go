package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/incusspawn/isx/internal/build"
	"github.com/incusspawn/isx/internal/incus"
	"github.com/incusspawn/isx/internal/instance"
)

// loginShell starts bash as a login shell, or sh where there is no bash.
const loginShell = `if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l`

func newShellCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "shell NAME",
		Short: "Open an interactive shell in an instance as the agent user",
		Long: "shell starts the instance if it is stopped and opens a login shell in it as the\n" +
			"agent user, in /home/agent, through the incus CLI. While the shell runs, isx\n" +
			"mcp knows a person is in the instance and never destroys it.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runShell(cmd.Context(), args[0])
		},
	}
}

func (a *app) runShell(ctx context.Context, name string) error {
	client, err := a.incus()
	if err != nil {
		return err
	}
	incusCLI, err := exec.LookPath("incus")
	if err != nil {
		return fmt.Errorf("isx shell needs the incus command-line tool, which is not on PATH: %w", err)
	}
	if err := a.readyForShell(ctx, client, name); err != nil {
		return err
	}
	home, err := a.homeDir()
	if err != nil {
		return err
	}
	release, err := instance.MarkShell(home, client.ProjectName(), name, os.Getpid())
	if err != nil {
		return err
	}
	runErr := a.attach(incusCLI, client, name)
	if err := release(); err != nil {
		a.warnf("%v", err)
	}
	return runErr
}

// readyForShell checks the instance is an isx instance (not a template)
// and starts it when it is stopped.
func (a *app) readyForShell(ctx context.Context, client *incus.Client, name string) error {
	inst, _, err := client.GetInstance(ctx, name)
	if errors.Is(err, incus.ErrNotFound) {
		return &instance.Error{Code: instance.CodeNotFound, Instance: name,
			Message: fmt.Sprintf("there is no instance named %s in project %s; `isx list` shows the instances there are", name, client.ProjectName())}
	}
	if err != nil {
		return err
	}
	stamps := instance.ParseStamps(inst.Config)
	switch {
	case stamps.IsTemplate():
		return &instance.Error{Code: instance.CodeIsTemplate, Instance: name,
			Message: fmt.Sprintf("%s is a template, which isx keeps stopped; branch it and open a shell in the branch: `isx branch work --from %s && isx shell work`", name, name)}
	case !stamps.Managed():
		return &instance.Error{Code: instance.CodeNotManaged, Instance: name,
			Message: fmt.Sprintf("%s was not made by isx; use `incus exec %s -- sh` for it", name, name)}
	}
	if !inst.Running() {
		fmt.Fprintf(a.stderr, "Starting %s...\n", name)
		if err := client.StartInstance(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// attach runs `incus exec` with this terminal and returns the shell's exit
// status as an exitError.
func (a *app) attach(incusCLI string, client *incus.Client, name string) error {
	terminal := "-T"
	if isTerminal(os.Stdin) {
		terminal = "-t"
	}
	uid, gid := strconv.Itoa(build.AgentUID), strconv.Itoa(build.AgentGID)
	cmd := exec.Command(incusCLI, "exec", "--project", client.ProjectName(), name,
		"--user", uid, "--group", gid, "--cwd", build.AgentHome,
		"--env", "HOME="+build.AgentHome, "--env", "USER="+build.AgentUser, "--env", "LOGNAME="+build.AgentUser,
		terminal, "--", "sh", "-c", loginShell)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, a.stdout, a.stderr
	cmd.Env = append(os.Environ(), envSocket+"="+client.Socket())
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exitError{code: exit.ExitCode()}
	}
	if err != nil {
		return fmt.Errorf("running %s: %w", incusCLI, err)
	}
	return nil
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
