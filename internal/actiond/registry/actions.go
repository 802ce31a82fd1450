package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// StoredAction is one version of an action as stored: the head row holds the
// latest, and each version row the version it names.
type StoredAction struct {
	ID         string            `json:"id"`
	Version    int               `json:"version"`
	Definition action.Definition `json:"definition"`
	// Deleted marks the version deleteAction wrote: the action is gone from
	// every listing and reference from then on.
	Deleted  bool      `json:"deleted,omitempty"`
	Created  time.Time `json:"created"`
	Modified time.Time `json:"modified"`
}

// Target is the version as an action.Target.
func (a *StoredAction) Target() action.Target {
	return action.Target{
		ID:         a.ID,
		Version:    a.Version,
		Definition: a.Definition,
		Enabled:    a.Definition.IsEnabled() && !a.Deleted,
		Deleted:    a.Deleted,
	}
}

// Document is the version as a policy's context.document.
func (a *StoredAction) Document() map[string]any { return action.Document(a.Target()) }

// versionKey is the row key of one version: the zero padding keeps versions
// in order under the store's key order.
func versionKey(id string, version int) string { return fmt.Sprintf("%s@%010d", id, version) }

type nameRow struct {
	ID string `json:"id"`
}

// MaxVersion is the highest version an action can reach (the width of the
// version key).
const MaxVersion = 9_999_999_999

// CheckID refuses an action ID that is not a UUID in its canonical form
// (lowercase, hyphenated), so that one action never has two spellings.
func CheckID(id string) error {
	parsed, err := uuid.Parse(id)
	if err != nil || parsed.String() != id {
		return invalid("id", "%q is not an action ID: use a UUID in lowercase hyphenated form, such as 3c1e4d1a-7a1b-4bde-9b7e-6b8f3f0c5a21", id)
	}
	return nil
}

// CreateAction stores version 1 of a new action. The definition must have
// been validated (action.Validate). An ID already used, even by a deleted
// action, or a name a non-deleted action has, is ALREADY_EXISTS.
func CreateAction(ctx context.Context, w *store.Work, id string, def action.Definition, now time.Time) (*StoredAction, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	var existing StoredAction
	found, err := get(ctx, w, TableAction, id, &existing)
	if err != nil {
		return nil, err
	}
	if found {
		return nil, alreadyExists("id", "an action with ID %s already exists: choose another ID, or change it with updateAction", id)
	}
	if err := claimName(ctx, w, def.Name, id); err != nil {
		return nil, err
	}
	stored := &StoredAction{ID: id, Version: 1, Definition: def, Created: now.UTC(), Modified: now.UTC()}
	return stored, writeVersion(ctx, w, stored)
}

// UpdateAction stores def as the action's next version. def is the whole
// new definition (action.Update merged the input into the stored one) and
// must have been validated. A rename moves the name; the kind cannot change.
func UpdateAction(ctx context.Context, w *store.Work, id string, def action.Definition, now time.Time) (*StoredAction, error) {
	head, err := liveHead(ctx, w, id)
	if err != nil {
		return nil, err
	}
	if def.Kind != head.Definition.Kind {
		return nil, invalid("kind", "the action is of kind %s and cannot become %s: create a new action instead", head.Definition.Kind, def.Kind)
	}
	if def.Name != head.Definition.Name {
		if err := claimName(ctx, w, def.Name, id); err != nil {
			return nil, err
		}
		if err := w.Delete(ctx, TableActionName, head.Definition.Name); err != nil {
			return nil, err
		}
	}
	next, err := nextVersion(head)
	if err != nil {
		return nil, err
	}
	stored := &StoredAction{ID: id, Version: next, Definition: def, Created: head.Created, Modified: now.UTC()}
	return stored, writeVersion(ctx, w, stored)
}

// DeleteAction writes a new version marked deleted and frees the name. The
// versions before it stay readable by ID.
func DeleteAction(ctx context.Context, w *store.Work, id string, now time.Time) (*StoredAction, error) {
	head, err := liveHead(ctx, w, id)
	if err != nil {
		return nil, err
	}
	if err := w.Delete(ctx, TableActionName, head.Definition.Name); err != nil {
		return nil, err
	}
	next, err := nextVersion(head)
	if err != nil {
		return nil, err
	}
	stored := &StoredAction{ID: id, Version: next, Definition: head.Definition, Deleted: true, Created: head.Created, Modified: now.UTC()}
	return stored, writeVersion(ctx, w, stored)
}

func nextVersion(head *StoredAction) (int, error) {
	if head.Version >= MaxVersion {
		return 0, invalid("id", "the action has reached its last version, %d", MaxVersion)
	}
	return head.Version + 1, nil
}

// liveHead reads the head of an action that exists and is not deleted.
func liveHead(ctx context.Context, w *store.Work, id string) (*StoredAction, error) {
	head, err := Action(ctx, w, id, 0)
	if err != nil {
		return nil, err
	}
	if head.Deleted {
		return nil, notFound("id", "no action with ID %s: it was deleted", id)
	}
	return head, nil
}

