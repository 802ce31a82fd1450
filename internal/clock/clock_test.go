package clock

import (
	"testing"
	"time"
)

func TestFakeAdvanceFiresDueTimers(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := NewFake(start)
	soon := f.After(time.Minute)
	later := f.After(time.Hour)
	f.Advance(2 * time.Minute)
	select {
	case got := <-soon:
		if !got.Equal(start.Add(2 * time.Minute)) {
			t.Fatalf("timer fired at %v", got)
		}
	default:
		t.Fatal("a timer due after one minute did not fire after two")
	}
	select {
	case <-later:
		t.Fatal("a timer due after an hour fired after two minutes")
	default:
	}
	if !f.Now().Equal(start.Add(2 * time.Minute)) {
		t.Fatalf("Now() = %v", f.Now())
	}
}
