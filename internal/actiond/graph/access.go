package graph

import (
	"context"
	"errors"

	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// Access is who a request runs as, and so what it may do: every resolver
// checks its operation on its resource through it. It is also the
// action.Writer of definition writes, so that a definition may reference
// only what its writer may read and invoke (ACT-043, ACT-044).
type Access struct {
	// Root is the local root: no layers, everything allowed. Only an
	// unauthenticated request to an actiond listening on loopback is root.
	Root bool
	// Principal is the principal's ID, for the record.
	Principal string
	// Claims are the verified token's claims, context.auth.claims in
	// assertions.
	Claims map[string]any
	// Layers narrow one another: the principal's policies, and when a tool
	// calls graphql(), the server's and the tools' after them. A non-root
	// Access without layers may do nothing.
	Layers []policy.Layer
}

// RootAccess is the local root's access.
func RootAccess() Access { return Access{Root: true} }

// PrincipalAccess is the access of a principal as its Principal row says,
// read through w: a principal without a row has no policies, and may do
// nothing.
func PrincipalAccess(ctx context.Context, w *store.Work, principal string, claims map[string]any) (Access, error) {
	layer, err := registry.PrincipalLayer(ctx, w, principal)
	if err != nil {
		return Access{}, err
	}
	return Access{Principal: principal, Claims: claims, Layers: []policy.Layer{layer}}, nil
}

// Check implements action.Writer: nil when every layer allows the request,
// the *policy.Denied otherwise. The request's claims are the access's.
func (a Access) Check(ctx context.Context, req policy.Request) error {
	if a.Root {
		return nil
	}
	req.Claims = a.Claims
	return policy.Check(ctx, req, a.Layers...)
}

// Allowed reports whether operation on resource is allowed for document.
func (a Access) Allowed(ctx context.Context, operation, resource string, document any) bool {
	return a.Check(ctx, policy.Request{Operation: operation, Resource: resource, Document: document}) == nil
}

// check is Check of one operation.
func (a Access) check(ctx context.Context, operation, resource string, document any) error {
	return a.Check(ctx, policy.Request{Operation: operation, Resource: resource, Document: document})
}

// permitted reads one row and checks that the reader may do operation on
// it. A row that does not exist (the registry's or the store's
// ErrNotFound) is not found and no error; so is none that the check
// refuses, which is the error.
func permitted[T any](ctx context.Context, operation, resource string, read func() (T, error)) (row T, found bool, err error) {
	row, err = read()
	if errors.Is(err, registry.ErrNotFound) || errors.Is(err, store.ErrNotFound) {
		return row, false, nil
	}
	if err != nil {
		return row, false, err
	}
	if err := current(ctx).env.Access.check(ctx, operation, resource, row); err != nil {
		return row, false, err
	}
	return row, true, nil
}
