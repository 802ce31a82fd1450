package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
)

// A request answered with an error its record could not take — the
// database refused the write, or its connection was cut — must not stay
// RUNNING: the settler keeps such record writes and makes them once the database
// answers again. Each is conditional on the execution still being RUNNING,
// so making it late, or twice, never overwrites an outcome that did commit.

// settleWrite is one record write to make later.
type settleWrite func(ctx context.Context, tx *store.Tx) error

// settler keeps the writes until the database takes them.
type settler struct {
	store  *store.Store
	clock  clock.Clock
	logger *slog.Logger

	mu      sync.Mutex
	pending []settleWrite
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// retryEvery is how often the settler tries its writes again.
const retryEvery = time.Second

func startSettler(s *store.Store, c clock.Clock, logger *slog.Logger) *settler {
	l := &settler{store: s, clock: c, logger: logger, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *settler) add(w settleWrite) {
	l.mu.Lock()
	l.pending = append(l.pending, w)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *settler) run() {
	defer close(l.done)
	ticker := l.clock.NewTicker(retryEvery)
	defer ticker.Stop()
	for {
		select {
		case <-l.stop:
			l.flush()
			return
		case <-l.wake:
		case <-ticker.C():
		}
		l.flush()
	}
}

// flush tries every pending write once; those the database did not take
// stay for the next try.
func (l *settler) flush() {
	l.mu.Lock()
	pending := l.pending
	l.pending = nil
	l.mu.Unlock()
	var kept []settleWrite
	for _, w := range pending {
		ctx := context.Background()
		err := l.store.Write(ctx, func(tx *store.Tx) error { return w(ctx, tx) })
		if err != nil && !errors.Is(err, store.ErrSettled) && !errors.Is(err, store.ErrNotFound) {
			kept = append(kept, w)
		}
	}
	if len(kept) > 0 {
		l.logger.Warn("record writes wait for the database", "pending", len(kept))
		l.mu.Lock()
		l.pending = append(kept, l.pending...)
		l.mu.Unlock()
	}
}

func (l *settler) close() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

// settleUnadmitted fails a request whose admission answered an error: if
// the admission committed after all, its execution is RUNNING with nobody
// serving it.
func settleUnadmitted(account, executionID string, cause error) settleWrite {
	return func(ctx context.Context, tx *store.Tx) error {
		e, err := tx.Execution(ctx, account, executionID)
		if errors.Is(err, store.ErrNotFound) {
			return nil // the admission did not commit: nothing to settle
		}
		if err != nil {
			return err
		}
		if e.Status != store.Running {
			return nil
		}
		rerr := newError(codeInternal, errInternal, 500, nil)
		e.Status, e.EndedAt = store.Failed, time.Time{}
		e.Error = rerr.recorded()
		e.Output, _ = json.Marshal(map[string]any{"error": rerr.wire()})
		e.Invocation, _ = json.Marshal(map[string]any{"error": rerr.invocationEntry(map[string]any{"cause": cause.Error(), "stage": "admission"})})
		if err := tx.FinishExecution(ctx, e); err != nil {
			return err
		}
		return tx.SettleInput(ctx, executionID)
	}
}
