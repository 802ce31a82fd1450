package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// Reader reads the committed registry of every account: what the MCP
// endpoint resolves a request's server, tools and principal from.
type Reader struct {
	store *store.Store
}

// NewReader reads committed rows of s.
func NewReader(s *store.Store) *Reader { return &Reader{store: s} }

// Resolver resolves names as they stand committed now. Each call starts a
// fresh unit of work that is never applied.
func (r *Reader) Resolver(account string) action.Resolver {
	return NewResolver(r.store.NewWork(account))
}

// Principal returns a principal's policies; found is false when it has no
// row (and so no permissions).
func (r *Reader) Principal(ctx context.Context, account, name string) (policies []policy.Policy, found bool, err error) {
	stored, err := Principal(ctx, r.store.NewWork(account), name)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return stored.Policies, true, nil
}

// Action reads an action at version (0: its latest) as a target; a missing
// one wraps action.ErrNotFound.
func (r *Reader) Action(ctx context.Context, account, id string, version int) (action.Target, error) {
	w := r.store.NewWork(account)
	stored, err := Action(ctx, w, id, version)
	if errors.Is(err, ErrNotFound) {
		return action.Target{}, fmt.Errorf("%w: %s", action.ErrNotFound, err)
	}
	if err != nil {
		return action.Target{}, err
	}
	target := stored.Target()
	if version != 0 {
		// A version of an action disabled or deleted since is so too.
		head, err := Action(ctx, w, id, 0)
		if err != nil {
			return action.Target{}, err
		}
		target.Enabled = target.Enabled && head.Definition.IsEnabled() && !head.Deleted
		target.Deleted = target.Deleted || head.Deleted
	}
	return target, nil
}
