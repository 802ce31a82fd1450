package action_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/policy"
)

// registry is a Resolver over versions held in memory: the unit-test seam
// beside the store-backed resolver.
type registry struct {
	versions map[string][]action.Target // name → versions, index = version-1
	calls    int
}

func newRegistry() *registry { return &registry{versions: map[string][]action.Target{}} }

// add stores a new version of def and returns its target.
func (r *registry) add(def action.Definition) action.Target {
	existing := r.versions[def.Name]
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", len(r.versions)+1)
	if len(existing) > 0 {
		id = existing[0].ID
	}
	target := action.Target{ID: id, Version: len(existing) + 1, Definition: def, Enabled: def.IsEnabled()}
	r.versions[def.Name] = append(existing, target)
	return target
}

func (r *registry) Resolve(_ context.Context, name string, version int) (action.Target, error) {
	r.calls++
	versions := r.versions[name]
	if len(versions) == 0 {
		return action.Target{}, fmt.Errorf("%s: %w", name, action.ErrNotFound)
	}
	if version == 0 {
		return versions[len(versions)-1], nil
	}
	if version > len(versions) {
		return action.Target{}, fmt.Errorf("%s@%d: %w", name, version, action.ErrNotFound)
	}
	return versions[version-1], nil
}

var (
	selectOnly = []policy.Policy{{Effect: policy.Allow, Actions: []string{"SELECT"}, Resources: []string{"financial.*"}}}
	everything = []policy.Policy{{Effect: policy.Allow, Actions: []string{"*"}, Resources: []string{"*"}}}
	inserts    = []policy.Policy{{Effect: policy.Allow, Actions: []string{"SELECT", "INSERT"}, Resources: []string{"financial.*"}}}
)

func object(properties map[string]any, required ...string) map[string]any {
	schema := map[string]any{"type": "object"}
	if properties != nil {
		schema["properties"] = properties
	}
	if len(required) > 0 {
		list := make([]any, len(required))
		for i, r := range required {
			list[i] = r
		}
		schema["required"] = list
	}
	return schema
}

func starlarkTool(name string, policies []policy.Policy, properties map[string]any, required ...string) action.Definition {
	return action.Definition{
		Name: name, Kind: action.KindTool,
		Config:   map[string]any{"source": "def run(event):\n    return event[\"data\"]\n"},
		Tool:     &action.ToolBlock{InputSchema: object(properties, required...)},
		Policies: policies,
	}
}

func skill(name, description string) action.Definition {
	return action.Definition{Name: name, Kind: action.KindSkill, Description: description, Config: map[string]any{"instructions": "…"}}
}

// fixtures is the registry the definition tests read.
func fixtures() *registry {
	r := newRegistry()
	r.add(starlarkTool("get_account_context", selectOnly, map[string]any{"account_id": map[string]any{"type": "string"}}, "account_id"))
	r.add(starlarkTool("notify_human_ops", inserts, map[string]any{
		"message":      map[string]any{"type": "string", "x-mcp-header": "Message"},
		"requested_by": map[string]any{"type": "string"},
	}, "message", "requested_by"))
	r.add(starlarkTool("get_account", selectOnly, map[string]any{"account_id": map[string]any{"type": "string"}}))
	r.add(starlarkTool("writer", everything, map[string]any{}))
	r.add(starlarkTool("with_intent", selectOnly, map[string]any{"intent": map[string]any{"type": "string"}}))
	r.add(starlarkTool("closed", selectOnly, map[string]any{"a": map[string]any{"type": "string"}}))
	r.versions["closed"][0].Definition.Tool.InputSchema["additionalProperties"] = false
	// renamed: version 1 is called "alias", version 2 "get_account".
	r.add(starlarkTool("alias", selectOnly, map[string]any{}))
	v2 := starlarkTool("get_account", selectOnly, map[string]any{})
	r.versions["alias"] = append(r.versions["alias"], action.Target{ID: r.versions["alias"][0].ID, Version: 2, Definition: v2, Enabled: true})
	r.add(action.Definition{Name: "reviewer", Kind: action.KindAgent, Agent: map[string]any{"model": "m"},
		Tool: &action.ToolBlock{InputSchema: object(map[string]any{"question": map[string]any{"type": "string"}})}, Policies: selectOnly})
	r.add(action.Definition{Name: "planner", Kind: action.KindAgent, Agent: map[string]any{"model": "m"}})
	r.add(action.Definition{Name: "gpt", Kind: action.KindModel, Tool: &action.ToolBlock{InputSchema: object(map[string]any{})}})
	r.add(skill("fraud-review-2", "How to review an account for fraud."))
	r.add(skill("Bad_Name", "x"))
	r.add(skill("a--b", "x"))
	r.add(skill("-a", "x"))
	r.add(skill("empty-description", ""))
	r.add(skill("long-description", strings.Repeat("é", 1025)))
	r.add(action.Definition{Name: "other-server", Kind: action.KindMCP})
	r.add(starlarkTool("gone", selectOnly, map[string]any{}))
	r.versions["gone"][0].Deleted = true
	return r
}

// root may do anything.
var root = action.PolicyWriter{Layers: []policy.Layer{{Name: policy.LayerPrincipal, Policies: everything}}}

// fraudOps is the seed's example server.
func fraudOps() action.Definition {
	return mustDecode(`{
		"name": "fraud-ops",
		"description": "Account review tools for the fraud operations team.",
		"kind": "mcp",
		"config": {},
		"mcp": {
			"name": "fraud-ops",
			"instructions": "Tools for reviewing account activity.",
			"session": {"start": {"input": {"principal": "execution.input.principal", "subject": "execution.input.subject"}}}
		},
		"session": {
			"inputSchema": {"type": "object", "properties": {"principal": {"type": "string"}, "subject": {"type": "string"}}, "required": ["principal", "subject"]},
			"id": "string(size(session.input.principal)) + ':' + session.input.principal + ':' + session.input.subject"
		},
		"tools": [
			{"name": "get_account_context"},
			{"name": "notify_human_ops", "input": {"requested_by": "execution.input.subject"}}
		],
		"policies": [{"effect": "ALLOW", "actions": ["SELECT"], "resources": ["financial.*"]}]
	}`)
}

func mustDecode(text string) action.Definition {
	def, err := action.Decode([]byte(text))
	if err != nil {
		panic(err)
	}
	return def
}

func clone(def action.Definition) action.Definition {
	b, err := json.Marshal(def)
	if err != nil {
		panic(err)
	}
	return mustDecode(string(b))
}

func validate(t *testing.T, def action.Definition) error {
	t.Helper()
	return action.Validate(context.Background(), def, fixtures(), root)
}
