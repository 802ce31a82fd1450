package graph

import (
	"context"
	"errors"

	"github.com/incusspawn/isx/internal/actiond/graph/model"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
)

type authQueryResolver struct{}

func (authQueryResolver) Principal(ctx context.Context, obj *model.AuthQuery, name string) (*model.Principal, error) {
	st := current(ctx)
	stored, found, err := permitted(ctx, policy.Select, registry.ResourcePrincipal, func() (*registry.StoredPrincipal, error) {
		return registry.Principal(ctx, st.env.Work, name)
	})
	if !found {
		return nil, err
	}
	return principal(stored)
}

// Principals lists the principals the reader may read, in name order.
func (authQueryResolver) Principals(ctx context.Context, obj *model.AuthQuery) ([]*model.Principal, error) {
	st := current(ctx)
	list, err := registry.Principals(ctx, st.env.Work, "", 0)
	if err != nil {
		return nil, err
	}
	out := []*model.Principal{}
	for _, stored := range list {
		if !st.env.Access.Allowed(ctx, policy.Select, registry.ResourcePrincipal, stored) {
			continue
		}
		p, err := principal(stored)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// PutPrincipal is an INSERT of a new principal or an UPDATE of an existing
// one, checked with the principal as it will be.
func (m *authMutation) PutPrincipal(input map[string]any) (*model.Principal, error) {
	ctx := m.ctx
	st := current(ctx)
	var in struct {
		Name     string          `json:"name"`
		Policies []policy.Policy `json:"policies"`
	}
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	if err := registry.CheckPrincipalName(in.Name); err != nil {
		return nil, err
	}
	operation, version := policy.Insert, 1
	existing, err := registry.Principal(ctx, st.env.Work, in.Name)
	switch {
	case err == nil:
		operation, version = policy.Update, existing.Version+1
	case !errors.Is(err, registry.ErrNotFound):
		return nil, err
	}
	next := &registry.StoredPrincipal{Name: in.Name, Policies: in.Policies, Version: version}
	if err := st.env.Access.check(ctx, operation, registry.ResourcePrincipal, next); err != nil {
		return nil, err
	}
	stored, err := registry.PutPrincipal(ctx, st.env.Work, in.Name, in.Policies)
	if err != nil {
		return nil, err
	}
	return principal(stored)
}

func (m *authMutation) DeletePrincipal(name string) (*model.Principal, error) {
	ctx := m.ctx
	st := current(ctx)
	_, found, err := permitted(ctx, policy.Delete, registry.ResourcePrincipal, func() (*registry.StoredPrincipal, error) {
		return registry.Principal(ctx, st.env.Work, name)
	})
	if !found {
		return nil, err
	}
	stored, err := registry.DeletePrincipal(ctx, st.env.Work, name)
	if err != nil {
		return nil, err
	}
	return principal(stored)
}

func principal(stored *registry.StoredPrincipal) (*model.Principal, error) {
	list, err := policies(stored.Policies)
	if err != nil {
		return nil, err
	}
	return &model.Principal{Name: stored.Name, Policies: list, Version: stored.Version}, nil
}
