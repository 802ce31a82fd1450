// Package store keeps actiond's data: business rows (written through units of
// work, so that previews can roll back into write sets) and the records of
// every request (executions, sessions, uses), on embedded SQLite or Postgres
// with the same behaviour.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
)

// Dialect names the database behind a Store.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Codes of the store's errors.
const (
	CodeNotFound   = "store_not_found"
	CodeConflict   = "store_conflict"
	CodeContention = "store_contention"
	CodeNoDatabase = "store_no_database"
	CodeAccess     = "store_access"
)

// The store's errors, wrapped with what was asked; match them with
// errors.Is.
var (
	// ErrNotFound is returned when a row or record does not exist.
	ErrNotFound = coded.New(CodeNotFound, "not found")
	// ErrConflict is returned when a row changed since it was read, or a row
	// that must be new already exists.
	ErrConflict = coded.New(CodeConflict, "the row changed since it was read").
			WithHint("Read the row again and retry the transaction.")
	// ErrContention is returned when a transaction could not get its locks in
	// time because many requests wanted the same rows; retrying may succeed.
	ErrContention = coded.New(CodeContention, "the database was too busy to take this transaction; retry").
			WithHint("Retry the transaction.")
	// ErrNoDatabase is Open with Existing where there is no database.
	ErrNoDatabase = coded.New(CodeNoDatabase, "there is no actiond database there")
	// ErrAccess is a data directory or database file this process may not
	// read and write.
	ErrAccess = coded.New(CodeAccess, "actiond may not read and write its database")
)

// Options say which database to open.
type Options struct {
	// DataDir holds the embedded SQLite database (actiond.db). Used when
	// PostgresDSN is empty.
	DataDir string
	// PostgresDSN selects Postgres.
	PostgresDSN string
	// PostgresSchema, when set, keeps every table in that schema (created if
	// missing); tests use it to stay apart.
	PostgresSchema string
	// Existing refuses to create a database: Open fails with ErrNoDatabase
	// when the data directory or the Postgres schema holds none yet. The
	// commands that only read, or sign as a running server, use it.
	Existing bool
	// LockTimeout bounds how long a write waits for a contended row lock
	// before failing with ErrContention (default 2 s).
	LockTimeout time.Duration
	Clock       clock.Clock
	// ObserveCommit, when set, is told how long each read-write
	// transaction's COMMIT took (the metrics' commit latency).
	ObserveCommit func(time.Duration)
}

// Store is the database. It is safe for concurrent use.
type Store struct {
	generationStatement *sql.Stmt
	generations         generations
	writes              chan *pendingWrite
	committers          sync.WaitGroup
	statements          sync.Map // "r:"/"w:" + query text → *sql.Stmt
	statementCount      atomic.Int64
	dialect             Dialect
	writer              *sql.DB // SQLite: the one writer connection; Postgres: the pool
	reader              *sql.DB
	clock               clock.Clock
	lockTimeout         time.Duration
	observeCommit       func(time.Duration)
}

// Open opens (and creates or migrates) the database.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = 2 * time.Second
	}
	var s *Store
	var err error
	if opts.PostgresDSN != "" {
		s, err = openPostgres(ctx, opts)
	} else {
		s, err = openSQLite(opts)
	}
	if err != nil {
		return nil, err
	}
	s.observeCommit = opts.ObserveCommit
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	// Every request reads the generation: prepare it once.
	s.generationStatement, err = s.reader.PrepareContext(ctx, rebind(s.dialect, "SELECT n FROM generations WHERE account = ?"))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("store: prepare: %w", err)
	}
	committers := 1 // SQLite has one writer
	if s.dialect == Postgres {
		committers = 4
	}
	s.startCommitters(committers)
	return s, nil
}

