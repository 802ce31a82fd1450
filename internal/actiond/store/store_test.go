package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

var start = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const account = "000000000000"

func TestRowsCompareAndSet(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := storetest.Open(t, d, clock.NewFake(start))
		err := s.Write(ctx, func(tx *store.Tx) error {
			v, err := tx.PutRow(ctx, account, "KVValue", "ns/a", json.RawMessage(`{"n":1}`), 0)
			if err != nil || v != 1 {
				return fmt.Errorf("first write: version %d, %v", v, err)
			}
			if _, err := tx.PutRow(ctx, account, "KVValue", "ns/a", json.RawMessage(`{"n":2}`), 0); !errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("creating an existing row: got %v, want ErrConflict", err)
			}
			if _, err := tx.PutRow(ctx, account, "KVValue", "ns/a", json.RawMessage(`{"n":2}`), 7); !errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("stale version: got %v, want ErrConflict", err)
			}
			v, err = tx.PutRow(ctx, account, "KVValue", "ns/a", json.RawMessage(`{"n":2}`), 1)
			if err != nil || v != 2 {
				return fmt.Errorf("update: version %d, %v", v, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Read(ctx, func(tx *store.Tx) error {
			row, ok, err := tx.Row(ctx, account, "KVValue", "ns/a")
			if err != nil || !ok || string(row.Value) != `{"n":2}` || row.Version != 2 {
				return fmt.Errorf("read back %+v ok=%v err=%v", row, ok, err)
			}
			if _, ok, _ := tx.Row(ctx, "111111111111", "KVValue", "ns/a"); ok {
				return errors.New("a row of one account is visible from another")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestWorkOverlayPreviewAndApply(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := storetest.Open(t, d, clock.NewFake(start))
		put(t, s, "KVValue", "ns/a", `1`)
		put(t, s, "KVValue", "ns/c", `3`)

		w := s.NewWork(account)
		must(t, w.Put(ctx, "KVValue", "ns/b", json.RawMessage(`2`)))
		must(t, w.Delete(ctx, "KVValue", "ns/c"))
		got, ok, err := w.Get(ctx, "KVValue", "ns/b")
		if err != nil || !ok || string(got) != "2" {
			t.Fatalf("work does not see its own write: %s %v %v", got, ok, err)
		}
		rows, err := w.Scan(ctx, "KVValue", "ns/", "", 0)
		must(t, err)
		if keys(rows) != "ns/a,ns/b" {
			t.Fatalf("scan through the work = %s, want ns/a,ns/b", keys(rows))
		}

		// A nested work that fails is dropped: the outer work never sees it.
		failed := w.Nested()
		must(t, failed.Put(ctx, "KVValue", "ns/x", json.RawMessage(`9`)))
		if _, ok, _ := w.Get(ctx, "KVValue", "ns/x"); ok {
			t.Fatal("an unmerged nested write is visible outside")
		}
		ok2 := w.Nested()
		must(t, ok2.Put(ctx, "KVValue", "ns/d", json.RawMessage(`4`)))
		w.Merge(ok2)

		want := `[{"table":"KVValue","key":"ns/b","value":2},{"table":"KVValue","key":"ns/c","deleted":true},{"table":"KVValue","key":"ns/d","value":4}]`
		if b, _ := json.Marshal(w.Writes()); string(b) != want {
			t.Fatalf("write set\n got %s\nwant %s", b, want)
		}
		// Nothing is committed before Apply: a preview is a work never applied.
		if committed := scanAll(t, s); committed != "ns/a,ns/c" {
			t.Fatalf("before apply the database holds %s", committed)
		}
		must(t, s.Write(ctx, func(tx *store.Tx) error { return tx.Apply(ctx, w) }))
		if committed := scanAll(t, s); committed != "ns/a,ns/b,ns/d" {
			t.Fatalf("after apply the database holds %s", committed)
		}
	})
}

func TestWorkApplyRefusesLostUpdate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := storetest.Open(t, d, clock.NewFake(start))
		put(t, s, "KVValue", "ns/a", `1`)
		first, second := s.NewWork(account), s.NewWork(account)
		for _, w := range []*store.Work{first, second} {
			if _, _, err := w.Get(ctx, "KVValue", "ns/a"); err != nil {
				t.Fatal(err)
			}
			must(t, w.Put(ctx, "KVValue", "ns/a", json.RawMessage(`2`)))
		}
		must(t, s.Write(ctx, func(tx *store.Tx) error { return tx.Apply(ctx, first) }))
		err := s.Write(ctx, func(tx *store.Tx) error { return tx.Apply(ctx, second) })
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second apply of a row both read: got %v, want ErrConflict", err)
		}
	})
}

