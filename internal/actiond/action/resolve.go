package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/policy"
)

// ErrNotFound is wrapped by a Resolver's error for a name or version that
// does not exist.
var ErrNotFound = errors.New("action not found")

// Target is what a reference resolves to: a stored action version, or a
// native tool.
type Target struct {
	ID         string
	Version    int
	Definition Definition
	// Enabled: the action and this version are enabled.
	Enabled bool
	// Deleted: the action or this version is deleted.
	Deleted bool
	// Native: a native tool; only Definition.Name is set.
	Native bool
}

// Resolver looks actions up in the registry. Native tools never reach it.
type Resolver interface {
	// Resolve returns the action named name at version, or at its latest
	// version when version is 0. An unknown name or version is an error
	// wrapping ErrNotFound.
	Resolve(ctx context.Context, name string, version int) (Target, error)
}

// Writer is the principal writing a definition: Validate asks it whether
// the principal may read (SELECT) and INVOKE each referenced action
// (ACT-043, ACT-044). The request is for resource actions.Action with the
// target's Document.
type Writer interface {
	Check(ctx context.Context, req policy.Request) error
}

// PolicyWriter is a Writer checked through package policy.
type PolicyWriter struct {
	Claims map[string]any
	Layers []policy.Layer
}

// Check implements Writer.
func (w PolicyWriter) Check(ctx context.Context, req policy.Request) error {
	req.Claims = w.Claims
	return policy.Check(ctx, req, w.Layers...)
}

// ResourceAction is the policy resource of actions.
const ResourceAction = "actions.Action"

// ResolveTool resolves a tool reference: a native tool by its name, anything
// else through resolver. version 0 is the latest.
func ResolveTool(ctx context.Context, resolver Resolver, name string, version int) (Target, error) {
	if IsNative(name) {
		return Target{Definition: Definition{Name: name}, Enabled: true, Native: true}, nil
	}
	return resolver.Resolve(ctx, name, version)
}

// ResolveSkill resolves a skill reference at its pinned or latest version;
// ok is false when it no longer resolves to an enabled skill (an unknown
// name or version, a deleted or disabled action, another kind), which its
// server or agent then leaves out.
func ResolveSkill(ctx context.Context, resolver Resolver, ref SkillRef) (t Target, ok bool, err error) {
	t, err = resolver.Resolve(ctx, ref.Name, versionOf(ref.Version))
	switch {
	case errors.Is(err, ErrNotFound):
		return Target{}, false, nil
	case err != nil:
		return Target{}, false, err
	}
	return t, !t.Deleted && t.Enabled && t.Definition.Kind == KindSkill, nil
}

// Document is the target as context.document of a policy assertion: its
// definition's JSON fields plus id and version.
func Document(t Target) map[string]any {
	document := map[string]any{}
	// A Definition always marshals and reads back; on the impossible failure
	// the document carries only id and version, which narrows assertions.
	if b, err := json.Marshal(t.Definition); err == nil {
		if err := json.Unmarshal(b, &document); err != nil {
			document = map[string]any{}
		}
	}
	document["id"] = t.ID
	document["version"] = t.Version
	return document
}

func versionOf(v *int) int {
	if v == nil {
		return 0
	}
	return *v
}

// Offered is one of a server's tool references resolved to what it calls
// now.
type Offered struct {
	Index  int // the reference's place in the server's tools
	Ref    ToolRef
	Target Target
}

// OfferedTools resolves each of the server's tool references at its pinned
// or latest version, in reference order. A reference that no longer
// resolves to something callable and enabled is left out. The endpoint
// lists what this gives, and the API shows the same.
func OfferedTools(ctx context.Context, resolver Resolver, server Definition) ([]Offered, error) {
	var offered []Offered
	for i, ref := range server.Tools {
		version := 0
		if ref.Version != nil {
			version = *ref.Version
		}
		target, err := ResolveTool(ctx, resolver, ref.Name, version)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("resolve tool %q: %w", ref.Name, err)
		}
		if target.Deleted || !target.Enabled || !Callable(target) {
			continue
		}
		offered = append(offered, Offered{Index: i, Ref: ref, Target: target})
	}
	return offered, nil
}

// Clash is why a tool that resolves is still not offered.
type Clash int

const (
	NoClash     Clash = iota
	NameClash         // its visible name is an earlier tool's of the server
	IntentClash       // it declares its own intent property on a server that states intent
)

// ClashOf is the clash of a tool named name with the tools seen before it
// (by visible name) and with the server's intent.
func ClashOf(seen map[string]bool, name string, target Target, intent Intent) Clash {
	switch {
	case seen[name]:
		return NameClash
	case !target.Native && intent != IntentNone && DeclaresIntent(InputSchema(target)):
		return IntentClash
	}
	return NoClash
}
