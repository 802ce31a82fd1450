package graph

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/actiond/graph/model"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// executionRecord is an execution record as the API shows it (model.Execution).
type executionRecord struct {
	rec *store.Execution
	// children, when loaded, are the calls beneath it, given rather than
	// read: a replay's, which commit with the operation that made them.
	children []*store.Execution
	loaded   bool

	once       sync.Once
	writeSet   []*model.WriteSetEntry
	unreadable int
}

func (e *executionRecord) ID() string                    { return e.rec.ID }
func (e *executionRecord) ActionID() string              { return e.rec.ActionID }
func (e *executionRecord) ActionVersion() int            { return int(e.rec.ActionVersion) }
func (e *executionRecord) ActionName() string            { return e.rec.ActionName }
func (e *executionRecord) EventType() string             { return e.rec.EventType }
func (e *executionRecord) Role() string                  { return e.rec.Role }
func (e *executionRecord) Status() model.ExecutionStatus { return model.ExecutionStatus(e.rec.Status) }
func (e *executionRecord) Caller() string                { return e.rec.Caller }
func (e *executionRecord) Subject() string               { return e.rec.Subject }
func (e *executionRecord) Client() string                { return e.rec.Client }
func (e *executionRecord) Input() model.JSON             { return model.JSON(e.rec.Input) }
func (e *executionRecord) Output() model.JSON            { return model.JSON(e.rec.Output) }
func (e *executionRecord) Error() model.JSON             { return model.JSON(e.rec.Error) }
func (e *executionRecord) Invocation() model.JSON        { return model.JSON(e.rec.Invocation) }
func (e *executionRecord) Preview() bool                 { return e.rec.Preview }
func (e *executionRecord) ParentID() *string             { return optional(e.rec.ParentID) }
func (e *executionRecord) SessionID() *string            { return optional(e.rec.SessionID) }
func (e *executionRecord) StartedAt() time.Time          { return e.rec.StartedAt }

func (e *executionRecord) GrantedInPreview() bool { return store.GrantedInPreview(e.rec) }

// Outcome is the status the explorer and the CLI show: TOOL_ERROR for a
// request answered with a tool error.
func (e *executionRecord) Outcome() string { return store.Outcome(e.rec) }

// StartedBy reads what started a task, and whether a replay recorded it
// as not started (its invocation says so).
func (e *executionRecord) StartedBy() *model.StartedBy {
	if e.rec.StartedBy == "" {
		return nil
	}
	return &model.StartedBy{ExecutionID: e.rec.StartedBy, NotStarted: store.NotStarted(e.rec)}
}

func (e *executionRecord) RolledBackByExecutionID() *string { return optional(e.rec.RolledBackBy) }

// Draft is the unpublished definition an invoke ran (ACT-465); null for a
// stored version.
func (e *executionRecord) Draft() model.JSON { return nullJSON(e.rec.Draft) }

// CancelledBy reads who cancelled the execution, and with which request.
func (e *executionRecord) CancelledBy() *model.CancelledBy {
	if len(e.rec.CancelledBy) == 0 {
		return nil
	}
	var by model.CancelledBy
	if err := json.Unmarshal(e.rec.CancelledBy, &by); err != nil {
		return nil
	}
	return &by
}

func (e *executionRecord) EndedAt() *time.Time {
	if e.rec.EndedAt.IsZero() {
		return nil
	}
	return &e.rec.EndedAt
}

