// Package holdingtest makes the MCP instances and sessions the tests of
// the holding domain start from: sessions that have ended, instances
// stamped as isx mcp leaves them, and tasks running in them.
package holdingtest

import (
	"context"
	"crypto/rand"
	"os/exec"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

// DeadSession is the id of a process that has exited.
func DeadSession(t testing.TB) string {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id, err := holding.SessionOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() //nolint:errcheck // killed on purpose
	if holding.SessionAlive(id) {
		t.Fatalf("session %s still counts as alive", id)
	}
	return id
}

// Stamps say how an MCP instance made for a test is held.
type Stamps struct {
	Session    string
	OrphanedAt time.Time // zero: not stamped orphaned
	Kept       bool
}

// Make branches instance name of owner from the built template from,
// stamped as isx mcp leaves it.
func Make(t testing.TB, c *incus.Client, name, from, owner string, s Stamps) {
	t.Helper()
	stamps := instance.MCPStamps{Session: s.Session, Owner: owner, Purpose: "sweep " + name}
	if !s.OrphanedAt.IsZero() {
		stamps.Orphaned = instance.OrphanedValue(s.OrphanedAt, s.Session)
	}
	if s.Kept {
		stamps.Kept = instance.FormatTime(s.OrphanedAt) + " " + s.Session
	}
	m := &instance.Manager{Client: c, Clock: clock.Real{}}
	if err := m.Branch(testContext(t), instance.BranchOptions{Name: name, From: from, Owner: owner, Config: stamps.Config()}); err != nil {
		t.Fatal(err)
	}
}

// StartTask starts a background command task in the instance, as the
// agent; as delegate it is then rewritten into a delegated agent's task,
// which is what keeps an orphan from the sweep.
func StartTask(t testing.TB, c *incus.Client, name, command string, delegate bool) string {
	t.Helper()
	ctx := testContext(t)
	started, err := task.NewStarter(clock.Real{}, rand.Reader).Start(ctx, c, name, task.Spec{Kind: task.KindCommand, Command: task.Shell(command)})
	if err != nil {
		t.Fatal(err)
	}
	id := started.Status.ID
	if !delegate {
		return id
	}
	dir := task.Dir + "/" + id
	res, err := c.Exec(ctx, name, incus.ExecRequest{
		Command: []string{"sh", "-c", `sed -i 's/"kind":"command"/"kind":"delegate"/' "$1/task.json" && echo delegate >"$1/kind"`, "x", dir},
		UID:     task.AgentUID, GID: task.AgentGID, Timeout: time.Minute,
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("making %s a delegate: %v %s", id, err, res.Stderr)
	}
	info, err := task.Status(ctx, c, name, id)
	if err != nil || info.Kind() != task.KindDelegate || info.State != task.StateRunning {
		t.Fatalf("the delegate task reads %+v, %v", info, err)
	}
	return id
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
