package warm_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/warm"
)

const tpl = buildtest.BusyBox

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newPool is a pool of the user "alice" in a throwaway project with the
// busybox template built, keeping counts[tpl] copies.
func newPool(t *testing.T, c *incus.Client, counts map[string]int) *warm.Pool {
	return &warm.Pool{
		Client: c, Clock: clock.NewFake(time.Date(2033, 1, 1, 0, 0, 0, 0, time.UTC)), Random: rand.Reader,
		Owner: "alice", Session: "stdio:1:1",
		Counts:   func() (map[string]int, error) { return counts, nil },
		LockPath: filepath.Join(t.TempDir(), "warm.lock"),
	}
}

// project is a throwaway Incus project with the busybox template built.
func project(t *testing.T) *incus.Client {
	t.Helper()
	c := incustest.Project(t)
	buildtest.Build(t, c, buildtest.Templates(t), tpl)
	return c
}

func copies(t *testing.T, p *warm.Pool) []warm.Copy {
	t.Helper()
	list, err := p.Copies(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func names(list []warm.Copy) []string {
	var out []string
	for _, c := range list {
		out = append(out, c.Name)
	}
	return out
}

func round(t *testing.T, p *warm.Pool) {
	t.Helper()
	if err := p.Round(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

// A round fills to the count with stopped copies stamped with the
// template's build, keeps them at the next round, trims to a lower count
// and empties the pool when the setting goes.
func TestRoundFillsTrimsAndEmpties(t *testing.T) {
	c := project(t)
	counts := map[string]int{tpl: 2}
	p := newPool(t, c, counts)
	round(t, p)
	first := copies(t, p)
	if len(first) != 2 {
		t.Fatalf("copies after a round: %v", names(first))
	}
	template, _, err := c.GetInstance(testContext(t), tpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range first {
		stamps := instance.ParseStamps(cp.Inst.Config)
		if !cp.Ready() || cp.Template != tpl || cp.Build != instance.BuildStamp(template.Config) || stamps.Managed() || stamps.Owner != "alice" {
			t.Errorf("copy %s: %s %+v", cp.Name, cp.Inst.Status, cp)
		}
	}
	round(t, p)
	if again := names(copies(t, p)); !slices.Equal(again, names(first)) {
		t.Errorf("a second round changed a full pool: %v, then %v", names(first), again)
	}
	counts[tpl] = 1
	round(t, p)
	if left := copies(t, p); len(left) != 1 {
		t.Errorf("count 1 left %v", names(left))
	}
	delete(counts, tpl)
	round(t, p)
	if left := copies(t, p); len(left) != 0 {
		t.Errorf("without the setting the pool kept %v", names(left))
	}
}

// A copy of an earlier build is never picked, and the next round
// replaces it with a copy of the build there is now.
func TestPickNeverHandsOutAStaleCopy(t *testing.T) {
	c := project(t)
	ctx := testContext(t)
	p := newPool(t, c, map[string]int{tpl: 1})
	round(t, p)
	stale := copies(t, p)
	if got, err := p.Pick(ctx, tpl); err != nil || got != stale[0].Name {
		t.Fatalf("Pick before the rebuild: %q, %v (pool %v)", got, err, names(stale))
	}
	rebuild(t, c)
	if got, err := p.Pick(ctx, tpl); err != nil || got != "" {
		t.Fatalf("Pick after the rebuild: %q, %v; the pool's copy is of the old build", got, err)
	}
	round(t, p)
	fresh := copies(t, p)
	if len(fresh) != 1 || fresh[0].Name == stale[0].Name {
		t.Fatalf("after the rebuild the pool is %v (was %v)", names(fresh), names(stale))
	}
	if got, err := p.Pick(ctx, tpl); err != nil || got != fresh[0].Name {
		t.Errorf("Pick of the fresh copy: %q, %v", got, err)
	}
}

// rebuild puts a new build of the template in place as isx build does:
// a new instance renamed into the template's name, stamped anew.
func rebuild(t *testing.T, c *incus.Client) {
	t.Helper()
	ctx := testContext(t)
	if err := c.CreateInstance(ctx, incus.InstanceCreate{Name: "rebuilt", Source: incus.CopySource(tpl, true),
		Config: map[string]string{instance.KeyCreated: instance.FormatTime(time.Now().Add(time.Hour))}}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteInstance(ctx, tpl, true); err != nil {
		t.Fatal(err)
	}
	if err := c.RenameInstance(ctx, "rebuilt", tpl); err != nil {
		t.Fatal(err)
	}
}

// A copy a killed filler left (stamped with its dead session) is
// removed by the next round of any pool; a live filler's is left alone.
func TestDeadFillersCopyIsRemoved(t *testing.T) {
	c := project(t)
	ctx := testContext(t)
	p := newPool(t, c, map[string]int{tpl: 1})
	round(t, p)
	ready := copies(t, p)[0]
	for name, session := range map[string]string{"warm-dead": "stdio:2147483646:1", "warm-alive": "coordinator-x"} {
		if err := c.CreateInstance(ctx, incus.InstanceCreate{Name: name, Source: incus.CopySource(ready.Name, true),
			Config: map[string]string{instance.KeyWarmFilling: session}}); err != nil {
			t.Fatal(err)
		}
	}
	round(t, p)
	got := names(copies(t, p))
	if !slices.Equal(got, []string{"warm-alive", ready.Name}) {
		t.Errorf("after a round the pool is %v; want the live filler's copy and %s", got, ready.Name)
	}
}

// Run rounds at once, at every kick and every interval of its clock, and
// ends with its context.
func TestRunRoundsOnKicksAndTicks(t *testing.T) {
	c := project(t)
	counts := map[string]int{}
	p := newPool(t, c, counts)
	fake := p.Clock.(*clock.Fake)
	rounds := make(chan error)
	p.Rounds = rounds
	p.Interval = time.Minute
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	next := func(what string) {
		t.Helper()
		select {
		case err := <-rounds:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("no round %s", what)
		}
	}
	next("at the start")
	counts[tpl] = 1
	p.Kick()
	next("after a kick")
	if got := copies(t, p); len(got) != 1 {
		t.Fatalf("after the kicked round: %v", names(got))
	}
	delete(counts, tpl)
	if err := fake.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fake.Advance(time.Minute)
	next("after an interval")
	if got := copies(t, p); len(got) != 0 {
		t.Errorf("after the setting went: %v", names(got))
	}
	cancel()
	<-done
}

// Taking a copy another caller took first copies the template instead;
// a name already in use refuses as for a cold create and leaves the copy
// in the pool.
func TestTakeOfAGoneCopyOrATakenName(t *testing.T) {
	c := project(t)
	ctx := testContext(t)
	p := newPool(t, c, map[string]int{tpl: 1})
	round(t, p)
	pooled := copies(t, p)[0]
	m := &instance.Manager{Client: c, Clock: clock.Real{}}
	opts := instance.BranchOptions{Name: "first", From: tpl, Owner: "alice", Warm: pooled.Name}
	if err := m.Branch(ctx, opts); err != nil {
		t.Fatal(err)
	}
	opts.Name = "second"
	if err := m.Branch(ctx, opts); err != nil {
		t.Fatalf("taking a copy already taken: %v", err)
	}
	first, _, err := c.GetInstance(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := c.GetInstance(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	if first.Config["volatile.uuid"] != pooled.Inst.Config["volatile.uuid"] || second.Config["volatile.uuid"] == pooled.Inst.Config["volatile.uuid"] {
		t.Errorf("first should be the pooled copy and second a copy of the template")
	}
	for _, inst := range []*incus.Instance{first, second} {
		s := instance.ParseStamps(inst.Config)
		if !inst.Running() || s.Type != instance.TypeInstance || s.Owner != "alice" || inst.Config[instance.KeyWarm] != "" {
			t.Errorf("%s: %s %+v", inst.Name, inst.Status, s)
		}
	}
	round(t, p)
	refill := copies(t, p)[0]
	opts.Name, opts.Warm = "first", refill.Name
	if err := m.Branch(ctx, opts); coded.CodeOf(err) != instance.CodeExists {
		t.Fatalf("taking a copy under a name in use: %v", err)
	}
	if got := names(copies(t, p)); !slices.Equal(got, []string{refill.Name}) {
		t.Errorf("after the refused take the pool is %v", got)
	}
}
