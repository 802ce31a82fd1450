package mcpserver

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/holding/holdingtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// Sessions hold what they made; another session is refused until it
// adopts; adopt takes an orphan, and with force a live session's instance,
// whose old holder then gets nothing more; ending or killing a session
// orphans its instances and destroys nothing.
//
// ISX-037, ISX-039, ISX-050, ISX-052, ISX-053, ISX-200, ISX-201, ISX-203,
// ISX-204, ISX-046.
func TestSessionsAndAdoption(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\n")
	a := e.start(sessionOptions{name: "session-a"})
	// The oldest revision isx speaks works the same.
	b := e.start(sessionOptions{name: "session-b", protocol: "2025-03-26"})

	var x, y CreateInstanceResult
	a.ok("create_instance", map[string]any{"template": "tpl-test-busybox", "name_hint": "x"}, &x)
	a.ok("create_instance", map[string]any{"template": "tpl-test-busybox", "name_hint": "y", "purpose": "spike"}, &y)

	// ISX-039: another live session is refused, and sees it held.
	meta := b.refused("exec", map[string]any{"instance": x.Instance, "command": "true"}, CodeNotHeld)
	if meta["instance"] != x.Instance {
		t.Errorf("refusal meta = %v", meta)
	}
	var listB ListInstancesResult
	b.ok("list_instances", map[string]any{}, &listB)
	for _, i := range listB.Instances {
		if i.State != InstanceHeld || i.Holder != a.sessionID() {
			t.Errorf("session b sees %+v", i)
		}
	}
	// Without force a live session's instance is not taken.
	b.refused("adopt_instance", map[string]any{"instance": x.Instance}, CodeWrongState)
	// ISX-052: with force it is, and the old holder gets nothing more.
	var took AdoptInstanceResult
	b.ok("adopt_instance", map[string]any{"instance": x.Instance, "force": true}, &took)
	if !took.Adopted || took.PreviousSession != a.sessionID() {
		t.Errorf("adopt = %+v", took)
	}
	a.refused("exec", map[string]any{"instance": x.Instance, "command": "true"}, CodeNotHeld)
	a.refused("destroy_instance", map[string]any{"instance": x.Instance}, CodeNotHeld)
	b.ok("exec", map[string]any{"instance": x.Instance, "command": "true"}, nil)
	// Adopting what one holds changes nothing.
	b.ok("adopt_instance", map[string]any{"instance": x.Instance}, &took)
	if took.Adopted {
		t.Errorf("re-adopt = %+v", took)
	}

	// ISX-201, ISX-203: a clean end orphans, destroys nothing.
	aID := a.sessionID()
	a.close()
	cfg := e.instanceConfig(y.Instance)
	m := instance.ParseStamps(cfg).MCP
	at, session, ok := m.OrphanedAt()
	if !ok || session != aID || time.Since(at) > time.Minute || m.Label() != "orphaned" {
		t.Fatalf("after a clean end y's stamps = %+v", m)
	}
	var listed ListInstancesResult
	b.ok("list_instances", map[string]any{}, &listed)
	for _, i := range listed.Instances {
		if i.Instance == y.Instance && (i.State != InstanceOrphaned || i.OrphanedAt == "" || i.DestroyAfter == "") {
			t.Errorf("orphan listed as %+v", i)
		}
	}
	b.refused("exec", map[string]any{"instance": y.Instance, "command": "true"}, CodeNotHeld)
	// ISX-050: adopt takes it.
	b.ok("adopt_instance", map[string]any{"instance": y.Instance}, &took)
	if !took.Adopted || took.PreviousSession != aID {
		t.Errorf("adopt orphan = %+v", took)
	}
	b.ok("exec", map[string]any{"instance": y.Instance, "command": "true"}, nil)
	if label := instance.ParseStamps(e.instanceConfig(y.Instance)).MCP.Label(); label != "held: spike" {
		t.Errorf("label after adoption = %q", label)
	}

	// ISX-204: a killed session's instances are orphans too, stamped when
	// first noticed.
	c := e.start(sessionOptions{name: "session-c"})
	var z CreateInstanceResult
	c.ok("create_instance", map[string]any{"template": "tpl-test-busybox", "name_hint": "z"}, &z)
	c.kill()
	b.ok("list_instances", map[string]any{}, &listed)
	found := false
	for _, i := range listed.Instances {
		if i.Instance == z.Instance {
			found = true
			if i.State != InstanceOrphaned {
				t.Errorf("a killed session's instance is %s", i.State)
			}
		}
	}
	if !found {
		t.Fatalf("%s not listed", z.Instance)
	}
	incustest.WaitFor(t, "the dead session's instance to be stamped orphaned", 30*time.Second, func() bool {
		return instance.ParseStamps(e.instanceConfig(z.Instance)).MCP.Orphaned != ""
	})

	// ISX-037: another host user's instance is refused.
	ctx := e.ctx()
	if err := e.client.PatchInstance(ctx, x.Instance, "", incus.InstancePatch{Config: map[string]string{instance.KeyMCPOwner: "somebody-else"}}); err != nil {
		t.Fatal(err)
	}
	meta = b.refused("exec", map[string]any{"instance": x.Instance, "command": "true"}, CodeRefused)
	if msg := meta["message"].(string); !strings.Contains(msg, "somebody-else") {
		t.Errorf("refusal does not name the owner: %s", msg)
	}
	b.refused("adopt_instance", map[string]any{"instance": x.Instance, "force": true}, CodeRefused)
	b.ok("list_instances", map[string]any{}, &listed)
	for _, i := range listed.Instances {
		if i.Instance == x.Instance {
			t.Errorf("another user's instance is listed")
		}
	}
	// An instance the user made with isx branch is not the agent's.
	if err := (&instance.Manager{Client: e.client, Clock: clock.Real{}}).Branch(ctx, instance.BranchOptions{Name: "mine", From: "tpl-test-busybox", Owner: "root"}); err != nil {
		t.Fatal(err)
	}
	b.refused("exec", map[string]any{"instance": "mine", "command": "true"}, CodeNotFound)
	b.refused("adopt_instance", map[string]any{"instance": "mine"}, CodeNotFound)
}

