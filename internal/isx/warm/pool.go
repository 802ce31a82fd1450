// Package warm keeps a pool of ready copies of templates, as mcp.yaml's
// warm: asks, for a create to take instead of copying the template.
//
// A copy is an ordinary stopped instance of the project, named
// warm-<template>-<suffix> and stamped instance.TypeWarm, so that no list
// shows it and no limit counts it. Incus renames only a stopped instance,
// so the pool keeps its copies stopped: taking one renames it to the name
// a cold create would have chosen, gives it the config and devices a cold
// create would have, and starts it (instance.Manager.Branch with Warm).
// The rename is also what decides between two callers taking one copy:
// exactly one rename succeeds. What state the pool has lives in Incus
// alone: a process killed while it fills leaves copies stamped with its
// dead session, which the next round of any pool removes.
package warm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// DefaultInterval is how often a running pool looks again without being
// kicked: it notices a rebuilt template or an edited mcp.yaml at the
// latest then.
const DefaultInterval = 30 * time.Second

// Pool is the warm pool of one host user in one Incus project.
type Pool struct {
	Client *incus.Client
	// Clock paces Run; Random draws copy names. Both are required.
	Clock  clock.Clock
	Random io.Reader
	// Owner is the host user whose copies these are; Session marks the
	// copies this process is filling.
	Owner, Session string
	// Counts says how many ready copies of each template to keep; it is
	// called at every round, so an edit of mcp.yaml takes effect at the
	// next. Templates it leaves out keep none.
	Counts func() (map[string]int, error)
	// LockPath is a file all of the user's pools lock while they fill, so
	// that one fills at a time ("": no lock).
	LockPath string
	// Interval paces Run between kicks (0: DefaultInterval).
	Interval time.Duration
	// Warn is told of what goes wrong in the background (nil: dropped).
	Warn func(format string, args ...any)
	// Rounds, when set, is sent each finished round's error (nil for a
	// round that went well), for tests to wait on.
	Rounds chan<- error

	once sync.Once
	kick chan struct{}
	// empty says the last round ran without a setting and left no copy.
	empty atomic.Bool
}

// Copy is one copy of the pool as Incus lists it.
type Copy struct {
	Name, Template string
	// Build is the template's BuildStamp when the copy was made.
	Build string
	// Filling is the session still copying it ("" once it is ready).
	Filling string
	Inst    *incus.Instance
}

// Ready reports whether the copy may be taken.
func (c Copy) Ready() bool { return c.Filling == "" && c.Inst.Status == incus.StatusStopped }

// Copies lists the pool's copies, sorted by name.
func (p *Pool) Copies(ctx context.Context) ([]Copy, error) {
	list, err := p.Client.Instances(ctx)
	if err != nil {
		return nil, err
	}
	return copiesOf(list, p.Owner), nil
}

