package main

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/testkit"
)

func waitFor(t *testing.T, out *testkit.SyncBuffer, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := incustest.Poll(ctx, 20*time.Millisecond, func() bool { return strings.Contains(out.String(), want) }); err != nil {
		t.Fatalf("the terminal never showed %q:\n%s", want, out.String())
	}
}

// `isx shell` opens a login shell as the agent in its home, on a terminal;
// while it runs the instance counts as attended (ISX-207), and the shell's
// exit status is isx's. A stopped instance is started first.
func TestCLIShell(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBox)
	x.ok("branch", "w1", "--from", buildtest.BusyBox)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.StopInstance(ctx, "w1", incus.StopOptions{Force: true}); err != nil {
		t.Fatal(err)
	}

	cmd := x.command(ctx, "shell", "w1")
	terminal, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer terminal.Close()
	var out testkit.SyncBuffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, err := io.Copy(&out, terminal)
		// The terminal reports EIO once the shell side closes.
		if err != nil && !strings.Contains(err.Error(), "input/output error") {
			t.Errorf("reading the terminal: %v", err)
		}
	}()

	if _, err := io.WriteString(terminal, "echo \"ready-$((40+2)) $(id -u):$(id -g) $(pwd) $HOME\"\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "ready-42 1000:1000 /home/agent /home/agent")
	if !instance.Attended(x.home, x.project, "w1") {
		t.Errorf("not attended while the shell runs")
	}
	if instance.Attended(x.home, x.project, "w2") {
		t.Errorf("another instance counts as attended")
	}
	if _, err := io.WriteString(terminal, "exit 7\n"); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Errorf("isx shell ended with %v, want exit status 7\n%s", err, out.String())
	}
	terminal.Close()
	<-copied
	if instance.Attended(x.home, x.project, "w1") {
		t.Errorf("still attended after the shell ended")
	}

	// Templates and unknown names are refused.
	if r := x.run("shell", buildtest.BusyBox); r.code != exitFailure || !strings.Contains(r.stderr, "is a template") {
		t.Errorf("shell into a template: %s", r)
	}
	if r := x.run("shell", "nowhere"); r.code != exitFailure || !strings.Contains(r.stderr, "no instance named nowhere") {
		t.Errorf("shell into an unknown instance: %s", r)
	}
}
