package holding

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

// An orphan is an instance whose holder ended (a clean end stamps it
// orphaned), died (noticed by the next to look) or, for a coordinator,
// lost its instance or its grant. Its grace period runs from the stamp.

// NoticeOrphans stamps instances among views whose holder died as
// orphaned, so their grace period starts when the death was first
// noticed.
func (h *Holder) NoticeOrphans(ctx context.Context, views []View) error {
	st := h.stamper()
	gone := st.goneCoordinators(ctx, views)
	return st.stampOrphans(ctx, slices.DeleteFunc(slices.Clone(views), func(v View) bool {
		m := v.Stamps.MCP
		return m.Orphaned != "" || m.Session == "" || (SessionAlive(m.Session) && !gone[m.Session])
	}))
}

// ReleaseAll stamps every instance this session holds as orphaned: what a
// clean end of the session does (it never destroys anything).
func (h *Holder) ReleaseAll(ctx context.Context) error {
	return releaseWhere(ctx, h.Client, h.Clock, h.Owner, h.Session, func(View) bool { return true })
}

// ReleaseUnapproved stamps orphaned what this session holds of templates
// approves no longer approves.
func (h *Holder) ReleaseUnapproved(ctx context.Context, approves func(template string) bool) error {
	return releaseWhere(ctx, h.Client, h.Clock, h.Owner, h.Session, func(v View) bool { return !approves(v.Stamps.Template) })
}

// ReleaseSession stamps orphaned every instance of owner that session
// holds: what destroying a coordinator, or withdrawing its grant, does to
// its instances.
func ReleaseSession(ctx context.Context, c *incus.Client, clk clock.Clock, owner, session string) error {
	return releaseWhere(ctx, c, clk, owner, session, func(View) bool { return true })
}

func releaseWhere(ctx context.Context, c *incus.Client, clk clock.Clock, owner, session string, release func(View) bool) error {
	views, err := instancesOf(ctx, c, owner)
	if err != nil {
		return err
	}
	st := stamper{client: c, clock: clk}
	return st.stampOrphans(ctx, slices.DeleteFunc(views, func(v View) bool {
		return v.Stamps.MCP.Session != session || v.Stamps.MCP.Orphaned != "" || !release(v)
	}))
}

// goneCoordinators are the coordinator sessions holding one of views
// whose instance is gone, is another one of the same name, or no longer
// holds the grant: their instances are orphans.
func (st stamper) goneCoordinators(ctx context.Context, views []View) map[string]bool {
	gone := map[string]bool{}
	seen := map[string]bool{}
	for _, v := range views {
		session := v.Stamps.MCP.Session
		rest, ok := strings.CutPrefix(session, instance.CoordinatorSessionPrefix)
		if !ok || v.Stamps.MCP.Orphaned != "" || seen[session] {
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

// stampOrphans stamps each instance orphaned by the session holding it,
// all at once.
func (st stamper) stampOrphans(ctx context.Context, views []View) error {
	at := st.clock.Now()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, v := range views {
		wg.Go(func() {
			if err := st.stampOrphaned(ctx, v.Inst.Name, v.Stamps.MCP.Session, at); err != nil {
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