// max-instances counts the host user's MCP instances across sessions,
// orphans and kept ones included, and not another host user's.
//
// ISX-056, ISX-057, ISX-058.
func TestMaxInstancesAcrossSessionsISX056(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\nmax-instances: 2\n")
	// Another host user holds two MCP instances in the same project.
	for _, name := range []string{"theirs-1", "theirs-2"} {
		e.mcpInstance(t, name, "somebody-else", holdingtest.Stamps{Session: "another-users-session"})
	}
	a := e.start(sessionOptions{})
	b := e.start(sessionOptions{})
	var made CreateInstanceResult
	a.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &made)
	b.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, nil)
	meta := a.refused("create_instance", map[string]any{"template": "tpl-test-busybox"}, CodeLimit)
	if !strings.Contains(meta["message"].(string), "max-instances") {
		t.Errorf("limit refusal: %v", meta["message"])
	}
	b.refused("create_instance", map[string]any{"template": "tpl-test-busybox"}, CodeLimit)
	if n := len(e.mcpInstances()); n != 4 {
		t.Fatalf("%d MCP instances, want the user's 2 and the other user's 2", n)
	}
	a.ok("keep_instance", map[string]any{"instance": made.Instance}, nil)
	b.refused("create_instance", map[string]any{"template": "tpl-test-busybox"}, CodeLimit)
	// The limit is read on every call: raising it takes effect at once.
	e.writeMCP("templates: [tpl-test-busybox]\nmax-instances: 3\n")
	b.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, nil)
}

// SIGTERM and SIGINT end a session cleanly: its instances are stamped
// orphaned, nothing is destroyed (ISX-201, ISX-203).
func TestSignalOrphansISX203(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\n")
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		s := e.start(sessionOptions{})
		var made CreateInstanceResult
		s.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &made)
		if err := s.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		incustest.WaitFor(t, "the server to exit", 30*time.Second, func() bool { return !holding.SessionAlive(s.sessionID()) })
		m := instance.ParseStamps(e.instanceConfig(made.Instance)).MCP
		if _, session, ok := m.OrphanedAt(); !ok || session != s.sessionID() {
			t.Errorf("after %v the instance's stamps are %+v", sig, m)
		}
		s.close()
	}
}