func openSQLite(opts Options) (*Store, error) {
	if opts.DataDir == "" {
		return nil, errors.New("store: no data directory: pass --data DIR or --postgres DSN")
	}
	path := filepath.Join(opts.DataDir, DatabaseFile)
	if opts.Existing {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, coded.New(CodeNoDatabase, "no actiond database in %s (it has no %s)", opts.DataDir, DatabaseFile).
				WithHint("Pass the --data directory `actiond serve` uses, or start `actiond serve --data " + opts.DataDir + "` first.")
		}
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, accessError(opts.DataDir, "create the data directory", err)
	}
	if err := checkAccess(opts.DataDir, path); err != nil {
		return nil, err
	}
	if err := checkPrivate(opts.DataDir); err != nil {
		return nil, err
	}
	if err := createPrivately(path); err != nil {
		return nil, err
	}
	// The DSN is a URI: a '#' in the directory (a subtest's "name#01") would
	// end the path, and a '?' start the parameters.
	uri := strings.NewReplacer("%", "%25", "#", "%23", "?", "%3F").Replace(path)
	// temp_store(MEMORY) keeps the savepoint journals of grouped commits off
	// disk; they are small and short-lived.
	pragmas := "_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)&_pragma=temp_store(MEMORY)" +
		fmt.Sprintf("&_pragma=busy_timeout(%d)", opts.LockTimeout.Milliseconds())
	// Each connection caches pages of its own: the writer, which every
	// request's record goes through, 16 MiB; each reader 4 MiB, the
	// operating system's cache of the file behind them. Together they stay
	// well under the process's budget of memory.
	writer, err := sql.Open("sqlite", "file:"+uri+"?"+pragmas+"&_pragma=cache_size(-16384)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// SQLite has one writer at a time; one connection makes writes queue in
	// Go instead of spinning on SQLITE_BUSY.
	writer.SetMaxOpenConns(1)
	reader, err := sql.Open("sqlite", "file:"+uri+"?"+pragmas+"&_pragma=cache_size(-4096)&_pragma=query_only(1)")
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// Readers are kept open: opening one reads the schema and runs the
	// pragmas again, which cost more than most reads.
	reader.SetMaxOpenConns(8)
	reader.SetMaxIdleConns(8)
	return &Store{dialect: SQLite, writer: writer, reader: reader, clock: opts.Clock, lockTimeout: opts.LockTimeout}, nil
}

func openPostgres(ctx context.Context, opts Options) (*Store, error) {
	cfg, err := pgx.ParseConfig(opts.PostgresDSN)
	if err != nil {
		return nil, fmt.Errorf("store: the Postgres DSN is not valid: %w", err)
	}
	if opts.PostgresSchema != "" {
		if !opts.Existing {
			if err := createSchema(ctx, cfg, opts.PostgresSchema); err != nil {
				return nil, err
			}
		}
		cfg.RuntimeParams["search_path"] = opts.PostgresSchema
	}
	db := stdlib.OpenDB(*cfg)
	if opts.Existing {
		if err := requireTables(ctx, db, opts); err != nil {
			db.Close()
			return nil, err
		}
	}
	db.SetMaxOpenConns(postgresConnections)
	db.SetMaxIdleConns(postgresConnections)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: cannot reach Postgres at %s: %w", redactDSN(opts.PostgresDSN), err)
	}
	return &Store{dialect: Postgres, writer: db, reader: db, clock: opts.Clock, lockTimeout: opts.LockTimeout}, nil
}

func createSchema(ctx context.Context, cfg *pgx.ConnConfig, schema string) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("store: cannot reach Postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		var pgErr *pgconn.PgError
		// Two processes creating the schema at once: one loses the race on the
		// catalog's unique index, and the schema exists either way.
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return nil
		}
		return fmt.Errorf("store: create schema %s: %w", schema, err)
	}
	return nil
}

func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return "(the given DSN)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Dialect says which database this is.
func (s *Store) Dialect() Dialect { return s.dialect }

// Clock is the store's clock, which stamps records.
func (s *Store) Clock() clock.Clock { return s.clock }

// Close closes the database.
func (s *Store) Close() error {
	s.stopCommitters()
	if s.generationStatement != nil {
		s.generationStatement.Close()
	}
	s.statements.Range(func(_, stmt any) bool {
		stmt.(*sql.Stmt).Close()
		return true
	})
	err := s.writer.Close()
	if s.reader != s.writer {
		err = errors.Join(err, s.reader.Close())
	}
	return err
}

// Tx is one database transaction.
type Tx struct {
	readOnly bool
	// movedGeneration says the transaction moved a generation: once it
	// ends, what the store knew of generations is forgotten.
	movedGeneration bool
	unprepared      []string
	tx              *sql.Tx
	dialect         Dialect
	now             time.Time
	store           *Store
}

// Now is the time the transaction started, by the store's clock.
func (tx *Tx) Now() time.Time { return tx.now }

