package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
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
// (ISX-205..211): an orphan past orphan-grace-hours is destroyed, unless a
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
	views, err := userInstances(ctx, opts.Client, opts.Owner)
	if err != nil {
		return nil, err
	}
	sw := &sweeper{opts: opts, report: &SweepReport{Left: map[string]string{}}}
	var errs []error
	for _, v := range views {
		if err := sw.one(ctx, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", v.inst.Name, err))
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

func (sw *sweeper) one(ctx context.Context, v mcpView) error {
	name, m := v.inst.Name, v.stamps.MCP
	now := sw.opts.Clock.Now()
	switch v.holdingFor(sw.opts.Session) {
	case heldHere, heldElsewhere:
		return sw.leave(name, "held by a live session")
	}
	if m.Orphaned == "" {
		if err := sw.stamper().stampOrphaned(ctx, name, m.Session, now); err != nil {
			return err
		}
		sw.report.Noticed = append(sw.report.Noticed, name)
		return sw.leave(name, "orphaned just now")
	}
	at, ok := v.orphanedAt()
	switch {
	case !ok:
		return sw.leave(name, "its orphaned stamp cannot be read")
	case m.Kept != "":
		return sw.leave(name, "kept for the user")
	case now.Before(at.Add(sw.opts.Policy.OrphanGrace())):
		return sw.leave(name, "within orphan-grace-hours")
	case sw.attended(name):
		return sw.leave(name, "a person is in it (isx shell)")
	case v.marked():
		return sw.leave(name, "another session is acting on it")
	}
	if dormant, ok := v.dormantAt(); ok {
		if now.Before(dormant.Add(sw.opts.Policy.DormantGrace())) {
			return sw.leave(name, "dormant, within dormant-grace-hours")
		}
		return sw.destroy(ctx, name)
	}
	if v.inst.Running() {
		working, silentSince, err := sw.delegates(ctx, name)
		if err != nil {
			return sw.leave(name, "its tasks cannot be read: "+err.Error())
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
func (sw *sweeper) stillOrphaned(v mcpView) *Refusal {
	name := v.inst.Name
	switch {
	case v.holdingFor(sw.opts.Session) != orphaned:
		return refusef(CodeBusy, "%s was adopted", name)
	case v.stamps.MCP.Kept != "":
		return refusef(CodeBusy, "%s was kept", name)
	case sw.attended(name):
		return refusef(CodeBusy, "a person entered %s", name)
	}
	return nil
}

func (sw *sweeper) destroy(ctx context.Context, name string) error {
	err := sw.stamper().markAndAct(ctx, sw.opts.Session, name, stateDestroying, sw.stillOrphaned, func() error {
		err := sw.opts.Client.DeleteInstance(ctx, name, true)
		if errors.Is(err, incus.ErrNotFound) {
			return nil
		}
		return err
	})
	var refusal *Refusal
	if errors.As(err, &refusal) {
		return sw.leave(name, refusal.Message)
	}
	if err != nil {
		return err
	}
	sw.report.Destroyed = append(sw.report.Destroyed, name)
	return nil
}

func (sw *sweeper) stopDormant(ctx context.Context, name string) error {
	err := sw.stamper().markAndAct(ctx, sw.opts.Session, name, stateStopping, sw.stillOrphaned, func() error {
		return sw.opts.Client.StopInstance(ctx, name, incus.StopOptions{Force: true, Timeout: stopTimeout})
	})
	var refusal *Refusal
	if errors.As(err, &refusal) {
		return sw.leave(name, refusal.Message)
	}
	stamp := map[string]string{instance.KeyMCPState: "", instance.KeyMCPRunning: ""}
	if err == nil {
		stamp[instance.KeyMCPDormant] = formatTime(sw.opts.Clock.Now())
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
// and, if so, since when all of them have been silent: the newest change
// to any running delegate's run directory (its event log and output grow
// while it works), or its start.
func (sw *sweeper) delegates(ctx context.Context, name string) (working bool, silentSince time.Time, err error) {
	infos, err := task.List(ctx, sw.opts.Client, name)
	if err != nil {
		return false, time.Time{}, err
	}
	var dirs []string
	for _, info := range infos {
		if info.State != task.StateRunning || info.Kind() != task.KindDelegate {
			continue
		}
		working = true
		if info.Started.After(silentSince) {
			silentSince = info.Started
		}
		dirs = append(dirs, fmt.Sprintf("%s/%s/runs/%d", task.Dir, info.ID, info.Run))
	}
	if !working {
		return false, time.Time{}, nil
	}
	res, err := sw.opts.Client.Exec(ctx, name, incus.ExecRequest{
		Command: append([]string{"sh", "-c", activityScript, "isx-activity"}, dirs...),
		UID:     agentUID, GID: agentGID, Timeout: 30 * time.Second,
	})
	if err != nil {
		return true, silentSince, err
	}
	if secs, err := strconv.ParseInt(strings.TrimSpace(string(res.Stdout)), 10, 64); err == nil {
		if t := time.Unix(secs, 0); t.After(silentSince) {
			silentSince = t
		}
	}
	return true, silentSince, nil
}

// activityScript prints the newest modification time (epoch seconds) of
// the run directories given and what is in them.
const activityScript = `newest=0
for d; do
  for f in "$d" "$d"/*; do
    [ -e "$f" ] || continue
    t=$(stat -c %Y "$f" 2>/dev/null) || continue
    [ "$t" -gt "$newest" ] && newest=$t
  done
done
echo "$newest"`

// sweepAtStart runs the sweep once, with the real clock, when isx mcp
// starts; problems go to stderr, since no call is there to refuse.
func (s *Server) sweepAtStart(ctx context.Context) {
	policy, _, refusal := loadPolicy(s.opts.Home)
	if refusal != nil {
		s.warnf("orphan sweep skipped: %s", refusal.Message)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	report, err := Sweep(ctx, SweepOptions{
		Client: s.opts.Client, Home: s.opts.Home, Owner: s.opts.Owner, Session: s.opts.Session,
		Policy: policy, Clock: clock.Real{},
	})
	if err != nil {
		s.warnf("orphan sweep: %v", err)
	}
	if report != nil && (len(report.Destroyed) > 0 || len(report.Stopped) > 0) {
		s.warnf("orphan sweep destroyed %v and stopped %v as dormant", report.Destroyed, report.Stopped)
	}
}
