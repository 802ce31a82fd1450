package holding_test

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/holding/holdingtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// world is a throwaway Incus project with the busybox test template
// built, and a home for the isx shell records.
type world struct {
	t      *testing.T
	client *incus.Client
	home   string
}

func newWorld(t *testing.T) *world {
	c := incustest.Project(t)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBox)
	return &world{t: t, client: c, home: t.TempDir()}
}

func (w *world) make(name, owner string, s holdingtest.Stamps) {
	w.t.Helper()
	holdingtest.Make(w.t, w.client, name, buildtest.BusyBox, owner, s)
}

func (w *world) exists(name string) (*incus.Instance, bool) {
	w.t.Helper()
	inst, _, err := w.client.GetInstance(context.Background(), name)
	if err != nil {
		return nil, false
	}
	return inst, true
}

func (w *world) instanceConfig(name string) map[string]string {
	w.t.Helper()
	inst, ok := w.exists(name)
	if !ok {
		w.t.Fatalf("instance %s is gone", name)
	}
	return inst.Config
}

// The orphan sweep with a fake clock: an orphan past orphan-grace-hours
// is destroyed; not before; never a kept one, one with a person in it, or
// one whose delegate still works; one kept only by a silent delegate is
// stopped after dormant-after-hours and destroyed dormant-grace-hours
// later; a dead session's instance is stamped orphaned when first noticed.
// The defaults of mcp.yaml apply (24 h, 24 h, 168 h).
//
// ISX-013, ISX-014, ISX-204, ISX-205, ISX-206, ISX-207, ISX-208, ISX-209,
// ISX-210, ISX-211.
func TestOrphanSweepFakeClock(t *testing.T) {
	e := newWorld(t)
	policy, err := config.LoadMCP(e.home) // no mcp.yaml: every default
	if err != nil {
		t.Fatal(err)
	}
	owner, err := instance.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	live, err := holding.StdioSession()
	if err != nil {
		t.Fatal(err)
	}
	dead := holdingtest.DeadSession(t)
	now := time.Now().UTC().Truncate(time.Second)
	old := now.Add(-25 * time.Hour)

	e.make("past-grace", owner, holdingtest.Stamps{Session: dead, OrphanedAt: old})
	e.make("within-grace", owner, holdingtest.Stamps{Session: dead, OrphanedAt: now.Add(-23 * time.Hour)})
	e.make("kept", owner, holdingtest.Stamps{Session: dead, OrphanedAt: old, Kept: true})
	e.make("attended", owner, holdingtest.Stamps{Session: dead, OrphanedAt: old})
	e.make("delegating", owner, holdingtest.Stamps{Session: dead, OrphanedAt: old})
	e.make("commanding", owner, holdingtest.Stamps{Session: dead, OrphanedAt: old})
	e.make("dead-holder", owner, holdingtest.Stamps{Session: dead})
	e.make("live-holder", owner, holdingtest.Stamps{Session: live})
	e.make("other-user", "somebody-else", holdingtest.Stamps{Session: dead, OrphanedAt: old})
	holdingtest.StartTask(t, e.client, "delegating", "sleep 3600", true)
	holdingtest.StartTask(t, e.client, "commanding", "sleep 3600", false)

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
	sweep := func() *holding.SweepReport {
		t.Helper()
		report, err := holding.Sweep(context.Background(), holding.SweepOptions{Client: e.client, Home: e.home, Owner: owner, Session: live, Policy: policy, Clock: fake})
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
	if _, ok := e.exists("other-user"); !ok {
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
	if inst, _ := e.exists("delegating"); inst == nil || !inst.Running() {
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
	inst, _ := e.exists("delegating")
	if inst.Running() || instance.ParseStamps(inst.Config).MCP.Dormant != instance.FormatTime(stoppedAt) {
		t.Fatalf("dormant instance: %s, stamps %v", inst.Status, inst.Config)
	}
	// ISX-014: destroyed 168 h after it was stopped, not at 167 h.
	fake.Set(stoppedAt.Add(167 * time.Hour))
	report = sweep()
	if _, ok := e.exists("delegating"); !ok || !strings.Contains(report.Left["delegating"], "dormant") {
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
		if _, ok := e.exists(name); !ok {
			t.Errorf("%s was destroyed", name)
		}
	}
	shell.Process.Kill() //nolint:errcheck // checked by the sweep below
	shell.Wait()         //nolint:errcheck // killed
	report = sweep()
	if !slices.Equal(report.Destroyed, []string{"attended"}) {
		t.Errorf("after the person left the sweep destroyed %v", report.Destroyed)
	}
	if _, ok := e.exists("kept"); !ok {
		t.Error("the kept orphan was destroyed")
	}
}
