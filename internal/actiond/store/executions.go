package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/coded"
)

// Execution statuses.
const (
	Queued         = "QUEUED"
	Running        = "RUNNING"
	Accepted       = "ACCEPTED"
	RetryScheduled = "RETRY_SCHEDULED"
	Succeeded      = "SUCCEEDED"
	Failed         = "FAILED"
	Exhausted      = "EXHAUSTED"
	Cancelled      = "CANCELLED"
)

// Execution roles: what an execution is in the lineage of a request.
const (
	RoleRequest = "request" // one admitted MCP request
	RoleRefusal = "refusal" // a request refused after its token was checked
	RoleCall    = "call"    // a call of a tool, beneath a request or another call
	RoleTask    = "task"    // a started execution: a callable agent's run
	RoleReplay  = "replay"  // a recorded request run again: preview, in no session
)

// ErrSettled is returned when an execution that should still be RUNNING was
// already finished by someone else: another process settled it as
// abandoned, or the commit that finished it went through after all.
var ErrSettled = coded.New(CodeSettled, "the execution was already finished").
	WithHint("Read the execution: its record says how it ended.")

// CodeSettled is ErrSettled's code.
const CodeSettled = "store_settled"

// Execution is the record of one run of an action: a request to an MCP
// server, or a call beneath one.
type Execution struct {
	Seq           int64           `json:"-"`
	ID            string          `json:"id"`
	Account       string          `json:"account"`
	ActionID      string          `json:"actionId"`
	ActionVersion int64           `json:"actionVersion"`
	ActionName    string          `json:"actionName"`
	EventType     string          `json:"eventType"`
	Role          string          `json:"role"`
	ParentID      string          `json:"parentId,omitempty"`
	StartedBy     string          `json:"startedBy,omitempty"`
	SessionID     string          `json:"sessionId,omitempty"`
	Status        string          `json:"status"`
	Caller        string          `json:"caller"`
	Subject       string          `json:"subject"`
	Client        string          `json:"client"`
	Input         json.RawMessage `json:"input,omitempty"`
	Output        json.RawMessage `json:"output,omitempty"`
	Error         json.RawMessage `json:"error,omitempty"`
	Invocation    json.RawMessage `json:"invocation,omitempty"`
	Preview       bool            `json:"preview"`
	WriteSet      []Write         `json:"writeSet,omitempty"`
	RolledBackBy  string          `json:"rolledBackByExecutionId,omitempty"`
	// Draft is the unpublished definition an invoke ran, its references
	// resolved; nil when a stored version ran.
	Draft json.RawMessage `json:"draft,omitempty"`
	// CancelledBy names who cancelled the execution and with which request.
	CancelledBy json.RawMessage `json:"cancelledBy,omitempty"`
	// Owner is the process running the execution while it is RUNNING, so
	// that another process can settle it when that one dies.
	Owner     string    `json:"-"`
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
}

const executionColumns = "seq, id, account, action_id, action_version, action_name, event_type, role, parent_id, started_by, session_id, status, caller, subject, client, input, output, error, invocation, preview, write_set, rolled_back_by, cancelled_by, owner, started_at, ended_at, draft"

// InsertExecution records a new execution.
func (tx *Tx) InsertExecution(ctx context.Context, e *Execution) error {
	return tx.InsertExecutions(ctx, []*Execution{e})
}

// insertColumns are the columns an insert writes: all but seq.
const insertColumns = "id, account, action_id, action_version, action_name, event_type, role, parent_id, started_by, session_id, status, caller, subject, client, input, output, error, invocation, preview, write_set, rolled_back_by, cancelled_by, owner, started_at, ended_at, draft"

// insertBatch bounds the rows one INSERT statement writes: 26 values each,
// far below either database's limit on a statement's parameters.
const insertBatch = 64

// InsertExecutions records new executions, in order, with as few
// statements as their number allows: a program's 64 calls are one.
func (tx *Tx) InsertExecutions(ctx context.Context, executions []*Execution) error {
	for len(executions) > 0 {
		n := min(len(executions), insertBatch)
		if err := tx.insertExecutions(ctx, executions[:n]); err != nil {
			return err
		}
		executions = executions[n:]
	}
	return nil
}

