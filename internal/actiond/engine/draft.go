package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/action"
)

// A draft is an unpublished definition of an action that invoke previews
// in place of its stored versions (seed 004, "A draft keeps its kind", "A
// draft uses only what the server offers"). It is your code, so it reaches
// what the server lists only as the server does.

// Through is a server's reference that a draft agent's tool of the same
// name goes through: the version it runs, and the fixed values it sets.
type Through struct {
	Version int            `json:"version"`
	Fixed   map[string]any `json:"fixed,omitempty"`
}

// nativeRefusal is the refusal of a draft that uses a native tool the
// server does not list, in the seed's words (ACT-407).
func nativeRefusal(name string) *Failure {
	return NewFailure(CodeInputInvalid, fmt.Sprintf("the definition uses the native tool %s, which this server does not offer", name),
		"Leave the native tool out of the draft, or invoke through a server that lists it.")
}

// planDraft checks a draft of stored, and makes what runs of it: the draft
// with its references resolved, at the stored action's version.
func (e *callEnv) planDraft(ctx context.Context, stored action.Target, raw map[string]any) (target, map[string]Through, *Failure) {
	c := e.request.call
	encoded, err := json.Marshal(raw)
	if err != nil {
		return target{}, nil, NewFailure(CodeInputInvalid, "The draft is not JSON.", "Pass the draft as createAction's input.")
	}
	def, err := action.Decode(encoded)
	if err != nil {
		return target{}, nil, draftInvalid(err)
	}
	if def.Kind != stored.Definition.Kind {
		return target{}, nil, NewFailure(CodeInputInvalid,
			fmt.Sprintf("A draft keeps its action's kind: %s is of kind %s, and the draft is of kind %s.", stored.Definition.Name, stored.Definition.Kind, def.Kind),
			"Make the draft's kind the action's, or create a new action for the other kind.")
	}
	if failure := invokable(def); failure != nil {
		return target{}, nil, failure
	}
	if failure := e.draftNatives(ctx, def); failure != nil {
		return target{}, nil, failure
	}
	resolver := e.request.runner.Registry.Resolver(c.Account)
	if err := action.Validate(ctx, def, resolver, action.PolicyWriter{Claims: c.Who.Claims, Layers: c.Layers}); err != nil {
		return target{}, nil, draftInvalid(err)
	}
	// The action as the draft would store it: INVOKE assertions on the
	// definition apply to what runs (ACT-401).
	if failure := e.mayInvoke(ctx, action.Document(action.Target{ID: stored.ID, Version: stored.Version + 1, Definition: def})); failure != nil {
		return target{}, nil, failure
	}
	resolved, through, failure := e.resolveDraft(ctx, resolver, def)
	if failure != nil {
		return target{}, nil, failure
	}
	compiled, err := action.Compile(resolved)
	if err != nil {
		return target{}, nil, draftInvalid(err)
	}
	record, err := json.Marshal(resolved)
	if err != nil {
		return target{}, nil, NewFailure(CodeFailure, "The draft could not be recorded.", "Call again in a moment.").WithDetail(err.Error())
	}
	run := target{
		action:   action.Target{ID: stored.ID, Version: stored.Version, Definition: resolved, Enabled: true},
		compiled: compiled,
		draft:    record,
	}
	return run, through, nil
}

func draftInvalid(err error) *Failure {
	var aerr *action.Error
	if errors.As(err, &aerr) {
		message := "The draft cannot run: " + aerr.Error()
		if aerr.Code == action.CodeAccessDenied {
			return NewFailure(aerr.Code, message, "Reference only actions that you and this server may read and INVOKE.").WithDetail(detail(aerr.Err))
		}
		return NewFailure(CodeInputInvalid, message, "Fix the draft at the field the message names, and invoke again.")
	}
	return NewFailure(CodeFailure, "The draft could not be checked.", "Call again in a moment.").WithDetail(err.Error())
}

