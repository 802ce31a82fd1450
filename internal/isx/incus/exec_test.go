package incus_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// execImages are the two kinds of instance exec must work in: no init
// system with busybox tools, and systemd with Debian's.
var execImages = []struct{ name, alias string }{
	{"busybox", incustest.BusyBox},
	{"debian", incustest.Debian},
}

func execInstance(t *testing.T, alias string) (*incus.Client, string) {
	t.Helper()
	c := incustest.Project(t)
	return c, incustest.Launch(t, c, alias)
}

func mustExec(t *testing.T, c *incus.Client, instance string, req incus.ExecRequest) *incus.ExecResult {
	t.Helper()
	res, err := c.Exec(testContext(t), instance, req)
	if err != nil {
		t.Fatalf("exec %q: %v", req.Command, err)
	}
	return res
}

// An exec leaves nothing behind: no output logs on the host, no helper
// files in the instance.
func assertNoLeftovers(t *testing.T, c *incus.Client, instance string) {
	t.Helper()
	ctx := testContext(t)
	if err := c.Settle(); err != nil {
		t.Fatalf("background clean-up: %v", err)
	}
	logs, err := c.ExecLogs(ctx, instance)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, instance, incus.ExecRequest{Command: []string{"sh", "-c", "ls -a /var/tmp | grep isx-exec; true"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 0 || len(res.Stdout) != 0 {
		t.Errorf("left behind: exec logs %v, files in /var/tmp %q", logs, res.Stdout)
	}
}

// ISX-061, ISX-278: the command runs inside the instance and its output,
// exit code, environment, directory and user are as asked.
func TestExecISX061(t *testing.T) {
	t.Parallel()
	for _, image := range execImages {
		t.Run(image.name, func(t *testing.T) {
			t.Parallel()
			c, name := execInstance(t, image.alias)

			res := mustExec(t, c, name, incus.ExecRequest{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
			if res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" ||
				res.StdoutBytes != 4 || res.StderrBytes != 4 || res.Truncated || res.TimedOut || res.Cancelled || res.Duration <= 0 {
				t.Errorf("result = %+v", res)
			}

			// What the command writes lands in the instance, not on the host.
			marker := "/root/isx-exec-test-" + name
			mustExec(t, c, name, incus.ExecRequest{Command: []string{"sh", "-c", "echo inside > " + marker}})
			if got, err := c.PullFile(testContext(t), name, marker); err != nil || string(got) != "inside\n" {
				t.Errorf("file written by the command: %q, %v", got, err)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the command touched the host: stat %s: %v", marker, err)
			}

			res = mustExec(t, c, name, incus.ExecRequest{
				Command: []string{"sh", "-c", `printf '%s|%s|%s|' "$GREETING" "$(pwd)" "$(id -u):$(id -g)"; printf '%s' "$1"`, "sh", "it's \"quoted\" $HOME"},
				Env:     map[string]string{"GREETING": "hello world"},
				Cwd:     "/tmp",
				UID:     1000,
				GID:     1000,
			})
			if got := string(res.Stdout); got != `hello world|/tmp|1000:1000|it's "quoted" $HOME` || res.ExitCode != 0 {
				t.Errorf("env, cwd, user and argv: %q (stderr %q, exit %d)", got, res.Stderr, res.ExitCode)
			}

			res = mustExec(t, c, name, incus.ExecRequest{Command: []string{"true"}, Cwd: "/no/such/dir"})
			if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "/no/such/dir") {
				t.Errorf("a missing cwd: exit %d stderr %q, want a failure naming it", res.ExitCode, res.Stderr)
			}

			res = mustExec(t, c, name, incus.ExecRequest{Command: []string{"no-such-command"}})
			if res.ExitCode != 127 || !strings.Contains(string(res.Stderr), "no-such-command") {
				t.Errorf("a missing command: exit %d, stderr %q, want 127", res.ExitCode, res.Stderr)
			}
			for _, code := range []string{"126", "127", "255"} {
				res = mustExec(t, c, name, incus.ExecRequest{Command: []string{"sh", "-c", "echo before; exit " + code}})
				if strconv.Itoa(res.ExitCode) != code || string(res.Stdout) != "before\n" {
					t.Errorf("exit %s: got exit %d, stdout %q", code, res.ExitCode, res.Stdout)
				}
			}
			assertNoLeftovers(t, c, name)
		})
	}
}

func TestExecStdin(t *testing.T) {
	t.Parallel()
	for _, image := range execImages {
		t.Run(image.name, func(t *testing.T) {
			t.Parallel()
			c, name := execInstance(t, image.alias)
			input := bytes.Repeat([]byte("0123456789abcdef"), incus.MaxStdinBytes/16)
			input[0] = 0 // binary-safe
			res := mustExec(t, c, name, incus.ExecRequest{Command: []string{"sh", "-c", "wc -c; id -u"}, Stdin: input, UID: 1000, GID: 1000})
			if fields := strings.Fields(string(res.Stdout)); len(fields) != 2 || fields[0] != "1048576" || fields[1] != "1000" {
				t.Errorf("1 MiB of stdin as uid 1000: stdout %q stderr %q", res.Stdout, res.Stderr)
			}
			res = mustExec(t, c, name, incus.ExecRequest{Command: []string{"cat"}, Stdin: []byte("line one\nline two")})
			if string(res.Stdout) != "line one\nline two" {
				t.Errorf("cat of stdin = %q", res.Stdout)
			}
			res = mustExec(t, c, name, incus.ExecRequest{Command: []string{"cat"}})
			if len(res.Stdout) != 0 || res.ExitCode != 0 {
				t.Errorf("no stdin: %+v, want empty input", res)
			}

			_, err := c.Exec(testContext(t), name, incus.ExecRequest{Command: []string{"cat"}, Stdin: make([]byte, incus.MaxStdinBytes+1)})
			if !errors.Is(err, incus.ErrStdinTooLarge) || !strings.Contains(err.Error(), "1 MiB") {
				t.Errorf("stdin over 1 MiB: %v, want ErrStdinTooLarge saying the limit", err)
			}
			assertNoLeftovers(t, c, name)
		})
	}
}

func TestExecOutputCap(t *testing.T) {
	t.Parallel()
	c, name := execInstance(t, incustest.BusyBox)
	res := mustExec(t, c, name, incus.ExecRequest{
		Command:        []string{"sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x; echo tail >&2"},
		MaxOutputBytes: 1000,
	})
	if len(res.Stdout) != 1000 || res.StdoutBytes != 3000000 || !res.Truncated ||
		string(res.Stderr) != "tail\n" || res.StderrBytes != 5 || res.ExitCode != 0 {
		t.Errorf("capped output: kept %d of %d stdout bytes, truncated %v, stderr %q", len(res.Stdout), res.StdoutBytes, res.Truncated, res.Stderr)
	}
	if strings.Trim(string(res.Stdout), "x") != "" {
		t.Errorf("kept output is not the start of the stream")
	}
	res = mustExec(t, c, name, incus.ExecRequest{Command: []string{"echo", "small"}, MaxOutputBytes: 6})
	if string(res.Stdout) != "small\n" || res.Truncated {
		t.Errorf("output exactly at the cap: %+v", res)
	}
	assertNoLeftovers(t, c, name)
}

// sleepers lists the processes of the test's `sleep 1000x` commands.
func sleepers(t *testing.T, c *incus.Client, instance string) string {
	t.Helper()
	res := mustExec(t, c, instance, incus.ExecRequest{Command: []string{"sh", "-c", "ps -o pid,args | grep '[s]leep 1000'; true"}})
	return strings.TrimSpace(string(res.Stdout))
}

// A timeout kills the command and everything it started, including a child
// that outlives its parent (ISX-065's kill mechanism).
func TestExecTimeoutKillsProcessGroupISX065(t *testing.T) {
	t.Parallel()
	for _, image := range execImages {
		t.Run(image.name, func(t *testing.T) {
			t.Parallel()
			c, name := execInstance(t, image.alias)
			begin := time.Now()
			res, err := c.Exec(testContext(t), name, incus.ExecRequest{
				Command: []string{"sh", "-c", "echo started; (sleep 1001 &); sleep 1000"},
				// Long enough that a loaded machine has run the echo
				// before the timeout fires; what is checked is the kill.
				Timeout: 2 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			if elapsed := time.Since(begin); elapsed > 8*time.Second {
				t.Errorf("a 2 s timeout returned after %s", elapsed)
			}
			if !res.TimedOut || res.Cancelled || res.ExitCode != 137 || string(res.Stdout) != "started\n" {
				t.Errorf("timed-out result = %+v (stdout %q)", res, res.Stdout)
			}
			if left := sleepers(t, c, name); left != "" {
				t.Errorf("processes survived the timeout:\n%s", left)
			}
			assertNoLeftovers(t, c, name)
		})
	}
}

// The timeout runs on the client's clock, so a long timeout is tested
// without waiting for it.
func TestExecTimeoutFollowsClock(t *testing.T) {
	t.Parallel()
	project, name := execInstance(t, incustest.BusyBox)
	fake := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	c := incus.New(project.Socket(), incus.WithProject(project.ProjectName()), incus.WithClock(fake))
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing the fake-clock client: %v", err)
		}
	})
	type outcome struct {
		res *incus.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := c.Exec(testContext(t), name, incus.ExecRequest{Command: []string{"sleep", "1000"}, Timeout: time.Hour})
		done <- outcome{res, err}
	}()
	incustest.WaitFor(t, "the command to run", time.Minute, func() bool { return sleepers(t, c, name) != "" })
	if err := fake.WaitForTimers(testContext(t), 1); err != nil {
		t.Fatalf("the exec never waited on its timeout: %v", err)
	}
	select {
	case got := <-done:
		t.Fatalf("exec ended before its timeout: %+v, %v", got.res, got.err)
	default:
	}
	fake.Advance(time.Hour)
	got := <-done
	if got.err != nil || !got.res.TimedOut || got.res.Duration != time.Hour {
		t.Errorf("after the clock passed the timeout: %+v, %v", got.res, got.err)
	}
	if left := sleepers(t, c, name); left != "" {
		t.Errorf("left running: %s", left)
	}
}

func TestExecCancelKillsProcess(t *testing.T) {
	t.Parallel()
	for _, image := range execImages {
		t.Run(image.name, func(t *testing.T) {
			t.Parallel()
			c, name := execInstance(t, image.alias)
			ctx, cancel := context.WithCancel(testContext(t))
			time.AfterFunc(500*time.Millisecond, cancel)
			begin := time.Now()
			res, err := c.Exec(ctx, name, incus.ExecRequest{Command: []string{"sh", "-c", "echo started; sleep 1000"}, UID: 1000, GID: 1000})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled exec: %v, want context.Canceled", err)
			}
			if elapsed := time.Since(begin); elapsed > 5*time.Second {
				t.Errorf("cancelled after 0.5 s, returned after %s", elapsed)
			}
			if res == nil || !res.Cancelled || res.TimedOut || string(res.Stdout) != "started\n" {
				t.Errorf("cancelled result = %+v", res)
			}
			if left := sleepers(t, c, name); left != "" {
				t.Errorf("processes survived the cancellation:\n%s", left)
			}
			assertNoLeftovers(t, c, name)
		})
	}
}

// Cancelling before the command has started must not leave it to run later.
func TestExecCancelledEarlyNeverRuns(t *testing.T) {
	t.Parallel()
	c, name := execInstance(t, incustest.BusyBox)
	for _, delay := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		ctx, cancel := context.WithCancel(testContext(t))
		time.AfterFunc(delay, cancel)
		res, err := c.Exec(ctx, name, incus.ExecRequest{Command: []string{"sh", "-c", "sleep 0.3; touch /root/ran"}, Stdin: []byte("x")})
		cancel()
		if err == nil && (res == nil || !res.Cancelled) {
			// The command may finish before the cancel lands; that is fine
			// only if it really ran to the end.
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled after %s: %v", delay, err)
		}
	}
	// A command that escaped its cancel would finish 0.3 s after it
	// started: watch for its file for longer than that.
	watch, stop := context.WithTimeout(testContext(t), 2*time.Second)
	defer stop()
	ran := func() bool {
		_, err := c.PullFile(watch, name, "/root/ran")
		return !errors.Is(err, incus.ErrNotFound) && watch.Err() == nil
	}
	if incustest.Poll(watch, incustest.PollInterval, ran) == nil {
		t.Errorf("a cancelled command ran to its end anyway")
	}
	if left := sleepers(t, c, name); left != "" {
		t.Errorf("left running: %s", left)
	}
}

