package graph

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// Execution is an execution record as the API shows it.
type Execution struct {
	rec *store.Execution

	once       sync.Once
	writeSet   []*WriteSetEntry
	unreadable int
}

func (e *Execution) ID() string              { return e.rec.ID }
func (e *Execution) ActionID() string        { return e.rec.ActionID }
func (e *Execution) ActionVersion() int      { return int(e.rec.ActionVersion) }
func (e *Execution) ActionName() string      { return e.rec.ActionName }
func (e *Execution) EventType() string       { return e.rec.EventType }
func (e *Execution) Role() string            { return e.rec.Role }
func (e *Execution) Status() ExecutionStatus { return ExecutionStatus(e.rec.Status) }
func (e *Execution) Caller() string          { return e.rec.Caller }
func (e *Execution) Subject() string         { return e.rec.Subject }
func (e *Execution) Client() string          { return e.rec.Client }
func (e *Execution) Input() JSON             { return JSON(e.rec.Input) }
func (e *Execution) Output() JSON            { return JSON(e.rec.Output) }
func (e *Execution) Error() JSON             { return JSON(e.rec.Error) }
func (e *Execution) Invocation() JSON        { return JSON(e.rec.Invocation) }
func (e *Execution) Preview() bool           { return e.rec.Preview }
func (e *Execution) ParentID() *string       { return optional(e.rec.ParentID) }
func (e *Execution) SessionID() *string      { return optional(e.rec.SessionID) }
func (e *Execution) StartedBy() *string      { return optional(e.rec.StartedBy) }
func (e *Execution) StartedAt() time.Time    { return e.rec.StartedAt }

func (e *Execution) RolledBackByExecutionID() *string { return optional(e.rec.RolledBackBy) }

func (e *Execution) EndedAt() *time.Time {
	if e.rec.EndedAt.IsZero() {
		return nil
	}
	return &e.rec.EndedAt
}

// McpRequest reads the request a mcp.request execution recorded as its input
// (ACT-097, ACT-099), and the intent its invocation recorded.
func (e *Execution) McpRequest() *McpRequest {
	if e.rec.EventType != "mcp.request" {
		return nil
	}
	var input struct {
		Method          string          `json:"method"`
		Params          json.RawMessage `json:"params"`
		ID              json.RawMessage `json:"id"`
		Principal       string          `json:"principal"`
		Subject         string          `json:"subject"`
		Client          string          `json:"client"`
		ProtocolVersion string          `json:"protocolVersion"`
	}
	var invocation struct {
		Intent string `json:"intent"`
	}
	// A record written by an older endpoint may lack fields: what does not
	// decode reads as absent.
	_ = json.Unmarshal(e.rec.Input, &input)
	_ = json.Unmarshal(e.rec.Invocation, &invocation)
	return &McpRequest{
		Method:          input.Method,
		Params:          nullJSON(input.Params),
		ID:              nullJSON(input.ID),
		Principal:       input.Principal,
		Subject:         input.Subject,
		Client:          input.Client,
		ProtocolVersion: input.ProtocolVersion,
		Intent:          optional(invocation.Intent),
	}
}

func nullJSON(raw json.RawMessage) JSON {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return JSON(raw)
}

// WriteSet lists the rows of the write set the reader may SELECT; a row's
// resource is <namespace>.<table>, its document the row's new value.
func (e *Execution) WriteSet(ctx context.Context) []*WriteSetEntry {
	e.filterWriteSet(ctx)
	return e.writeSet
}

// WriteSetUnreadable counts the rows WriteSet leaves out.
func (e *Execution) WriteSetUnreadable(ctx context.Context) int {
	e.filterWriteSet(ctx)
	return e.unreadable
}

func (e *Execution) filterWriteSet(ctx context.Context) {
	e.once.Do(func() {
		access := current(ctx).env.Access
		e.writeSet = []*WriteSetEntry{}
		for _, write := range e.rec.WriteSet {
			if readable(ctx, access, write) {
				e.writeSet = append(e.writeSet, &WriteSetEntry{Table: write.Table, Key: write.Key, Value: nullJSON(write.Value), Deleted: write.Deleted})
				continue
			}
			e.unreadable++
		}
	})
}

// readable: a deleted row has no value to check a reader's policies
// against, so only the root reads it.
func readable(ctx context.Context, access Access, write store.Write) bool {
	if access.Root {
		return true
	}
	if write.Deleted {
		return false
	}
	var document any
	if err := json.Unmarshal(write.Value, &document); err != nil {
		return false
	}
	return access.Allowed(ctx, policy.Select, registry.Resource(write.Table), document)
}

// Calls lists the executions this one called, in order, that the reader
// may read.
func (e *Execution) Calls(ctx context.Context) ([]*Execution, error) {
	st := current(ctx)
	var children []*store.Execution
	err := st.env.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		children, err = tx.Executions(ctx, store.ExecutionFilter{Account: st.env.Account, ParentID: e.rec.ID})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]*Execution, 0, len(children))
	for _, child := range children {
		if st.env.Access.Allowed(ctx, policy.Select, registry.ResourceExecution, child) {
			out = append(out, &Execution{rec: child})
		}
	}
	return out, nil
}

