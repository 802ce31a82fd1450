package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Session is one session of an MCP server: the requests its id expression
// groups, with the input fixed when it was created.
type Session struct {
	Account   string          `json:"account"`
	ServerID  string          `json:"serverId"`
	ID        string          `json:"id"`
	Input     json.RawMessage `json:"input"`
	CreatedAt time.Time       `json:"createdAt"`
	ClosedAt  time.Time       `json:"closedAt,omitzero"`
	// Requests counts the requests admitted to the session.
	Requests int64 `json:"-"`
	// Weight is what the session's requests weighed over its whole life:
	// each one, or the calls it made when more (see SessionLoad).
	Weight int64 `json:"-"`
}

// Closed says whether the session was closed.
func (s *Session) Closed() bool { return !s.ClosedAt.IsZero() }

// Session input states.
const (
	InputClaimed  = "CLAIMED"
	InputConsumed = "CONSUMED"
)

// SessionInput is one entry of a session's ordered request log.
type SessionInput struct {
	Seq         int64     `json:"seq"`
	Type        string    `json:"type"`
	ExecutionID string    `json:"executionId"`
	State       string    `json:"state"`
	Calls       int       `json:"calls"`
	AdmittedAt  time.Time `json:"admittedAt"`
}

// SessionKey names a session.
type SessionKey struct {
	Account  string
	ServerID string
	ID       string
}

// LockSession finds a session, or creates it with input, and locks it for
// the rest of the transaction, so that requests to one session are admitted
// one after another. created says whether this call made it.
func (tx *Tx) LockSession(ctx context.Context, key SessionKey, input json.RawMessage) (s *Session, created bool, err error) {
	if tx.dialect == Postgres {
		res, err := tx.exec(ctx, `INSERT INTO sessions (account, server_id, id, input, created_at, closed_at, next_seq)
			VALUES (?, ?, ?, ?, ?, 0, 1) ON CONFLICT DO NOTHING`, key.Account, key.ServerID, key.ID, string(input), micros(tx.now))
		if err != nil {
			return nil, false, fmt.Errorf("store: create session: %w", err)
		}
		n, _ := res.RowsAffected()
		created = n == 1
		s, err = tx.readSession(ctx, key, " FOR UPDATE")
		return s, created, err
	}
	// SQLite transactions here begin IMMEDIATE: this one already holds the
	// database's only write lock.
	s, err = tx.readSession(ctx, key, "")
	if err == nil {
		return s, false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, false, err
	}
	_, err = tx.exec(ctx, `INSERT INTO sessions (account, server_id, id, input, created_at, closed_at, next_seq)
		VALUES (?, ?, ?, ?, ?, 0, 1)`, key.Account, key.ServerID, key.ID, string(input), micros(tx.now))
	if err != nil {
		return nil, false, fmt.Errorf("store: create session: %w", err)
	}
	return &Session{Account: key.Account, ServerID: key.ServerID, ID: key.ID, Input: input, CreatedAt: tx.now}, true, nil
}

// Session reads a session without locking it.
func (tx *Tx) Session(ctx context.Context, key SessionKey) (*Session, error) {
	return tx.readSession(ctx, key, "")
}

func (tx *Tx) readSession(ctx context.Context, key SessionKey, suffix string) (*Session, error) {
	s := &Session{Account: key.Account, ServerID: key.ServerID, ID: key.ID}
	var input string
	var created, closed, next int64
	err := tx.queryRow(ctx, "SELECT input, created_at, closed_at, next_seq, weight FROM sessions WHERE account = ? AND server_id = ? AND id = ?"+suffix,
		key.Account, key.ServerID, key.ID).Scan(&input, &created, &closed, &next, &s.Weight)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: session %q: %w", key.ID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read session %q: %w", key.ID, err)
	}
	s.Input, s.CreatedAt, s.ClosedAt, s.Requests = json.RawMessage(input), fromMicros(created), fromMicros(closed), next-1
	return s, nil
}

// Sessions lists a server's sessions (all servers' when serverID is empty).
func (tx *Tx) Sessions(ctx context.Context, account, serverID string) ([]*Session, error) {
	query := "SELECT server_id, id, input, created_at, closed_at, next_seq FROM sessions WHERE account = ?"
	args := []any{account}
	if serverID != "" {
		query += " AND server_id = ?"
		args = append(args, serverID)
	}
	rows, err := tx.query(ctx, query+" ORDER BY created_at, id", args...)
	if err != nil {
		return nil, fmt.Errorf("store: list sessions: %w", err)
	}
	defer rows.Close()
	var out []*Session
	for rows.Next() {
		s := &Session{Account: account}
		var input string
		var created, closed, next int64
		if err := rows.Scan(&s.ServerID, &s.ID, &input, &created, &closed, &next); err != nil {
			return nil, err
		}
		s.Input, s.CreatedAt, s.ClosedAt, s.Requests = json.RawMessage(input), fromMicros(created), fromMicros(closed), next-1
		out = append(out, s)
	}
	return out, rows.Err()
}

