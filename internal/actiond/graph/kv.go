package graph

import (
	"context"
	"errors"

	"github.com/incusspawn/isx/internal/actiond/graph/model"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
)

type kvQueryResolver struct{}

func (kvQueryResolver) Value(ctx context.Context, obj *model.KVQuery, namespace string, key string) (*model.KVValue, error) {
	st := current(ctx)
	kv, found, err := permitted(ctx, policy.Select, registry.ResourceKV, func() (*registry.KVValue, error) {
		return registry.GetKV(ctx, st.env.Work, namespace, key)
	})
	if !found {
		return nil, err
	}
	return kvValue(kv), nil
}

// Values lists a namespace's values the reader may read, in key order; a
// value's cursor is its key.
func (kvQueryResolver) Values(ctx context.Context, obj *model.KVQuery, namespace string, first *int, after *string) (*model.KVValueConnection, error) {
	st := current(ctx)
	limit, cursor, err := keyedPage(first, after)
	if err != nil {
		return nil, err
	}
	found, hasNext, err := readablePage(limit, cursor,
		func(after string, n int) ([]*registry.KVValue, error) {
			return registry.ListKV(ctx, st.env.Work, namespace, after, n)
		},
		func(kv *registry.KVValue) string { return kv.Key },
		func(kv *registry.KVValue) bool {
			return st.env.Access.Allowed(ctx, policy.Select, registry.ResourceKV, kv)
		})
	if err != nil {
		return nil, err
	}
	conn := &model.KVValueConnection{Edges: []*model.KVValueEdge{}, PageInfo: &model.PageInfo{HasNextPage: hasNext}}
	for _, kv := range found {
		key := kv.Key
		conn.Edges = append(conn.Edges, &model.KVValueEdge{Cursor: key, Node: kvValue(kv)})
		conn.PageInfo.EndCursor = &key
	}
	return conn, nil
}

// Put is an INSERT of a new value, or an UPDATE of an existing one, checked
// with the value as it will be.
func (m *kvMutation) Put(namespace string, key string, value model.JSON) (*model.KVValue, error) {
	ctx := m.ctx
	st := current(ctx)
	operation := policy.Update
	_, err := registry.GetKV(ctx, st.env.Work, namespace, key)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		operation = policy.Insert
	case err != nil:
		return nil, err
	}
	next := &registry.KVValue{Namespace: namespace, Key: key, Value: []byte(value)}
	if err := st.env.Access.check(ctx, operation, registry.ResourceKV, next); err != nil {
		return nil, err
	}
	kv, err := registry.PutKV(ctx, st.env.Work, namespace, key, []byte(value))
	if err != nil {
		return nil, err
	}
	return kvValue(kv), nil
}

// Delete removes a value and answers what it was, or null when there was
// none.
func (m *kvMutation) Delete(namespace string, key string) (*model.KVValue, error) {
	ctx := m.ctx
	st := current(ctx)
	_, found, err := permitted(ctx, policy.Delete, registry.ResourceKV, func() (*registry.KVValue, error) {
		return registry.GetKV(ctx, st.env.Work, namespace, key)
	})
	if !found {
		return nil, err
	}
	kv, err := registry.DeleteKV(ctx, st.env.Work, namespace, key)
	if err != nil {
		return nil, err
	}
	return kvValue(kv), nil
}

func kvValue(kv *registry.KVValue) *model.KVValue {
	return &model.KVValue{Namespace: kv.Namespace, Key: kv.Key, Value: model.JSON(kv.Value)}
}
