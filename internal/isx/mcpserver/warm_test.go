package mcpserver

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/warm"
)

const warmTemplate = buildtest.BusyBox

// warmCopies are the warm pool's copies in the test's project.
func (e *env) warmCopies() []warm.Copy {
	e.t.Helper()
	owner, err := instance.CurrentOwner()
	if err != nil {
		e.t.Fatal(err)
	}
	copies, err := (&warm.Pool{Client: e.client, Owner: owner}).Copies(e.ctx())
	if err != nil {
		e.t.Fatal(err)
	}
	return copies
}

// waitWarm waits until the pool holds exactly n copies, all ready, of the
// template as built now; each look kicks the pool with a call.
func (e *env) waitWarm(s *session, n int) []warm.Copy { return e.waitWarmOf(s, warmTemplate, n) }

// waitWarmOf is waitWarm for another template.
func (e *env) waitWarmOf(s *session, template string, n int) []warm.Copy {
	e.t.Helper()
	var copies []warm.Copy
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	err := incustest.Poll(ctx, 500*time.Millisecond, func() bool {
		s.call("list_templates", map[string]any{})
		tpl := e.instanceConfig(template)
		copies = e.warmCopies()
		return len(copies) == n && !slices.ContainsFunc(copies, func(c warm.Copy) bool {
			return !c.Ready() || c.Build != instance.BuildStamp(tpl)
		})
	})
	if err != nil {
		e.t.Fatalf("the warm pool did not come to %d ready copies: %v", n, copyNames(copies))
	}
	return copies
}

func copyNames(copies []warm.Copy) []string {
	var out []string
	for _, c := range copies {
		out = append(out, c.Name+" filling:"+c.Filling+" "+c.Inst.Status)
	}
	return out
}

func uuids(copies []warm.Copy) []string {
	var out []string
	for _, c := range copies {
		out = append(out, c.Inst.Config["volatile.uuid"])
	}
	return out
}

// A copy taken from the pool is named, stamped, held, keyed and started
// exactly as a cold create's instance, and answers exec.
func TestWarmCopyIsMadeLikeAColdOne(t *testing.T) {
	e := newEnv(t, warmTemplate)
	e.writeMCP("templates: [" + warmTemplate + "]\n")
	s := e.start(sessionOptions{})
	args := func(hint, key string) map[string]any {
		return map[string]any{"template": warmTemplate, "name_hint": hint, "purpose": "the same purpose", "idempotency_key": key}
	}
	var cold, hot CreateInstanceResult
	s.ok("create_instance", args("cold", "key-cold"), &cold)

	e.writeMCP("templates: [" + warmTemplate + "]\nwarm:\n  " + warmTemplate + ": 1\n")
	pooled := e.waitWarm(s, 1)
	s.ok("create_instance", args("hot", "key-hot"), &hot)
	hotConfig, coldConfig := e.instanceConfig(hot.Instance), e.instanceConfig(cold.Instance)
	if hotConfig["volatile.uuid"] != pooled[0].Inst.Config["volatile.uuid"] {
		t.Fatalf("create_instance did not take the pool's copy %s", pooled[0].Name)
	}
	if !strings.HasPrefix(hot.Instance, "mcp-test-busybox-hot-") || len(hot.Instance) != len("mcp-test-busybox-hot-")+5 || hot.State != InstanceReady || hot.Status != "running" {
		t.Errorf("taken copy: %+v (a cold one: %+v)", hot, cold)
	}
	// Every stamp a cold create writes, with the same value but for the
	// key and the creation time; nothing of the pool's.
	for key := range union(hotConfig, coldConfig) {
		if !strings.HasPrefix(key, instance.Prefix) {
			continue
		}
		switch key {
		case instance.KeyMCPIdempotencyKey, instance.KeyCreated:
			if hotConfig[key] == "" {
				t.Errorf("taken copy lacks %s", key)
			}
		default:
			if hotConfig[key] != coldConfig[key] {
				t.Errorf("%s: taken copy %q, cold create %q", key, hotConfig[key], coldConfig[key])
			}
		}
	}
	if created := instance.ParseStamps(hotConfig).Created; time.Since(created) > time.Minute {
		t.Errorf("taken copy stamped created %s, not when it was taken", created)
	}
	hotInst, _, err := e.client.GetInstance(e.ctx(), hot.Instance)
	if err != nil {
		t.Fatal(err)
	}
	coldInst, _, err := e.client.GetInstance(e.ctx(), cold.Instance)
	if err != nil {
		t.Fatal(err)
	}
	if deviceTypes(hotInst.Devices) != deviceTypes(coldInst.Devices) {
		t.Errorf("devices: taken copy %s, cold create %s", deviceTypes(hotInst.Devices), deviceTypes(coldInst.Devices))
	}
	if got := strings.TrimSpace(e.execIn(hot.Instance, "hostname")); got != hot.Instance {
		t.Errorf("the taken copy calls itself %q", got)
	}
	var listed ListInstancesResult
	s.ok("list_instances", map[string]any{}, &listed)
	i := slices.IndexFunc(listed.Instances, func(v InstanceView) bool { return v.Instance == hot.Instance })
	if i < 0 || listed.Instances[i].State != InstanceReady || listed.Instances[i].Purpose != "the same purpose" {
		t.Errorf("list_instances: %+v", listed.Instances)
	}
	var again CreateInstanceResult
	s.ok("create_instance", args("hot", "key-hot"), &again)
	if again.Instance != hot.Instance || !again.Replayed {
		t.Errorf("a repeat of the key: %+v, want %s replayed", again, hot.Instance)
	}
}