// CloseSession closes a session; its new requests are refused from now on.
func (tx *Tx) CloseSession(ctx context.Context, key SessionKey) error {
	res, err := tx.exec(ctx, "UPDATE sessions SET closed_at = ? WHERE account = ? AND server_id = ? AND id = ? AND closed_at = 0",
		micros(tx.now), key.Account, key.ServerID, key.ID)
	if err != nil {
		return fmt.Errorf("store: close session %q: %w", key.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := tx.readSession(ctx, key, ""); err != nil {
			return err
		}
	}
	return nil
}

// Load is how much of a session's rate limit the last window used.
type Load struct {
	// Used counts each request admitted in the window as one, or as the
	// number of calls it made once its outcome is recorded, when more. It
	// is exact once it reaches the limit; under it, it may count requests
	// older than the window too.
	Used int
	// FreeAt is when enough of those requests age out of the window for one
	// more to fit under limit.
	FreeAt time.Time
}

// SessionLoad measures the requests admitted to a locked session since the
// window opened, against limit (the calls per minute). A session whose
// requests never weighed as much as the limit over its whole life is under
// it in any window, and its window is not read.
func (tx *Tx) SessionLoad(ctx context.Context, s *Session, window time.Duration, limit int) (Load, error) {
	if s.Weight < int64(limit) {
		return Load{Used: int(s.Weight)}, nil
	}
	key := SessionKey{Account: s.Account, ServerID: s.ServerID, ID: s.ID}
	since := tx.now.Add(-window)
	rows, err := tx.query(ctx, `SELECT calls, admitted_at FROM session_inputs
		WHERE account = ? AND server_id = ? AND session_id = ? AND admitted_at > ? ORDER BY admitted_at, seq`,
		key.Account, key.ServerID, key.ID, micros(since))
	if err != nil {
		return Load{}, fmt.Errorf("store: measure session %q: %w", key.ID, err)
	}
	defer rows.Close()
	type entry struct {
		weight int
		at     time.Time
	}
	var entries []entry
	var load Load
	for rows.Next() {
		var calls int
		var at int64
		if err := rows.Scan(&calls, &at); err != nil {
			return Load{}, err
		}
		weight := max(calls, 1)
		load.Used += weight
		entries = append(entries, entry{weight, fromMicros(at)})
	}
	if err := rows.Err(); err != nil {
		return Load{}, err
	}
	remaining := load.Used
	for _, e := range entries {
		if remaining < limit {
			break
		}
		remaining -= e.weight
		load.FreeAt = e.at.Add(window)
	}
	return load, nil
}

// AppendSessionInput adds a REQUEST input to a locked session's log, CLAIMED.
func (tx *Tx) AppendSessionInput(ctx context.Context, key SessionKey, executionID string) (*SessionInput, error) {
	var seq int64
	err := tx.queryRow(ctx, "UPDATE sessions SET next_seq = next_seq + 1, weight = weight + 1 WHERE account = ? AND server_id = ? AND id = ? RETURNING next_seq - 1",
		key.Account, key.ServerID, key.ID).Scan(&seq)
	if err != nil {
		return nil, fmt.Errorf("store: append to session %q: %w", key.ID, err)
	}
	in := &SessionInput{Seq: seq, Type: "REQUEST", ExecutionID: executionID, State: InputClaimed, AdmittedAt: tx.now}
	_, err = tx.exec(ctx, `INSERT INTO session_inputs (account, server_id, session_id, seq, type, execution_id, state, calls, admitted_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)`, key.Account, key.ServerID, key.ID, seq, in.Type, executionID, in.State, micros(tx.now))
	if err != nil {
		return nil, fmt.Errorf("store: append to session %q: %w", key.ID, err)
	}
	return in, nil
}

// ConsumeSessionInput marks a request's input CONSUMED with the number of
// tool calls it made.
func (tx *Tx) ConsumeSessionInput(ctx context.Context, key SessionKey, executionID string, calls int) error {
	// By execution_id alone, which is unique: given the session's columns
	// too, SQLite's planner walks the session's inputs, which grow without
	// bound.
	res, err := tx.exec(ctx, `UPDATE session_inputs SET state = ?, calls = ? WHERE execution_id = ?`,
		InputConsumed, calls, executionID)
	if err != nil {
		return fmt.Errorf("store: consume session input of %s: %w", executionID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: consume session input of %s: %w", executionID, ErrNotFound)
	}
	if calls > 1 {
		// The request weighs its calls now, one of which its admission
		// counted.
		_, err := tx.exec(ctx, "UPDATE sessions SET weight = weight + ? WHERE account = ? AND server_id = ? AND id = ?",
			calls-1, key.Account, key.ServerID, key.ID)
		if err != nil {
			return fmt.Errorf("store: weigh session %q: %w", key.ID, err)
		}
	}
	return nil
}

// SessionInputs lists a session's inputs in order.
func (tx *Tx) SessionInputs(ctx context.Context, key SessionKey) ([]SessionInput, error) {
	rows, err := tx.query(ctx, `SELECT seq, type, execution_id, state, calls, admitted_at FROM session_inputs
		WHERE account = ? AND server_id = ? AND session_id = ? ORDER BY seq`, key.Account, key.ServerID, key.ID)
	if err != nil {
		return nil, fmt.Errorf("store: read session %q inputs: %w", key.ID, err)
	}
	defer rows.Close()
	var out []SessionInput
	for rows.Next() {
		var in SessionInput
		var at int64
		if err := rows.Scan(&in.Seq, &in.Type, &in.ExecutionID, &in.State, &in.Calls, &at); err != nil {
			return nil, err
		}
		in.AdmittedAt = fromMicros(at)
		out = append(out, in)
	}
	return out, rows.Err()
}