func (tx *Tx) insertExecutions(ctx context.Context, batch []*Execution) error {
	args := make([]any, 0, 26*len(batch))
	for _, e := range batch {
		if e.StartedAt.IsZero() {
			e.StartedAt = tx.now
		}
		writeSet, err := encodeWriteSet(e.WriteSet)
		if err != nil {
			return err
		}
		args = append(args, e.ID, e.Account, e.ActionID, e.ActionVersion, e.ActionName, e.EventType, e.Role,
			nullable(e.ParentID), nullable(e.StartedBy), nullable(e.SessionID), e.Status, e.Caller, e.Subject, e.Client,
			nullableJSON(e.Input), nullableJSON(e.Output), nullableJSON(e.Error), nullableJSON(e.Invocation),
			tx.boolean(e.Preview), writeSet, nullable(e.RolledBackBy), nullableJSON(e.CancelledBy), nullable(e.Owner),
			micros(e.StartedAt), micros(e.EndedAt), nullableJSON(e.Draft))
	}
	if _, err := tx.exec(ctx, insertStatement(len(batch)), args...); err != nil {
		if len(batch) == 1 {
			return fmt.Errorf("store: record execution %s: %w", batch[0].ID, err)
		}
		return fmt.Errorf("store: record %d executions, %s first: %w", len(batch), batch[0].ID, err)
	}
	return nil
}

// insertStatements are the INSERT statements of 1 to insertBatch rows,
// made once: the store prepares each by its text.
var insertStatements = func() []string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", 26), ", ") + ")"
	statements := make([]string, insertBatch+1)
	for n := 1; n <= insertBatch; n++ {
		statements[n] = "INSERT INTO executions (" + insertColumns + ") VALUES " + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
	}
	return statements
}()

func insertStatement(rows int) string { return insertStatements[rows] }

// FinishExecution records how a RUNNING execution ended: its status, output
// or error, invocation details, and when. An execution that is no longer
// RUNNING is ErrSettled: whoever finished it first keeps their record.
func (tx *Tx) FinishExecution(ctx context.Context, e *Execution) error {
	if e.EndedAt.IsZero() {
		e.EndedAt = tx.now
	}
	writeSet, err := encodeWriteSet(e.WriteSet)
	if err != nil {
		return err
	}
	res, err := tx.exec(ctx, `UPDATE executions SET status = ?, output = ?, error = ?, invocation = ?, write_set = ?,
		session_id = ?, rolled_back_by = ?, cancelled_by = ?, owner = NULL, ended_at = ? WHERE id = ? AND status = ?`,
		e.Status, nullableJSON(e.Output), nullableJSON(e.Error), nullableJSON(e.Invocation), writeSet,
		nullable(e.SessionID), nullable(e.RolledBackBy), nullableJSON(e.CancelledBy), micros(e.EndedAt), e.ID, Running)
	if err != nil {
		return fmt.Errorf("store: finish execution %s: %w", e.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var status string
	err = tx.queryRow(ctx, "SELECT status FROM executions WHERE id = ?", e.ID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: finish execution %s: %w", e.ID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: finish execution %s: %w", e.ID, err)
	}
	return fmt.Errorf("store: finish execution %s, already %s: %w", e.ID, status, ErrSettled)
}

// ExecutionStatus reads an execution's status.
func (tx *Tx) ExecutionStatus(ctx context.Context, id string) (string, error) {
	var status string
	err := tx.queryRow(ctx, "SELECT status FROM executions WHERE id = ?", id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("store: execution %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("store: read execution %s: %w", id, err)
	}
	return status, nil
}

// MarkRolledBack marks every tool call beneath parent, at any depth, that no
// earlier failure marked, as rolled back by `by`: a failed or cancelled
// task's calls, whose writes were dropped with it.
func (tx *Tx) MarkRolledBack(ctx context.Context, parent, by string) error {
	_, err := tx.exec(ctx, `WITH RECURSIVE beneath(id) AS (
			SELECT id FROM executions WHERE parent_id = ? AND event_type = 'tool.call'
			UNION ALL SELECT e.id FROM executions e JOIN beneath b ON e.parent_id = b.id)
		UPDATE executions SET rolled_back_by = ? WHERE id IN (SELECT id FROM beneath) AND rolled_back_by IS NULL`, parent, by)
	if err != nil {
		return fmt.Errorf("store: mark the calls of %s rolled back: %w", parent, err)
	}
	return nil
}

// Execution reads one execution.
func (tx *Tx) Execution(ctx context.Context, account, id string) (*Execution, error) {
	rows, err := tx.query(ctx, "SELECT "+executionColumns+" FROM executions WHERE account = ? AND id = ?", account, id)
	if err != nil {
		return nil, fmt.Errorf("store: read execution %s: %w", id, err)
	}
	list, err := scanExecutions(rows)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("store: execution %s: %w", id, ErrNotFound)
	}
	return list[0], nil
}

// ExecutionFilter selects executions; empty fields select everything.
type ExecutionFilter struct {
	Account   string
	ActionID  string
	SessionID string
	ParentID  string
	// StartedBy selects what a request started: its tasks.
	StartedBy string
	Role      string
	Status    string
	Caller    string
	Preview   *bool
	// StartedFrom and StartedBefore bound StartedAt: from inclusive,
	// before exclusive; zero leaves that side open.
	StartedFrom, StartedBefore time.Time
	// AfterSeq and BeforeSeq page: only executions recorded after, or
	// before, this one.
	AfterSeq, BeforeSeq int64
	// Newest lists the newest first, so that a page can end at the latest.
	Newest bool
	Limit  int
}

// Executions lists executions in the order they were recorded.
func (tx *Tx) Executions(ctx context.Context, f ExecutionFilter) ([]*Execution, error) {
	where := []string{"account = ?"}
	args := []any{f.Account}
	add := func(clause string, v any) {
		where = append(where, clause)
		args = append(args, v)
	}
	if f.ActionID != "" {
		add("action_id = ?", f.ActionID)
	}
	if f.SessionID != "" {
		add("session_id = ?", f.SessionID)
	}
	if f.StartedBy != "" {
		add("started_by = ?", f.StartedBy)
	}
	if f.ParentID != "" {
		add("parent_id = ?", f.ParentID)
	}
	if f.Role != "" {
		add("role = ?", f.Role)
	}
	if f.Status != "" {
		add("status = ?", f.Status)
	}
	if f.Caller != "" {
		add("caller = ?", f.Caller)
	}
	if f.Preview != nil {
		add("preview = ?", tx.boolean(*f.Preview))
	}
	if !f.StartedFrom.IsZero() {
		add("started_at >= ?", micros(f.StartedFrom))
	}
	if !f.StartedBefore.IsZero() {
		add("started_at < ?", micros(f.StartedBefore))
	}
	if f.AfterSeq > 0 {
		add("seq > ?", f.AfterSeq)
	}
	if f.BeforeSeq > 0 {
		add("seq < ?", f.BeforeSeq)
	}
	order := " ORDER BY seq"
	if f.Newest {
		order += " DESC"
	}
	query := "SELECT " + executionColumns + " FROM executions WHERE " + strings.Join(where, " AND ") + order
	if f.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := tx.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list executions: %w", err)
	}
	return scanExecutions(rows)
}

