package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

type zeroReader struct{ n byte }

func (r *zeroReader) Read(p []byte) (int, error) {
	for i := range p {
		r.n++
		p[i] = r.n
	}
	return len(p), nil
}

func rootExec(t *testing.T, c *incus.Client, name, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Exec(ctx, name, incus.ExecRequest{Command: []string{"sh", "-c", script}, Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%q in %s: %v %s %s", script, name, err, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// isx shell --task (task_status.join_command) joins a task, marking it
// attached while the person is in it: a command task opens a shell in its
// working directory; a delegate resumes the agent's conversation, and a
// finished one reads attached meanwhile.
//
// ISX-123, ISX-129, ISX-130.
func TestShellJoinsTaskISX123(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBox)
	x.ok("branch", "w1", "--from", buildtest.BusyBox)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	starter := task.NewStarter(clock.Real{}, &zeroReader{})
	started, err := starter.Start(ctx, c, "w1", task.Spec{Kind: task.KindCommand, Command: task.Shell("sleep 600"), Cwd: "/etc/isx-test"})
	if err != nil {
		t.Fatal(err)
	}
	id := started.Status.ID
	join := task.JoinCommand(id, "w1")
	args := strings.Fields(join)[1:]

	tm := startTerminal(t, x.command(ctx, args...))
	tm.expect("isx: task " + id + " (sleep 600) is running")
	tm.send("echo at-$(pwd)")
	tm.expect("at-/etc/isx-test")
	marker := rootExec(t, c, "w1", "cat /home/agent/.isx-mcp/tasks/"+id+"/attached")
	pid := strings.Fields(marker)[0]
	if rootExec(t, c, "w1", "test -d /proc/"+pid+" && echo alive") != "alive\n" {
		t.Errorf("the attached marker %q names no live process", marker)
	}
	if !instance.Attended(x.home, x.project, "w1") {
		t.Error("the instance is not attended while a person is in the task")
	}
	tm.send("exit")
	tm.wait()
	if out := rootExec(t, c, "w1", "test -d /proc/"+pid+" && echo alive || echo gone"); out != "gone\n" {
		t.Errorf("the joined process outlived isx shell: %s", out)
	}

	// A delegate's task, finished: joining resumes the agent's saved
	// conversation, and the task reads attached while the person is in it.
	done, err := starter.Start(ctx, c, "w1", task.Spec{Kind: task.KindCommand, Command: task.Shell("true")})
	if err != nil {
		t.Fatal(err)
	}
	delegate := done.Status.ID
	dir := task.Dir + "/" + delegate
	rootExec(t, c, "w1", `sed -i 's/"kind":"command"/"kind":"delegate","delegate":{"agent":"claude"}/' `+dir+`/task.json && echo delegate >`+dir+`/kind && echo sess-1 >`+dir+`/session_id && chown -R 1000:1000 `+dir+`
printf '#!/bin/sh\necho "claude $*"\nread line\necho "bye $line"\n' >/bin/claude && chmod 755 /bin/claude`)
	waitForState := func(want task.State) {
		t.Helper()
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var info *task.Info
		var err error
		inState := func() bool {
			info, err = task.Status(ctx, c, "w1", delegate)
			return err != nil || info.State == want
		}
		switch {
		case incustest.Poll(wait, 100*time.Millisecond, inState) != nil:
			t.Fatalf("task %s is %s, want %s", delegate, info.State, want)
		case err != nil:
			t.Fatal(err)
		}
	}
	waitForState(task.StateFinished)
	tm = startTerminal(t, x.command(ctx, "shell", "--task", delegate, "w1"))
	tm.expect("claude --resume sess-1")
	waitForState(task.StateAttached)
	tm.send("done")
	tm.expect("bye done")
	tm.wait()
	waitForState(task.StateFinished)

	if r := x.run("shell", "--task", "t-aaaaaaaaaa", "w1"); r.code == 0 || !strings.Contains(r.stderr, "no record of task") {
		t.Errorf("joining an unknown task: %s", r)
	}
}