// claimName points name at id, refusing a name another action has.
func claimName(ctx context.Context, w *store.Work, name, id string) error {
	if name == "" {
		return invalid("name", "name is required")
	}
	var row nameRow
	found, err := get(ctx, w, TableActionName, name, &row)
	if err != nil {
		return err
	}
	if found && row.ID != id {
		return alreadyExists("name", "another action is named %q: names are unique among the account's actions, so choose another name", name)
	}
	return put(ctx, w, TableActionName, name, nameRow{ID: id})
}

func writeVersion(ctx context.Context, w *store.Work, stored *StoredAction) error {
	if err := put(ctx, w, TableAction, versionKey(stored.ID, stored.Version), stored); err != nil {
		return err
	}
	return put(ctx, w, TableAction, stored.ID, stored)
}

// Action reads an action at version, or its head when version is 0 (also a
// deleted action's, marked Deleted). A missing action or version is
// NOT_FOUND; an ID that is not one is BAD_REQUEST.
func Action(ctx context.Context, w *store.Work, id string, version int) (*StoredAction, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	key := id
	if version != 0 {
		if version < 0 || version > MaxVersion {
			return nil, invalid("version", "a version is a number from 1")
		}
		key = versionKey(id, version)
	}
	var stored StoredAction
	found, err := get(ctx, w, TableAction, key, &stored)
	if err != nil {
		return nil, err
	}
	if !found {
		if version != 0 {
			return nil, notFound("version", "action %s has no version %d", id, version)
		}
		return nil, notFound("id", "no action with ID %s", id)
	}
	return &stored, nil
}

// ActionByName reads the head of the non-deleted action named name.
func ActionByName(ctx context.Context, w *store.Work, name string) (*StoredAction, error) {
	id, err := idOf(ctx, w, name)
	if err != nil {
		return nil, err
	}
	return Action(ctx, w, id, 0)
}

func idOf(ctx context.Context, w *store.Work, name string) (string, error) {
	var row nameRow
	found, err := get(ctx, w, TableActionName, name, &row)
	if err != nil {
		return "", err
	}
	if !found {
		return "", notFound("name", "no action named %q", name)
	}
	return row.ID, nil
}

// Actions lists the heads of the non-deleted actions in name order, after
// the name `after`, at most limit of them (0: all).
func Actions(ctx context.Context, w *store.Work, after string, limit int) ([]*StoredAction, error) {
	rows, err := w.Scan(ctx, TableActionName, "", after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*StoredAction, 0, len(rows))
	for _, row := range rows {
		head, err := ActionByName(ctx, w, row.Key)
		if err != nil {
			return nil, fmt.Errorf("registry: the name %q points at a missing action: %w", row.Key, err)
		}
		out = append(out, head)
	}
	return out, nil
}

// History lists every version of an action, oldest first.
func History(ctx context.Context, w *store.Work, id string) ([]*StoredAction, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	rows, err := w.Scan(ctx, TableAction, id+"@", "", 0)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, notFound("id", "no action with ID %s", id)
	}
	return decodeRows[StoredAction](rows)
}

// Resolver resolves action names through a unit of work, so a definition
// write sees the actions the same request wrote before it. Native tools
// never reach it (action.ResolveTool handles them).
type Resolver struct {
	work *store.Work
}

// NewResolver resolves names as w sees them.
func NewResolver(w *store.Work) *Resolver { return &Resolver{work: w} }

// Resolve implements action.Resolver: the action named name at version, or
// at its latest version when version is 0. A pinned version of an action
// that is disabled now reads as disabled: Enabled is the action's and the
// version's.
func (r *Resolver) Resolve(ctx context.Context, name string, version int) (action.Target, error) {
	id, err := idOf(ctx, r.work, name)
	if errors.Is(err, ErrNotFound) {
		return action.Target{}, fmt.Errorf("%w: %s", action.ErrNotFound, err)
	}
	if err != nil {
		return action.Target{}, err
	}
	head, err := Action(ctx, r.work, id, 0)
	if err != nil {
		return action.Target{}, fmt.Errorf("registry: resolve %q: %w", name, err)
	}
	if version == 0 || version == head.Version {
		return head.Target(), nil
	}
	if version < 0 || version > head.Version {
		return action.Target{}, fmt.Errorf("%w: %q has no version %d (its latest is %d)", action.ErrNotFound, name, version, head.Version)
	}
	pinned, err := Action(ctx, r.work, id, version)
	if errors.Is(err, ErrNotFound) {
		return action.Target{}, fmt.Errorf("%w: %s", action.ErrNotFound, err)
	}
	if err != nil {
		return action.Target{}, err
	}
	target := pinned.Target()
	target.Enabled = target.Enabled && head.Definition.IsEnabled() && !head.Deleted
	target.Deleted = target.Deleted || head.Deleted
	return target, nil
}

// decodeRows decodes scanned rows, each into a T.
func decodeRows[T any](rows []store.Row) ([]*T, error) {
	out := make([]*T, 0, len(rows))
	for _, row := range rows {
		v := new(T)
		if err := json.Unmarshal(row.Value, v); err != nil {
			return nil, fmt.Errorf("registry: the stored %s row %q does not decode: %w", row.Table, row.Key, err)
		}
		out = append(out, v)
	}
	return out, nil
}