// Without setsid the command cannot lead its own process group; the kill
// then walks the process tree instead.
func TestExecTimeoutWithoutSetsid(t *testing.T) {
	t.Parallel()
	c, name := execInstance(t, incustest.BusyBox)
	mustExec(t, c, name, incus.ExecRequest{Command: []string{"rm", "/bin/setsid"}})
	res := mustExec(t, c, name, incus.ExecRequest{
		Command: []string{"sh", "-c", "sleep 1000 & sleep 1001"},
		Timeout: 300 * time.Millisecond,
	})
	if !res.TimedOut {
		t.Errorf("result = %+v, want timed out", res)
	}
	if left := sleepers(t, c, name); left != "" {
		t.Errorf("processes survived the timeout:\n%s", left)
	}
	assertNoLeftovers(t, c, name)
}

// The kill does not depend on files the command could delete.
func TestExecTimeoutAfterHelperFilesRemoved(t *testing.T) {
	t.Parallel()
	c, name := execInstance(t, incustest.BusyBox)
	res := mustExec(t, c, name, incus.ExecRequest{
		Command: []string{"sh", "-c", "rm -f /var/tmp/.isx-exec-*; sleep 1000"},
		Timeout: 300 * time.Millisecond,
	})
	if !res.TimedOut || res.ExitCode != 137 {
		t.Errorf("result = %+v, want timed out and killed", res)
	}
	if left := sleepers(t, c, name); left != "" {
		t.Errorf("processes survived the timeout:\n%s", left)
	}
	assertNoLeftovers(t, c, name)
}

func TestExecErrors(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)
	createStopped(t, c, "stopped", nil)
	if _, err := c.Exec(ctx, "missing", incus.ExecRequest{Command: []string{"true"}}); !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("exec in a missing instance: %v, want ErrNotFound", err)
	}
	_, err := c.Exec(ctx, "stopped", incus.ExecRequest{Command: []string{"true"}})
	var apiErr *incus.Error
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "not running") {
		t.Errorf("exec in a stopped instance: %v, want an error saying it is not running", err)
	}
	if _, err := c.Exec(ctx, "stopped", incus.ExecRequest{}); err == nil {
		t.Error("exec without a command succeeded")
	}
}
