package store

import (
	"context"
	"fmt"
	"strings"
)

// schemaVersion grows with every change to the statements below; Open applies
// what a database lacks.
const schemaVersion = 5

// The same tables on both databases. {{serial}} and {{bool}} are the only
// words that differ.
const schemaV1 = `
CREATE TABLE IF NOT EXISTS rows (
	account    TEXT NOT NULL,
	tbl        TEXT NOT NULL,
	key        TEXT {{collate}}NOT NULL,
	value      TEXT NOT NULL,
	version    BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (account, tbl, key)
);
CREATE TABLE IF NOT EXISTS executions (
	seq            {{serial}},
	id             TEXT NOT NULL UNIQUE,
	account        TEXT NOT NULL,
	action_id      TEXT NOT NULL,
	action_version BIGINT NOT NULL,
	action_name    TEXT NOT NULL,
	event_type     TEXT NOT NULL,
	role           TEXT NOT NULL,
	parent_id      TEXT,
	started_by     TEXT,
	session_id     TEXT,
	status         TEXT NOT NULL,
	caller         TEXT NOT NULL,
	subject        TEXT NOT NULL,
	client         TEXT NOT NULL,
	input          TEXT,
	output         TEXT,
	error          TEXT,
	invocation     TEXT,
	preview        {{bool}} NOT NULL,
	write_set      TEXT,
	rolled_back_by TEXT,
	started_at     BIGINT NOT NULL,
	ended_at       BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS executions_action ON executions (account, action_id, seq);
CREATE INDEX IF NOT EXISTS executions_session ON executions (account, session_id, seq);
CREATE INDEX IF NOT EXISTS executions_parent ON executions (parent_id, seq);
CREATE TABLE IF NOT EXISTS execution_uses (
	execution_id TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	kind         TEXT NOT NULL,
	ref          TEXT NOT NULL,
	PRIMARY KEY (execution_id, seq)
);
CREATE TABLE IF NOT EXISTS sessions (
	account    TEXT NOT NULL,
	server_id  TEXT NOT NULL,
	id         TEXT NOT NULL,
	input      TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	closed_at  BIGINT NOT NULL,
	next_seq   BIGINT NOT NULL,
	PRIMARY KEY (account, server_id, id)
);
CREATE TABLE IF NOT EXISTS session_inputs (
	account      TEXT NOT NULL,
	server_id    TEXT NOT NULL,
	session_id   TEXT NOT NULL,
	seq          BIGINT NOT NULL,
	type         TEXT NOT NULL,
	execution_id TEXT NOT NULL,
	state        TEXT NOT NULL,
	calls        INTEGER NOT NULL,
	admitted_at  BIGINT NOT NULL,
	PRIMARY KEY (account, server_id, session_id, seq)
);
CREATE INDEX IF NOT EXISTS session_inputs_admitted ON session_inputs (account, server_id, session_id, admitted_at);
CREATE INDEX IF NOT EXISTS session_inputs_execution ON session_inputs (execution_id);
CREATE TABLE IF NOT EXISTS refusal_windows (
	account        TEXT NOT NULL,
	server_id      TEXT NOT NULL,
	principal      TEXT NOT NULL,
	subject        TEXT NOT NULL,
	window_start   BIGINT NOT NULL,
	unrecorded     INTEGER NOT NULL,
	PRIMARY KEY (account, server_id, principal, subject)
);
CREATE TABLE IF NOT EXISTS signing_keys (
	id         TEXT PRIMARY KEY,
	jwk        TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS generations (
	account TEXT PRIMARY KEY,
	n       BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS schema_version (
	version INTEGER NOT NULL
);
`

// upgradeV2 adds what tasks and process liveness need to a version 1
// database: who is running each RUNNING execution, and who cancelled one.
const upgradeV2 = `
ALTER TABLE executions ADD COLUMN owner TEXT;
ALTER TABLE executions ADD COLUMN cancelled_by TEXT
`