func TestExecutionsRecordAndFilter(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		fake := clock.NewFake(start)
		s := storetest.Open(t, d, fake)
		req := &store.Execution{ID: "req-1", Account: account, ActionID: "srv", ActionVersion: 3, ActionName: "fraud-ops",
			EventType: "mcp.request", Role: store.RoleRequest, SessionID: "s1", Status: store.Running,
			Caller: "signin", Subject: "alice", Client: "claude", Input: json.RawMessage(`{"method":"tools/call"}`)}
		call := &store.Execution{ID: "call-1", Account: account, ActionID: "tool", ActionVersion: 1, ActionName: "kv_put",
			EventType: "tool.call", Role: store.RoleCall, ParentID: "req-1", Status: store.Succeeded, Caller: "signin",
			Subject: "alice", Client: "claude", Preview: true, Output: json.RawMessage(`{"ok":true}`),
			WriteSet: []store.Write{{Table: "KVValue", Key: "ns/a", Value: json.RawMessage(`1`)}}}
		must(t, s.Write(ctx, func(tx *store.Tx) error {
			if err := tx.InsertExecution(ctx, req); err != nil {
				return err
			}
			return tx.InsertExecution(ctx, call)
		}))
		fake.Advance(time.Second)
		req.Status, req.Output = store.Succeeded, json.RawMessage(`{"isError":false}`)
		must(t, s.Write(ctx, func(tx *store.Tx) error {
			if err := tx.FinishExecution(ctx, req); err != nil {
				return err
			}
			return tx.AddUse(ctx, req.ID, store.Use{Kind: store.UseTool, Ref: call.ID})
		}))
		must(t, s.Read(ctx, func(tx *store.Tx) error {
			got, err := tx.Execution(ctx, account, "req-1")
			if err != nil {
				return err
			}
			if got.Status != store.Succeeded || !got.EndedAt.Equal(start.Add(time.Second)) || got.SessionID != "s1" {
				return fmt.Errorf("finished request reads back as %+v", got)
			}
			preview := true
			list, err := tx.Executions(ctx, store.ExecutionFilter{Account: account, Preview: &preview})
			if err != nil || len(list) != 1 || list[0].ID != "call-1" || len(list[0].WriteSet) != 1 {
				return fmt.Errorf("preview filter: %v %v", list, err)
			}
			children, err := tx.Executions(ctx, store.ExecutionFilter{Account: account, ParentID: "req-1"})
			if err != nil || len(children) != 1 {
				return fmt.Errorf("children: %v %v", children, err)
			}
			uses, err := tx.Uses(ctx, "req-1")
			if err != nil || len(uses) != 1 || uses[0].Ref != "call-1" || uses[0].Kind != store.UseTool {
				return fmt.Errorf("uses: %v %v", uses, err)
			}
			if _, err := tx.Execution(ctx, account, "nope"); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("missing execution: %v", err)
			}
			return nil
		}))
	})
}

func TestSessionLoadCountsCallsAndAgesOut(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		fake := clock.NewFake(start)
		s := storetest.Open(t, d, fake)
		key := store.SessionKey{Account: account, ServerID: "srv", ID: "5:alice:x"}
		admit := func(id string) {
			t.Helper()
			must(t, s.Write(ctx, func(tx *store.Tx) error {
				if _, _, err := tx.LockSession(ctx, key, json.RawMessage(`{"subject":"x"}`)); err != nil {
					return err
				}
				_, err := tx.AppendSessionInput(ctx, key, id)
				return err
			}))
		}
		admit("r1")
		fake.Advance(10 * time.Second)
		admit("r2")
		must(t, s.Write(ctx, func(tx *store.Tx) error { return tx.ConsumeSessionInput(ctx, key, "r2", 4) }))
		load := sessionLoad(t, s, key, 5)
		// r1 counts 1 while claimed; r2 counts its 4 calls once consumed.
		if load.Used != 5 {
			t.Fatalf("used = %d, want 5", load.Used)
		}
		if want := start.Add(time.Minute); !load.FreeAt.Equal(want) {
			t.Fatalf("free at %v, want %v (when r1 ages out, r2's 4 calls leave room for one)", load.FreeAt, want)
		}
		fake.Advance(51 * time.Second)
		if load := sessionLoad(t, s, key, 5); load.Used != 4 {
			t.Fatalf("after r1 aged out used = %d, want 4", load.Used)
		}
		must(t, s.Read(ctx, func(tx *store.Tx) error {
			ins, err := tx.SessionInputs(ctx, key)
			if err != nil {
				return err
			}
			if len(ins) != 2 || ins[0].ExecutionID != "r1" || ins[0].State != store.InputClaimed ||
				ins[1].State != store.InputConsumed || ins[1].Calls != 4 || ins[1].Seq != 2 {
				return fmt.Errorf("inputs %+v", ins)
			}
			return nil
		}))
	})
}

