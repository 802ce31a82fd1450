package incustest

import (
	"context"
	"testing"
	"time"
)

// Tests wait for what a real process or Incus brings about (a command
// running, an instance gone, a line on a terminal), which no fake clock can
// hurry. They poll for it, on a ticker, instead of sleeping: a condition
// that holds early ends the wait early.

// PollInterval is how often WaitFor checks its condition.
const PollInterval = 50 * time.Millisecond

// Poll checks cond now and then every interval until it holds, and returns
// nil; or ctx's error once ctx ends first.
func Poll(ctx context.Context, interval time.Duration, cond func() bool) error {
	if cond() {
		return nil
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
			if cond() {
				return nil
			}
		}
	}
}

// WaitFor fails the test unless cond holds within timeout; what says what
// was waited for.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := Poll(ctx, PollInterval, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}
