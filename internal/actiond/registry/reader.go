package registry

import (
	"context"
	"errors"

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