func scanExecutions(rows *sql.Rows) ([]*Execution, error) {
	defer rows.Close()
	var out []*Execution
	for rows.Next() {
		var e Execution
		var parent, startedBy, session, input, output, errText, invocation, writeSet, rolledBack, cancelledBy, owner, draft sql.NullString
		var preview any
		var started, ended int64
		err := rows.Scan(&e.Seq, &e.ID, &e.Account, &e.ActionID, &e.ActionVersion, &e.ActionName, &e.EventType, &e.Role,
			&parent, &startedBy, &session, &e.Status, &e.Caller, &e.Subject, &e.Client, &input, &output, &errText,
			&invocation, &preview, &writeSet, &rolledBack, &cancelledBy, &owner, &started, &ended, &draft)
		if err != nil {
			return nil, fmt.Errorf("store: read execution: %w", err)
		}
		e.ParentID, e.StartedBy, e.SessionID, e.RolledBackBy = parent.String, startedBy.String, session.String, rolledBack.String
		e.CancelledBy, e.Owner, e.Draft = rawJSON(cancelledBy), owner.String, rawJSON(draft)
		e.Input, e.Output, e.Error, e.Invocation = rawJSON(input), rawJSON(output), rawJSON(errText), rawJSON(invocation)
		e.Preview = truthy(preview)
		e.StartedAt, e.EndedAt = fromMicros(started), fromMicros(ended)
		if writeSet.Valid && writeSet.String != "" {
			if err := json.Unmarshal([]byte(writeSet.String), &e.WriteSet); err != nil {
				return nil, fmt.Errorf("store: read execution %s: write set: %w", e.ID, err)
			}
		}
		out = append(out, &e)
	}
	return out, rows.Err()
}

// Use kinds.
const (
	UseTool  = "TOOL"
	UseSkill = "SKILL"
)

