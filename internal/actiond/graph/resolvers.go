package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/graph/generated"
	"github.com/incusspawn/isx/internal/actiond/graph/model"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// Resolver is the root of the resolvers. It holds nothing: every resolver
// reads its operation's state from the context.
type Resolver struct{}

func (r *Resolver) Query() generated.QueryResolver               { return queryResolver{} }
func (r *Resolver) Mutation() generated.MutationResolver         { return mutationResolver{} }
func (r *Resolver) Action() generated.ActionResolver             { return actionResolver{} }
func (r *Resolver) Session() generated.SessionResolver           { return sessionResolver{} }
func (r *Resolver) ActionsQuery() generated.ActionsQueryResolver { return actionsQueryResolver{} }
func (r *Resolver) KVQuery() generated.KVQueryResolver           { return kvQueryResolver{} }
func (r *Resolver) AuthQuery() generated.AuthQueryResolver       { return authQueryResolver{} }

type queryResolver struct{}

func (queryResolver) Action(ctx context.Context, id string, version *int) (model.Action, error) {
	st := current(ctx)
	v := 0
	if version != nil {
		if *version < 1 {
			return nil, badRequest("version", "a version is a number from 1")
		}
		v = *version
	}
	stored, err := registry.Action(ctx, st.env.Work, id, v)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return selectable(ctx, stored)
}

func (queryResolver) ActionByName(ctx context.Context, name string) (model.Action, error) {
	stored, err := registry.ActionByName(ctx, current(ctx).env.Work, name)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return selectable(ctx, stored)
}

// selectable returns the action when the reader may SELECT it.
func selectable(ctx context.Context, stored *registry.StoredAction) (model.Action, error) {
	if err := current(ctx).env.Access.check(ctx, policy.Select, registry.ResourceAction, stored.Document()); err != nil {
		return nil, err
	}
	return newAction(stored), nil
}

func (queryResolver) Actions(ctx context.Context) (*model.ActionsQuery, error) {
	return &model.ActionsQuery{}, nil
}
func (queryResolver) Kv(ctx context.Context) (*model.KVQuery, error) { return &model.KVQuery{}, nil }
func (queryResolver) Auth(ctx context.Context) (*model.AuthQuery, error) {
	return &model.AuthQuery{}, nil
}

func (queryResolver) Execution(ctx context.Context, id string) (model.Execution, error) {
	return execution(ctx, id)
}

type mutationResolver struct{}

func (mutationResolver) Actions(ctx context.Context) (model.ActionsMutation, error) {
	return &actionsMutation{ctx: ctx}, nil
}
func (mutationResolver) Kv(ctx context.Context) (model.KVMutation, error) {
	return &kvMutation{ctx: ctx}, nil
}
func (mutationResolver) Auth(ctx context.Context) (model.AuthMutation, error) {
	return &authMutation{ctx: ctx}, nil
}

type actionResolver struct{}

func (actionResolver) Executions(ctx context.Context, obj model.Action, where *model.ExecutionWhere, first *int, after *string) (*model.ExecutionConnection, error) {
	f := filter(where)
	f.ActionID = obj.ID()
	return executions(ctx, f, first, after)
}

type sessionResolver struct{}

func (sessionResolver) Executions(ctx context.Context, obj model.Session, first *int, after *string) (*model.ExecutionConnection, error) {
	return executions(ctx, store.ExecutionFilter{ActionID: obj.ActionID(), SessionID: obj.ID()}, first, after)
}

func filter(where *model.ExecutionWhere) store.ExecutionFilter {
	var f store.ExecutionFilter
	if where == nil {
		return f
	}
	f.Preview = where.Preview
	if where.ActionID != nil {
		f.ActionID = *where.ActionID
	}
	if where.SessionID != nil {
		f.SessionID = *where.SessionID
	}
	if where.Status != nil {
		f.Status = string(*where.Status)
	}
	if where.Role != nil {
		f.Role = *where.Role
	}
	if where.ParentID != nil {
		f.ParentID = *where.ParentID
	}
	return f
}

// decodeInput reads an input object as given into v, refusing fields v does
// not have.
func decodeInput(input map[string]any, v any) error {
	raw, err := json.Marshal(input)
	if err != nil {
		return badRequest("input", "the input does not encode as JSON: %v", err)
	}
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return newError(CodeBadRequest, "input."+typeErr.Field, fmt.Sprintf("expected %s, got a JSON %s", typeErr.Type, typeErr.Value), err)
		}
		return newError(CodeBadRequest, "input", err.Error(), err)
	}
	return nil
}

// definitionInput encodes createAction's or updateAction's input as the
// definition JSON action.Decode and action.Update read.
func definitionInput(input map[string]any) ([]byte, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, badRequest("input", "the input does not encode as JSON: %v", err)
	}
	return raw, nil
}

var _ action.Writer = Access{}
