package graph

import (
	"context"
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/graph/model"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
)

// NativeTool is what a listing shows of a native tool the engine runs.
type NativeTool struct {
	Description string
	InputSchema map[string]any
}

// NativeTools looks up a native tool the engine runs; found is false for one
// a later version adds, which a server's listing leaves out. The engine
// answers it (the server wires it), so that the API need not import the
// engine, which runs the API's operations.
type NativeTools func(name string) (tool NativeTool, found bool)

// OfferedTools resolves the server's references as a tools/list does now:
// in reference order, at the pinned or latest version, leaving out what no
// longer resolves to something callable and enabled, with the annotations
// derived for each (seed "Annotations"). A tool whose action the reader may
// not SELECT is counted, not shown: the explorer shows nothing GraphQL would
// not.
func (a *actionVersion) OfferedTools(ctx context.Context) (*model.OfferedTools, error) {
	server := a.def()
	if server.Kind != action.KindMCP {
		return nil, nil
	}
	st := current(ctx)
	resolver := registry.NewResolver(st.env.Work)
	intent := server.ServerIntent()
	out := &model.OfferedTools{Tools: []*model.OfferedTool{}}
	offered, err := action.OfferedTools(ctx, resolver, server)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, o := range offered {
		ref, target := o.Ref, o.Target
		tool, err := offeredTool(ctx, st.env, resolver, server, ref, target, intent)
		if err != nil || tool == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		switch action.ClashOf(seen, tool.Name, target, intent) {
		case action.NameClash:
			tool.Unavailable = optional("its name is another tool's of this server")
		case action.IntentClash:
			tool.Unavailable = optional("it declares its own intent property, which clashes with the server's stated intent")
		}
		seen[tool.Name] = true
		if !target.Native && !st.env.Access.Allowed(ctx, policy.Select, registry.ResourceAction, action.Document(target)) {
			out.Unreadable++
			continue
		}
		out.Tools = append(out.Tools, tool)
	}
	return out, nil
}

func offeredTool(ctx context.Context, env Env, resolver action.Resolver, server action.Definition, ref action.ToolRef, target action.Target, intent action.Intent) (*model.OfferedTool, error) {
	tool := &model.OfferedTool{Name: action.VisibleName(target), Native: target.Native}
	schema := action.InputSchema(target)
	openWorld := false
	var err error
	if target.Native {
		native, found := NativeTool{}, false
		if env.Natives != nil {
			native, found = env.Natives(target.Definition.Name)
		}
		if !found {
			return nil, nil
		}
		tool.Description, schema = optional(native.Description), native.InputSchema
		if target.Definition.Name == action.NativeProgram {
			openWorld, err = action.ServerOpenWorld(ctx, resolver, server)
		}
	} else {
		id, v := target.ID, target.Version
		tool.ActionID, tool.Version, tool.Description = &id, &v, optional(target.Definition.Description)
		openWorld, err = action.OpenWorld(ctx, resolver, target)
	}
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", tool.Name, err)
	}
	input, err := toJSON(action.EffectiveInputSchema(schema, ref, intent))
	if err != nil {
		return nil, err
	}
	tool.InputSchema = input
	derived := action.Annotations(server, target, openWorld)
	tool.Annotations = &model.ToolAnnotations{ReadOnlyHint: derived.ReadOnlyHint, DestructiveHint: derived.DestructiveHint}
	if derived.OpenWorldHint != nil {
		tool.Annotations.OpenWorldHint = *derived.OpenWorldHint
	}
	return tool, nil
}