// Use records that a request used what an execution produced.
type Use struct {
	Kind string `json:"kind"`
	// Ref is the execution whose output was used.
	Ref string `json:"executionId"`
}

// AddUse records a use by an execution.
func (tx *Tx) AddUse(ctx context.Context, executionID string, use Use) error {
	_, err := tx.exec(ctx, `INSERT INTO execution_uses (execution_id, seq, kind, ref)
		VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM execution_uses WHERE execution_id = ?), ?, ?)`,
		executionID, executionID, use.Kind, use.Ref)
	if err != nil {
		return fmt.Errorf("store: record use by %s: %w", executionID, err)
	}
	return nil
}

// AddUses records uses by an execution, in order, after any it recorded
// before.
func (tx *Tx) AddUses(ctx context.Context, executionID string, uses []Use) error {
	if len(uses) <= 1 {
		for _, use := range uses {
			if err := tx.AddUse(ctx, executionID, use); err != nil {
				return err
			}
		}
		return nil
	}
	var last int
	if err := tx.queryRow(ctx, "SELECT COALESCE(MAX(seq), 0) FROM execution_uses WHERE execution_id = ?", executionID).Scan(&last); err != nil {
		return fmt.Errorf("store: record uses by %s: %w", executionID, err)
	}
	for len(uses) > 0 {
		n := min(len(uses), insertBatch)
		args := make([]any, 0, 4*n)
		for i, use := range uses[:n] {
			args = append(args, executionID, last+i+1, use.Kind, use.Ref)
		}
		query := "INSERT INTO execution_uses (execution_id, seq, kind, ref) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?), ", n), ", ")
		if _, err := tx.exec(ctx, query, args...); err != nil {
			return fmt.Errorf("store: record uses by %s: %w", executionID, err)
		}
		last += n
		uses = uses[n:]
	}
	return nil
}

// Uses lists an execution's uses in order.
func (tx *Tx) Uses(ctx context.Context, executionID string) ([]Use, error) {
	rows, err := tx.query(ctx, "SELECT kind, ref FROM execution_uses WHERE execution_id = ? ORDER BY seq", executionID)
	if err != nil {
		return nil, fmt.Errorf("store: read uses of %s: %w", executionID, err)
	}
	defer rows.Close()
	var out []Use
	for rows.Next() {
		var u Use
		if err := rows.Scan(&u.Kind, &u.Ref); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

func encodeWriteSet(ws []Write) (any, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(ws)
	if err != nil {
		return nil, fmt.Errorf("store: encode write set: %w", err)
	}
	return string(b), nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullableJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func rawJSON(s sql.NullString) json.RawMessage {
	if !s.Valid || s.String == "" {
		return nil
	}
	return json.RawMessage(s.String)
}

func (tx *Tx) boolean(v bool) any {
	if tx.dialect == Postgres {
		return v
	}
	if v {
		return 1
	}
	return 0
}

func truthy(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case int64:
		return b != 0
	case int:
		return b != 0
	}
	return false
}

// NotStarted says whether e is a task a replay recorded as not started,
// which its invocation says: it never ran, so it cannot be rerun.
func NotStarted(e *Execution) bool {
	if e.Role != RoleTask || len(e.Invocation) == 0 {
		return false
	}
	var invocation struct {
		NotStarted bool `json:"notStarted"`
	}
	return json.Unmarshal(e.Invocation, &invocation) == nil && invocation.NotStarted
}

// GrantedInPreview says whether e is an agent's call of a tool that needs
// approval which a preview ran as if approved (its invocation says so).
func GrantedInPreview(e *Execution) bool {
	if e.Role != RoleCall || len(e.Invocation) == 0 {
		return false
	}
	var invocation struct {
		GrantedInPreview bool `json:"grantedInPreview"`
	}
	return json.Unmarshal(e.Invocation, &invocation) == nil && invocation.GrantedInPreview
}

// MarkGrantedInPreview sets the mark GrantedInPreview reads, beside what
// e's invocation already holds; an invocation that is not a JSON object
// is kept whole under "recorded" rather than dropped.
func MarkGrantedInPreview(e *Execution) {
	var invocation map[string]any
	if len(e.Invocation) > 0 && json.Unmarshal(e.Invocation, &invocation) != nil {
		invocation = map[string]any{"recorded": json.RawMessage(e.Invocation)}
	}
	if invocation == nil {
		invocation = map[string]any{}
	}
	invocation["grantedInPreview"] = true
	e.Invocation, _ = json.Marshal(invocation) // a map of JSON values always encodes
}
