package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

// newTask is a task of user subject in session, and its execution.
func newTask(id, session, subject string) (*store.Execution, *store.Task) {
	e := &store.Execution{ID: id, Account: account, ActionID: "agent", ActionName: "agent", EventType: "task.start", Role: store.RoleTask,
		StartedBy: "request-" + id, Caller: "p", Subject: subject, Client: "c"}
	t := &store.Task{ExecutionID: id, Account: account, ServerID: "server", SessionID: session, Principal: "p", Subject: subject,
		Spec: json.RawMessage(`{}`), MaxAttempts: 2}
	return e, t
}

func startTask(t *testing.T, s *store.Store, id, session, subject string, limits store.TaskLimits) error {
	t.Helper()
	ctx := context.Background()
	e, task := newTask(id, session, subject)
	return s.Write(ctx, func(tx *store.Tx) error { return tx.StartTask(ctx, e, task, limits) })
}

// ACT-191, ACT-192, ACT-195, ACT-196 in the store: a start beyond the
// session's or the user's unfinished tasks is ErrTaskLimit and records
// nothing; a finished task frees its place.
func TestStartTaskLimits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := storetest.Open(t, d, clock.NewFake(start))
		limits := store.TaskLimits{PerSession: 2, PerUser: 3}
		for i, c := range []struct{ session, subject string }{{"s1", "alice"}, {"s1", "alice"}, {"s2", "alice"}} {
			if err := startTask(t, s, fmt.Sprintf("t%d", i), c.session, c.subject, limits); err != nil {
				t.Fatalf("start %d: %v", i, err)
			}
		}
		if err := startTask(t, s, "t-session", "s1", "alice", limits); !errors.Is(err, store.ErrTaskLimit) {
			t.Errorf("a third task in s1: %v, want ErrTaskLimit", err)
		}
		if err := startTask(t, s, "t-user", "s3", "alice", limits); !errors.Is(err, store.ErrTaskLimit) {
			t.Errorf("a fourth task of alice: %v, want ErrTaskLimit", err)
		}
		if err := startTask(t, s, "t-bob", "s1b", "bob", limits); err != nil {
			t.Errorf("bob's first task: %v", err)
		}
		err := s.Read(ctx, func(tx *store.Tx) error {
			_, err := tx.TaskByID(ctx, account, "t-session")
			return err
		})
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a refused start recorded a task: %v", err)
		}
		// Cancelling a queued task finishes it at once and frees its place.
		by := json.RawMessage(`{"principal":"p","subject":"alice","executionId":"r"}`)
		err = s.Write(ctx, func(tx *store.Tx) error {
			status, err := tx.CancelTask(ctx, account, "t0", by)
			if status != store.Cancelled {
				return fmt.Errorf("cancel a queued task: %s", status)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := startTask(t, s, "t-again", "s1", "alice", limits); err != nil {
			t.Errorf("after a task finished: %v", err)
		}
	})
}

// Claims are exclusive: four claimers racing for 40 tasks claim each once.
func TestClaimTasksOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		opts := storetest.Options(t, d)
		var stores []*store.Store
		for range 2 {
			s, err := store.Open(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			stores = append(stores, s)
		}
		for i := range 40 {
			if err := startTask(t, stores[0], fmt.Sprintf("t%02d", i), fmt.Sprintf("s%d", i), fmt.Sprintf("u%d", i), store.TaskLimits{}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		claimed := map[string]string{}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("worker%d", w)
				for {
					var got []*store.Task
					err := stores[w%2].Write(ctx, func(tx *store.Tx) error {
						var err error
						got, err = tx.ClaimTasks(ctx, owner, 3)
						return err
					})
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, task := range got {
						if previous, twice := claimed[task.ExecutionID]; twice {
							t.Errorf("%s claimed by %s and %s", task.ExecutionID, previous, owner)
						}
						claimed[task.ExecutionID] = owner
						if task.Status != store.Running || task.Owner != owner || task.Attempt != 1 {
							t.Errorf("claimed %+v", task)
						}
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(claimed) != 40 {
			t.Errorf("%d tasks claimed, want 40", len(claimed))
		}
	})
}

// An attempt's writes hold only while its claim does: once the task was
// ended, or recovered under another attempt, the stale claim writes
// nothing (ErrLeaseLost).
func TestLeaseFencesStaleWorkers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		fake := clock.NewFake(start)
		s := storetest.Open(t, d, fake)
		if err := startTask(t, s, "t1", "s", "u", store.TaskLimits{}); err != nil {
			t.Fatal(err)
		}
		claim := func(owner string) *store.Task {
			var got []*store.Task
			if err := s.Write(ctx, func(tx *store.Tx) error {
				var err error
				got, err = tx.ClaimTasks(ctx, owner, 1)
				return err
			}); err != nil || len(got) != 1 {
				t.Fatalf("claim: %v %v", got, err)
			}
			return got[0]
		}
		first := claim("a")
		// The first attempt's process died: the task is rescheduled for a
		// second attempt, which another process claims.
		retry := &store.Execution{ID: "t1", Status: store.RetryScheduled, Error: json.RawMessage(`{"code":"task_worker_lost"}`)}
		if err := s.Write(ctx, func(tx *store.Tx) error { return tx.EndTask(ctx, first.Lease(), retry, fake.Now()) }); err != nil {
			t.Fatal(err)
		}
		second := claim("b")
		if second.Attempt != 2 {
			t.Errorf("second attempt %d", second.Attempt)
		}
		done := &store.Execution{ID: "t1", Status: store.Succeeded, Output: json.RawMessage(`"stale"`)}
		err := s.Write(ctx, func(tx *store.Tx) error { return tx.EndTask(ctx, first.Lease(), done, time.Time{}) })
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("the stale attempt ended the task: %v", err)
		}
		done.Output = json.RawMessage(`"fresh"`)
		if err := s.Write(ctx, func(tx *store.Tx) error { return tx.EndTask(ctx, second.Lease(), done, time.Time{}) }); err != nil {
			t.Fatal(err)
		}
		err = s.Read(ctx, func(tx *store.Tx) error {
			e, err := tx.Execution(ctx, account, "t1")
			if err != nil {
				return err
			}
			task, err := tx.TaskByID(ctx, account, "t1")
			if err != nil {
				return err
			}
			if e.Status != store.Succeeded || string(e.Output) != `"fresh"` || !task.Finished || task.Owner != "" {
				return fmt.Errorf("ended as %s %s, task %+v", e.Status, e.Output, task)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
}
