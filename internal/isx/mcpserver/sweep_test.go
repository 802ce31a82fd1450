package mcpserver

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

// deadSession is the id of a process that has exited.
func deadSession(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id, err := SessionOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() //nolint:errcheck // killed on purpose
	if SessionAlive(id) {
		t.Fatalf("session %s still counts as alive", id)
	}
	return id
}

// orphanOpts describe an MCP instance made for a sweep test.
type orphanOpts struct {
	session    string
	orphanedAt time.Time // zero: not stamped orphaned
	kept       bool
}

func (e *env) mcpInstance(t *testing.T, name, owner string, o orphanOpts) {
	t.Helper()
	stamps := instance.MCPStamps{Session: o.session, Owner: owner, Purpose: "sweep " + name}
	if !o.orphanedAt.IsZero() {
		stamps.Orphaned = instance.OrphanedValue(o.orphanedAt, o.session)
	}
	if o.kept {
		stamps.Kept = instance.FormatTime(o.orphanedAt) + " " + o.session
	}
	m := &instance.Manager{Client: e.client, Clock: clock.Real{}}
	if err := m.Branch(e.ctx(), instance.BranchOptions{Name: name, From: buildtest.BusyBox, Owner: owner, Config: stamps.Config()}); err != nil {
		t.Fatal(err)
	}
}

// startTask starts a background command task in the instance, as the
// agent; as delegate it is then rewritten into a delegated agent's task,
// which is what keeps an orphan from the sweep.
func (e *env) startTask(t *testing.T, name, command string, delegate bool) string {
	t.Helper()
	started, err := task.NewStarter(clock.Real{}, cryptoRandom{}).Start(e.ctx(), e.client, name, task.Spec{Kind: task.KindCommand, Command: task.Shell(command)})
	if err != nil {
		t.Fatal(err)
	}
	id := started.Status.ID
	if delegate {
		dir := task.Dir + "/" + id
		res, err := e.client.Exec(e.ctx(), name, incus.ExecRequest{
			Command: []string{"sh", "-c", `sed -i 's/"kind":"command"/"kind":"delegate"/' "$1/task.json" && echo delegate >"$1/kind"`, "x", dir},
			UID:     agentUID, GID: agentGID, Timeout: time.Minute,
		})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("making %s a delegate: %v %s", id, err, res.Stderr)
		}
		info, err := task.Status(e.ctx(), e.client, name, id)
		if err != nil || info.Kind() != task.KindDelegate || info.State != task.StateRunning {
			t.Fatalf("the delegate task reads %+v, %v", info, err)
		}
	}
	return id
}

func exists(t *testing.T, e *env, name string) (*incus.Instance, bool) {
	t.Helper()
	inst, _, err := e.client.GetInstance(e.ctx(), name)
	if err != nil {
		return nil, false
	}
	return inst, true
}

