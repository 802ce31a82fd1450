package store

import (
	"context"
	"fmt"
	"time"
)

// Every serving actiond process records itself in processes and refreshes
// its heartbeat while it lives. Whatever a process leaves RUNNING — the
// requests it was serving, the tasks it was running — names it as owner, so
// that once its heartbeat is old enough any other process, or the next one
// to start, can settle what it left.

// RegisterProcess records a process as alive now. Registering again (after
// others declared it dead) revives it.
func (tx *Tx) RegisterProcess(ctx context.Context, id string) error {
	_, err := tx.exec(ctx, `INSERT INTO processes (id, started_at, heartbeat_at) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`, id, micros(tx.now), micros(tx.now))
	if err != nil {
		return fmt.Errorf("store: register process: %w", err)
	}
	return nil
}

// Heartbeat refreshes a process's heartbeat. alive is false when its row is
// gone: another process declared it dead and settled its work.
func (tx *Tx) Heartbeat(ctx context.Context, id string) (alive bool, err error) {
	res, err := tx.exec(ctx, "UPDATE processes SET heartbeat_at = ? WHERE id = ?", micros(tx.now), id)
	if err != nil {
		return false, fmt.Errorf("store: heartbeat: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// DeadProcesses lists the processes other than self whose heartbeat is
// older than before, locked on Postgres (one that another process is
// settling at the same moment is skipped).
func (tx *Tx) DeadProcesses(ctx context.Context, self string, before time.Time) ([]string, error) {
	lock := ""
	if tx.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	rows, err := tx.query(ctx, "SELECT id FROM processes WHERE id <> ? AND heartbeat_at < ? ORDER BY id"+lock, self, micros(before))
	if err != nil {
		return nil, fmt.Errorf("store: find dead processes: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// ForgetProcess removes a process's row: on a clean stop, or once its work
// was settled.
func (tx *Tx) ForgetProcess(ctx context.Context, id string) error {
	if _, err := tx.exec(ctx, "DELETE FROM processes WHERE id = ?", id); err != nil {
		return fmt.Errorf("store: forget process: %w", err)
	}
	return nil
}

// UnownedOwners lists the owners of RUNNING executions started before
// `before` that no process row names ("" for executions without an owner):
// left by a process that died before anyone saw it, or by an older actiond.
func (tx *Tx) UnownedOwners(ctx context.Context, before time.Time) ([]string, error) {
	rows, err := tx.query(ctx, `SELECT DISTINCT COALESCE(owner, '') FROM executions
		WHERE status = ? AND started_at < ? AND (owner IS NULL OR owner NOT IN (SELECT id FROM processes))`, Running, micros(before))
	if err != nil {
		return nil, fmt.Errorf("store: find abandoned executions: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var owner string
		if err := rows.Scan(&owner); err != nil {
			return nil, err
		}
		out = append(out, owner)
	}
	return out, rows.Err()
}

// RunningRequestsOf lists up to limit RUNNING request executions of owner
// ("" for those without one) started before `before`.
func (tx *Tx) RunningRequestsOf(ctx context.Context, owner string, before time.Time, limit int) ([]*Execution, error) {
	where, args := "owner = ?", []any{owner}
	if owner == "" {
		where, args = "owner IS NULL", nil
	}
	rows, err := tx.query(ctx, "SELECT "+executionColumns+" FROM executions WHERE "+where+" AND status = ? AND role = ? AND started_at < ? ORDER BY seq LIMIT ?",
		append(args, Running, RoleRequest, micros(before), limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: read abandoned requests: %w", err)
	}
	return scanExecutions(rows)
}

// SettleInput marks a request's session input CONSUMED, if it has one
// still CLAIMED: a request settled after its process died made no call
// anyone can read.
func (tx *Tx) SettleInput(ctx context.Context, executionID string) error {
	_, err := tx.exec(ctx, "UPDATE session_inputs SET state = ? WHERE execution_id = ? AND state = ?", InputConsumed, executionID, InputClaimed)
	if err != nil {
		return fmt.Errorf("store: settle the session input of %s: %w", executionID, err)
	}
	return nil
}
