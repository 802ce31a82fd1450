package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/delegate"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

// loginShell starts bash as a login shell, or sh where there is no bash.
const loginShell = `if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l`

func newShellCommand(a *app) *cobra.Command {
	var taskID string
	cmd := &cobra.Command{
		Use:   "shell NAME",
		Short: "Open an interactive shell in an instance as the agent user",
		Long: "shell starts the instance if it is stopped and opens a login shell in it as the\n" +
			"agent user, in /home/agent, through the incus CLI. While the shell runs, isx\n" +
			"mcp knows a person is in the instance and never destroys it.\n\n" +
			"With --task TASK_ID (task_status's join_command) it joins an isx mcp task\n" +
			"instead: a delegated agent's task resumes the agent's conversation (claude\n" +
			"--resume, codex resume); a command task, which has no conversation, opens the\n" +
			"login shell in the task's working directory and says where its output is. While\n" +
			"you are in it the task is marked attached, and a finished delegate's task_status\n" +
			"says attached, so the host agent does not continue that conversation meanwhile.",
		Args:              exactArgs(1),
		ValidArgsFunction: a.completeInstance,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runShell(cmd.Context(), args[0], taskID)
		},
	}
	cmd.Flags().StringVar(&taskID, "task", "", "join this isx mcp task (see task_status.join_command)")
	return cmd
}

func (a *app) runShell(ctx context.Context, name, taskID string) error {
	ws, err := a.open()
	if err != nil {
		return err
	}
	client := ws.client
	incusCLI, err := exec.LookPath("incus")
	if err != nil {
		return fmt.Errorf("isx shell needs the incus command-line tool, which is not on PATH: %w", err)
	}
	if err := a.readyForShell(ctx, client, name); err != nil {
		return err
	}
	release, err := instance.MarkShell(ws.home, client.ProjectName(), name, os.Getpid())
	if err != nil {
		return err
	}
	var runErr error
	if taskID != "" {
		runErr = a.joinTask(ctx, incusCLI, client, name, taskID)
	} else {
		runErr = a.attach(incusCLI, client, name, build.AgentHome, []string{"sh", "-c", loginShell})
	}
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
		return instance.NewError(instance.CodeNotFound, name, nil, "there is no instance named %s in project %s; `isx list` shows the instances there are", name, client.ProjectName())
	}
	if err != nil {
		return err
	}
	stamps := instance.ParseStamps(inst.Config)
	switch {
	case stamps.IsTemplate():
		return instance.NewError(instance.CodeIsTemplate, name, nil, "%s is a template, which isx keeps stopped; branch it and open a shell in the branch: `isx branch work --from %s && isx shell work`", name, name)
	case !stamps.Managed():
		return instance.NewError(instance.CodeNotManaged, name, nil, "%s was not made by isx; use `incus exec %s -- sh` for it", name, name)
	}
	if !inst.Running() {
		fmt.Fprintf(a.stderr, "Starting %s...\n", name)
		if err := client.StartInstance(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// attach runs argv with `incus exec` as the agent in cwd, with this
// terminal, and returns its exit status as an exitError.
func (a *app) attach(incusCLI string, client *incus.Client, name, cwd string, argv []string) error {
	terminal := "-T"
	if isTerminal(os.Stdin) {
		terminal = "-t"
	}
	uid, gid := strconv.Itoa(build.AgentUID), strconv.Itoa(build.AgentGID)
	args := []string{"exec", "--project", client.ProjectName(), name,
		"--user", uid, "--group", gid, "--cwd", cwd,
		"--env", "HOME=" + build.AgentHome, "--env", "USER=" + build.AgentUser, "--env", "LOGNAME=" + build.AgentUser,
		terminal, "--"}
	cmd := exec.Command(incusCLI, append(args, argv...)...)
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

// joinTask puts the person into an isx mcp task, marked attached for as
// long as they are in it (task.AttachCommand).
func (a *app) joinTask(ctx context.Context, incusCLI string, client *incus.Client, name, taskID string) error {
	info, err := task.Status(ctx, client, name, taskID)
	if err != nil {
		return err
	}
	if info.State == task.StateLost || info.Record == nil {
		return instance.NewError(instance.CodeNotFound, name, nil, "instance %s has no record of task %s; task_status in isx mcp lists what it has", name, taskID)
	}
	cwd := info.Record.Cwd
	var argv []string
	if info.Kind() == task.KindDelegate {
		if argv, err = resumeCommand(ctx, client, name, info); err != nil {
			return err
		}
		argv = append([]string{"sh", "-lc", `cd "$1" 2>/dev/null; shift; exec "$@"`, "isx-join", cwd}, argv...)
	} else {
		argv = []string{"sh", "-c", commandTaskShell, "isx-join", commandTaskIntro(info), cwd}
	}
	joined, err := task.AttachCommand(taskID, argv)
	if err != nil {
		return err
	}
	return a.attach(incusCLI, client, name, build.AgentHome, joined)
}

// commandTaskShell is what joining a command task opens: a command has no
// conversation to resume, so the person gets a login shell in the task's
// working directory, told the task's state and where its output is.
const commandTaskShell = `printf '%s\n' "$1"; cd "$2" 2>/dev/null || cd
if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l`

func commandTaskIntro(info *task.Info) string {
	state := string(info.State)
	if info.State == task.StateFinished {
		state = fmt.Sprintf("finished with exit code %d", info.ExitCode)
	}
	command := strings.Join(info.Record.Command, " ")
	if len(info.Record.Command) == 3 && info.Record.Command[0] == "/bin/sh" && info.Record.Command[1] == "-c" {
		command = info.Record.Command[2]
	}
	dir := fmt.Sprintf("%s/%s/runs/%d", task.Dir, info.ID, info.Run)
	return fmt.Sprintf("isx: task %s (%s) is %s; its output is in %s/stdout and %s/stderr. A command task has no conversation, so this is a shell in its working directory; exit it to leave.",
		info.ID, command, state, dir, dir)
}

// resumeCommand is the command that resumes a delegated agent's saved
// conversation: the session the task recorded, or the one its stream
// names, in the agent's own form (claude --resume, codex resume, …).
func resumeCommand(ctx context.Context, client *incus.Client, name string, info *task.Info) ([]string, error) {
	agent := ""
	if info.Record.Delegate != nil {
		agent = info.Record.Delegate.Agent
	}
	adapter, err := delegate.Of(agent)
	if err != nil {
		return nil, fmt.Errorf("task %s records no agent isx knows: %w", info.ID, err)
	}
	run, err := task.ReadDelegate(ctx, client, name, info.ID, 64<<10, 0)
	if err != nil {
		return nil, err
	}
	session := run.Session
	if session == "" {
		session = adapter.Parse(run.Head).SessionID
	}
	if session == "" {
		return nil, fmt.Errorf("task %s has no saved %s session yet, so there is no conversation to join; try again once it has started", info.ID, agent)
	}
	return adapter.Join(session), nil
}
