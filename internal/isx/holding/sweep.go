package holding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/task"
)

// SweepOptions say whose orphans a sweep looks at and by which rules.
type SweepOptions struct {
	Client *incus.Client
	// Home finds the isx shell records (instance.Attended).
	Home  string
	Owner string
	// Session is the sweeping session, which marks what it destroys or
	// stops (mark, re-read, act).
	Session string
	Policy  *config.MCP
	Clock   clock.Clock
	// Activity reads what the host proxy counted of an instance, which
	// tells a working delegate from a silent one. Nil: only a delegate's
	// start says when it was last heard of.
	Activity ActivityReader
}

// ActivityReader is what the sweep needs of the host proxy.
type ActivityReader interface {
	Activity(ctx context.Context, instance string) (proxy.Activity, error)
}

// SweepReport says what a sweep did, by instance name.
type SweepReport struct {
	// Noticed were orphans whose session had died unnoticed: they are
	// stamped orphaned now, and their grace starts now.
	Noticed []string
	// Destroyed were orphans past their grace (or dormant past theirs).
	Destroyed []string
	// Stopped were orphans past grace kept only by a delegate that showed
	// no activity for dormant-after-hours.
	Stopped []string
	// Left are orphans the sweep did not touch, with why.
	Left map[string]string
}

// Sweep is what the start of isx mcp does with the host user's orphans
// (ISX-205, ISX-206, ISX-207, ISX-208, ISX-209, ISX-210, ISX-211): an orphan past orphan-grace-hours is destroyed, unless a
// person is in it with isx shell, it was kept with keep_instance, or an
// agent it delegated to is still working. One kept only by a delegate
// that showed no activity for dormant-after-hours is stopped instead and
// stamped dormant; a dormant one is destroyed dormant-grace-hours after
// it was stopped. Every destroy and stop is decided again under a mark
// (mark, re-read, act), so a session adopting at the same moment wins or
// loses cleanly.
func Sweep(ctx context.Context, opts SweepOptions) (*SweepReport, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	views, err := instancesOf(ctx, opts.Client, opts.Owner)
	if err != nil {
		return nil, err
	}
	sw := &sweeper{opts: opts, report: &SweepReport{Left: map[string]string{}}}
	// A coordinator that is gone, or lost its grant, leaves orphans
	// behind although its session id never dies on its own.
	if gone := sw.stamper().goneCoordinators(ctx, views); len(gone) > 0 {
		orphans := slices.DeleteFunc(slices.Clone(views), func(v View) bool { return !gone[v.Stamps.MCP.Session] })
		if err := sw.stamper().stampOrphans(ctx, orphans); err != nil {
			return nil, err
		}
		if views, err = instancesOf(ctx, opts.Client, opts.Owner); err != nil {
			return nil, err
		}
	}
	var errs []error
	for _, v := range views {
		if err := sw.one(ctx, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", v.Inst.Name, err))
		}
	}
	sort.Strings(sw.report.Destroyed)
	sort.Strings(sw.report.Stopped)
	sort.Strings(sw.report.Noticed)
	return sw.report, errors.Join(errs...)
}

type sweeper struct {
	opts   SweepOptions
	report *SweepReport
}

func (sw *sweeper) stamper() stamper { return stamper{client: sw.opts.Client, clock: sw.opts.Clock} }

func (sw *sweeper) leave(name, why string) error {
	sw.report.Left[name] = why
	return nil
}

func (sw *sweeper) one(ctx context.Context, v View) error {
	name, m := v.Inst.Name, v.Stamps.MCP
	now := sw.opts.Clock.Now()
	switch v.HoldingFor(sw.opts.Session) {
	case HeldHere, HeldElsewhere:
		return sw.leave(name, "held by a live session")
	}
	if m.Orphaned == "" {
		if err := sw.stamper().stampOrphaned(ctx, name, m.Session, now); err != nil {
			return err
		}
		sw.report.Noticed = append(sw.report.Noticed, name)
		return sw.leave(name, "orphaned just now")
	}
	at, ok := v.OrphanedAt()
	switch {
	case !ok:
		return sw.leave(name, "its orphaned stamp cannot be read")
	case m.Kept != "":
		return sw.leave(name, "kept for the user")
	case now.Before(at.Add(sw.opts.Policy.OrphanGrace())):
		return sw.leave(name, "within orphan-grace-hours")
	case sw.attended(name):
		return sw.leave(name, "a person is in it (isx shell)")
	case v.Marked():
		return sw.leave(name, "another session is acting on it")
	}
	if dormant, ok := v.DormantAt(); ok {
		if now.Before(dormant.Add(sw.opts.Policy.DormantGrace())) {
			return sw.leave(name, "dormant, within dormant-grace-hours")
		}
		return sw.destroy(ctx, name)
	}
	if v.Inst.Running() {
		working, silentSince, err := sw.delegates(ctx, name)
		if err != nil {
			return sw.leave(name, "whether its delegate still works cannot be read: "+err.Error())
		}
		if working {
			if now.Sub(silentSince) < sw.opts.Policy.DormantAfter() {
				return sw.leave(name, "an agent it delegated to is still working")
			}
			return sw.stopDormant(ctx, name)
		}
	}
	return sw.destroy(ctx, name)
}

