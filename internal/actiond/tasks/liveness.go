package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/incusspawn/isx/internal/actiond/store"
)

// Codes of what a stopped process left and another settled.
const (
	// CodeRequestAbandoned: the process serving a request stopped before
	// it recorded the request's outcome, so no result was sent.
	CodeRequestAbandoned = "mcp_request_abandoned"
	// CodeWorkerLost: the process running a task's attempt stopped.
	CodeWorkerLost = "task_worker_lost"
)

// farFuture settles everything of a process known to be dead, whenever it
// started.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// heartbeat refreshes the process's heartbeat and sweeps for the work of
// processes that stopped. A heartbeat that finds the process declared dead
// stops its attempts, whose tasks others recovered, and registers it anew.
func (s *Service) heartbeat() {
	var alive bool
	err := s.opts.Store.Write(s.ctx, func(tx *store.Tx) error {
		var err error
		alive, err = tx.Heartbeat(s.ctx, s.opts.Process)
		return err
	})
	if err != nil {
		if s.ctx.Err() == nil {
			s.opts.Logger.Warn("tasks: heartbeat", "err", err)
		}
		return
	}
	if !alive {
		s.opts.Logger.Warn("tasks: this process was declared dead while it ran; its tasks were recovered elsewhere")
		s.mu.Lock()
		for _, cancel := range s.running {
			cancel(errLeaseLost)
		}
		s.mu.Unlock()
		if err := s.opts.Store.Write(s.ctx, func(tx *store.Tx) error { return tx.RegisterProcess(s.ctx, s.opts.Process) }); err != nil {
			s.opts.Logger.Warn("tasks: register again", "err", err)
		}
	}
	if err := s.sweep(s.ctx, s.opts.Clock.Now().Add(-s.opts.Liveness)); err != nil && s.ctx.Err() == nil {
		s.opts.Logger.Warn("tasks: sweep", "err", err)
	}
}

// sweep settles what stopped processes left RUNNING: those whose heartbeat
// is older than before, then executions whose owner no process row names
// (started before `before`), then this process's own tasks that no worker
// of it runs (a claim whose answer was lost).
func (s *Service) sweep(ctx context.Context, before time.Time) error {
	var dead []string
	err := s.opts.Store.Write(ctx, func(tx *store.Tx) error {
		var err error
		dead, err = tx.DeadProcesses(ctx, s.opts.Process, before)
		return err
	})
	if err != nil {
		return err
	}
	for _, process := range dead {
		if err := s.settle(ctx, process, farFuture); err != nil {
			return err
		}
		if err := s.opts.Store.Write(ctx, func(tx *store.Tx) error { return tx.ForgetProcess(ctx, process) }); err != nil {
			return err
		}
		s.opts.Logger.Info("tasks: settled the work of a stopped process", "process", process)
	}
	var owners []string
	err = s.opts.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		owners, err = tx.UnownedOwners(ctx, before)
		return err
	})
	if err != nil {
		return err
	}
	for _, owner := range owners {
		if owner == s.opts.Process {
			continue
		}
		if err := s.settle(ctx, owner, before); err != nil {
			return err
		}
	}
	return s.recoverForgotten(ctx)
}

// settle fails the requests owner left RUNNING and recovers its tasks, a
// batch per transaction.
func (s *Service) settle(ctx context.Context, owner string, before time.Time) error {
	const batch = 100
	for {
		var n int
		err := s.opts.Store.Write(ctx, func(tx *store.Tx) error {
			requests, err := tx.RunningRequestsOf(ctx, owner, before, batch)
			if err != nil {
				return err
			}
			n = len(requests)
			for _, e := range requests {
				if err := abandon(ctx, tx, e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if n < batch {
			break
		}
	}
	for {
		var n int
		err := s.opts.Store.Write(ctx, func(tx *store.Tx) error {
			tasks, err := tx.RunningTasksOf(ctx, owner, batch)
			if err != nil {
				return err
			}
			n = len(tasks)
			for _, t := range tasks {
				// Another process settling the same one may have recovered it
				// first.
				if err := s.recoverTask(ctx, tx, t); err != nil && !errors.Is(err, store.ErrLeaseLost) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if n < batch {
			return nil
		}
	}
}

// abandon records a request its process left: FAILED with a code of its
// own and no output; its session input is settled too.
func abandon(ctx context.Context, tx *store.Tx, e *store.Execution) error {
	e.Status, e.Output, e.EndedAt = store.Failed, nil, time.Time{}
	e.Error, _ = json.Marshal(map[string]any{"code": CodeRequestAbandoned,
		"message": "The process serving this request stopped before it recorded the request's outcome; no result was sent.",
		"hint":    "Send the request again; nothing it did was committed."})
	e.Invocation, _ = json.Marshal(map[string]any{"error": map[string]any{"code": CodeRequestAbandoned, "details": map[string]any{"owner": e.Owner}}})
	if err := tx.FinishExecution(ctx, e); err != nil && !errors.Is(err, store.ErrSettled) {
		return err
	}
	return tx.SettleInput(ctx, e.ID)
}

// recoverTask recovers a task whose worker stopped: another attempt when
// its retries allow, EXHAUSTED when they ran out, CANCELLED when it was
// asked to stop. What the lost attempt called is kept, rolled back.
func (s *Service) recoverTask(ctx context.Context, tx *store.Tx, t *store.Task) error {
	if _, err := tx.HoldLease(ctx, t.Lease()); err != nil {
		return err
	}
	if err := tx.MarkRolledBack(ctx, t.ExecutionID, t.ExecutionID); err != nil {
		return err
	}
	e := &store.Execution{ID: t.ExecutionID}
	runAfter := time.Time{}
	switch {
	case len(t.Cancel) > 0:
		e.Status, e.CancelledBy = store.Cancelled, t.Cancel
	case t.Attempt < t.MaxAttempts:
		e.Status, runAfter = store.RetryScheduled, tx.Now().Add(s.opts.Backoff(t.Attempt))
	default:
		e.Status = store.Exhausted
	}
	if e.Status != store.Cancelled {
		e.Error, _ = json.Marshal(map[string]any{"code": CodeWorkerLost,
			"message": "The process running the task's agent stopped before the agent finished.",
			"hint":    "Nothing to do while retries remain: another process runs the agent again. Otherwise start the task again.",
			"detail":  map[string]any{"owner": t.Owner, "attempt": t.Attempt}})
	}
	return tx.EndTask(ctx, t.Lease(), e, runAfter)
}

// recoverForgotten gives back the tasks this process holds but runs no
// worker for: a claim that committed though its answer was lost.
func (s *Service) recoverForgotten(ctx context.Context) error {
	return s.opts.Store.Write(ctx, func(tx *store.Tx) error {
		mine, err := tx.RunningTasksOf(ctx, s.opts.Process, 1000)
		if err != nil {
			return err
		}
		for _, t := range mine {
			s.mu.Lock()
			_, running := s.running[t.ExecutionID]
			s.mu.Unlock()
			if running {
				continue
			}
			if len(t.Cancel) > 0 {
				err = s.recoverTask(ctx, tx, t)
			} else {
				err = tx.ReleaseTask(ctx, t.Lease())
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}
