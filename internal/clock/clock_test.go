package clock

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case at := <-ch:
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestFakeAdvanceFiresDueTimers(t *testing.T) {
	f := NewFake(start)
	soon := f.After(time.Minute)
	later := f.After(time.Hour)
	f.Advance(2 * time.Minute)
	if got, ok := fired(soon); !ok || !got.Equal(start.Add(time.Minute)) {
		t.Fatalf("a timer due after one minute: fired %v at %v", ok, got)
	}
	if _, ok := fired(later); ok {
		t.Fatal("a timer due after an hour fired after two minutes")
	}
	if !f.Now().Equal(start.Add(2 * time.Minute)) {
		t.Fatalf("Now() = %v", f.Now())
	}
	if got := f.Since(start); got != 2*time.Minute {
		t.Fatalf("Since = %v", got)
	}
}

func TestFakeTimerStopAndReset(t *testing.T) {
	f := NewFake(start)
	timer := f.NewTimer(time.Second)
	if !timer.Stop() {
		t.Fatal("Stop of a pending timer reported it inactive")
	}
	f.Advance(time.Hour)
	if _, ok := fired(timer.C()); ok {
		t.Fatal("a stopped timer fired")
	}
	if timer.Reset(time.Minute) {
		t.Fatal("Reset of a stopped timer reported it active")
	}
	f.Advance(59 * time.Second)
	if _, ok := fired(timer.C()); ok {
		t.Fatal("a reset timer fired early")
	}
	f.Advance(time.Second)
	if _, ok := fired(timer.C()); !ok {
		t.Fatal("a reset timer did not fire when due")
	}
	if f.Timers() != 0 {
		t.Fatalf("%d timers pending after the only one fired", f.Timers())
	}
}

func TestFakeTickerFiresEachPeriod(t *testing.T) {
	f := NewFake(start)
	ticker := f.NewTicker(10 * time.Second)
	defer ticker.Stop()
	for i := 1; i <= 3; i++ {
		f.Advance(10 * time.Second)
		got, ok := fired(ticker.C())
		if !ok || !got.Equal(start.Add(time.Duration(i)*10*time.Second)) {
			t.Fatalf("tick %d: fired %v at %v", i, ok, got)
		}
	}
	// Ticks nobody reads are dropped, as time.Ticker drops them.
	f.Advance(time.Minute)
	if _, ok := fired(ticker.C()); !ok {
		t.Fatal("no tick after a minute")
	}
	if _, ok := fired(ticker.C()); ok {
		t.Fatal("more than one tick was buffered")
	}
	ticker.Reset(time.Hour)
	f.Advance(59 * time.Minute)
	if _, ok := fired(ticker.C()); ok {
		t.Fatal("a ticker reset to an hour ticked within it")
	}
	ticker.Stop()
	f.Advance(2 * time.Hour)
	if _, ok := fired(ticker.C()); ok {
		t.Fatal("a stopped ticker ticked")
	}
}

// A test waits for the code under test to start waiting, then moves the
// clock: no sleep anywhere.
func TestFakeWaitForTimers(t *testing.T) {
	f := NewFake(start)
	done := make(chan time.Time)
	go func() { done <- <-f.After(time.Hour) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Hour)
	if got := <-done; !got.Equal(start.Add(time.Hour)) {
		t.Fatalf("woke at %v", got)
	}
	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if err := f.WaitForTimers(short, 1); err == nil {
		t.Fatal("WaitForTimers returned nil for a cancelled context with no timer pending")
	}
}

func TestFakeSetBackwardFiresNothing(t *testing.T) {
	f := NewFake(start)
	ch := f.After(time.Minute)
	f.Set(start.Add(-time.Hour))
	if _, ok := fired(ch); ok {
		t.Fatal("moving the clock back fired a timer")
	}
	f.Set(start.Add(time.Minute))
	if _, ok := fired(ch); !ok {
		t.Fatal("the timer did not fire once its time came")
	}
}