// McpRequest reads the request a mcp.request execution recorded as its input
// (ACT-097, ACT-099), and the intent its invocation recorded.
func (e *executionRecord) McpRequest() *model.McpRequest {
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
	return &model.McpRequest{
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

func nullJSON(raw json.RawMessage) model.JSON {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return model.JSON(raw)
}

// WriteSet lists the rows of the write set the reader may SELECT; a row's
// resource is <namespace>.<table>, its document the row's new value.
func (e *executionRecord) WriteSet(ctx context.Context) []*model.WriteSetEntry {
	e.filterWriteSet(ctx)
	return e.writeSet
}

// WriteSetUnreadable counts the rows WriteSet leaves out.
func (e *executionRecord) WriteSetUnreadable(ctx context.Context) int {
	e.filterWriteSet(ctx)
	return e.unreadable
}

func (e *executionRecord) filterWriteSet(ctx context.Context) {
	e.once.Do(func() {
		access := current(ctx).env.Access
		e.writeSet = []*model.WriteSetEntry{}
		for _, write := range e.rec.WriteSet {
			if readable(ctx, access, write) {
				e.writeSet = append(e.writeSet, &model.WriteSetEntry{Table: write.Table, Key: write.Key, Value: nullJSON(write.Value), Deleted: write.Deleted})
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
func (e *executionRecord) Calls(ctx context.Context) ([]model.Execution, error) {
	st := current(ctx)
	children := topLevel(e.children, e.rec.ID)
	var err error
	if !e.loaded {
		err = st.env.Store.Read(ctx, func(tx *store.Tx) error {
			var err error
			children, err = tx.Executions(ctx, store.ExecutionFilter{Account: st.env.Account, ParentID: e.rec.ID})
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	out := make([]model.Execution, 0, len(children))
	for _, child := range children {
		if st.env.Access.Allowed(ctx, policy.Select, registry.ResourceExecution, child) {
			out = append(out, &executionRecord{rec: child, children: e.children, loaded: e.loaded})
		}
	}
	return out, nil
}

func (e *executionRecord) Uses(ctx context.Context) ([]*model.ExecutionUse, error) {
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
	out := make([]*model.ExecutionUse, len(uses))
	for i, use := range uses {
		out[i] = &model.ExecutionUse{Kind: use.Kind, ExecutionID: use.Ref}
	}
	return out, nil
}

// readableExecution reads one execution the reader may SELECT; found is
// false when there is none, or none the reader may read.
func readableExecution(ctx context.Context, id string) (rec *store.Execution, found bool, err error) {
	st := current(ctx)
	return permitted(ctx, policy.Select, registry.ResourceExecution, func() (rec *store.Execution, err error) {
		err = st.env.Store.Read(ctx, func(tx *store.Tx) error {
			rec, err = tx.Execution(ctx, st.env.Account, id)
			return err
		})
		return rec, err
	})
}

// noReadableExecution refuses an execution ID readableExecution did not
// find, alike whether it does not exist or may not be read.
func noReadableExecution(id string) error {
	return newError(CodeNotFound, "executionId", "no execution with ID "+id+" that you can read", store.ErrNotFound)
}

// execution reads one execution; nil when there is none.
func execution(ctx context.Context, id string) (model.Execution, error) {
	rec, found, err := readableExecution(ctx, id)
	if !found {
		return nil, err
	}
	return &executionRecord{rec: rec}, nil
}

// sessionRecord is a session of an MCP server as the API shows it (model.Session).
type sessionRecord struct {
	rec *store.Session
}

func (s *sessionRecord) ActionID() string     { return s.rec.ServerID }
func (s *sessionRecord) ID() string           { return s.rec.ID }
func (s *sessionRecord) Input() model.JSON    { return model.JSON(s.rec.Input) }
func (s *sessionRecord) CreatedAt() time.Time { return s.rec.CreatedAt }
func (s *sessionRecord) Closed() bool         { return s.rec.Closed() }
func (s *sessionRecord) RequestCount() int    { return int(s.rec.Requests) }

func (s *sessionRecord) ClosedAt() *time.Time {
	if !s.rec.Closed() {
		return nil
	}
	return &s.rec.ClosedAt
}

// Inputs is the session's ordered request log.
func (s *sessionRecord) Inputs(ctx context.Context) ([]*model.SessionInput, error) {
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
	out := make([]*model.SessionInput, len(inputs))
	for i, in := range inputs {
		out[i] = &model.SessionInput{Seq: int(in.Seq), Type: in.Type, ExecutionID: in.ExecutionID, State: in.State, Calls: in.Calls, AdmittedAt: in.AdmittedAt}
	}
	return out, nil
}

func (s *sessionRecord) key() store.SessionKey {
	return store.SessionKey{Account: s.rec.Account, ServerID: s.rec.ServerID, ID: s.rec.ID}
}

// session reads a session the reader may read; nil when there is none.
func session(ctx context.Context, actionID, sessionID string) (model.Session, error) {
	st := current(ctx)
	rec, found, err := permitted(ctx, policy.Select, registry.ResourceSession, func() (rec *store.Session, err error) {
		err = st.env.Store.Read(ctx, func(tx *store.Tx) error {
			rec, err = tx.Session(ctx, store.SessionKey{Account: st.env.Account, ServerID: actionID, ID: sessionID})
			return err
		})
		return rec, err
	})
	if !found {
		return nil, err
	}
	return &sessionRecord{rec: rec}, nil
}
