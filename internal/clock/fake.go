package clock

import (
	"context"
	"sync"
	"time"
)

// Fake is a clock that moves only when told to. The zero value starts at the
// zero time; use NewFake for a realistic start.
//
// A test that needs the code under test to be waiting before it moves the
// clock calls WaitForTimers, which returns once enough timers are pending:
// the test never sleeps to give the code time to start waiting.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever a timer is added
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

func (f *Fake) After(d time.Duration) <-chan time.Time { return f.NewTimer(d).C() }

func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{clock: f, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTimer{clock: f, ch: make(chan time.Time, 1), period: d}
	t.Reset(d)
	return fakeTicker{t}
}

// Advance moves the clock forward and fires every timer that is now due, in
// the order they fall due; a ticker fires once per period passed, as far as
// its channel (of one) takes them, like time.Ticker.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	target := f.now.Add(d)
	for {
		next := f.nextDue(target)
		if next == nil {
			break
		}
		f.now = next.at
		f.fire(next)
	}
	f.now = target
}

// Set moves the clock to t and fires due timers. Moving it backward fires
// nothing.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	d := t.Sub(f.now)
	if d < 0 {
		f.now = t
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	f.Advance(d)
}

// Timers is how many timers and tickers are pending.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitForTimers returns once at least n timers and tickers are pending, or
// with ctx's error.
func (f *Fake) WaitForTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return nil
		}
		if f.changed == nil {
			f.changed = make(chan struct{})
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// nextDue is the earliest pending timer due at or before target.
func (f *Fake) nextDue(target time.Time) *fakeTimer {
	var next *fakeTimer
	for _, t := range f.timers {
		if t.at.After(target) {
			continue
		}
		if next == nil || t.at.Before(next.at) {
			next = t
		}
	}
	return next
}

// fire sends the time on a due timer and re-arms a ticker; f.mu is held.
func (f *Fake) fire(t *fakeTimer) {
	select {
	case t.ch <- f.now:
	default: // a ticker nobody read: the tick is dropped, as time.Ticker does
	}
	if t.period > 0 {
		t.at = t.at.Add(t.period)
		return
	}
	f.remove(t)
}

func (f *Fake) add(t *fakeTimer) {
	f.timers = append(f.timers, t)
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}

func (f *Fake) remove(t *fakeTimer) bool {
	for i, pending := range f.timers {
		if pending == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			return true
		}
	}
	return false
}

type fakeTimer struct {
	clock  *Fake
	ch     chan time.Time
	at     time.Time
	period time.Duration // 0 for a timer
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	return t.clock.remove(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	active := f.remove(t)
	t.at = f.now.Add(d)
	if d <= 0 && t.period == 0 {
		select {
		case t.ch <- f.now:
		default:
		}
		return active
	}
	if t.period > 0 && d > 0 {
		t.period = d
	}
	f.add(t)
	return active
}

type fakeTicker struct{ t *fakeTimer }

func (k fakeTicker) C() <-chan time.Time   { return k.t.C() }
func (k fakeTicker) Stop()                 { k.t.Stop() }
func (k fakeTicker) Reset(d time.Duration) { k.t.Reset(d) }
