package action

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/policy"
)

// VisibleName is the tool name an external agent sees for a reference's
// target: the referenced action's registry name at the resolved version (a
// callable agent and a model too), or the native tool's own name.
func VisibleName(t Target) string { return t.Definition.Name }

// Callable reports whether a reference may name the target as a tool: a
// native tool, an action of kind tool, graphql, cel or model, or a callable
// agent. A skill, an MCP server and an agent without a tool block may not.
func Callable(t Target) bool {
	if t.Native {
		return true
	}
	switch t.Definition.Kind {
	case KindTool, KindGraphQL, KindCEL, KindModel:
		return true
	case KindAgent:
		return t.Definition.IsCallableAgent()
	}
	return false
}

// ToolKindOf is the annotation rule the target follows.
func ToolKindOf(t Target) policy.ToolKind {
	if t.Native {
		return natives[t.Definition.Name].kind
	}
	switch t.Definition.Kind {
	case KindCEL:
		return policy.KindCELAction
	case KindAgent:
		return policy.KindAgent
	case KindModel:
		return policy.KindModel
	}
	return policy.KindTool
}

// InputSchema is the target's declared input schema, nil for a native tool
// (the native package declares those) or a target without a tool block.
func InputSchema(t Target) map[string]any {
	if t.Native || t.Definition.Tool == nil {
		return nil
	}
	return t.Definition.Tool.InputSchema
}

// Annotations derives a listed tool's annotations from the server's policies
// and the target's own (a callable agent's are the agent's). openWorld is
// OpenWorld's answer for a tool or agent, ServerOpenWorld's for program.
func Annotations(server Definition, t Target, openWorld bool) mcp.ToolAnnotations {
	return policy.Annotate(server.Policies, t.Definition.Policies, ToolKindOf(t), openWorld)
}

// maxReferenceDepth bounds how deep OpenWorld follows references.
const maxReferenceDepth = 16

// OpenWorld reports whether a target reaches an open-world tool: it is a
// model, or it declares one, directly or through the tools it declares, at
// the versions its references resolve to (ACT-315..317). Native tools are
// closed world (program: see ServerOpenWorld). A reference that no longer
// resolves reaches nothing.
func OpenWorld(ctx context.Context, resolver Resolver, t Target) (bool, error) {
	return openWorld(ctx, resolver, t, map[string]bool{}, 0)
}

func openWorld(ctx context.Context, resolver Resolver, t Target, seen map[string]bool, depth int) (bool, error) {
	if t.Native {
		return false, nil
	}
	if t.Definition.Kind == KindModel {
		return true, nil
	}
	key := fmt.Sprintf("%s@%d", t.ID, t.Version)
	if seen[key] || depth > maxReferenceDepth {
		return false, nil
	}
	seen[key] = true
	for _, ref := range t.Definition.Tools {
		next, err := ResolveTool(ctx, resolver, ref.Name, versionOf(ref.Version))
		if errors.Is(err, ErrNotFound) || err == nil && (next.Deleted || !next.Enabled) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("action: resolving %s's tool %s: %w", t.Definition.Name, ref.Name, err)
		}
		open, err := openWorld(ctx, resolver, next, seen, depth+1)
		if err != nil || open {
			return open, err
		}
	}
	return false, nil
}

// ServerOpenWorld reports whether an MCP server lists an open-world tool,
// which makes its program tool open world (ACT-318).
func ServerOpenWorld(ctx context.Context, resolver Resolver, server Definition) (bool, error) {
	return openWorld(ctx, resolver, Target{Definition: Definition{Kind: KindMCP, Name: server.Name, Tools: server.Tools}}, map[string]bool{}, 0)
}