// A database of schema 4 has sessions without a weight: opening it weighs
// each session by its inputs, so that the limit still holds for sessions
// made before the upgrade.
func TestUpgradeWeighsExistingSessions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		opts := storetest.Options(t, d)
		s, err := store.Open(ctx, opts)
		must(t, err)
		key := store.SessionKey{Account: account, ServerID: "srv", ID: "s"}
		for i := range 3 {
			must(t, s.Write(ctx, func(tx *store.Tx) error {
				if _, _, err := tx.LockSession(ctx, key, json.RawMessage(`{}`)); err != nil {
					return err
				}
				_, err := tx.AppendSessionInput(ctx, key, fmt.Sprintf("r%d", i))
				return err
			}))
		}
		must(t, s.Write(ctx, func(tx *store.Tx) error { return tx.ConsumeSessionInput(ctx, key, "r1", 3) }))
		must(t, s.Write(ctx, func(tx *store.Tx) error { return tx.ForgetWeights(ctx) }))
		s.Close()
		reopened := mustOpen(t, opts)
		// r0 and r2 weigh one each, r1 its 3 calls: 5, the limit.
		if load := sessionLoad(t, reopened, key, 5); load.Used != 5 {
			t.Fatalf("used = %d after the upgrade, want 5", load.Used)
		}
	})
}

// Same-moment admissions to one session are serialized, so a limit holds
// under concurrency on both databases (the store half of ACT-515).
func TestConcurrentAdmissionsHoldTheLimit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		opts := storetest.Options(t, d)
		stores := []*store.Store{mustOpen(t, opts)}
		if d == store.Postgres {
			stores = append(stores, mustOpen(t, opts)) // two processes on one database
		}
		key := store.SessionKey{Account: account, ServerID: "srv", ID: "s"}
		const limit, attempts = 50, 200
		var mu sync.Mutex
		admitted, contended := 0, 0
		var wg sync.WaitGroup
		for i := range attempts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := stores[i%len(stores)]
				ok := false
				err := s.Write(ctx, func(tx *store.Tx) error {
					session, _, err := tx.LockSession(ctx, key, json.RawMessage(`{}`))
					if err != nil {
						return err
					}
					load, err := tx.SessionLoad(ctx, session, time.Minute, limit)
					if err != nil || load.Used >= limit {
						return err
					}
					_, err = tx.AppendSessionInput(ctx, key, fmt.Sprintf("r%d", i))
					ok = err == nil
					return err
				})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, store.ErrContention):
					contended++
				case err != nil:
					t.Errorf("admission %d: %v", i, err)
				case ok:
					admitted++
				}
			}()
		}
		wg.Wait()
		if admitted != limit && admitted+contended < limit {
			t.Fatalf("admitted %d (contended %d) of %d with limit %d", admitted, contended, attempts, limit)
		}
		if admitted > limit {
			t.Fatalf("admitted %d, more than the limit %d", admitted, limit)
		}
	})
}

func TestRefusalsThrottledPerSubject(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		fake := clock.NewFake(start)
		s := storetest.Open(t, d, fake)
		alice := store.RefusalKey{Account: account, ServerID: "srv", Principal: "signin", Subject: "alice"}
		bob := alice
		bob.Subject = "bob"
		note := func(k store.RefusalKey) store.RefusalNote {
			var n store.RefusalNote
			must(t, s.Write(ctx, func(tx *store.Tx) error {
				var err error
				n, err = tx.NoteRefusal(ctx, k, time.Minute)
				return err
			}))
			return n
		}
		if n := note(alice); !n.Record {
			t.Fatal("first refusal not recorded")
		}
		for range 4 {
			fake.Advance(5 * time.Second)
			if n := note(alice); n.Record {
				t.Fatal("a refusal inside the minute was recorded")
			}
		}
		if n := note(bob); !n.Record {
			t.Fatal("another subject of the same principal was hidden")
		}
		fake.Advance(time.Minute)
		n := note(alice)
		if !n.Record || n.Unrecorded != 4 || !n.Window.Equal(start) {
			t.Fatalf("next window's refusal: %+v, want recorded with 4 unrecorded since %v", n, start)
		}
	})
}

