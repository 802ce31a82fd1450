package store_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

// Postgres ends every connection of the store's pool at once (as a
// restart or an operator's pg_terminate_backend does); the next read does
// not fail on a dead pooled connection but begins on a live one. Seen in
// CI: a read right after such a cut failed with SQLSTATE 57P01.
func TestReadAfterTheServerEndedThePool(t *testing.T) {
	opts := storetest.Options(t, store.Postgres)
	application := "store-cut-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	u, err := url.Parse(opts.PostgresDSN)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", application)
	u.RawQuery = q.Encode()
	opts.PostgresDSN = u.String()
	opts.Clock = clock.Real{}
	s, err := store.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Eight reads open at once leave eight connections in the pool.
	const open = 8
	var began, wg sync.WaitGroup
	began.Add(open)
	release := make(chan struct{})
	for range open {
		wg.Go(func() {
			err := s.Read(ctx, func(*store.Tx) error {
				began.Done()
				<-release
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	began.Wait()
	close(release)
	wg.Wait()

	killer, err := pgx.Connect(ctx, storetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(ctx)
	tag, err := killer.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", application)
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() < open {
		t.Fatalf("%d connections ended, want the pool's %d", tag.RowsAffected(), open)
	}
	for {
		var left int
		if err := killer.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", application).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
	}
	for i := range open {
		if err := s.Read(ctx, func(tx *store.Tx) error {
			_, err := tx.Executions(ctx, store.ExecutionFilter{})
			return err
		}); err != nil {
			t.Fatalf("read %d after the cut: %v", i+1, err)
		}
	}
}
