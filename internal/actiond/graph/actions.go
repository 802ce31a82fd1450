package graph

import (
	"context"
	"errors"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/graph/model"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
)

type actionsQueryResolver struct{}

// List lists the actions the reader may read, in name order; an action's
// cursor is its name.
func (actionsQueryResolver) List(ctx context.Context, obj *model.ActionsQuery, first *int, after *string) (*model.ActionConnection, error) {
	st := current(ctx)
	limit, cursor, err := keyedPage(first, after)
	if err != nil {
		return nil, err
	}
	found, hasNext, err := readablePage(limit, cursor,
		func(after string, n int) ([]*registry.StoredAction, error) {
			return registry.Actions(ctx, st.env.Work, after, n)
		},
		func(head *registry.StoredAction) string { return head.Definition.Name },
		func(head *registry.StoredAction) bool {
			return st.env.Access.Allowed(ctx, policy.Select, registry.ResourceAction, head.Document())
		})
	if err != nil {
		return nil, err
	}
	conn := &model.ActionConnection{Edges: []*model.ActionEdge{}, PageInfo: &model.PageInfo{HasNextPage: hasNext}}
	for _, head := range found {
		name := head.Definition.Name
		conn.Edges = append(conn.Edges, &model.ActionEdge{Cursor: name, Node: newAction(head)})
		conn.PageInfo.EndCursor = &name
	}
	return conn, nil
}

func (actionsQueryResolver) Executions(ctx context.Context, obj *model.ActionsQuery, where *model.ExecutionWhere, first *int, after *string, last *int, before *string) (*model.ExecutionConnection, error) {
	q, err := executionQueryOf(where)
	if err != nil {
		return nil, err
	}
	return executions(ctx, q, page{first: first, after: after, last: last, before: before})
}

func (actionsQueryResolver) Session(ctx context.Context, obj *model.ActionsQuery, actionID string, sessionID string) (model.Session, error) {
	return session(ctx, actionID, sessionID)
}

func (actionsQueryResolver) Sessions(ctx context.Context, obj *model.ActionsQuery, actionID string) ([]model.Session, error) {
	st := current(ctx)
	var list []*store.Session
	err := st.env.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		list, err = tx.Sessions(ctx, st.env.Account, actionID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := []model.Session{}
	for _, rec := range list {
		if st.env.Access.Allowed(ctx, policy.Select, registry.ResourceSession, rec) {
			out = append(out, &sessionRecord{rec: rec})
		}
	}
	return out, nil
}

// CreateAction validates the definition against the registry as this
// request sees it, with the caller as its writer, and stores version 1.
func (m *actionsMutation) CreateAction(id string, input map[string]any) (model.Action, error) {
	ctx := m.ctx
	st := current(ctx)
	if id == "" {
		// The caller may leave the ID to actiond; the result's id names it.
		if st.env.IDs == nil {
			return nil, badRequest("id", "this operation cannot make an action ID: give one, a UUID in lowercase hyphenated form")
		}
		id = st.env.IDs.New()
	}
	if err := registry.CheckID(id); err != nil {
		return nil, err
	}
	raw, err := definitionInput(input)
	if err != nil {
		return nil, err
	}
	def, err := action.Decode(raw)
	if err != nil {
		return nil, err
	}
	document := action.Document(action.Target{ID: id, Version: 1, Definition: def})
	if err := st.env.Access.check(ctx, policy.Insert, registry.ResourceAction, document); err != nil {
		return nil, err
	}
	if err := action.Validate(ctx, def, registry.NewResolver(st.env.Work), st.env.Access); err != nil {
		return nil, err
	}
	stored, err := registry.CreateAction(ctx, st.env.Work, id, def, st.now)
	if err != nil {
		return nil, err
	}
	return newAction(stored), nil
}

// UpdateAction writes the next version: each supplied top-level field
// replaces the stored one whole (action.Update). The caller must be allowed
// to UPDATE the action both as stored and as it will be.
func (m *actionsMutation) UpdateAction(id string, input map[string]any) (model.Action, error) {
	ctx := m.ctx
	st := current(ctx)
	head, err := liveAction(ctx, id)
	if err != nil {
		return nil, err
	}
	raw, err := definitionInput(input)
	if err != nil {
		return nil, err
	}
	def, err := action.Update(head.Definition, raw)
	if err != nil {
		return nil, err
	}
	if def.Kind != head.Definition.Kind {
		return nil, badRequest("kind", "the action is of kind %s and cannot become %s: create a new action instead", head.Definition.Kind, def.Kind)
	}
	next := action.Document(action.Target{ID: id, Version: head.Version + 1, Definition: def})
	for _, document := range []any{head.Document(), next} {
		if err := st.env.Access.check(ctx, policy.Update, registry.ResourceAction, document); err != nil {
			return nil, err
		}
	}
	if err := action.Validate(ctx, def, registry.NewResolver(st.env.Work), st.env.Access); err != nil {
		return nil, err
	}
	stored, err := registry.UpdateAction(ctx, st.env.Work, id, def, st.now)
	if err != nil {
		return nil, err
	}
	return newAction(stored), nil
}

func (m *actionsMutation) DeleteAction(id string) (model.Action, error) {
	ctx := m.ctx
	st := current(ctx)
	head, err := liveAction(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := st.env.Access.check(ctx, policy.Delete, registry.ResourceAction, head.Document()); err != nil {
		return nil, err
	}
	stored, err := registry.DeleteAction(ctx, st.env.Work, id, st.now)
	if err != nil {
		return nil, err
	}
	return newAction(stored), nil
}

// liveAction reads the head of an action that exists and is not deleted.
func liveAction(ctx context.Context, id string) (*registry.StoredAction, error) {
	head, err := registry.Action(ctx, current(ctx).env.Work, id, 0)
	if err != nil {
		return nil, err
	}
	if head.Deleted {
		return nil, newError(CodeNotFound, "id", "no action with ID "+id+": it was deleted", registry.ErrNotFound)
	}
	return head, nil
}

// CloseSession closes a session (UPDATE on actions.Session). The close is a
// record write: it commits with the request (or, under Execute with
// RecordWrites, with the caller's records), never on its own.
func (m *actionsMutation) CloseSession(actionID string, sessionID string) (model.Session, error) {
	ctx := m.ctx
	st := current(ctx)
	if !st.env.RecordWrites {
		return nil, newError(CodeBadRequest, "closeSession", "closeSession writes a record that this caller cannot commit: close the session through the GraphQL API", nil)
	}
	key := store.SessionKey{Account: st.env.Account, ServerID: actionID, ID: sessionID}
	var rec *store.Session
	err := st.env.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = tx.Session(ctx, key)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, newError(CodeNotFound, "sessionId", "action "+actionID+" has no session "+sessionID, err)
	}
	if err != nil {
		return nil, err
	}
	if err := st.env.Access.check(ctx, policy.Update, registry.ResourceSession, rec); err != nil {
		return nil, err
	}
	if !rec.Closed() {
		st.addRecord(func(ctx context.Context, tx *store.Tx) error { return tx.CloseSession(ctx, key) })
		closed := *rec
		closed.ClosedAt = st.now
		rec = &closed
	}
	return &sessionRecord{rec: rec}, nil
}