func TestSigningKeyFirstWriterWins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := storetest.Open(t, d, clock.Real{})
		if _, ok, err := s.LoadSigningKey(ctx); ok || err != nil {
			t.Fatalf("fresh store has a key: %v %v", ok, err)
		}
		first, err := s.SaveSigningKey(ctx, []byte(`{"kid":"a"}`))
		must(t, err)
		second, err := s.SaveSigningKey(ctx, []byte(`{"kid":"b"}`))
		must(t, err)
		if string(first) != `{"kid":"a"}` || string(second) != `{"kid":"a"}` {
			t.Fatalf("stored %s then %s", first, second)
		}
	})
}

func mustOpen(t *testing.T, opts store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sessionLoad(t *testing.T, s *store.Store, key store.SessionKey, limit int) store.Load {
	t.Helper()
	var load store.Load
	must(t, s.Read(context.Background(), func(tx *store.Tx) error {
		session, err := tx.Session(context.Background(), key)
		if err != nil {
			return err
		}
		load, err = tx.SessionLoad(context.Background(), session, time.Minute, limit)
		return err
	}))
	return load
}

func put(t *testing.T, s *store.Store, table, key, value string) {
	t.Helper()
	must(t, s.Write(context.Background(), func(tx *store.Tx) error {
		_, err := tx.PutRow(context.Background(), account, table, key, json.RawMessage(value), 0)
		return err
	}))
}

func scanAll(t *testing.T, s *store.Store) string {
	t.Helper()
	var rows []store.Row
	must(t, s.Read(context.Background(), func(tx *store.Tx) error {
		var err error
		rows, err = tx.Rows(context.Background(), account, "KVValue", "", "", 0)
		return err
	}))
	return keys(rows)
}

func keys(rows []store.Row) string {
	out := ""
	for i, r := range rows {
		if i > 0 {
			out += ","
		}
		out += r.Key
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Requests read the generation while registry writes move it: once the
// writes committed, every read sees where they left it, also on SQLite,
// where the store keeps what it read.
func TestGenerationReadWhileItMoves(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := storetest.Open(t, d, clock.NewFake(start))
		const writes = 30
		done := make(chan struct{})
		var readers sync.WaitGroup
		for range 4 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					if _, err := s.Generation(ctx, account); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		for i := range writes {
			w := s.NewWork(account)
			must(t, w.Put(ctx, "Action", fmt.Sprintf("a%d", i), json.RawMessage(`{}`)))
			must(t, s.Write(ctx, func(tx *store.Tx) error { return tx.Apply(ctx, w) }))
		}
		close(done)
		readers.Wait()
		if n, err := s.Generation(ctx, account); err != nil || n != writes {
			t.Fatalf("generation %d (%v) after %d registry writes", n, err, writes)
		}
	})
}

func TestGenerationMovesWithRegistryWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := storetest.Open(t, d, clock.NewFake(start))
		apply := func(table string) int64 {
			w := s.NewWork(account)
			must(t, w.Put(ctx, table, fmt.Sprintf("k%d", time.Now().UnixNano()), json.RawMessage(`{}`)))
			must(t, s.Write(ctx, func(tx *store.Tx) error { return tx.Apply(ctx, w) }))
			n, err := s.Generation(ctx, account)
			must(t, err)
			return n
		}
		if n := apply("KVValue"); n != 0 {
			t.Fatalf("a KV write moved the generation to %d", n)
		}
		if n := apply("Action"); n != 1 {
			t.Fatalf("an Action write left the generation at %d, want 1", n)
		}
		if n := apply("Principal"); n != 2 {
			t.Fatalf("a Principal write left the generation at %d, want 2", n)
		}
	})
}

