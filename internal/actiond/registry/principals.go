package registry

import (
	"context"
	"errors"
	"unicode"
	"unicode/utf8"

	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// StoredPrincipal is a principal's row: the policies every request made as
// that principal is bounded by.
type StoredPrincipal struct {
	Name     string          `json:"name"`
	Policies []policy.Policy `json:"policies"`
	Version  int             `json:"version"`
}

// MaxPrincipalName bounds a principal's name, in bytes.
const MaxPrincipalName = 256

// CheckPrincipalName refuses a name no token could carry unambiguously:
// empty, too long, not UTF-8, or with control characters or surrounding
// spaces.
func CheckPrincipalName(name string) error {
	switch {
	case name == "":
		return invalid("name", "a principal needs a name")
	case len(name) > MaxPrincipalName:
		return invalid("name", "a principal's name is at most %d bytes", MaxPrincipalName)
	case !utf8.ValidString(name):
		return invalid("name", "a principal's name must be UTF-8")
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return invalid("name", "a principal's name cannot hold control characters")
		}
	}
	if unicode.IsSpace(rune(name[0])) || unicode.IsSpace(rune(name[len(name)-1])) {
		return invalid("name", "a principal's name cannot start or end with a space")
	}
	return nil
}

// PutPrincipal creates a principal, or replaces its policies, as its next
// version.
func PutPrincipal(ctx context.Context, w *store.Work, name string, policies []policy.Policy) (*StoredPrincipal, error) {
	if err := CheckPrincipalName(name); err != nil {
		return nil, err
	}
	if err := policy.Validate(policies); err != nil {
		var bad *policy.InvalidError
		if errors.As(err, &bad) {
			return nil, newError(CodeBadRequest, "policies"+bad.Path(), err, "%s", bad.Message)
		}
		return nil, err
	}
	if policies == nil {
		policies = []policy.Policy{}
	}
	version := 1
	existing, err := Principal(ctx, w, name)
	switch {
	case err == nil:
		version = existing.Version + 1
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	stored := &StoredPrincipal{Name: name, Policies: policies, Version: version}
	return stored, put(ctx, w, TablePrincipal, name, stored)
}

// Principal reads a principal; one without a row is NOT_FOUND.
func Principal(ctx context.Context, w *store.Work, name string) (*StoredPrincipal, error) {
	var stored StoredPrincipal
	found, err := get(ctx, w, TablePrincipal, name, &stored)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notFound("name", "no principal named %q", name)
	}
	return &stored, nil
}

// Principals lists principals in name order, after `after`, at most limit
// (0: all).
func Principals(ctx context.Context, w *store.Work, after string, limit int) ([]*StoredPrincipal, error) {
	rows, err := w.Scan(ctx, TablePrincipal, "", after, limit)
	if err != nil {
		return nil, err
	}
	return decodeRows[StoredPrincipal](rows)
}

// DeletePrincipal removes a principal, which leaves its tokens with no
// permissions.
func DeletePrincipal(ctx context.Context, w *store.Work, name string) (*StoredPrincipal, error) {
	existing, err := Principal(ctx, w, name)
	if err != nil {
		return nil, err
	}
	return existing, w.Delete(ctx, TablePrincipal, name)
}

// PrincipalLayer is the principal's policies as the first policy layer of
// its requests. A principal without a row has no policies, and so may do
// nothing.
func PrincipalLayer(ctx context.Context, w *store.Work, name string) (policy.Layer, error) {
	layer := policy.Layer{Name: policy.LayerPrincipal, PrincipalID: name}
	stored, err := Principal(ctx, w, name)
	if errors.Is(err, ErrNotFound) {
		return layer, nil
	}
	if err != nil {
		return policy.Layer{}, err
	}
	layer.Policies = stored.Policies
	return layer, nil
}