// draftNatives refuses a draft of a native tool's kind, or whose tools or
// whose skills' tools name a native tool, that the server does not list
// (ACT-404..407), and one whose skills make available a tool the principal
// or the server may not INVOKE (ACT-398).
func (e *callEnv) draftNatives(ctx context.Context, def action.Definition) *Failure {
	offer := e.request.call.Offer
	switch def.Kind {
	case action.KindGraphQL, action.KindCEL:
		if !lists(offer, string(def.Kind)) {
			return nativeRefusal(string(def.Kind))
		}
	}
	for _, ref := range def.Tools {
		if action.IsNative(ref.Name) && !lists(offer, ref.Name) {
			return nativeRefusal(ref.Name)
		}
	}
	resolver := e.request.runner.Registry.Resolver(e.request.call.Account)
	for _, skillRef := range def.Skills {
		skill, err := resolver.Resolve(ctx, skillRef.Name, versionOf(skillRef.Version))
		if errors.Is(err, action.ErrNotFound) {
			continue // Validate names it
		}
		if err != nil {
			return NewFailure(CodeFailure, "The draft's skills could not be read.", "Call again in a moment.").WithDetail(err.Error())
		}
		for _, ref := range skill.Definition.Tools {
			if action.IsNative(ref.Name) {
				if !lists(offer, ref.Name) {
					return nativeRefusal(ref.Name)
				}
				continue
			}
			tool, err := resolver.Resolve(ctx, ref.Name, versionOf(ref.Version))
			if errors.Is(err, action.ErrNotFound) {
				continue // a skill's missing tool is not offered, so nothing reaches it
			}
			if err != nil {
				return NewFailure(CodeFailure, "The draft's skills could not be read.", "Call again in a moment.").WithDetail(err.Error())
			}
			if failure := e.mayInvoke(ctx, action.Document(tool)); failure != nil {
				failure.Message = fmt.Sprintf("The skill %s makes %s available, and %s", skill.Definition.Name, ref.Name, failure.Message)
				return failure
			}
		}
	}
	return nil
}

// resolveDraft pins each of the draft's references to the version that
// runs: a tool the server lists at the server's reference's version, the
// others at their pinned or latest version. For a tool the server lists
// it also says what the server's reference sets, for a draft agent.
func (e *callEnv) resolveDraft(ctx context.Context, resolver action.Resolver, def action.Definition) (action.Definition, map[string]Through, *Failure) {
	offer := e.request.call.Offer
	resolved := def
	resolved.Tools = append([]action.ToolRef(nil), def.Tools...)
	resolved.Skills = append([]action.SkillRef(nil), def.Skills...)
	through := map[string]Through{}
	for i, ref := range resolved.Tools {
		if action.IsNative(ref.Name) {
			continue
		}
		if listed, ok := offer.Tool(ref.Name); ok && !listed.Target.Native {
			fixed, err := offer.FixedInput(ctx, listed.Ref, map[string]any{})
			if err != nil {
				return action.Definition{}, nil, NewFailure(CodeCELEvaluation, "The server's fixed input for "+ref.Name+" could not be evaluated.",
					"Ask the server's owner to fix the tool reference's fixed input.").WithDetail(err.Error())
			}
			version := listed.Target.Version
			through[ref.Name] = Through{Version: version, Fixed: fixed}
			resolved.Tools[i].Version = &version
			continue
		}
		t, err := resolver.Resolve(ctx, ref.Name, versionOf(ref.Version))
		if err != nil {
			return action.Definition{}, nil, NewFailure(CodeFailure, "The draft's tools could not be read.", "Call again in a moment.").WithDetail(err.Error())
		}
		version := t.Version
		resolved.Tools[i].Version = &version
	}
	for i, ref := range resolved.Skills {
		t, err := resolver.Resolve(ctx, ref.Name, versionOf(ref.Version))
		if err != nil {
			return action.Definition{}, nil, NewFailure(CodeFailure, "The draft's skills could not be read.", "Call again in a moment.").WithDetail(err.Error())
		}
		version := t.Version
		resolved.Skills[i].Version = &version
	}
	return resolved, through, nil
}

func versionOf(v *int) int {
	if v == nil {
		return 0
	}
	return *v
}