// schemaV2 holds the tables of started executions (tasks) and of the actiond
// processes sharing the database.
const schemaV2 = `
CREATE INDEX IF NOT EXISTS executions_running ON executions (owner) WHERE status = 'RUNNING';
CREATE INDEX IF NOT EXISTS executions_status ON executions (account, status, seq);
CREATE TABLE IF NOT EXISTS tasks (
	execution_id TEXT PRIMARY KEY,
	account      TEXT NOT NULL,
	server_id    TEXT NOT NULL,
	session_id   TEXT NOT NULL,
	principal    TEXT NOT NULL,
	subject      TEXT NOT NULL,
	status       TEXT NOT NULL,
	spec         TEXT NOT NULL,
	attempt      INTEGER NOT NULL,
	max_attempts INTEGER NOT NULL,
	run_after    BIGINT NOT NULL,
	owner        TEXT,
	cancel       TEXT,
	finished     {{bool}} NOT NULL,
	created_at   BIGINT NOT NULL,
	updated_at   BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_ready ON tasks (status, run_after);
CREATE INDEX IF NOT EXISTS tasks_session ON tasks (account, server_id, session_id, finished);
CREATE INDEX IF NOT EXISTS tasks_user ON tasks (account, server_id, principal, subject, finished);
CREATE INDEX IF NOT EXISTS tasks_owner ON tasks (owner, status);
CREATE TABLE IF NOT EXISTS processes (
	id           TEXT PRIMARY KEY,
	started_at   BIGINT NOT NULL,
	heartbeat_at BIGINT NOT NULL
);
`

// upgradeV3 adds the unpublished definition an invoke of a draft ran, with
// its references resolved (ActionExecution.draft).
const upgradeV3 = `
ALTER TABLE executions ADD COLUMN draft TEXT
`

// upgradeV4 adds what a serving process says of itself (its pid, host,
// listen address and public URL), so that another can name it.
const upgradeV4 = `
ALTER TABLE processes ADD COLUMN info TEXT
`

// upgradeV5 adds each session's weight: every request it admitted counted
// as one, or as the calls it made when more, over its whole life. A
// session whose weight is under its rate limit cannot have reached the
// limit in the last minute, so admission measures the window only when it
// could have (SessionLoad).
const upgradeV5 = `
ALTER TABLE sessions ADD COLUMN weight BIGINT NOT NULL DEFAULT 0;
UPDATE sessions SET weight = (SELECT COALESCE(SUM(CASE WHEN i.calls > 1 THEN i.calls ELSE 1 END), 0) FROM session_inputs i
	WHERE i.account = sessions.account AND i.server_id = sessions.server_id AND i.session_id = sessions.id)
`

func (s *Store) ddl(text string) string {
	serial, boolean, collate := "INTEGER PRIMARY KEY AUTOINCREMENT", "INTEGER", ""
	if s.dialect == Postgres {
		// Keys are compared byte by byte, as SQLite does, whatever the
		// database's locale: prefix scans depend on it.
		serial, boolean, collate = "BIGSERIAL PRIMARY KEY", "BOOLEAN", `COLLATE "C" `
	}
	return strings.NewReplacer("{{serial}}", serial, "{{bool}}", boolean, "{{collate}}", collate).Replace(text)
}

func (s *Store) migrate(ctx context.Context) error {
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	defer conn.Close()
	if s.dialect == Postgres {
		// Several actiond processes may start at once on one database.
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(7461636)"); err != nil {
			return fmt.Errorf("store: migrate: lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(7461636)")
	}
	run := func(text string) error {
		for _, stmt := range strings.Split(s.ddl(text), ";") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("store: migrate: %w\n%s", err, stmt)
			}
		}
		return nil
	}
	if err := run(schemaV1); err != nil {
		return err
	}
	var version int
	err = conn.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_version").Scan(&version)
	if err != nil {
		return fmt.Errorf("store: migrate: read version: %w", err)
	}
	if version > schemaVersion {
		return fmt.Errorf("store: the database was written by a newer actiond (schema %d, this one knows %d): upgrade actiond", version, schemaVersion)
	}
	if version < 2 {
		// A fresh database was just made at version 1 too: both take the
		// same step, under the migration lock.
		if err := run(upgradeV2); err != nil {
			return err
		}
	}
	if err := run(schemaV2); err != nil {
		return err
	}
	if version < 3 {
		if err := run(upgradeV3); err != nil {
			return err
		}
	}
	if version < 4 {
		if err := run(upgradeV4); err != nil {
			return err
		}
	}
	if version < 5 {
		if err := run(upgradeV5); err != nil {
			return err
		}
	}
	// The sign-in's tables are made where missing, whatever the version.
	if err := run(schemaSignIn); err != nil {
		return err
	}
	if version < schemaVersion {
		if _, err := conn.ExecContext(ctx, rebind(s.dialect, "INSERT INTO schema_version (version) VALUES (?)"), schemaVersion); err != nil {
			return fmt.Errorf("store: migrate: record version: %w", err)
		}
	}
	return nil
}
