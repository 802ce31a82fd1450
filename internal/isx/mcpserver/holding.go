package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// Every tool that acts on an instance reads its stamps afresh and checks
// that it is an MCP instance of this host user held by this session.
// Changes of holder go through a PATCH guarded by the ETag of the read they
// were decided on, followed by a fresh read to see the change stuck (mark,
// re-read, act): of two sessions racing for an instance exactly one wins.

// lookup reads an MCP instance of this host user. name was checked
// against InstanceName's schema when the call's arguments were decoded.
func (s *Server) lookup(ctx context.Context, name string) (mcpView, string, *Refusal) {
	inst, etag, err := s.opts.Client.GetInstance(ctx, name)
	if errors.Is(err, incus.ErrNotFound) {
		return mcpView{}, "", notMCP(name)
	}
	if err != nil {
		return mcpView{}, "", asRefusal(err).on(name, "")
	}
	v := viewOf(inst)
	switch {
	case !v.isMCP():
		return v, "", notMCP(name)
	case v.stamps.MCP.Owner != s.opts.Owner:
		return v, "", refusef(CodeRefused, "instance %s belongs to host user %s, not %s; isx mcp never acts on another user's instances", name, v.stamps.MCP.Owner, s.opts.Owner).on(name, "")
	case v.marked():
		return v, "", refusef(CodeBusy, "instance %s is being %s by session %s", name, map[string]string{stateDestroying: "destroyed", stateStopping: "stopped"}[v.state], v.marker).on(name, "")
	}
	return v, etag, nil
}

func notMCP(name string) *Refusal {
	return refusef(CodeNotFound, "there is no MCP instance named %s; list_instances shows yours (instances the user made with isx branch are not available to agents)", name).on(name, "")
}

// held reads an instance this session holds.
func (s *Server) held(ctx context.Context, name string) (mcpView, string, *Refusal) {
	v, etag, refusal := s.lookup(ctx, name)
	if refusal != nil {
		return v, etag, refusal
	}
	switch v.holdingFor(s.opts.Session) {
	case heldElsewhere:
		return v, etag, refusef(CodeNotHeld, "instance %s is held by another live session (%s); adopt_instance with force: true takes it from that session", name, v.stamps.MCP.Session).on(name, "")
	case orphaned:
		return v, etag, refusef(CodeNotHeld, "instance %s is an orphan (the session that held it ended); adopt_instance takes it back, with its tasks", name).on(name, "")
	}
	if v.creating() {
		if _, busy := s.inflight.Load(name); busy {
			return v, etag, refusef(CodeBusy, "instance %s is still being created by another call of this session", name).on(name, "")
		}
		return v, etag, refusef(CodeWrongState, "instance %s was not finished: repeat create_instance with its idempotency key to finish it, or destroy_instance it", name).on(name, "")
	}
	return v, etag, nil
}

// heldRunning reads an instance this session holds that is running.
func (s *Server) heldRunning(ctx context.Context, name string) (mcpView, string, *Refusal) {
	v, etag, refusal := s.held(ctx, name)
	if refusal == nil && !v.inst.Running() {
		refusal = refusef(CodeWrongState, "instance %s is %s; start_instance it first", name, strings.ToLower(v.inst.Status)).on(name, "")
	}
	return v, etag, refusal
}

// maxAttempts bounds retries of a guarded write that lost a race.
const maxAttempts = 5

// update changes an instance's config guarded by the ETag of a fresh read,
// retrying when something else changed it in between. change decides from
// the current stamps; an empty patch writes nothing.
func (s *Server) update(ctx context.Context, name string, change func(v mcpView) (map[string]string, error)) (mcpView, error) {
	for range maxAttempts {
		inst, etag, err := s.opts.Client.GetInstance(ctx, name)
		if err != nil {
			return mcpView{}, err
		}
		v := viewOf(inst)
		changes, err := change(v)
		if err != nil || len(changes) == 0 {
			return v, err
		}
		err = s.stamper().patch(ctx, name, etag, changes)
		if errors.Is(err, incus.ErrConflict) {
			continue
		}
		if err != nil {
			return v, err
		}
		for k, value := range changes {
			if value == "" {
				delete(inst.Config, k)
			} else {
				inst.Config[k] = value
			}
		}
		return viewOf(inst), nil
	}
	return mcpView{}, refusef(CodeBusy, "instance %s kept changing while isx tried to update it; retry", name).on(name, "")
}