func (sw *sweeper) attended(name string) bool {
	return instance.Attended(sw.opts.Home, sw.opts.Client.ProjectName(), name)
}

// stillOrphaned is the decision made again under the mark.
func (sw *sweeper) stillOrphaned(v View) error {
	name := v.Inst.Name
	switch {
	case v.HoldingFor(sw.opts.Session) != Orphaned:
		return refuse(CodeBusy, name, "%s was adopted", name)
	case v.Stamps.MCP.Kept != "":
		return refuse(CodeBusy, name, "%s was kept", name)
	case sw.attended(name):
		return refuse(CodeBusy, name, "a person entered %s", name)
	}
	return nil
}

func (sw *sweeper) destroy(ctx context.Context, name string) error {
	err := sw.stamper().markAndAct(ctx, sw.opts.Session, name, StateDestroying, sw.stillOrphaned, func() error {
		err := sw.opts.Client.DeleteInstance(ctx, name, true)
		if errors.Is(err, incus.ErrNotFound) {
			return nil
		}
		return err
	})
	if why, ok := declined(err); ok {
		return sw.leave(name, why)
	}
	if err != nil {
		return err
	}
	sw.report.Destroyed = append(sw.report.Destroyed, name)
	return nil
}

func (sw *sweeper) stopDormant(ctx context.Context, name string) error {
	err := sw.stamper().markAndAct(ctx, sw.opts.Session, name, StateStopping, sw.stillOrphaned, func() error {
		return sw.opts.Client.StopInstance(ctx, name, incus.StopOptions{Force: true, Timeout: StopTimeout})
	})
	if why, ok := declined(err); ok {
		return sw.leave(name, why)
	}
	stamp := map[string]string{instance.KeyMCPState: "", instance.KeyMCPRunning: ""}
	if err == nil {
		stamp[instance.KeyMCPDormant] = instance.FormatTime(sw.opts.Clock.Now())
	}
	// The mark is lifted either way; the dormant stamp only after a stop.
	patchErr := sw.stamper().patch(context.WithoutCancel(ctx), name, "", stamp)
	if err = errors.Join(err, patchErr); err != nil {
		return err
	}
	sw.report.Stopped = append(sw.report.Stopped, name)
	return nil
}

// delegates reports whether a delegated agent still runs in the instance
// and, if so, since when it has been silent, as the host proxy counted
// it: not at all while a model call is in flight; else since the latest
// of the last model call, the last bytes of any traffic, the start of the
// proxy's counting (a proxy that restarted knows nothing older, and must
// not make a working agent look silent) and the newest delegate's start.
func (sw *sweeper) delegates(ctx context.Context, name string) (working bool, silentSince time.Time, err error) {
	infos, err := task.List(ctx, sw.opts.Client, name)
	if err != nil {
		return false, time.Time{}, err
	}
	for _, info := range infos {
		if info.State != task.StateRunning || info.Kind() != task.KindDelegate {
			continue
		}
		working = true
		if info.Started.After(silentSince) {
			silentSince = info.Started
		}
	}
	if !working || sw.opts.Activity == nil {
		return working, silentSince, nil
	}
	activity, err := sw.opts.Activity.Activity(ctx, name)
	if err != nil {
		return true, silentSince, fmt.Errorf("the host proxy cannot say how active it is: %w", err)
	}
	if activity.RequestsInFlight > 0 {
		return true, sw.opts.Clock.Now(), nil
	}
	for _, at := range []string{activity.CountingSince, activity.LastRequestAt, activity.LastResponseAt, activity.TrafficLastActivityAt} {
		t, err := proxy.ParseTime(at)
		if err != nil {
			return true, silentSince, fmt.Errorf("the host proxy's time %q: %w", at, err)
		}
		if t.After(silentSince) {
			silentSince = t
		}
	}
	return true, silentSince, nil
}

// StopTimeout is how long an instance may take to shut down cleanly
// before it is killed.
const StopTimeout = 5 * time.Second

// declined is the reason the decision made again under the mark gave for
// leaving the instance alone.
func declined(err error) (string, bool) {
	// Incus's own failures are coded too, but they are failures, not reasons.
	if c := coded.Of(err); c != nil && !incus.Reported(err) {
		return c.Message, true
	}
	return "", false
}
