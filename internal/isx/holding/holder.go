package holding

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// Every operation on an instance reads its stamps afresh and checks that
// it is an MCP instance of this host user held by this session. Changes
// of holder go through a PATCH guarded by the ETag of the read they were
// decided on, followed by a fresh read to see the change stuck (mark,
// re-read, act): of two sessions racing for an instance exactly one wins.

// Holder is one session's hold on the MCP instances of its host user.
type Holder struct {
	Client *incus.Client
	// Clock waits between retries; Random draws names. Both are required.
	Clock  clock.Clock
	Random io.Reader
	// Home finds the isx shell records and the reservations.
	Home    string
	Owner   string
	Session string
	// ProxyDir is where new instances' proxy devices lead ("": none).
	ProxyDir string
	// Warn is told of problems no caller can act on (nil: dropped).
	Warn func(format string, args ...any)

	inflight sync.Map // instance names being made by this process

	taskMu       sync.Mutex
	pendingTasks int
}

func (h *Holder) warnf(format string, args ...any) {
	if h.Warn != nil {
		h.Warn(format, args...)
	}
}

// Lookup reads an MCP instance of this host user, with the ETag of the
// read. name must be a valid instance name.
func (h *Holder) Lookup(ctx context.Context, name string) (View, string, error) {
	inst, etag, err := h.Client.GetInstance(ctx, name)
	if errors.Is(err, incus.ErrNotFound) {
		return View{}, "", notMCP(name)
	}
	if err != nil {
		return View{}, "", about(name, err)
	}
	v := ViewOf(inst)
	switch {
	case !v.IsMCP():
		return v, "", notMCP(name)
	case v.Stamps.MCP.Owner != h.Owner:
		return v, "", refuse(CodeRefused, name, "instance %s belongs to host user %s, not %s; isx mcp never acts on another user's instances", name, v.Stamps.MCP.Owner, h.Owner)
	case v.Marked():
		return v, "", refuse(CodeBusy, name, "instance %s is being %s by session %s", name, map[string]string{StateDestroying: "destroyed", StateStopping: "stopped"}[v.State], v.Marker)
	}
	return v, etag, nil
}

func notMCP(name string) *coded.Error {
	return refuse(CodeNotFound, name, "there is no MCP instance named %s; list_instances shows yours (instances the user made with isx branch are not available to agents)", name)
}

// Held reads an instance this session holds.
func (h *Holder) Held(ctx context.Context, name string) (View, string, error) {
	v, etag, err := h.Lookup(ctx, name)
	if err != nil {
		return v, etag, err
	}
	switch v.HoldingFor(h.Session) {
	case HeldElsewhere:
		return v, etag, refuse(CodeNotHeld, name, "instance %s is held by another live session (%s); adopt_instance with force: true takes it from that session", name, v.Stamps.MCP.Session)
	case Orphaned:
		return v, etag, refuse(CodeNotHeld, name, "instance %s is an orphan (the session that held it ended); adopt_instance takes it back, with its tasks", name)
	}
	if v.Creating() {
		if _, busy := h.inflight.Load(name); busy {
			return v, etag, refuse(CodeBusy, name, "instance %s is still being created by another call of this session", name)
		}
		return v, etag, refuse(CodeWrongState, name, "instance %s was not finished: repeat create_instance with its idempotency key to finish it, or destroy_instance it", name)
	}
	return v, etag, nil
}

// HeldRunning reads an instance this session holds that is running.
func (h *Holder) HeldRunning(ctx context.Context, name string) (View, string, error) {
	v, etag, err := h.Held(ctx, name)
	if err == nil && !v.Inst.Running() {
		err = refuse(CodeWrongState, name, "instance %s is %s; start_instance it first", name, strings.ToLower(v.Inst.Status))
	}
	return v, etag, err
}

// Instances lists the project's MCP instances of this host user.
func (h *Holder) Instances(ctx context.Context) ([]View, error) {
	return instancesOf(ctx, h.Client, h.Owner)
}

func instancesOf(ctx context.Context, c *incus.Client, owner string) ([]View, error) {
	list, err := c.Instances(ctx)
	if err != nil {
		return nil, err
	}
	var out []View
	for i := range list {
		v := ViewOf(&list[i])
		if v.IsMCP() && v.Stamps.MCP.Owner == owner {
			out = append(out, v)
		}
	}
	return out, nil
}

// maxAttempts bounds retries of a guarded write that lost a race.
const maxAttempts = 5

// Update changes an instance's config guarded by the ETag of a fresh read,
// retrying when something else changed it in between. change decides from
// the current stamps; an empty patch writes nothing.
func (h *Holder) Update(ctx context.Context, name string, change func(v View) (map[string]string, error)) (View, error) {
	for range maxAttempts {
		inst, etag, err := h.Client.GetInstance(ctx, name)
		if err != nil {
			return View{}, err
		}
		v := ViewOf(inst)
		changes, err := change(v)
		if err != nil || len(changes) == 0 {
			return v, err
		}
		err = h.stamper().patch(ctx, name, etag, changes)
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
		return ViewOf(inst), nil
	}
	return View{}, refuse(CodeBusy, name, "instance %s kept changing while isx tried to update it; retry", name)
}

