package store

import (
	"context"
	"fmt"
	"runtime/debug"
)

// Writes from concurrent requests are committed in groups: one transaction
// runs each write in a savepoint of its own, so one write's failure rolls
// back only that write, and one commit makes the whole group durable. A
// request still learns its outcome only after its commit, as the record
// rules require; the database writes its log once per group instead of once
// per request.

// maxGroup bounds how many writes share one commit.
const maxGroup = 64

type pendingWrite struct {
	ctx  context.Context
	fn   func(*Tx) error
	done chan error
}

// startCommitters starts n goroutines that commit queued writes.
func (s *Store) startCommitters(n int) {
	s.writes = make(chan *pendingWrite, 4*maxGroup)
	for range n {
		s.committers.Add(1)
		go s.commitLoop()
	}
}

func (s *Store) commitLoop() {
	defer s.committers.Done()
	for first := range s.writes {
		group := []*pendingWrite{first}
	gather:
		for len(group) < maxGroup {
			select {
			case w, ok := <-s.writes:
				if !ok {
					break gather
				}
				group = append(group, w)
			default:
				break gather
			}
		}
		s.commitGroup(group)
	}
}

// commitGroup runs a group of writes in one transaction.
func (s *Store) commitGroup(group []*pendingWrite) {
	results := make([]error, len(group))
	err := s.run(context.Background(), s.writer, false, func(tx *Tx) error {
		for i, w := range group {
			results[i] = s.inSavepoint(tx, w)
		}
		return nil
	})
	for i, w := range group {
		if err != nil && results[i] == nil {
			results[i] = err // the commit failed: nothing of the group is kept
		}
		w.done <- results[i]
	}
}

func (s *Store) inSavepoint(tx *Tx, w *pendingWrite) (err error) {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	ctx := context.WithoutCancel(w.ctx)
	if _, err := tx.exec(ctx, "SAVEPOINT write"); err != nil {
		return s.classify(fmt.Errorf("store: savepoint: %w", err))
	}
	if err := s.call(tx, w.fn); err != nil {
		if _, rerr := tx.exec(ctx, "ROLLBACK TO SAVEPOINT write"); rerr != nil {
			return s.classify(fmt.Errorf("store: roll back a failed write: %w (after %w)", rerr, err))
		}
		tx.exec(ctx, "RELEASE SAVEPOINT write")
		return s.classify(err)
	}
	if _, err := tx.exec(ctx, "RELEASE SAVEPOINT write"); err != nil {
		return s.classify(fmt.Errorf("store: release savepoint: %w", err))
	}
	return nil
}

// stopCommitters drains the queue and waits for the committers.
func (s *Store) stopCommitters() {
	if s.writes == nil {
		return
	}
	close(s.writes)
	s.committers.Wait()
}

// call runs a write function, turning a panic into an error: the function
// runs on the committer's goroutine, where a panic would end the process
// and every request waiting on the group.
func (s *Store) call(tx *Tx, fn func(*Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: a write failed: panic: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(tx)
}