// busyWait bounds how long a write waits for an operation Incus is
// running on the instance (a start, a stop) to end.
const busyWait = 30 * time.Second

// stamper writes an instance's stamps with guarded PATCHes, waiting on its
// clock while Incus is busy with the instance. The server and the sweep
// share it.
type stamper struct {
	client *incus.Client
	clock  clock.Clock
}

func (s *Server) stamper() stamper { return stamper{client: s.opts.Client, clock: s.opts.Clock} }

// patch writes config keys guarded by etag. While Incus runs another
// operation on the instance (it answers "Instance is busy running a …
// operation") it waits and tries again.
func (st stamper) patch(ctx context.Context, name, etag string, changes map[string]string) error {
	deadline := st.clock.Now().Add(busyWait)
	for {
		err := st.client.PatchInstance(ctx, name, etag, incus.InstancePatch{Config: changes})
		if !instanceBusy(err) || st.clock.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-st.clock.After(100 * time.Millisecond):
		}
	}
}

// instanceBusy recognises Incus refusing a change while another operation
// runs on the instance.
func instanceBusy(err error) bool {
	return err != nil && strings.Contains(err.Error(), "is busy running")
}

// takeOver makes this session the holder of an orphan (or, with
// fromLive, of another live session's instance). It returns the instance
// as taken and the session that held it before ("" when this one did).
func (s *Server) takeOver(ctx context.Context, name string, fromLive bool) (mcpView, string, *Refusal) {
	for range maxAttempts {
		v, etag, refusal := s.lookup(ctx, name)
		if refusal != nil {
			return v, "", refusal
		}
		previous := v.stamps.MCP.Session
		switch v.holdingFor(s.opts.Session) {
		case heldHere:
			return v, "", nil
		case heldElsewhere:
			if !fromLive {
				return v, "", refusef(CodeWrongState, "instance %s is held by another live session (%s); pass force: true to take it (that session loses it)", name, previous).on(name, "")
			}
		}
		changes := map[string]string{
			instance.KeyMCPSession:  s.opts.Session,
			instance.KeyMCPOrphaned: "",
			instance.KeyMCPDormant:  "",
		}
		if v.state == stateDestroying || v.state == stateStopping {
			changes[instance.KeyMCPState] = "" // a dead session's unfinished mark
		}
		err := s.stamper().patch(ctx, name, etag, changes)
		if errors.Is(err, incus.ErrConflict) {
			continue
		}
		if err != nil {
			return v, "", asRefusal(err).on(name, "")
		}
		// Re-read: the guarded write won, so this shows it unless another
		// session took the instance since, which it then has.
		after, _, refusal := s.lookup(ctx, name)
		if refusal != nil {
			return after, "", refusal
		}
		if after.holdingFor(s.opts.Session) == heldHere {
			return after, previous, nil
		}
	}
	return mcpView{}, "", refusef(CodeBusy, "another session was taking instance %s at the same time; retry", name).on(name, "")
}

// markAndAct marks the instance for this session (destroying or
// stopping) with a guarded write decided by allow, re-reads it to see the
// mark stuck, and only then acts. Nobody else adopts or acts on a marked
// instance while this session lives.
func (s *Server) markAndAct(ctx context.Context, name, mark string, allow func(v mcpView) *Refusal, act func() error) error {
	return s.stamper().markAndAct(ctx, s.opts.Session, name, mark, allow, act)
}

func (st stamper) markAndAct(ctx context.Context, session, name, mark string, allow func(v mcpView) *Refusal, act func() error) error {
	value := mark + " " + session
	for range maxAttempts {
		inst, etag, err := st.client.GetInstance(ctx, name)
		if err != nil {
			return err
		}
		v := viewOf(inst)
		if refusal := allow(v); refusal != nil {
			return refusal
		}
		err = st.patch(ctx, name, etag, map[string]string{instance.KeyMCPState: value})
		if errors.Is(err, incus.ErrConflict) {
			continue
		}
		if err != nil {
			return err
		}
		again, _, err := st.client.GetInstance(ctx, name)
		if err != nil {
			return err
		}
		if instance.ParseStamps(again.Config).MCP.State != value {
			continue
		}
		return act()
	}
	return refusef(CodeBusy, "instance %s kept changing while isx tried to act on it; retry", name).on(name, "")
}