func union(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// deviceTypes is "name=type ..." of an instance's own devices, sorted.
func deviceTypes(devices map[string]map[string]string) string {
	var out []string
	for name, d := range devices {
		out = append(out, name+"="+d["type"])
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// A copy of the template's build before a rebuild is never handed out;
// the pool is rebuilt with copies of the new build.
func TestWarmStaleCopiesAreNeverHandedOut(t *testing.T) {
	e := newEnv(t, warmTemplate)
	e.writeMCP("templates: [" + warmTemplate + "]\nwarm:\n  " + warmTemplate + ": 1\n")
	s := e.start(sessionOptions{})
	stale := e.waitWarm(s, 1)
	// As isx build does: a new instance renamed into the template's place.
	ctx := e.ctx()
	if err := e.client.CreateInstance(ctx, incus.InstanceCreate{Name: "rebuilt", Source: incus.CopySource(warmTemplate, true),
		Config: map[string]string{instance.KeyCreated: instance.FormatTime(time.Now().Add(time.Hour))}}); err != nil {
		t.Fatal(err)
	}
	if err := e.client.DeleteInstance(ctx, warmTemplate, true); err != nil {
		t.Fatal(err)
	}
	if err := e.client.RenameInstance(ctx, "rebuilt", warmTemplate); err != nil {
		t.Fatal(err)
	}
	var made CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": warmTemplate}, &made)
	if got := e.instanceConfig(made.Instance)["volatile.uuid"]; slices.Contains(uuids(stale), got) {
		t.Fatalf("create_instance handed out %s, a copy of the template's earlier build", stale[0].Name)
	}
	fresh := e.waitWarm(s, 1)
	if fresh[0].Name == stale[0].Name {
		t.Errorf("the stale copy %s is still in the pool", stale[0].Name)
	}
	s.ok("create_instance", map[string]any{"template": warmTemplate}, &made)
	if got := e.instanceConfig(made.Instance)["volatile.uuid"]; got != fresh[0].Inst.Config["volatile.uuid"] {
		t.Errorf("the fresh copy %s was not taken", fresh[0].Name)
	}
}

// Pooled copies are nobody's: list_instances and isx list never show
// them and max-instances never counts them, while a taken copy counts
// like any instance; removing the setting empties the pool.
func TestWarmCopiesAreNotListedOrCounted(t *testing.T) {
	e := newEnv(t, warmTemplate)
	e.writeMCP("templates: [" + warmTemplate + "]\nmax-instances: 1\nwarm:\n  " + warmTemplate + ": 2\n")
	s := e.start(sessionOptions{})
	pooled := e.waitWarm(s, 2)
	var listed ListInstancesResult
	s.ok("list_instances", map[string]any{}, &listed)
	if len(listed.Instances) != 0 {
		t.Errorf("list_instances shows pooled copies: %+v", listed.Instances)
	}
	if out := e.isxList(); strings.Contains(out, warm.Prefix) {
		t.Errorf("isx list shows pooled copies:\n%s", out)
	}
	var made CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": warmTemplate}, &made)
	if got := e.instanceConfig(made.Instance)["volatile.uuid"]; !slices.Contains(uuids(pooled), got) {
		t.Fatalf("create_instance did not take a pooled copy")
	}
	e.waitWarm(s, 2)
	s.refused("create_instance", map[string]any{"template": warmTemplate}, CodeLimit)
	if out := e.isxList(); !strings.Contains(out, made.Instance) || strings.Contains(out, warm.Prefix) {
		t.Errorf("isx list:\n%s", out)
	}
	e.writeMCP("templates: [" + warmTemplate + "]\nmax-instances: 1\n")
	e.waitWarm(s, 0)
}

// isxList is `isx list --json` as the user runs it.
func (e *env) isxList() string {
	e.t.Helper()
	cmd := exec.Command(isxBinary(e.t), "list", "--json")
	cmd.Env = e.environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("isx list: %v\n%s", err, out)
	}
	return string(out)
}

// kill -9 of isx mcp while its pool fills leaves copies stamped with its
// dead session, and the next isx mcp's pool removes every one of them.
func TestWarmKilledWhileFillingLeavesNothingBehind(t *testing.T) {
	e := newEnv(t, warmTemplate)
	e.writeMCP("templates: [" + warmTemplate + "]\n")
	s := e.start(sessionOptions{})
	e.writeMCP("templates: [" + warmTemplate + "]\nwarm:\n  " + warmTemplate + ": 8\n")
	s.call("list_templates", map[string]any{})
	// A copy is filled in a fraction of a second: look often.
	ctx, cancel := context.WithTimeout(e.ctx(), 3*time.Minute)
	defer cancel()
	err := incustest.Poll(ctx, 5*time.Millisecond, func() bool {
		return slices.ContainsFunc(e.warmCopies(), func(c warm.Copy) bool { return c.Filling == s.sessionID() })
	})
	if err != nil {
		t.Fatalf("no copy was seen being filled: %v", copyNames(e.warmCopies()))
	}
	s.kill()
	left := e.warmCopies()
	if !slices.ContainsFunc(left, func(c warm.Copy) bool { return c.Filling == s.sessionID() }) {
		t.Logf("the copy being filled was finished before the kill: %v", copyNames(left))
	}
	e.writeMCP("templates: [" + warmTemplate + "]\nwarm:\n  " + warmTemplate + ": 1\n")
	next := e.start(sessionOptions{})
	kept := e.waitWarm(next, 1)
	if kept[0].Filling != "" {
		t.Errorf("a dead filler's copy is kept: %v", copyNames(kept))
	}
	e.writeMCP("templates: [" + warmTemplate + "]\n")
	e.waitWarm(next, 0)
	list, err := e.client.Instances(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range list {
		if inst.Name != warmTemplate {
			t.Errorf("left behind: %s (%s)", inst.Name, inst.Status)
		}
	}
}