// A write that panics fails alone; the store and the other writes go on.
func TestPanickingWriteFailsAlone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		s := storetest.Open(t, d, clock.NewFake(start))
		err := s.Write(ctx, func(tx *store.Tx) error {
			if _, err := tx.PutRow(ctx, account, "KVValue", "ns/lost", json.RawMessage(`1`), 0); err != nil {
				return err
			}
			var nothing map[string]int
			nothing["boom"] = 1 // panics
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "panic") {
			t.Fatalf("a panicking write returned %v, want an error naming the panic", err)
		}
		put(t, s, "KVValue", "ns/kept", `2`)
		if got := scanAll(t, s); got != "ns/kept" {
			t.Fatalf("after the panic the database holds %s, want only ns/kept", got)
		}
	})
}

// The filters the explorer pages requests by: status, caller, a time range,
// and newest first before a cursor; a session counts its admitted requests.
func TestExecutionsByStatusCallerTimeAndNewestFirst(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		fake := clock.NewFake(start)
		s := storetest.Open(t, d, fake)
		key := store.SessionKey{Account: account, ServerID: "srv", ID: "s1"}
		for i, who := range []string{"alice", "bob", "alice", "alice"} {
			status := store.Succeeded
			if i == 2 {
				status = store.Failed
			}
			e := &store.Execution{ID: fmt.Sprintf("req-%d", i), Account: account, ActionID: "srv", ActionName: "fraud-ops",
				EventType: "mcp.request", Role: store.RoleRequest, SessionID: "s1", Status: status, Caller: who, Subject: who}
			must(t, s.Write(ctx, func(tx *store.Tx) error {
				if _, _, err := tx.LockSession(ctx, key, json.RawMessage(`{}`)); err != nil {
					return err
				}
				if _, err := tx.AppendSessionInput(ctx, key, e.ID); err != nil {
					return err
				}
				return tx.InsertExecution(ctx, e)
			}))
			fake.Advance(time.Minute)
		}
		ids := func(list []*store.Execution) string {
			var out []string
			for _, e := range list {
				out = append(out, e.ID)
			}
			return strings.Join(out, ",")
		}
		must(t, s.Read(ctx, func(tx *store.Tx) error {
			cases := []struct {
				name   string
				filter store.ExecutionFilter
				want   string
			}{
				{"status", store.ExecutionFilter{Status: store.Failed}, "req-2"},
				{"caller", store.ExecutionFilter{Caller: "alice"}, "req-0,req-2,req-3"},
				{"time range", store.ExecutionFilter{StartedFrom: start.Add(time.Minute), StartedBefore: start.Add(3 * time.Minute)}, "req-1,req-2"},
				{"newest first", store.ExecutionFilter{Newest: true, Limit: 2}, "req-3,req-2"},
			}
			var all []*store.Execution
			for _, c := range cases {
				c.filter.Account = account
				got, err := tx.Executions(ctx, c.filter)
				if err != nil {
					return err
				}
				if ids(got) != c.want {
					return fmt.Errorf("%s: got %s, want %s", c.name, ids(got), c.want)
				}
				if c.name == "newest first" {
					all = got
				}
			}
			older, err := tx.Executions(ctx, store.ExecutionFilter{Account: account, Newest: true, BeforeSeq: all[1].Seq})
			if err != nil || ids(older) != "req-1,req-0" {
				return fmt.Errorf("before the second newest: %s %v", ids(older), err)
			}
			session, err := tx.Session(ctx, key)
			if err != nil || session.Requests != 4 {
				return fmt.Errorf("session reads back with %+v, want 4 requests: %v", session, err)
			}
			list, err := tx.Sessions(ctx, account, "srv")
			if err != nil || len(list) != 1 || list[0].Requests != 4 {
				return fmt.Errorf("sessions list: %+v %v", list, err)
			}
			return nil
		}))
	})
}

// A data directory is a path, not a URI: one whose name holds '#' or '?'
// (a subtest's "name#01") is its own database, not a prefix's.
func TestSQLiteDirectoriesWithURICharacters(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	for i, name := range []string{"a#1", "a#2", "b?x=1", "c%41"} {
		s, err := store.Open(ctx, store.Options{DataDir: filepath.Join(base, name)})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Write(ctx, func(tx *store.Tx) error {
			_, err := tx.PutRow(ctx, account, "KVValue", "ns/k", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), 0)
			return err
		})
		s.Close()
		if err != nil {
			t.Errorf("%s: %v (another directory's database?)", name, err)
		}
		if _, err := os.Stat(filepath.Join(base, name, "actiond.db")); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
