package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/coded"
)

// A task is a started execution: a callable agent's run, queued in the
// database so that a worker of any process sharing it can claim it. Its
// execution (role task) holds what the run recorded; its row in tasks holds
// what scheduling needs: when it may run, who runs it, which attempt this
// is, and a cancellation asked for while it runs. The two always change in
// one transaction.

// Codes of the task errors.
const (
	CodeTaskLimit = "store_task_limit"
	CodeLeaseLost = "store_lease_lost"
)

var (
	// ErrTaskLimit is returned by StartTask when the session or the user
	// already has as many unfinished tasks as the limit allows.
	ErrTaskLimit = coded.New(CodeTaskLimit, "too many unfinished tasks").
			WithHint("Wait for a task to finish, or cancel one, and start again.")
	// ErrLeaseLost is returned to a worker whose claim on a task is no
	// longer its own: the task was recovered by another process, finished,
	// or cancelled. The worker must stop and write nothing more.
	ErrLeaseLost = coded.New(CodeLeaseLost, "the task is no longer this worker's to run").
			WithHint("Stop working on the task: another process recovered it, or it ended.")
)

// Task is the scheduling of a started execution.
type Task struct {
	ExecutionID string
	Account     string
	ServerID    string
	SessionID   string
	Principal   string
	Subject     string
	Status      string
	// Spec is what a worker needs to run the task, as its starter wrote it.
	Spec        json.RawMessage
	Attempt     int
	MaxAttempts int
	// RunAfter is when a QUEUED or RETRY_SCHEDULED task may be claimed.
	RunAfter time.Time
	// Owner is the process running it while it is RUNNING.
	Owner string
	// Cancel, when set, is the cancelledBy of a cancellation asked for while
	// the task runs: its worker stops at its next step.
	Cancel    json.RawMessage
	Finished  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Lease is one attempt's claim on a task: every write of the attempt checks
// that the task is still RUNNING under it.
type Lease struct {
	ExecutionID string
	Owner       string
	Attempt     int
}

// Lease is the task's current claim.
func (t *Task) Lease() Lease {
	return Lease{ExecutionID: t.ExecutionID, Owner: t.Owner, Attempt: t.Attempt}
}

// TaskLimits bound the unfinished tasks of one session, and of one user (a
// principal and subject) across a server's sessions.
type TaskLimits struct {
	PerSession int
	PerUser    int
}

const taskColumns = "execution_id, account, server_id, session_id, principal, subject, status, spec, attempt, max_attempts, run_after, owner, cancel, finished, created_at, updated_at"

// StartTask records a new task, QUEUED: its execution e and its scheduling
// t, once the session and the user are under their limits, counted under
// locks so that two starts at once cannot both take the last place. A start
// beyond a limit is ErrTaskLimit, and records nothing.
func (tx *Tx) StartTask(ctx context.Context, e *Execution, t *Task, limits TaskLimits) error {
	if err := tx.lockTaskScope(ctx, t); err != nil {
		return err
	}
	count := func(where string, args ...any) (int, error) {
		var n int
		err := tx.queryRow(ctx, "SELECT COUNT(*) FROM tasks WHERE account = ? AND server_id = ? AND "+where+" AND finished = ?",
			append(append([]any{t.Account, t.ServerID}, args...), tx.boolean(false))...).Scan(&n)
		return n, err
	}
	inSession, err := count("session_id = ?", t.SessionID)
	if err != nil {
		return fmt.Errorf("store: count the session's tasks: %w", err)
	}
	if limits.PerSession > 0 && inSession >= limits.PerSession {
		return fmt.Errorf("%w: the session has %d unfinished tasks, its limit", ErrTaskLimit, inSession)
	}
	ofUser, err := count("principal = ? AND subject = ?", t.Principal, t.Subject)
	if err != nil {
		return fmt.Errorf("store: count the user's tasks: %w", err)
	}
	if limits.PerUser > 0 && ofUser >= limits.PerUser {
		return fmt.Errorf("%w: the user has %d unfinished tasks at this server, its limit", ErrTaskLimit, ofUser)
	}
	e.Status, t.Status = Queued, Queued
	if err := tx.InsertExecution(ctx, e); err != nil {
		return err
	}
	if t.RunAfter.IsZero() {
		t.RunAfter = tx.now
	}
	t.CreatedAt, t.UpdatedAt = tx.now, tx.now
	_, err = tx.exec(ctx, `INSERT INTO tasks (`+taskColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?)`,
		t.ExecutionID, t.Account, t.ServerID, t.SessionID, t.Principal, t.Subject, t.Status, string(t.Spec),
		t.Attempt, t.MaxAttempts, micros(t.RunAfter), tx.boolean(false), micros(tx.now), micros(tx.now))
	if err != nil {
		return fmt.Errorf("store: record task %s: %w", t.ExecutionID, err)
	}
	return nil
}

// lockTaskScope serializes the starts of one session and of one user. On
// SQLite the transaction already holds the only write lock.
func (tx *Tx) lockTaskScope(ctx context.Context, t *Task) error {
	if tx.dialect != Postgres {
		return nil
	}
	// The session first, then the user: every start takes them in this
	// order, so two starts never wait on each other in a circle.
	for _, key := range []string{
		lockKey("session", t.Account, t.ServerID, t.SessionID),
		lockKey("user", t.Account, t.ServerID, t.Principal, t.Subject),
	} {
		if _, err := tx.exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended(?, 7461636))", key); err != nil {
			return fmt.Errorf("store: lock the task limits: %w", err)
		}
	}
	return nil
}

// lockKey joins parts so that distinct parts never make the same key: each
// is prefixed with its length.
func lockKey(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "%d:%s;", len(p), p)
	}
	return b.String()
}

// ClaimTasks claims up to n tasks that may run now for owner, oldest first:
// each becomes RUNNING under a new attempt. On Postgres a task another
// process is claiming at the same moment is skipped, so no task is claimed
// twice.
func (tx *Tx) ClaimTasks(ctx context.Context, owner string, n int) ([]*Task, error) {
	if n <= 0 {
		return nil, nil
	}
	lock := ""
	if tx.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	rows, err := tx.query(ctx, `UPDATE tasks SET status = ?, owner = ?, attempt = attempt + 1, cancel = NULL, updated_at = ?
		WHERE execution_id IN (SELECT execution_id FROM tasks WHERE status IN (?, ?) AND run_after <= ?
			ORDER BY run_after, execution_id LIMIT ?`+lock+`)
		RETURNING `+taskColumns,
		Running, owner, micros(tx.now), Queued, RetryScheduled, micros(tx.now), n)
	if err != nil {
		return nil, fmt.Errorf("store: claim tasks: %w", err)
	}
	claimed, err := scanTasks(rows)
	if err != nil {
		return nil, err
	}
	if len(claimed) == 0 {
		return nil, nil
	}
	args := []any{Running, owner}
	for _, t := range claimed {
		args = append(args, t.ExecutionID)
	}
	_, err = tx.exec(ctx, "UPDATE executions SET status = ?, owner = ? WHERE id IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(claimed)), ", ")+")", args...)
	if err != nil {
		return nil, fmt.Errorf("store: claim %d tasks: %w", len(claimed), err)
	}
	return claimed, nil
}

// HoldLease checks that the task is still RUNNING under the lease, locking
// its row for the rest of the transaction, and returns it. Otherwise it is
// ErrLeaseLost.
func (tx *Tx) HoldLease(ctx context.Context, l Lease) (*Task, error) {
	lock := ""
	if tx.dialect == Postgres {
		lock = " FOR UPDATE"
	}
	rows, err := tx.query(ctx, "SELECT "+taskColumns+" FROM tasks WHERE execution_id = ?"+lock, l.ExecutionID)
	if err != nil {
		return nil, fmt.Errorf("store: read task %s: %w", l.ExecutionID, err)
	}
	found, err := scanTasks(rows)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("store: task %s: %w", l.ExecutionID, ErrNotFound)
	}
	t := found[0]
	if t.Status != Running || t.Owner != l.Owner || t.Attempt != l.Attempt {
		return nil, fmt.Errorf("store: task %s is %s under attempt %d of %q: %w", l.ExecutionID, t.Status, t.Attempt, t.Owner, ErrLeaseLost)
	}
	return t, nil
}

// EndTask ends the lease's attempt: e says how its execution ends — its
// status, and its output, error, write set and cancelledBy; the rest of
// the execution's record stays as it is. A final status (SUCCEEDED,
// FAILED, EXHAUSTED, CANCELLED) finishes the task; RETRY_SCHEDULED puts it
// back to be claimed from runAfter on. The lease must still hold
// (ErrLeaseLost otherwise): the update of the task checks it.
func (tx *Tx) EndTask(ctx context.Context, l Lease, e *Execution, runAfter time.Time) error {
	retry := e.Status == RetryScheduled
	if !retry && !finalStatus(e.Status) {
		return fmt.Errorf("store: a task cannot end %s", e.Status)
	}
	var res sql.Result
	var err error
	if retry {
		res, err = tx.exec(ctx, `UPDATE tasks SET status = ?, owner = NULL, cancel = NULL, run_after = ?, updated_at = ?
			WHERE execution_id = ? AND status = ? AND owner = ? AND attempt = ?`,
			RetryScheduled, micros(runAfter), micros(tx.now), l.ExecutionID, Running, l.Owner, l.Attempt)
	} else {
		res, err = tx.exec(ctx, `UPDATE tasks SET status = ?, owner = NULL, finished = ?, updated_at = ?
			WHERE execution_id = ? AND status = ? AND owner = ? AND attempt = ?`,
			e.Status, tx.boolean(true), micros(tx.now), l.ExecutionID, Running, l.Owner, l.Attempt)
	}
	if err != nil {
		return fmt.Errorf("store: end task %s: %w", l.ExecutionID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		_, err := tx.HoldLease(ctx, l) // says why: gone, or another attempt's
		if err == nil {
			err = ErrLeaseLost
		}
		return fmt.Errorf("store: end task %s: %w", l.ExecutionID, err)
	}
	if retry {
		res, err = tx.exec(ctx, "UPDATE executions SET status = ?, error = ?, owner = NULL WHERE id = ? AND status = ?",
			RetryScheduled, nullableJSON(e.Error), l.ExecutionID, Running)
	} else {
		ended := e.EndedAt
		if ended.IsZero() {
			ended = tx.now
		}
		writeSet, werr := encodeWriteSet(e.WriteSet)
		if werr != nil {
			return werr
		}
		res, err = tx.exec(ctx, `UPDATE executions SET status = ?, output = ?, error = ?, write_set = ?, cancelled_by = ?, owner = NULL, ended_at = ?
			WHERE id = ? AND status = ?`,
			e.Status, nullableJSON(e.Output), nullableJSON(e.Error), writeSet, nullableJSON(e.CancelledBy), micros(ended), l.ExecutionID, Running)
	}
	if err != nil {
		return fmt.Errorf("store: end task %s: %w", l.ExecutionID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: end task %s: %w", l.ExecutionID, ErrSettled)
	}
	return nil
}

func finalStatus(status string) bool {
	switch status {
	case Succeeded, Failed, Exhausted, Cancelled:
		return true
	}
	return false
}

// CancelTask cancels a task: a QUEUED or RETRY_SCHEDULED one is CANCELLED at
// once, with by as its cancelledBy; a RUNNING one is asked to stop, which its
// worker does at its next step; a finished one is left as it is. It returns
// the task's status after the call.
func (tx *Tx) CancelTask(ctx context.Context, account, id string, by json.RawMessage) (string, error) {
	t, err := tx.lockedTask(ctx, account, id)
	if err != nil {
		return "", err
	}
	switch {
	case t.Finished:
		return t.Status, nil
	case t.Status == Running:
		if len(t.Cancel) == 0 {
			if _, err := tx.exec(ctx, "UPDATE tasks SET cancel = ?, updated_at = ? WHERE execution_id = ?", string(by), micros(tx.now), id); err != nil {
				return "", fmt.Errorf("store: cancel task %s: %w", id, err)
			}
		}
		return Running, nil
	}
	if _, err := tx.exec(ctx, "UPDATE tasks SET status = ?, finished = ?, updated_at = ? WHERE execution_id = ?",
		Cancelled, tx.boolean(true), micros(tx.now), id); err != nil {
		return "", fmt.Errorf("store: cancel task %s: %w", id, err)
	}
	if _, err := tx.exec(ctx, "UPDATE executions SET status = ?, cancelled_by = ?, owner = NULL, ended_at = ? WHERE id = ?",
		Cancelled, string(by), micros(tx.now), id); err != nil {
		return "", fmt.Errorf("store: cancel task %s: %w", id, err)
	}
	return Cancelled, nil
}

// lockedTask reads a task's scheduling for an update: on Postgres the row
// stays locked until the transaction ends (SQLite has no row locks).
func (tx *Tx) lockedTask(ctx context.Context, account, id string) (*Task, error) {
	lock := ""
	if tx.dialect == Postgres {
		lock = " FOR UPDATE"
	}
	return tx.readTask(ctx, account, id, lock)
}

// TaskByID reads a task's scheduling.
func (tx *Tx) TaskByID(ctx context.Context, account, id string) (*Task, error) {
	return tx.readTask(ctx, account, id, "")
}

// readTask reads one task, the query ending in suffix (a row lock).
func (tx *Tx) readTask(ctx context.Context, account, id, suffix string) (*Task, error) {
	rows, err := tx.query(ctx, "SELECT "+taskColumns+" FROM tasks WHERE account = ? AND execution_id = ?"+suffix, account, id)
	if err != nil {
		return nil, fmt.Errorf("store: read task %s: %w", id, err)
	}
	found, err := scanTasks(rows)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("store: task %s: %w", id, ErrNotFound)
	}
	return found[0], nil
}

// CancelRequests lists the RUNNING tasks of owner that were asked to stop.
func (tx *Tx) CancelRequests(ctx context.Context, owner string) ([]*Task, error) {
	rows, err := tx.query(ctx, "SELECT "+taskColumns+" FROM tasks WHERE owner = ? AND status = ? AND cancel IS NOT NULL", owner, Running)
	if err != nil {
		return nil, fmt.Errorf("store: read cancellations: %w", err)
	}
	return scanTasks(rows)
}

// RunningTasksOf lists the RUNNING tasks of owner ("" for those without one),
// locked on Postgres and skipped when another process holds them.
func (tx *Tx) RunningTasksOf(ctx context.Context, owner string, limit int) ([]*Task, error) {
	where, args := "owner = ?", []any{owner}
	if owner == "" {
		where, args = "owner IS NULL", nil
	}
	lock := ""
	if tx.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	rows, err := tx.query(ctx, "SELECT "+taskColumns+" FROM tasks WHERE "+where+" AND status = ? ORDER BY execution_id LIMIT ?"+lock,
		append(args, Running, limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: read running tasks: %w", err)
	}
	return scanTasks(rows)
}

// TaskCounts counts a server's tasks by status, for tests and benchmarks.
func (tx *Tx) TaskCounts(ctx context.Context, account, serverID string) (map[string]int, error) {
	rows, err := tx.query(ctx, "SELECT status, COUNT(*) FROM tasks WHERE account = ? AND server_id = ? GROUP BY status", account, serverID)
	if err != nil {
		return nil, fmt.Errorf("store: count tasks: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return nil, err
		}
		out[status] = n
	}
	return out, rows.Err()
}

func scanTasks(rows *sql.Rows) ([]*Task, error) {
	defer rows.Close()
	var out []*Task
	for rows.Next() {
		t := &Task{}
		var spec string
		var owner, cancel sql.NullString
		var finished any
		var runAfter, created, updated int64
		err := rows.Scan(&t.ExecutionID, &t.Account, &t.ServerID, &t.SessionID, &t.Principal, &t.Subject, &t.Status, &spec,
			&t.Attempt, &t.MaxAttempts, &runAfter, &owner, &cancel, &finished, &created, &updated)
		if err != nil {
			return nil, fmt.Errorf("store: read task: %w", err)
		}
		t.Spec, t.Owner, t.Cancel, t.Finished = json.RawMessage(spec), owner.String, rawJSON(cancel), truthy(finished)
		t.RunAfter, t.CreatedAt, t.UpdatedAt = fromMicros(runAfter), fromMicros(created), fromMicros(updated)
		out = append(out, t)
	}
	return out, rows.Err()
}

// ReleaseTask gives back a task whose attempt stopped without a verdict
// (its process is shutting down): it may be claimed again at once, and the
// attempt does not count against its retries.
func (tx *Tx) ReleaseTask(ctx context.Context, l Lease) error {
	if _, err := tx.HoldLease(ctx, l); err != nil {
		return err
	}
	if _, err := tx.exec(ctx, "UPDATE tasks SET status = ?, owner = NULL, attempt = attempt - 1, run_after = ?, updated_at = ? WHERE execution_id = ?",
		RetryScheduled, micros(tx.now), micros(tx.now), l.ExecutionID); err != nil {
		return fmt.Errorf("store: release task %s: %w", l.ExecutionID, err)
	}
	if _, err := tx.exec(ctx, "UPDATE executions SET status = ?, owner = NULL WHERE id = ? AND status = ?", RetryScheduled, l.ExecutionID, Running); err != nil {
		return fmt.Errorf("store: release task %s: %w", l.ExecutionID, err)
	}
	return nil
}