// The orphan sweep with a fake clock: an orphan past orphan-grace-hours
// is destroyed; not before; never a kept one, one with a person in it, or
// one whose delegate still works; one kept only by a silent delegate is
// stopped after dormant-after-hours and destroyed dormant-grace-hours
// later; a dead session's instance is stamped orphaned when first noticed.
// The defaults of mcp.yaml apply (24 h, 24 h, 168 h).
//
// ISX-013, ISX-014, ISX-204..211.
func TestOrphanSweepFakeClock(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	policy, err := config.LoadMCP(e.home) // no mcp.yaml: every default
	if err != nil {
		t.Fatal(err)
	}
	owner, err := instance.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	live, err := StdioSession()
	if err != nil {
		t.Fatal(err)
	}
	dead := deadSession(t)
	now := time.Now().UTC().Truncate(time.Second)
	old := now.Add(-25 * time.Hour)

	e.mcpInstance(t, "past-grace", owner, orphanOpts{session: dead, orphanedAt: old})
	e.mcpInstance(t, "within-grace", owner, orphanOpts{session: dead, orphanedAt: now.Add(-23 * time.Hour)})
	e.mcpInstance(t, "kept", owner, orphanOpts{session: dead, orphanedAt: old, kept: true})
	e.mcpInstance(t, "attended", owner, orphanOpts{session: dead, orphanedAt: old})
	e.mcpInstance(t, "delegating", owner, orphanOpts{session: dead, orphanedAt: old})
	e.mcpInstance(t, "commanding", owner, orphanOpts{session: dead, orphanedAt: old})
	e.mcpInstance(t, "dead-holder", owner, orphanOpts{session: dead})
	e.mcpInstance(t, "live-holder", owner, orphanOpts{session: live})
	e.mcpInstance(t, "other-user", "somebody-else", orphanOpts{session: dead, orphanedAt: old})
	e.startTask(t, "delegating", "sleep 3600", true)
	e.startTask(t, "commanding", "sleep 3600", false)

	// A person in "attended": an isx shell's record, alive while the
	// process lives.
	shell := exec.Command("sleep", "3600")
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	defer shell.Process.Kill() //nolint:errcheck // also ended below
	release, err := instance.MarkShell(e.home, e.client.ProjectName(), "attended", shell.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer release() //nolint:errcheck // the sweep removes it once the process is gone

	fake := clock.NewFake(now)
	sweep := func() *SweepReport {
		t.Helper()
		report, err := Sweep(context.Background(), SweepOptions{Client: e.client, Home: e.home, Owner: owner, Session: live, Policy: policy, Clock: fake})
		if err != nil {
			t.Fatalf("sweep at %s: %v", fake.Now(), err)
		}
		return report
	}

	report := sweep()
	if !slices.Equal(report.Destroyed, []string{"commanding", "past-grace"}) {
		t.Errorf("first sweep destroyed %v (left: %v)", report.Destroyed, report.Left)
	}
	for name, why := range map[string]string{
		"within-grace": "within orphan-grace-hours", "kept": "kept", "attended": "isx shell",
		"delegating": "still working", "live-holder": "live session", "dead-holder": "orphaned just now",
	} {
		if !strings.Contains(report.Left[name], why) {
			t.Errorf("%s: left because %q, want %q", name, report.Left[name], why)
		}
	}
	if _, ok := exists(t, e, "other-user"); !ok {
		t.Error("another host user's orphan was swept")
	}
	if !slices.Equal(report.Noticed, []string{"dead-holder"}) {
		t.Errorf("noticed %v", report.Noticed)
	}
	at, _, ok := instance.ParseStamps(e.instanceConfig("dead-holder")).MCP.OrphanedAt()
	if !ok || !at.Equal(now) {
		t.Errorf("dead-holder stamped orphaned at %v", at)
	}

	// ISX-013: silent for 23 h is not yet dormant.
	fake.Set(now.Add(23 * time.Hour))
	report = sweep()
	if inst, _ := exists(t, e, "delegating"); inst == nil || !inst.Running() {
		t.Fatalf("the delegating orphan was touched after 23 h of silence")
	}
	if !slices.Contains(report.Destroyed, "within-grace") {
		t.Errorf("within-grace (orphaned 46 h) not destroyed: %v", report.Left["within-grace"])
	}
	// After 24 h of silence it is stopped and stamped dormant.
	stoppedAt := now.Add(24*time.Hour + time.Minute)
	fake.Set(stoppedAt)
	report = sweep()
	if !slices.Equal(report.Stopped, []string{"delegating"}) {
		t.Fatalf("stopped %v; left %v", report.Stopped, report.Left)
	}
	// The dead session's instance, noticed 24 h ago, is past its grace.
	if !slices.Equal(report.Destroyed, []string{"dead-holder"}) {
		t.Errorf("after 24 h the sweep destroyed %v; dead-holder: %v", report.Destroyed, report.Left["dead-holder"])
	}
	inst, _ := exists(t, e, "delegating")
	if inst.Running() || instance.ParseStamps(inst.Config).MCP.Dormant != instance.FormatTime(stoppedAt) {
		t.Fatalf("dormant instance: %s, stamps %v", inst.Status, inst.Config)
	}
	// ISX-014: destroyed 168 h after it was stopped, not at 167 h.
	fake.Set(stoppedAt.Add(167 * time.Hour))
	report = sweep()
	if _, ok := exists(t, e, "delegating"); !ok || !strings.Contains(report.Left["delegating"], "dormant") {
		t.Fatalf("the dormant instance went at 167 h: %v", report.Left["delegating"])
	}
	fake.Set(stoppedAt.Add(168 * time.Hour))
	report = sweep()
	if !slices.Contains(report.Destroyed, "delegating") {
		t.Errorf("the dormant instance was not destroyed after 168 h: %v", report.Left["delegating"])
	}
	// ISX-207, ISX-209: kept and attended stay; attended goes once the
	// person has left.
	for _, name := range []string{"kept", "attended", "live-holder"} {
		if _, ok := exists(t, e, name); !ok {
			t.Errorf("%s was destroyed", name)
		}
	}
	shell.Process.Kill() //nolint:errcheck // checked by the sweep below
	shell.Wait()         //nolint:errcheck // killed
	report = sweep()
	if !slices.Equal(report.Destroyed, []string{"attended"}) {
		t.Errorf("after the person left the sweep destroyed %v", report.Destroyed)
	}
	if _, ok := exists(t, e, "kept"); !ok {
		t.Error("the kept orphan was destroyed")
	}
}

// ISX-205, ISX-206: the next isx mcp to start sweeps, with the real clock:
// an orphan past grace goes, a younger one stays.
func TestSweepAtStartISX205(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("orphan-grace-hours: 1\n")
	owner, err := instance.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	dead := deadSession(t)
	e.mcpInstance(t, "two-hours", owner, orphanOpts{session: dead, orphanedAt: time.Now().Add(-2 * time.Hour)})
	e.mcpInstance(t, "half-hour", owner, orphanOpts{session: dead, orphanedAt: time.Now().Add(-30 * time.Minute)})
	s := e.start(sessionOptions{})
	incustest.WaitFor(t, "the start of isx mcp to sweep the old orphan", time.Minute, func() bool {
		_, ok := exists(t, e, "two-hours")
		return !ok
	})
	// The server ends only once its sweep has.
	s.close()
	if _, ok := exists(t, e, "half-hour"); !ok {
		t.Error("an orphan within its grace was destroyed")
	}
	if _, err := os.Stat(e.mcpPath()); err != nil {
		t.Fatal(err)
	}
}