// userInstances lists the project's MCP instances of this host user.
func (s *Server) userInstances(ctx context.Context) ([]mcpView, error) {
	return userInstances(ctx, s.opts.Client, s.opts.Owner)
}

func userInstances(ctx context.Context, c *incus.Client, owner string) ([]mcpView, error) {
	list, err := c.Instances(ctx)
	if err != nil {
		return nil, err
	}
	var out []mcpView
	for i := range list {
		v := viewOf(&list[i])
		if v.isMCP() && v.stamps.MCP.Owner == owner {
			out = append(out, v)
		}
	}
	return out, nil
}

// noticeOrphans stamps instances whose holder died as orphaned, so their
// grace period starts when the death was first noticed.
func (st stamper) noticeOrphans(ctx context.Context, views []mcpView) error {
	gone := st.goneCoordinators(ctx, views)
	return st.stampOrphans(ctx, slices.DeleteFunc(slices.Clone(views), func(v mcpView) bool {
		m := v.stamps.MCP
		return m.Orphaned != "" || m.Session == "" || (SessionAlive(m.Session) && !gone[m.Session])
	}))
}

// goneCoordinators are the coordinator sessions holding one of views
// whose instance is gone, is another one of the same name, or no longer
// holds the grant: their instances are orphans.
func (st stamper) goneCoordinators(ctx context.Context, views []mcpView) map[string]bool {
	gone := map[string]bool{}
	seen := map[string]bool{}
	for _, v := range views {
		session := v.stamps.MCP.Session
		rest, ok := strings.CutPrefix(session, instance.CoordinatorSessionPrefix)
		if !ok || v.stamps.MCP.Orphaned != "" || seen[session] {
			continue
		}
		seen[session] = true
		name, _, _ := strings.Cut(rest, "@")
		inst, _, err := st.client.GetInstance(ctx, name)
		switch {
		case errors.Is(err, incus.ErrNotFound):
			gone[session] = true
		case err == nil && (!instance.Coordinator(inst) || instance.CoordinatorSession(inst) != session):
			gone[session] = true
		}
	}
	return gone
}

// releaseAll stamps every instance this session holds as orphaned: what a
// clean end of the session does (it never destroys anything).
func (s *Server) releaseAll(ctx context.Context) error {
	views, err := s.userInstances(ctx)
	if err != nil {
		return err
	}
	return s.stamper().stampOrphans(ctx, slices.DeleteFunc(views, func(v mcpView) bool {
		return v.stamps.MCP.Session != s.opts.Session || v.stamps.MCP.Orphaned != ""
	}))
}

// stampOrphans stamps each instance orphaned by the session holding it,
// all at once.
func (st stamper) stampOrphans(ctx context.Context, views []mcpView) error {
	at := st.clock.Now()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, v := range views {
		wg.Go(func() {
			if err := st.stampOrphaned(ctx, v.inst.Name, v.stamps.MCP.Session, at); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stampOrphaned marks an instance orphaned by session at the time given,
// if that session still holds it and it is not stamped already.
func (st stamper) stampOrphaned(ctx context.Context, name, session string, at time.Time) error {
	for range maxAttempts {
		inst, etag, err := st.client.GetInstance(ctx, name)
		if errors.Is(err, incus.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		m := instance.ParseStamps(inst.Config).MCP
		if m.Session != session || m.Orphaned != "" {
			return nil
		}
		err = st.patch(ctx, name, etag, map[string]string{instance.KeyMCPOrphaned: instance.OrphanedValue(at, session)})
		if errors.Is(err, incus.ErrConflict) {
			continue
		}
		if errors.Is(err, incus.ErrNotFound) {
			return nil
		}
		return err
	}
	return fmt.Errorf("instance %s kept changing while isx stamped it orphaned", name)
}

// takenElsewhere is the refusal of a session that lost the instance while
// it was deciding what to do with it.
func takenElsewhere(name string) *Refusal {
	return refusef(CodeNotHeld, "instance %s was taken by another session", name).on(name, "")
}
