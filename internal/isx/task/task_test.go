package task

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// The integration tests run every behaviour twice: in the Debian image,
// where runs are systemd units, and in the busybox image, which has no init
// system and gets detached process groups.

func TestTasksDebian(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	inst := incustest.Launch(t, c, incustest.Debian)
	env := setUp(t, c, inst, modeSystemd)
	exercise(t, env)
}

func TestTasksBusyBox(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	inst := incustest.Launch(t, c, incustest.BusyBox)
	env := setUp(t, c, inst, modeProcess)
	exercise(t, env)

	// A run whose runner died with the instance ended without an exit
	// code: finished, not running forever.
	t.Run("restart leaves finished without exit code", func(t *testing.T) {
		st := env.start(t, Spec{Kind: KindCommand, Command: Shell("sleep 6101")})
		ctx := context.Background()
		if err := c.RestartInstance(ctx, inst, incus.StopOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		got := env.status(t, st.ID)
		if got.State != StateFinished || got.ExitCode != NoExitCode || got.Problem == "" {
			t.Errorf("after a restart: %+v, want finished with NoExitCode and a problem", got)
		}
	})

	t.Run("instance without an agent user is unavailable", func(t *testing.T) {
		bare := incustest.Launch(t, c, incustest.BusyBox)
		_, err := env.starter.Start(context.Background(), c, bare, Spec{Kind: KindCommand, Command: Shell("true")})
		if coded.CodeOf(err) != CodeUnavailable || !strings.Contains(err.Error(), "/home/agent") {
			t.Errorf("Start without an agent user: %v, want unavailable naming /home/agent", err)
		}
	})

	t.Run("stopped instance is wrong_state", func(t *testing.T) {
		ctx := context.Background()
		if err := c.StopInstance(ctx, inst, incus.StopOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		_, err := Status(ctx, c, inst, "t-aaaaaaaaaa")
		if coded.CodeOf(err) != CodeWrongState {
			t.Errorf("Status in a stopped instance: %v (code %q), want wrong_state", err, coded.CodeOf(err))
		}
		_, err = Status(ctx, c, "no-such-instance", "t-aaaaaaaaaa")
		if coded.CodeOf(err) != CodeNotFound {
			t.Errorf("Status in a missing instance: %v (code %q), want not_found", err, coded.CodeOf(err))
		}
	})
}

// testEnv is one running instance prepared for tasks.
type testEnv struct {
	c       *incus.Client
	inst    string
	mode    string
	starter *Starter
}

// agentUserScript creates the agent user as isx's builds do, with the
// account files where there is no useradd (busybox).
const agentUserScript = `if ! id -u agent >/dev/null 2>&1; then
  if command -v useradd >/dev/null 2>&1; then
    useradd --create-home --home-dir /home/agent --uid 1000 --user-group --shell /bin/sh agent
  else
    echo 'agent:x:1000:' >>/etc/group
    echo 'agent:x:1000:1000:isx agent:/home/agent:/bin/sh' >>/etc/passwd
    mkdir -p /home/agent && chown 1000:1000 /home/agent && chmod 0755 /home/agent
  fi
fi
if command -v systemctl >/dev/null 2>&1; then systemctl is-system-running --wait >/dev/null 2>&1; fi
true`

func setUp(t testing.TB, c *incus.Client, inst, mode string) *testEnv {
	t.Helper()
	env := &testEnv{c: c, inst: inst, mode: mode, starter: NewStarter(clock.Real{}, rand.Reader)}
	env.root(t, agentUserScript)
	return env
}

// root runs a shell line as root in the instance and returns its stdout.
func (e *testEnv) root(t testing.TB, line string) string {
	t.Helper()
	res, err := e.c.Exec(context.Background(), e.inst, incus.ExecRequest{Command: []string{"sh", "-c", line}, Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %v %+v\n%s", line, err, res, res.Stderr)
	}
	return string(res.Stdout)
}

func (e *testEnv) start(t testing.TB, spec Spec) *Info {
	t.Helper()
	started, err := e.starter.Start(context.Background(), e.c, e.inst, spec)
	if err != nil {
		t.Fatalf("Start %q: %v", spec.Command, err)
	}
	if started.Replayed {
		t.Fatalf("Start %q without a repeated key replayed %s", spec.Command, started.Status.ID)
	}
	return &started.Status
}

func (e *testEnv) status(t testing.TB, id string) *Info {
	t.Helper()
	st, err := Status(context.Background(), e.c, e.inst, id)
	if err != nil {
		t.Fatalf("Status %s: %v", id, err)
	}
	return st
}

// finish waits (inside the instance) until the task ends.
func (e *testEnv) finish(t testing.TB, id string) *Info {
	t.Helper()
	res, err := Wait(context.Background(), e.c, e.inst, []string{id}, time.Minute)
	if err != nil {
		t.Fatalf("Wait %s: %v", id, err)
	}
	if res.Changed == nil || res.Changed.ID != id {
		t.Fatalf("Wait %s: nothing changed within a minute: %+v", id, res)
	}
	return res.Changed
}

// processes lists the command lines running in the instance that start
// with marker.
func (e *testEnv) processes(t testing.TB, marker string) []string {
	t.Helper()
	out := e.root(t, `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f" 2>/dev/null; echo; done`)
	var found []string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, marker) {
			found = append(found, strings.TrimSpace(line))
		}
	}
	return found
}

func exercise(t *testing.T, e *testEnv) {
	ctx := context.Background()
	var running *Info // a sleep 60 task, for the later checks

	// ISX-062, ISX-121: a background command returns at once and is running.
	started := t.Run("ISX-062 ISX-121 start sleep 60 is running", func(t *testing.T) {
		st := e.start(t, Spec{Kind: KindCommand, Command: Shell("sleep 60"), Session: "session-a", Env: map[string]string{"TOKEN": "s3cret-value"}})
		if st.State != StateRunning || st.Pending || st.Run != 1 {
			t.Fatalf("started: %+v, want running run 1", st)
		}
		if st.Mode != e.mode {
			t.Errorf("mode %q, want %q", st.Mode, e.mode)
		}
		if ValidateID(st.ID) != nil {
			t.Errorf("task id %q is not well formed", st.ID)
		}
		rec := st.Record
		if rec == nil || rec.Kind != KindCommand || rec.Cwd != AgentHome || rec.Session != "session-a" ||
			!slices.Equal(rec.EnvNames, []string{"TOKEN"}) || rec.Created.IsZero() || st.Started.IsZero() {
			t.Errorf("record: %+v", rec)
		}
		running = e.status(t, st.ID)
		if running.State != StateRunning {
			t.Errorf("Status: %+v, want running", running)
		}
		if e.mode == modeSystemd {
			unit := UnitName(st.ID, 1)
			if got := strings.TrimSpace(e.root(t, "systemctl is-active "+unit+" || true")); got != "active" {
				t.Errorf("unit %s is %q, want active", unit, got)
			}
			if got := strings.TrimSpace(e.root(t, "systemctl show -p User,KillMode --value "+unit)); got != "1000\ncontrol-group" && got != "control-group\n1000" {
				t.Errorf("unit %s: User, KillMode = %q", unit, got)
			}
		}
		// The command runs as the agent user with the task's environment.
		if procs := e.processes(t, "sleep 60"); len(procs) == 0 {
			t.Errorf("no sleep 60 process in the instance")
		}
		owner := e.root(t, `for p in /proc/[0-9]*; do if tr '\0' ' ' <$p/cmdline 2>/dev/null | grep -q '^sleep 60 $'; then awk '/^Uid:/{print $2}' $p/status; fi; done`)
		if strings.TrimSpace(owner) != "1000" {
			t.Errorf("sleep 60 runs as uid %q, want 1000", owner)
		}
	})

	if !started || running == nil {
		t.Fatal("the first task did not start; the rest depend on it")
	}

	// The environment's values are only in the 0600 env file, never in the
	// record that Status, List and every tool show.
	t.Run("env values stay out of the record", func(t *testing.T) {
		dir := Dir + "/" + running.ID
		if rec := e.root(t, "cat "+dir+"/task.json"); strings.Contains(rec, "s3cret-value") || !strings.Contains(rec, "TOKEN") {
			t.Errorf("task.json holds the value or lacks the name: %s", rec)
		}
		if got := strings.TrimSpace(e.root(t, "stat -c '%a %u' "+dir+"/env "+dir)); got != "600 1000\n700 1000" {
			t.Errorf("env file and task dir modes: %q", got)
		}
	})

	// ISX-063, ISX-122, ISX-064: exit 3 finishes with exit code 3; its output
	// is in the result.
	t.Run("ISX-063 ISX-122 ISX-064 exit 3 finishes with its output", func(t *testing.T) {
		st := e.start(t, Spec{Kind: KindCommand, Command: Shell("echo done; echo warn >&2; exit 3"), Env: map[string]string{"A": "1"}})
		changed := e.finish(t, st.ID)
		if changed.State != StateFinished || changed.ExitCode != 3 || changed.Finished.IsZero() {
			t.Fatalf("after exit 3: %+v", changed)
		}
		again := e.status(t, st.ID)
		if again.State != StateFinished || again.ExitCode != 3 || again.StdoutBytes != 5 || again.StderrBytes != 5 {
			t.Errorf("Status after exit 3: %+v", again)
		}
		out, err := Result(ctx, e.c, e.inst, st.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if string(out.Stdout) != "done\n" || string(out.Stderr) != "warn\n" || out.Status.ExitCode != 3 || out.Truncated {
			t.Errorf("Result: %+v stdout %q stderr %q", out, out.Stdout, out.Stderr)
		}
	})

	t.Run("result keeps the tail when truncated", func(t *testing.T) {
		st := e.start(t, Spec{Kind: KindCommand, Command: Shell("i=0; while [ $i -lt 1000 ]; do echo line$i; i=$((i+1)); done")})
		e.finish(t, st.ID)
		out, err := Result(ctx, e.c, e.inst, st.ID, 16)
		if err != nil {
			t.Fatal(err)
		}
		if !out.Truncated || string(out.Stdout) != "line998\nline999\n" || out.StdoutBytes < 7000 || out.Status.ExitCode != 0 {
			t.Errorf("Result(16): truncated %v stdout %q of %d bytes", out.Truncated, out.Stdout, out.StdoutBytes)
		}
	})

	t.Run("result of a running task is wrong_state", func(t *testing.T) {
		_, err := Result(ctx, e.c, e.inst, running.ID, 0)
		if coded.CodeOf(err) != CodeWrongState {
			t.Errorf("Result while running: %v, want wrong_state", err)
		}
	})

	// ISX-065: cancel stops the command and everything it started.
	t.Run("ISX-065 cancel of sleep 600 leaves no process", func(t *testing.T) {
		st := e.start(t, Spec{Kind: KindCommand, Command: Shell("sleep 6001 & sleep 6002; wait")})
		if procs := e.processes(t, "sleep 600"); len(procs) != 2 {
			t.Fatalf("before cancel: %q, want two sleeps", procs)
		}
		begin := time.Now()
		c, err := Cancel(ctx, e.c, e.inst, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("cancel took %s", time.Since(begin))
		if c.AlreadyEnded || c.Status.State != StateFinished || c.Status.ExitCode != 143 {
			t.Errorf("Cancel: %+v, want finished with 143", c)
		}
		if procs := e.processes(t, "sleep 600"); len(procs) != 0 {
			t.Errorf("after cancel: %q still run", procs)
		}
		// ISX-127: read back, the state is finished, never unknown.
		if got := e.status(t, st.ID); got.State != StateFinished || got.ExitCode != 143 {
			t.Errorf("Status after cancel: %+v", got)
		}
		again, err := Cancel(ctx, e.c, e.inst, st.ID)
		if err != nil || !again.AlreadyEnded || again.Status.ExitCode != 143 {
			t.Errorf("second Cancel: %+v, %v, want a no-op saying it ended", again, err)
		}
	})

	t.Run("ISX-065 cancel kills what ignores TERM after 2 s", func(t *testing.T) {
		st := e.start(t, Spec{Kind: KindCommand, Command: Shell("trap '' TERM; sleep 6003")})
		begin := time.Now()
		c, err := Cancel(ctx, e.c, e.inst, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c.Status.State != StateFinished || c.Status.ExitCode != 137 {
			t.Errorf("Cancel: %+v, want finished with 137", c.Status)
		}
		if procs := e.processes(t, "sleep 6003"); len(procs) != 0 {
			t.Errorf("after cancel: %q still run", procs)
		}
		t.Logf("cancel of a TERM-ignoring task took %s", time.Since(begin))
	})

	// ISX-124: a task whose record was removed is lost.
	t.Run("ISX-124 removed record is lost", func(t *testing.T) {
		st := e.start(t, Spec{Kind: KindCommand, Command: Shell("true")})
		e.root(t, "rm -rf "+Dir+"/"+st.ID)
		if got := e.status(t, st.ID); got.State != StateLost || got.Record != nil {
			t.Errorf("Status: %+v, want lost", got)
		}
		if _, err := Result(ctx, e.c, e.inst, st.ID, 0); coded.CodeOf(err) != CodeNotFound {
			t.Errorf("Result of a lost task: %v, want not_found", err)
		}
		if _, err := Cancel(ctx, e.c, e.inst, st.ID); coded.CodeOf(err) != CodeNotFound {
			t.Errorf("Cancel of a lost task: %v, want not_found", err)
		}
		if got := e.status(t, "t-aaaaaaaaaa"); got.State != StateLost {
			t.Errorf("Status of a task never made: %+v, want lost", got)
		}
	})

	// ISX-159, ISX-160, ISX-161, ISX-164: a key replays its task, across
	// sessions, until the task is gone.
	t.Run("ISX-159 ISX-160 ISX-164 key replays its task", func(t *testing.T) {
		spec := Spec{Kind: KindCommand, Command: Shell("sleep 30"), Key: "job:1.a_b-" + e.mode, Session: "one"}
		first, err := e.starter.Start(ctx, e.c, e.inst, spec)
		if err != nil || first.Replayed {
			t.Fatalf("first Start: %+v, %v", first, err)
		}
		spec.Session = "two"
		spec.Command = Shell("echo a different command is still a replay")
		second, err := e.starter.Start(ctx, e.c, e.inst, spec)
		if err != nil || !second.Replayed || second.Status.ID != first.Status.ID || second.Status.Record.Session != "one" {
			t.Fatalf("repeated Start: %+v, %v, want a replay of %s", second, err, first.Status.ID)
		}
		if procs := e.processes(t, "sleep 30"); len(procs) != 1 {
			t.Errorf("after the replay %d sleep 30 run, want 1", len(procs))
		}
		found, err := FindByKey(ctx, e.c, e.inst, spec.Key)
		if err != nil || found.ID != first.Status.ID || found.Record.Key != spec.Key {
			t.Errorf("FindByKey: %+v, %v", found, err)
		}
		if _, err := Cancel(ctx, e.c, e.inst, first.Status.ID); err != nil {
			t.Fatal(err)
		}
		e.root(t, "rm -rf "+Dir+"/"+first.Status.ID)
		if _, err := FindByKey(ctx, e.c, e.inst, spec.Key); coded.CodeOf(err) != CodeNotFound {
			t.Errorf("FindByKey after the task is gone: %v, want not_found", err)
		}
		third, err := e.starter.Start(ctx, e.c, e.inst, spec)
		if err != nil || third.Replayed || third.Status.ID == first.Status.ID {
			t.Errorf("Start after the task is gone: %+v, %v, want a new task", third, err)
		}
	})

	// A Start interrupted after writing the record and before starting the
	// run leaves a pending task; repeating it with the key starts it, once.
	// With systemd the interruption can also fall between the agent's part
	// (record, mode, run.json) and systemd-run.
	crashes := []string{modeNone}
	if e.mode == modeSystemd {
		crashes = append(crashes, modeSystemd)
	}
	for _, crash := range crashes {
		t.Run("key replay starts a record whose run never started/"+crash, func(t *testing.T) {
			marker := "/home/agent/replayed-" + crash
			spec := Spec{Kind: KindCommand, Command: Shell("echo ran >>" + marker + "; exit 7"), Key: "crash-" + crash}
			made, err := e.starter.create(ctx, e.c, e.inst, spec, crash)
			if err != nil {
				t.Fatal(err)
			}
			if st := e.status(t, made.Status.ID); st.State != StateRunning || !st.Pending {
				t.Fatalf("record without a run: %+v, want running and pending", st)
			}
			replay, err := e.starter.Start(ctx, e.c, e.inst, spec)
			if err != nil || !replay.Replayed || replay.Status.ID != made.Status.ID || replay.Status.Mode != e.mode {
				t.Fatalf("Start with the key: %+v, %v", replay, err)
			}
			if done := e.finish(t, made.Status.ID); done.State != StateFinished || done.ExitCode != 7 {
				t.Errorf("the replayed run: %+v, want finished with 7", done)
			}
			if _, err := e.starter.Start(ctx, e.c, e.inst, spec); err != nil {
				t.Fatal(err)
			}
			if ran := e.root(t, "cat "+marker); ran != "ran\n" {
				t.Errorf("the command ran %d times, want once", strings.Count(ran, "ran"))
			}
		})
	}

	// ISX-159: concurrent repeats of one key make one task.
	t.Run("ISX-159 concurrent starts with one key make one task", func(t *testing.T) {
		spec := Spec{Kind: KindCommand, Command: Shell("echo once >>/home/agent/concurrent; sleep 5"), Key: "concurrent"}
		results := make([]*Started, 4)
		errs := make([]error, len(results))
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() { results[i], errs[i] = e.starter.Start(ctx, e.c, e.inst, spec) })
		}
		wg.Wait()
		made := 0
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("Start %d: %v", i, errs[i])
			}
			if !r.Replayed {
				made++
			}
			if r.Status.ID != results[0].Status.ID {
				t.Errorf("Start %d made %s, another %s", i, r.Status.ID, results[0].Status.ID)
			}
		}
		if made != 1 {
			t.Errorf("%d of the starts made a task, want 1", made)
		}
		if ran := e.root(t, "cat /home/agent/concurrent"); ran != "once\n" {
			t.Errorf("the command ran %d times, want once", strings.Count(ran, "once"))
		}
	})

	// A cancelled pending task never starts, even when its key is repeated.
	t.Run("cancel of a pending task stops it from starting", func(t *testing.T) {
		spec := Spec{Kind: KindCommand, Command: Shell("touch /home/agent/must-not-run"), Key: "pending-" + e.mode}
		made, err := e.starter.create(ctx, e.c, e.inst, spec, modeNone)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Cancel(ctx, e.c, e.inst, made.Status.ID)
		if err != nil || c.Status.State != StateFinished || c.Status.ExitCode != NoExitCode {
			t.Fatalf("Cancel of a pending task: %+v, %v", c, err)
		}
		replay, err := e.starter.Start(ctx, e.c, e.inst, spec)
		if err != nil || !replay.Replayed || replay.Status.State != StateFinished {
			t.Errorf("Start with the key: %+v, %v", replay, err)
		}
		if got := e.root(t, "ls /home/agent"); strings.Contains(got, "must-not-run") {
			t.Errorf("the cancelled command ran")
		}
	})

	// ISX-167, ISX-168: a key that made another kind of task is refused,
	// and nothing is made.
	t.Run("ISX-167 key of another kind is refused", func(t *testing.T) {
		key := "kind-" + e.mode
		delegate, err := e.starter.create(ctx, e.c, e.inst, Spec{Kind: KindDelegate, Command: Shell("true"), Key: key, Delegate: &Delegate{Agent: "claude"}}, "")
		if err != nil {
			t.Fatal(err)
		}
		before := e.count(t)
		_, err = e.starter.Start(ctx, e.c, e.inst, Spec{Kind: KindCommand, Command: Shell("true"), Key: key})
		if coded.CodeOf(err) != CodeInvalidArgument || !strings.Contains(err.Error(), delegate.Status.ID) {
			t.Errorf("command Start with a delegate's key: %v, want invalid_argument naming %s", err, delegate.Status.ID)
		}
		if after := e.count(t); after != before {
			t.Errorf("%d tasks before, %d after", before, after)
		}
	})

	// ISX-123: a finished delegate with a person in its conversation is
	// attached, and finished again once they leave.
	t.Run("ISX-123 attached while a person is in the conversation", func(t *testing.T) {
		made, err := e.starter.create(ctx, e.c, e.inst, Spec{Kind: KindDelegate, Command: Shell("true"), Delegate: &Delegate{Agent: "claude", Model: "opus"}}, "")
		if err != nil {
			t.Fatal(err)
		}
		id := made.Status.ID
		if st := e.finish(t, id); st.State != StateFinished || st.Record.Delegate.Model != "opus" {
			t.Fatalf("delegate: %+v", st)
		}
		argv, err := AttachCommand(id, []string{"sh", "-c", "echo joined; sleep 1.5"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var joined *incus.ExecResult
		var joinErr error
		wg.Go(func() {
			joined, joinErr = e.c.Exec(ctx, e.inst, incus.ExecRequest{Command: argv, UID: AgentUID, GID: AgentGID})
		})
		state := StateFinished
		for i := 0; i < 100 && state != StateAttached; i++ {
			state = e.status(t, id).State
		}
		if state != StateAttached {
			t.Errorf("while a person is in the conversation: %s, want attached", state)
		}
		wg.Wait()
		if joinErr != nil || joined.ExitCode != 0 || string(joined.Stdout) != "joined\n" {
			t.Fatalf("attach command: %+v, %v", joined, joinErr)
		}
		if got := e.status(t, id); got.State != StateFinished {
			t.Errorf("after the person left: %s, want finished", got.State)
		}
		// A command task is never attached.
		cmd := e.start(t, Spec{Kind: KindCommand, Command: Shell("true")})
		e.finish(t, cmd.ID)
		argv, _ = AttachCommand(cmd.ID, []string{"sleep", "1"})
		wg.Go(func() {
			_, joinErr = e.c.Exec(ctx, e.inst, incus.ExecRequest{Command: argv, UID: AgentUID, GID: AgentGID})
		})
		marked := false
		for i := 0; i < 50 && !marked; i++ {
			marked = e.root(t, "test -e "+Dir+"/"+cmd.ID+"/attached && echo yes || true") == "yes\n"
		}
		if got := e.status(t, cmd.ID); !marked || got.State != StateFinished {
			t.Errorf("a command task with a person attached (marked: %v): %s, want finished", marked, got.State)
		}
		wg.Wait()
		if joinErr != nil {
			t.Fatal(joinErr)
		}
	})

	// Wait returns when a task ends, well before its time is up; it
	// notices a change inside the instance.
	t.Run("ISX-140 wait returns when the task ends", func(t *testing.T) {
		st := e.start(t, Spec{Kind: KindCommand, Command: Shell("sleep 1")})
		begin := time.Now()
		res, err := Wait(ctx, e.c, e.inst, []string{running.ID, st.ID}, time.Minute)
		took := time.Since(begin)
		if err != nil {
			t.Fatal(err)
		}
		if res.Changed == nil || res.Changed.ID != st.ID || res.Changed.State != StateFinished || len(res.Statuses) != 2 ||
			res.Statuses[0].State != StateRunning || res.Statuses[1].ExitCode != 0 {
			t.Fatalf("Wait: %+v", res)
		}
		// Returning at its one-minute timeout would be polling's answer,
		// not the change's.
		if took >= time.Minute {
			t.Errorf("Wait took %s for a 1 s task", took)
		}
		t.Logf("Wait returned %s after a 1 s task was started", took)

		begin = time.Now()
		res, err = Wait(ctx, e.c, e.inst, []string{running.ID}, 300*time.Millisecond)
		if err != nil || res.Changed != nil || res.Statuses[0].State != StateRunning {
			t.Errorf("Wait on a running task with a short timeout: %+v, %v", res, err)
		}
		if took := time.Since(begin); took < 300*time.Millisecond {
			t.Errorf("Wait with a 300 ms timeout returned after %s", took)
		}
		// An ended task returns at once.
		res, err = Wait(ctx, e.c, e.inst, []string{running.ID, "t-aaaaaaaaaa"}, time.Minute)
		if err != nil || res.Changed == nil || res.Changed.State != StateLost {
			t.Errorf("Wait with a lost task: %+v, %v", res, err)
		}
	})

	t.Run("wait ends with its context", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := Wait(cctx, e.c, e.inst, []string{running.ID}, time.Minute)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait past its context: %v", err)
		}
	})

	// Nothing an agent sends reaches a shell unquoted.
	t.Run("hostile ids never reach the instance", func(t *testing.T) {
		counter := &countingExecutor{Executor: e.c}
		for _, id := range []string{"t-aaaaaaaaaa; touch /pwned", "../../../etc", "t-aaaaaaaaa", "t-AAAAAAAAAA", "t-aaaaaaaaaa\n", "$(touch /pwned)", "t-aaaaaaaaa1", ""} {
			if _, err := Status(ctx, counter, e.inst, id); coded.CodeOf(err) != CodeInvalidArgument {
				t.Errorf("Status(%q): %v, want invalid_argument", id, err)
			}
			if _, err := Cancel(ctx, counter, e.inst, id); coded.CodeOf(err) != CodeInvalidArgument {
				t.Errorf("Cancel(%q): %v, want invalid_argument", id, err)
			}
			if _, err := Result(ctx, counter, e.inst, id, 0); coded.CodeOf(err) != CodeInvalidArgument {
				t.Errorf("Result(%q): %v, want invalid_argument", id, err)
			}
			if _, err := Wait(ctx, counter, e.inst, []string{running.ID, id}, 0); coded.CodeOf(err) != CodeInvalidArgument {
				t.Errorf("Wait(%q): %v, want invalid_argument", id, err)
			}
		}
		for _, key := range []string{"a/b", "a b", "", strings.Repeat("a", 65), "$(x)", "k\n"} {
			if _, err := FindByKey(ctx, counter, e.inst, key); coded.CodeOf(err) != CodeInvalidArgument {
				t.Errorf("FindByKey(%q): %v, want invalid_argument", key, err)
			}
			if key == "" {
				continue // no key at all
			}
			if _, err := e.starter.Start(ctx, counter, e.inst, Spec{Kind: KindCommand, Command: Shell("true"), Key: key}); coded.CodeOf(err) != CodeInvalidArgument {
				t.Errorf("Start with key %q: %v, want invalid_argument", key, err)
			}
		}
		for _, spec := range []Spec{
			{Kind: KindCommand},
			{Kind: "shell", Command: Shell("true")},
			{Kind: KindDelegate, Command: Shell("true")},
			{Kind: KindCommand, Command: Shell("true"), Cwd: "relative/dir"},
			{Kind: KindCommand, Command: Shell("true"), Env: map[string]string{"A=B": "x"}},
			{Kind: KindCommand, Command: Shell("true"), Env: map[string]string{"$(x)": "x"}},
			{Kind: KindCommand, Command: []string{"echo", "nul\x00byte"}},
			{Kind: KindCommand, Command: Shell(strings.Repeat("x", MaxCommandBytes+1))},
		} {
			if _, err := e.starter.Start(ctx, counter, e.inst, spec); coded.CodeOf(err) != CodeInvalidArgument {
				t.Errorf("Start(%+v): %v, want invalid_argument", spec.Command, err)
			}
		}
		if n := counter.n.Load(); n != 0 {
			t.Errorf("%d execs reached the instance", n)
		}
	})

	t.Run("hostile commands, env and cwd arrive unchanged", func(t *testing.T) {
		cwd := "/home/agent/we ird'$(touch /tmp/pwned)\n\"dir\""
		res, err := e.c.Exec(ctx, e.inst, incus.ExecRequest{Command: []string{"sh", "-c", `mkdir -p "$1" && chown 1000:1000 "$1"`, "sh", cwd}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("mkdir: %v %+v", err, res)
		}
		env := map[string]string{}
		for i, s := range hostileStrings {
			env[fmt.Sprintf("H%d", i)] = s
		}
		argv := append([]string{"printf", "%s\\0"}, hostileStrings...)
		st := e.start(t, Spec{Kind: KindCommand, Command: argv, Cwd: cwd, Env: env, Session: "x'; touch /tmp/pwned; '"})
		e.finish(t, st.ID)
		out, err := Result(ctx, e.c, e.inst, st.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Join(hostileStrings, "\x00") + "\x00"; string(out.Stdout) != want || out.Status.ExitCode != 0 {
			t.Errorf("argv came back as %q (exit %d, stderr %q), want %q", out.Stdout, out.Status.ExitCode, out.Stderr, want)
		}
		script := `pwd; for i in $(seq 0 ` + fmt.Sprint(len(hostileStrings)-1) + `); do eval "printf '%s\0' \"\$H$i\""; done`
		st = e.start(t, Spec{Kind: KindCommand, Command: Shell(script), Cwd: cwd, Env: env})
		e.finish(t, st.ID)
		out, err = Result(ctx, e.c, e.inst, st.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := cwd + "\n" + strings.Join(hostileStrings, "\x00") + "\x00"; string(out.Stdout) != want {
			t.Errorf("cwd and env came back as %q (stderr %q), want %q", out.Stdout, out.Stderr, want)
		}
		if got := e.root(t, "ls /tmp"); strings.Contains(got, "pwned") {
			t.Errorf("a hostile string ran a command")
		}
	})

	t.Run("missing working directory is refused", func(t *testing.T) {
		before := e.count(t)
		_, err := e.starter.Start(ctx, e.c, e.inst, Spec{Kind: KindCommand, Command: Shell("true"), Cwd: "/no/such/dir"})
		if coded.CodeOf(err) != CodeInvalidArgument || !strings.Contains(err.Error(), "/no/such/dir") {
			t.Errorf("Start in a missing directory: %v, want invalid_argument naming it", err)
		}
		if after := e.count(t); after != before {
			t.Errorf("%d tasks before, %d after", before, after)
		}
	})

	t.Run("list and clear", func(t *testing.T) {
		list, err := List(ctx, e.c, e.inst)
		if err != nil {
			t.Fatal(err)
		}
		states := map[State]int{}
		var sawRunning bool
		for _, st := range list {
			states[st.State]++
			if st.ID == running.ID {
				sawRunning = st.State == StateRunning && st.Record.Key == "" && !st.Record.Created.IsZero()
			}
		}
		if !sawRunning || states[StateFinished] == 0 || len(list) < 10 {
			t.Errorf("List: %d tasks, states %v, sleep 60 running: %v", len(list), states, sawRunning)
		}
		n, err := Clear(ctx, e.c, e.inst)
		if err != nil || n != len(list) {
			t.Errorf("Clear: %d, %v, want %d", n, err, len(list))
		}
		if after := e.count(t); after != 0 {
			t.Errorf("%d tasks after Clear", after)
		}
		if procs := e.processes(t, "sleep 60"); len(procs) != 0 {
			t.Errorf("after Clear: %q still run", procs)
		}
		if got := e.status(t, running.ID); got.State != StateLost {
			t.Errorf("a cleared task: %s, want lost", got.State)
		}
	})
}

func (e *testEnv) count(t testing.TB) int {
	t.Helper()
	list, err := List(context.Background(), e.c, e.inst)
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

type countingExecutor struct {
	Executor
	n atomic.Int32
}

func (c *countingExecutor) Exec(ctx context.Context, instance string, req incus.ExecRequest) (*incus.ExecResult, error) {
	c.n.Add(1)
	return c.Executor.Exec(ctx, instance, req)
}