// Write runs fn in a read-write transaction and commits it when fn returns
// nil. Lock waits that time out return ErrContention.
func (s *Store) Write(ctx context.Context, fn func(*Tx) error) error {
	w := &pendingWrite{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.writes <- w
	// The write cannot be withdrawn once queued: waiting for it keeps the
	// caller from acting on a write whose outcome it does not know.
	return <-w.done
}

// Read runs fn in a read-only transaction.
func (s *Store) Read(ctx context.Context, fn func(*Tx) error) error {
	return s.run(ctx, s.reader, true, fn)
}

// postgresConnections bounds the Postgres pool, idle connections included.
const postgresConnections = 32

func (s *Store) run(ctx context.Context, db *sql.DB, readOnly bool, fn func(*Tx) error) error {
	options := &sql.TxOptions{ReadOnly: readOnly && s.dialect == Postgres}
	sqlTx, err := db.BeginTx(ctx, options)
	// A pooled connection the server has ended (a restart, a terminated
	// backend) fails at its first use, which is this BEGIN: nothing ran
	// on it, so begin again on the next. Every idle one may have been
	// ended at once, hence as many tries as the pool holds.
	for try := 0; err != nil && s.dialect == Postgres && connectionEnded(err) && ctx.Err() == nil && try < postgresConnections; try++ {
		sqlTx, err = db.BeginTx(ctx, options)
	}
	if err != nil {
		return s.classify(fmt.Errorf("store: begin: %w", err))
	}
	tx := &Tx{tx: sqlTx, dialect: s.dialect, now: s.clock.Now(), store: s, readOnly: db == s.reader && s.reader != s.writer}
	if s.dialect == Postgres && !readOnly {
		if _, err := sqlTx.ExecContext(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", s.lockTimeout.Milliseconds())); err != nil {
			sqlTx.Rollback()
			return s.classify(fmt.Errorf("store: set lock timeout: %w", err))
		}
	}
	defer func() {
		if len(tx.unprepared) > 0 {
			s.prepare(context.WithoutCancel(ctx), tx)
		}
	}()
	defer func() {
		if tx.movedGeneration {
			s.generations.forget()
		}
	}()
	if err := fn(tx); err != nil {
		sqlTx.Rollback()
		return s.classify(err)
	}
	if err := s.commit(sqlTx, readOnly); err != nil {
		return s.classify(fmt.Errorf("store: commit: %w", err))
	}
	return nil
}

// commit commits, timing a read-write transaction's commit for
// ObserveCommit.
func (s *Store) commit(sqlTx *sql.Tx, readOnly bool) error {
	if readOnly || s.observeCommit == nil {
		return sqlTx.Commit()
	}
	started := s.clock.Now()
	err := sqlTx.Commit()
	s.observeCommit(s.clock.Since(started))
	return err
}

// connectionEnded reports whether err says the server ended the
// connection: an operator or a shutdown terminated it (class 57P), or it
// was closed under the client.
func connectionEnded(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "57P")
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || pgconn.SafeToRetry(err)
}

// classify turns the database's words for "too busy" into ErrContention.
func (s *Store) classify(err error) error {
	if err == nil || errors.Is(err, ErrContention) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "55P03", "40001", "40P01": // lock_not_available, serialization_failure, deadlock_detected
			return fmt.Errorf("%w: %w", ErrContention, err)
		}
	}
	if s.dialect == SQLite {
		msg := err.Error()
		if strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked") {
			return fmt.Errorf("%w: %w", ErrContention, err)
		}
	}
	return err
}

// rebind turns ? placeholders into $n for Postgres. Our statements never hold
// a literal question mark.
func (tx *Tx) rebind(query string) string { return rebind(tx.dialect, query) }

func rebind(d Dialect, query string) string {
	if d != Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// statement finds the prepared form of a query. Parsing SQL on every request
// costs more than running it, so each query is prepared once per store —
// after the transaction that first meets it, since SQLite's one writer
// connection is busy until then.
func (tx *Tx) statement(ctx context.Context, query string) *sql.Stmt {
	if stmt, ok := tx.store.statements.Load(tx.statementKey(query)); ok {
		return tx.tx.StmtContext(ctx, stmt.(*sql.Stmt))
	}
	tx.unprepared = append(tx.unprepared, query)
	return nil
}

func (tx *Tx) statementKey(query string) string {
	if tx.readOnly {
		return "r:" + query
	}
	return "w:" + query
}

// maxStatements bounds the prepared statements a store keeps.
const maxStatements = 512

// prepare prepares the queries a finished transaction ran unprepared.
func (s *Store) prepare(ctx context.Context, tx *Tx) {
	db := s.writer
	if tx.readOnly {
		db = s.reader
	}
	for _, query := range tx.unprepared {
		key := tx.statementKey(query)
		if _, ok := s.statements.Load(key); ok || s.statementCount.Load() >= maxStatements {
			continue
		}
		stmt, err := db.PrepareContext(ctx, tx.rebind(query))
		if err != nil {
			continue // it runs unprepared, as before
		}
		if _, loaded := s.statements.LoadOrStore(key, stmt); loaded {
			stmt.Close()
			continue
		}
		s.statementCount.Add(1)
	}
}

func (tx *Tx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if stmt := tx.statement(ctx, query); stmt != nil {
		return stmt.ExecContext(ctx, args...)
	}
	return tx.tx.ExecContext(ctx, tx.rebind(query), args...)
}

func (tx *Tx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if stmt := tx.statement(ctx, query); stmt != nil {
		return stmt.QueryContext(ctx, args...)
	}
	return tx.tx.QueryContext(ctx, tx.rebind(query), args...)
}

func (tx *Tx) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if stmt := tx.statement(ctx, query); stmt != nil {
		return stmt.QueryRowContext(ctx, args...)
	}
	return tx.tx.QueryRowContext(ctx, tx.rebind(query), args...)
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}