func (e *Execution) Uses(ctx context.Context) ([]*ExecutionUse, error) {
	st := current(ctx)
	var uses []store.Use
	err := st.env.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		uses, err = tx.Uses(ctx, e.rec.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]*ExecutionUse, len(uses))
	for i, use := range uses {
		out[i] = &ExecutionUse{Kind: use.Kind, ExecutionID: use.Ref}
	}
	return out, nil
}

// Pages of records.
const (
	defaultPage = 50
	maxPage     = 500
)

func pageSize(first *int) (int, error) {
	if first == nil {
		return defaultPage, nil
	}
	if *first < 0 || *first > maxPage {
		return 0, badRequest("first", "first is a number from 0 to %d", maxPage)
	}
	return *first, nil
}

// executions lists the executions f selects that the reader may read, a page
// at a time; an execution's cursor is its position in the record.
func executions(ctx context.Context, f store.ExecutionFilter, first *int, after *string) (*ExecutionConnection, error) {
	st := current(ctx)
	limit, err := pageSize(first)
	if err != nil {
		return nil, err
	}
	if after != nil && *after != "" {
		seq, err := strconv.ParseInt(*after, 10, 64)
		if err != nil || seq < 0 {
			return nil, badRequest("after", "%q is not a cursor of this list: pass an edge's cursor", *after)
		}
		f.AfterSeq = seq
	}
	f.Account = st.env.Account
	found, hasNext, err := readablePage(limit, f.AfterSeq,
		func(after int64, n int) ([]*store.Execution, error) {
			f.AfterSeq, f.Limit = after, n
			var rows []*store.Execution
			err := st.env.Store.Read(ctx, func(tx *store.Tx) error {
				var err error
				rows, err = tx.Executions(ctx, f)
				return err
			})
			return rows, err
		},
		func(row *store.Execution) int64 { return row.Seq },
		func(row *store.Execution) bool {
			return st.env.Access.Allowed(ctx, policy.Select, registry.ResourceExecution, row)
		})
	if err != nil {
		return nil, err
	}
	conn := &ExecutionConnection{Edges: []*ExecutionEdge{}, PageInfo: &PageInfo{HasNextPage: hasNext}}
	for _, row := range found {
		cursor := strconv.FormatInt(row.Seq, 10)
		conn.Edges = append(conn.Edges, &ExecutionEdge{Cursor: cursor, Node: &Execution{rec: row}})
		conn.PageInfo.EndCursor = &cursor
	}
	return conn, nil
}

// execution reads one execution; nil when there is none.
func execution(ctx context.Context, id string) (*Execution, error) {
	st := current(ctx)
	var rec *store.Execution
	err := st.env.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = tx.Execution(ctx, st.env.Account, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := st.env.Access.check(ctx, policy.Select, registry.ResourceExecution, rec); err != nil {
		return nil, err
	}
	return &Execution{rec: rec}, nil
}

// Session is a session of an MCP server as the API shows it.
type Session struct {
	rec *store.Session
}

func (s *Session) ActionID() string     { return s.rec.ServerID }
func (s *Session) ID() string           { return s.rec.ID }
func (s *Session) Input() JSON          { return JSON(s.rec.Input) }
func (s *Session) CreatedAt() time.Time { return s.rec.CreatedAt }
func (s *Session) Closed() bool         { return s.rec.Closed() }

func (s *Session) ClosedAt() *time.Time {
	if !s.rec.Closed() {
		return nil
	}
	return &s.rec.ClosedAt
}

// Inputs is the session's ordered request log.
func (s *Session) Inputs(ctx context.Context) ([]*SessionInput, error) {
	st := current(ctx)
	var inputs []store.SessionInput
	err := st.env.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		inputs, err = tx.SessionInputs(ctx, s.key())
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]*SessionInput, len(inputs))
	for i, in := range inputs {
		out[i] = &SessionInput{Seq: int(in.Seq), Type: in.Type, ExecutionID: in.ExecutionID, State: in.State, Calls: in.Calls, AdmittedAt: in.AdmittedAt}
	}
	return out, nil
}

func (s *Session) key() store.SessionKey {
	return store.SessionKey{Account: s.rec.Account, ServerID: s.rec.ServerID, ID: s.rec.ID}
}

// session reads a session the reader may read; nil when there is none.
func session(ctx context.Context, actionID, sessionID string) (*Session, error) {
	st := current(ctx)
	var rec *store.Session
	err := st.env.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = tx.Session(ctx, store.SessionKey{Account: st.env.Account, ServerID: actionID, ID: sessionID})
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := st.env.Access.check(ctx, policy.Select, registry.ResourceSession, rec); err != nil {
		return nil, err
	}
	return &Session{rec: rec}, nil
}