// Keep marks an instance this session holds as kept for the user.
func (h *Holder) Keep(ctx context.Context, name string) (View, error) {
	return h.Update(ctx, name, func(v View) (map[string]string, error) {
		if v.HoldingFor(h.Session) != HeldHere {
			return nil, TakenElsewhere(name)
		}
		if v.Stamps.MCP.Kept != "" {
			return nil, nil
		}
		return map[string]string{instance.KeyMCPKept: instance.FormatTime(h.Clock.Now()) + " " + h.Session}, nil
	})
}

// TakeOver makes this session the holder of an orphan (or, with
// fromLive, of another live session's instance). It returns the instance
// as taken and the session that held it before ("" when this one did).
func (h *Holder) TakeOver(ctx context.Context, name string, fromLive bool) (View, string, error) {
	for range maxAttempts {
		v, etag, err := h.Lookup(ctx, name)
		if err != nil {
			return v, "", err
		}
		previous := v.Stamps.MCP.Session
		switch v.HoldingFor(h.Session) {
		case HeldHere:
			return v, "", nil
		case HeldElsewhere:
			if !fromLive {
				return v, "", refuse(CodeWrongState, name, "instance %s is held by another live session (%s); pass force: true to take it (that session loses it)", name, previous)
			}
		}
		changes := map[string]string{
			instance.KeyMCPSession:  h.Session,
			instance.KeyMCPOrphaned: "",
			instance.KeyMCPDormant:  "",
		}
		if v.State == StateDestroying || v.State == StateStopping {
			changes[instance.KeyMCPState] = "" // a dead session's unfinished mark
		}
		err = h.stamper().patch(ctx, name, etag, changes)
		if errors.Is(err, incus.ErrConflict) {
			continue
		}
		if err != nil {
			return v, "", about(name, err)
		}
		// Re-read: the guarded write won, so this shows it unless another
		// session took the instance since, which it then has.
		after, _, err := h.Lookup(ctx, name)
		if err != nil {
			return after, "", err
		}
		if after.HoldingFor(h.Session) == HeldHere {
			return after, previous, nil
		}
	}
	return View{}, "", refuse(CodeBusy, name, "another session was taking instance %s at the same time; retry", name)
}

// MarkAndAct marks the instance for this session (StateDestroying or
// StateStopping) with a guarded write decided by allow, re-reads it to see
// the mark stuck, and only then acts. Nobody else adopts or acts on a
// marked instance while this session lives.
func (h *Holder) MarkAndAct(ctx context.Context, name, mark string, allow func(v View) error, act func() error) error {
	return h.stamper().markAndAct(ctx, h.Session, name, mark, allow, act)
}

// TakenElsewhere is the failure of a session that lost the instance while
// it was deciding what to do with it.
func TakenElsewhere(name string) error {
	return refuse(CodeNotHeld, name, "instance %s was taken by another session", name)
}

// busyWait bounds how long a write waits for an operation Incus is
// running on the instance (a start, a stop) to end.
const busyWait = 30 * time.Second

// stamper writes an instance's stamps with guarded PATCHes, waiting on its
// clock while Incus is busy with the instance. A Holder and the sweep
// share it.
type stamper struct {
	client *incus.Client
	clock  clock.Clock
}

func (h *Holder) stamper() stamper { return stamper{client: h.Client, clock: h.Clock} }

// patch writes config keys guarded by etag. While Incus runs another
// operation on the instance (it answers "Instance is busy running a …
// operation") it waits and tries again.
func (st stamper) patch(ctx context.Context, name, etag string, changes map[string]string) error {
	deadline := st.clock.Now().Add(busyWait)
	for {
		err := st.client.PatchInstance(ctx, name, etag, incus.InstancePatch{Config: changes})
		if !InstanceBusy(err) || st.clock.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-st.clock.After(100 * time.Millisecond):
		}
	}
}

// InstanceBusy recognises Incus refusing a change while another operation
// runs on the instance.
func InstanceBusy(err error) bool {
	return err != nil && strings.Contains(err.Error(), "is busy running")
}

func (st stamper) markAndAct(ctx context.Context, session, name, mark string, allow func(v View) error, act func() error) error {
	value := mark + " " + session
	for range maxAttempts {
		inst, etag, err := st.client.GetInstance(ctx, name)
		if err != nil {
			return err
		}
		if err := allow(ViewOf(inst)); err != nil {
			return err
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
	return refuse(CodeBusy, name, "instance %s kept changing while isx tried to act on it; retry", name)
}