func copiesOf(list []incus.Instance, owner string) []Copy {
	var out []Copy
	for i := range list {
		inst := &list[i]
		config := inst.Config
		if config[instance.KeyType] != instance.TypeWarm || config[instance.KeyOwner] != owner {
			continue
		}
		out = append(out, Copy{
			Name: inst.Name, Template: config[instance.KeyTemplate], Build: config[instance.KeyWarm],
			Filling: config[instance.KeyWarmFilling], Inst: inst,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Pick names a ready copy of the template as it is built now, or ""
// when the pool has none: a copy of an earlier build is never picked.
// The caller takes it with instance.BranchOptions.Warm, and Kick refills.
func (p *Pool) Pick(ctx context.Context, template string) (string, error) {
	tpl, _, err := p.Client.GetInstance(ctx, template)
	if errors.Is(err, incus.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	build := instance.BuildStamp(tpl.Config)
	copies, err := p.Copies(ctx)
	if err != nil {
		return "", err
	}
	for _, c := range copies {
		if c.Template == template && c.Build == build && c.Ready() {
			return c.Name, nil
		}
	}
	return "", nil
}

// Kick asks Run for a round now (after a take, or an edit of mcp.yaml).
func (p *Pool) Kick() {
	select {
	case p.kicks() <- struct{}{}:
	default:
	}
}

func (p *Pool) kicks() chan struct{} {
	p.once.Do(func() { p.kick = make(chan struct{}, 1) })
	return p.kick
}

// Run keeps the pool until ctx ends: a round at once, then one at every
// kick and every Interval.
func (p *Pool) Run(ctx context.Context) {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	for {
		err := p.Round(ctx)
		if err != nil && ctx.Err() == nil {
			p.warnf("warm pool: %v", err)
		}
		if p.Rounds != nil {
			select {
			case p.Rounds <- err:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-p.kicks():
		case <-p.Clock.After(interval):
		}
	}
}

func (p *Pool) warnf(format string, args ...any) {
	if p.Warn != nil {
		p.Warn(format, args...)
	}
}

// Round brings the pool to what Counts says: it removes copies of dead
// fillers, stale copies (their template rebuilt or gone), copies of
// templates no longer warm and copies beyond the count, and then fills
// each template up to its count, one copy at a time. While another of
// the user's pools holds the lock, it does nothing: that one fills.
func (p *Pool) Round(ctx context.Context) error {
	counts, err := p.Counts()
	if err != nil {
		return err
	}
	// Without a warm: setting nobody fills this user's pool, so once a
	// round found it empty the next need not ask Incus (a round follows
	// every call).
	if len(counts) == 0 && p.empty.Load() {
		return nil
	}
	unlock, ok, err := p.lock()
	if err != nil || !ok {
		return err
	}
	defer unlock()
	list, err := p.Client.InstancesByName(ctx)
	if err != nil {
		return err
	}
	ready, kept, errs := p.prune(ctx, list, counts)
	p.empty.Store(len(counts) == 0 && kept == 0 && len(errs) == 0)
	for _, tpl := range sortedKeys(counts) {
		source, ok := list[tpl]
		if !ok {
			continue
		}
		// A project-local build is never used through MCP, so no copy of
		// it is kept either.
		if stamps := instance.ParseStamps(source.Config); !stamps.IsTemplate() || stamps.Source == "project-local" {
			continue
		}
		for have := ready[tpl]; have < counts[tpl] && ctx.Err() == nil; have++ {
			if err := p.fill(ctx, source); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	return errors.Join(errs...)
}

// prune removes what the pool must not keep and counts the ready copies
// it keeps, by template, and all it keeps.
func (p *Pool) prune(ctx context.Context, list map[string]*incus.Instance, counts map[string]int) (ready map[string]int, kept int, errs []error) {
	all := make([]incus.Instance, 0, len(list))
	for _, inst := range list {
		all = append(all, *inst)
	}
	ready = map[string]int{}
	for _, c := range copiesOf(all, p.Owner) {
		tpl, ok := list[c.Template]
		keep := false
		switch {
		case c.Filling != "":
			// A live filler is another process that took the lock after
			// this one read the list; leave its copy to it.
			keep = c.Filling != p.Session && holding.SessionAlive(c.Filling)
		case !ok || c.Build != instance.BuildStamp(tpl.Config) || !c.Ready():
		case ready[c.Template] < counts[c.Template]:
			ready[c.Template]++
			keep = true
		}
		if keep {
			kept++
			continue
		}
		if err := p.Client.DeleteInstance(ctx, c.Name, true); err != nil && !errors.Is(err, incus.ErrNotFound) {
			errs = append(errs, fmt.Errorf("removing warm copy %s: %w", c.Name, err))
		}
	}
	return ready, kept, errs
}

// fill makes one copy of the template, stamped with its build and, until
// the copy is done, with this session: a copy left by a filler that died
// is known by its dead session.
func (p *Pool) fill(ctx context.Context, tpl *incus.Instance) error {
	for range 5 {
		name, err := copyName(tpl.Name, p.Random)
		if err != nil {
			return err
		}
		config := instance.ClearMCP(tpl.Config)
		config[instance.KeyType] = instance.TypeWarm
		config[instance.KeyOwner] = p.Owner
		config[instance.KeyWarm] = instance.BuildStamp(tpl.Config)
		config[instance.KeyWarmFilling] = p.Session
		err = p.Client.CreateInstance(ctx, incus.InstanceCreate{Name: name, Source: incus.CopySource(tpl.Name, true), Config: config})
		if errors.Is(err, incus.ErrConflict) {
			continue
		}
		if err == nil {
			err = p.Client.PatchInstance(ctx, name, "", incus.InstancePatch{Config: map[string]string{instance.KeyWarmFilling: ""}})
		}
		if err != nil {
			cleanup := context.WithoutCancel(ctx)
			if deleteErr := p.Client.DeleteInstance(cleanup, name, true); deleteErr != nil && !errors.Is(deleteErr, incus.ErrNotFound) {
				err = errors.Join(err, deleteErr)
			}
			return fmt.Errorf("filling the warm pool of %s: %w", tpl.Name, err)
		}
		return nil
	}
	return fmt.Errorf("filling the warm pool of %s: no free name found", tpl.Name)
}

// Prefix starts every copy's name.
const Prefix = "warm-"

// copyName is warm-<template without tpl->-<suffix>, within Incus's 63
// characters.
func copyName(tpl string, random io.Reader) (string, error) {
	raw := make([]byte, 5)
	if _, err := io.ReadFull(random, raw); err != nil {
		return "", fmt.Errorf("drawing a warm copy's name: %w", err)
	}
	suffix := fmt.Sprintf("%x", raw)
	base := strings.TrimPrefix(tpl, "tpl-")
	if room := holding.MaxInstanceName - len(Prefix) - len(suffix) - 1; len(base) > room {
		base = strings.TrimRight(base[:room], "-")
	}
	return Prefix + base + "-" + suffix, nil
}

// lock takes LockPath without waiting; ok is false while another holds it.
func (p *Pool) lock() (unlock func(), ok bool, err error) {
	if p.LockPath == "" {
		return func() {}, true, nil
	}
	f, err := os.OpenFile(p.LockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("opening the warm pool's lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("locking the warm pool: %w", err)
	}
	return func() { f.Close() }, true, nil
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
