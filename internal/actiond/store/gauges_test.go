package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

// The metrics' gauges: tasks waiting by state, how long the oldest
// claimable one has waited (a retry not yet due does not count), and the
// sessions not closed; on both databases.
func TestReadGauges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		fake := clock.NewFake(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
		s := storetest.Open(t, d, fake)
		empty, err := s.ReadGauges(ctx)
		if err != nil || empty != (store.Gauges{}) {
			t.Fatalf("an empty database: %+v, %v", empty, err)
		}
		for _, id := range []string{"t1", "t2", "t3"} {
			if err := startTask(t, s, id, "s-"+id, "u-"+id, store.TaskLimits{}); err != nil {
				t.Fatal(err)
			}
			fake.Advance(30 * time.Second)
		}
		// A retry due in an hour waits, but is not yet claimable.
		e, later := newTask("t4", "s-t4", "u-t4")
		later.RunAfter = fake.Now().Add(time.Hour)
		if err := s.Write(ctx, func(tx *store.Tx) error { return tx.StartTask(ctx, e, later, store.TaskLimits{}) }); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a", "b", "c"} {
			key := store.SessionKey{Account: account, ServerID: "server", ID: id}
			if err := s.Write(ctx, func(tx *store.Tx) error {
				_, _, err := tx.LockSession(ctx, key, json.RawMessage(`{}`))
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Write(ctx, func(tx *store.Tx) error {
			return tx.CloseSession(ctx, store.SessionKey{Account: account, ServerID: "server", ID: "b"})
		}); err != nil {
			t.Fatal(err)
		}
		var claimed []*store.Task
		if err := s.Write(ctx, func(tx *store.Tx) (err error) { claimed, err = tx.ClaimTasks(ctx, "w", 1); return err }); err != nil || len(claimed) != 1 || claimed[0].ExecutionID != "t1" {
			t.Fatalf("claim the oldest: %v, %v", claimed, err)
		}
		got, err := s.ReadGauges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// t2 became claimable 60 s before now, t3 30 s; t4 in an hour.
		want := store.Gauges{Queued: 3, OldestDue: 60 * time.Second, OpenSessions: 2}
		if got != want {
			t.Errorf("gauges %+v, want %+v", got, want)
		}
	})
}
