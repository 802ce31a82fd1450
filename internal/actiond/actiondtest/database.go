package actiondtest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // the SQLite driver the store uses

	"github.com/incusspawn/isx/internal/actiond/store"
)

// OpenDatabase opens a second, independent connection pool to the env's
// database, as another process would: for tests that hold locks against
// actiond. It is closed at the end of the test.
func (e *Env) OpenDatabase() *sql.DB {
	e.T.Helper()
	var db *sql.DB
	if e.Dialect == store.SQLite {
		path := filepath.Join(e.StoreOptions.DataDir, "actiond.db")
		var err error
		db, err = sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
		if err != nil {
			e.T.Fatalf("open %s: %v", path, err)
		}
	} else {
		cfg, err := pgx.ParseConfig(e.StoreOptions.PostgresDSN)
		if err != nil {
			e.T.Fatalf("postgres DSN: %v", err)
		}
		if e.StoreOptions.PostgresSchema != "" {
			cfg.RuntimeParams["search_path"] = e.StoreOptions.PostgresSchema
		}
		db = stdlib.OpenDB(*cfg)
	}
	db.SetMaxOpenConns(4)
	e.T.Cleanup(func() { db.Close() })
	return db
}

// CreateSchema creates the Postgres schema of opts, which actiond processes
// given a DSN with search_path do not create themselves.
func CreateSchema(t testing.TB, opts store.Options) {
	t.Helper()
	if opts.PostgresSchema == "" {
		return
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, opts.PostgresDSN)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{opts.PostgresSchema}.Sanitize()); err != nil {
		t.Fatalf("create schema: %v", err)
	}
}
