package holding

import (
	"context"
	"slices"
	"sync"
)

// KeyLocks serialise calls of this process that use the same idempotency
// key, so that a repeat arriving while the first call still runs waits
// for it and then replays it. The zero value is ready.
type KeyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	mu    sync.Mutex
	users int
}

// Lock takes the lock of key ("" locks nothing) and returns its release.
func (k *KeyLocks) Lock(key string) func() {
	if key == "" {
		return func() {}
	}
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		l.users--
		if l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// KeyedTask is the instance among views in which key made a task.
func KeyedTask(views []View, key string) (View, bool) {
	if key != "" {
		for _, v := range views {
			if slices.Contains(v.TaskKeys, key) {
				return v, true
			}
		}
	}
	return View{}, false
}

// Repeat says whether key already made a task in instance name, refusing
// a key that made one in another instance (ISX-166). An orphan the key's
// task is in is taken back, as a repeated creation takes its instance
// (ISX-162); took says so.
func (h *Holder) Repeat(ctx context.Context, views []View, name, key string) (repeat, took bool, err error) {
	v, ok := KeyedTask(views, key)
	switch {
	case !ok:
		return false, false, nil
	case v.Inst.Name != name:
		return false, false, refuse(CodeInvalidArgument, name, "idempotency key %q made a task in instance %s, not %s; a repeat must name the same instance, so use another key for something else", key, v.Inst.Name, name)
	case v.HoldingFor(h.Session) != Orphaned:
		return true, false, nil
	}
	if _, _, err := h.TakeOver(ctx, name, false); err != nil {
		return true, false, err
	}
	return true, true, nil
}
