package actiondtest

import (
	"context"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
)

// PollInterval is how often Poll looks again.
const PollInterval = 10 * time.Millisecond

// Poll calls cond now and then on every tick of a ticker until it holds,
// and returns nil, or until ctx ends, and returns ctx's error. It is for
// waiting on what a real process, HTTP server or database shows, which
// moves on its own time; code that takes a clock is driven by clock.Fake
// instead.
func Poll(ctx context.Context, cond func() bool) error {
	if cond() {
		return nil
	}
	ticker := clock.Real{}.NewTicker(PollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C():
			if cond() {
				return nil
			}
		}
	}
}

// WaitFor fails the test unless cond holds within limit; what says what
// it waited for.
func WaitFor(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := Poll(ctx, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s", limit, what)
	}
}
