// Package storetest opens real databases for tests: SQLite in a temporary
// directory, and Postgres in a schema of its own that is dropped afterwards.
package storetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/sourcetree"
)

// Dialects are the databases every store-backed test runs against.
var Dialects = []store.Dialect{store.SQLite, store.Postgres}

// Each runs fn once per dialect as a subtest.
func Each(t *testing.T, fn func(t *testing.T, d store.Dialect)) {
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) { fn(t, d) })
	}
}

// Open opens an empty store of the dialect, closed at the end of the test.
func Open(t testing.TB, d store.Dialect, c clock.Clock) *store.Store {
	t.Helper()
	opts := Options(t, d)
	opts.Clock = c
	s, err := store.Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("open %s store: %v", d, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Options are the open options for a fresh database of the dialect; several
// stores opened with the same options share it, as several actiond processes
// share one Postgres.
func Options(t testing.TB, d store.Dialect) store.Options {
	t.Helper()
	if d == store.SQLite {
		return store.Options{DataDir: t.TempDir()}
	}
	dsn := PostgresDSN(t)
	schema := "t_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() { dropSchema(dsn, schema) })
	return store.Options{PostgresDSN: dsn, PostgresSchema: schema}
}

var (
	dsnOnce sync.Once
	dsn     string
	dsnErr  error
)

// PostgresDSN returns $ACTIOND_TEST_POSTGRES, or starts the project's test
// Postgres with scripts/postgres-up.sh and returns its DSN.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsnOnce.Do(func() {
		if v := os.Getenv("ACTIOND_TEST_POSTGRES"); v != "" {
			dsn = v
			return
		}
		root, err := sourcetree.Root()
		if err != nil {
			dsnErr = err
			return
		}
		out, err := exec.Command(filepath.Join(root, "scripts", "postgres-up.sh")).Output()
		if err != nil {
			dsnErr = fmt.Errorf("scripts/postgres-up.sh: %w", err)
			return
		}
		dsn = strings.TrimSpace(string(out))
	})
	if dsnErr != nil {
		t.Fatalf("no Postgres for the tests (set ACTIOND_TEST_POSTGRES or let scripts/postgres-up.sh start one): %v", dsnErr)
	}
	return dsn
}

func dropSchema(dsn, schema string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}
