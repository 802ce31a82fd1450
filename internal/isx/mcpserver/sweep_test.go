package mcpserver

import (
	"os"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/holding/holdingtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// mcpInstance makes an MCP instance of the busybox template, stamped as
// isx mcp leaves it.
func (e *env) mcpInstance(t *testing.T, name, owner string, s holdingtest.Stamps) {
	t.Helper()
	holdingtest.Make(t, e.client, name, buildtest.BusyBox, owner, s)
}

func exists(t *testing.T, e *env, name string) (*incus.Instance, bool) {
	t.Helper()
	inst, _, err := e.client.GetInstance(e.ctx(), name)
	if err != nil {
		return nil, false
	}
	return inst, true
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
	dead := holdingtest.DeadSession(t)
	e.mcpInstance(t, "two-hours", owner, holdingtest.Stamps{Session: dead, OrphanedAt: time.Now().Add(-2 * time.Hour)})
	e.mcpInstance(t, "half-hour", owner, holdingtest.Stamps{Session: dead, OrphanedAt: time.Now().Add(-30 * time.Minute)})
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
