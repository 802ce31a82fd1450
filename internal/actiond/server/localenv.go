package server

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"

	"go.yaml.in/yaml/v3"
)

// The local environment's actions have fixed IDs, so that several actiond
// processes installing them at once agree on what exists.
const (
	DefaultServerID = "00000000-0000-4000-8000-000000000001"
	AuditToolID     = "00000000-0000-4000-8000-000000000002"
	// LocalPrincipal is the principal `actiond token` names by default; the
	// local environment gives it every permission, as the platform's local
	// environment gives its unauthenticated caller.
	LocalPrincipal = "local"
)

//go:embed audit.star
var auditSource string

//go:embed skills.yaml
var skillsSource []byte

// defaultSkillIDs are the fixed IDs of the default server's skills, in the
// order skills.yaml gives them.
var defaultSkillIDs = []string{
	"00000000-0000-4000-8000-000000000011", "00000000-0000-4000-8000-000000000012", "00000000-0000-4000-8000-000000000013",
	"00000000-0000-4000-8000-000000000014", "00000000-0000-4000-8000-000000000015", "00000000-0000-4000-8000-000000000016",
}

type skillSource struct {
	Name         string                `yaml:"name"`
	Description  string                `yaml:"description"`
	Tools        []string              `yaml:"tools"`
	Instructions string                `yaml:"instructions"`
	Examples     []action.SkillExample `yaml:"examples"`
}

// defaultSkills are the default server's skills, read from skills.yaml.
func defaultSkills() ([]action.Definition, error) {
	var sources []skillSource
	if err := yaml.Unmarshal(skillsSource, &sources); err != nil {
		return nil, fmt.Errorf("local environment: skills.yaml: %w", err)
	}
	if len(sources) != len(defaultSkillIDs) {
		return nil, fmt.Errorf("local environment: skills.yaml has %d skills for %d IDs", len(sources), len(defaultSkillIDs))
	}
	var out []action.Definition
	for _, src := range sources {
		examples := make([]any, len(src.Examples))
		for i, e := range src.Examples {
			examples[i] = map[string]any{"situation": e.Situation, "resolution": e.Resolution, "reason": e.Reason}
		}
		def := action.Definition{Name: src.Name, Description: src.Description, Kind: action.KindSkill,
			Config: map[string]any{"instructions": src.Instructions, "examples": examples}}
		for _, tool := range src.Tools {
			def.Tools = append(def.Tools, action.ToolRef{Name: tool})
		}
		out = append(out, def)
	}
	return out, nil
}

// installLocalEnvironment creates the local principal, the audit tool and the
// default MCP server when they do not exist yet. They are ordinary actions:
// change them with updateAction.
func installLocalEnvironment(ctx context.Context, st *store.Store, c clock.Clock) error {
	w := st.NewWork(auth.DefaultAccount)
	everything := []policy.Policy{{Effect: policy.Allow, Actions: []string{"*"}, Resources: []string{"*"}}}
	if _, err := registry.Principal(ctx, w, LocalPrincipal); errors.Is(err, registry.ErrNotFound) {
		if _, err := registry.PutPrincipal(ctx, w, LocalPrincipal, everything); err != nil {
			return fmt.Errorf("local environment: principal %s: %w", LocalPrincipal, err)
		}
	}
	skills, err := defaultSkills()
	if err != nil {
		return err
	}
	type install struct {
		id  string
		def action.Definition
	}
	installs := []install{{AuditToolID, auditTool()}}
	for i, skill := range skills {
		installs = append(installs, install{defaultSkillIDs[i], skill})
	}
	installs = append(installs, install{DefaultServerID, defaultServer(everything, skills)})
	for _, def := range installs {
		if _, err := registry.Action(ctx, w, def.id, 0); err == nil {
			continue
		}
		if err := action.Validate(ctx, def.def, registry.NewResolver(w), rootWriter{}); err != nil {
			return fmt.Errorf("local environment: %s: %w", def.def.Name, err)
		}
		if _, err := registry.CreateAction(ctx, w, def.id, def.def, c.Now()); err != nil {
			return fmt.Errorf("local environment: %s: %w", def.def.Name, err)
		}
	}
	if len(w.Writes()) == 0 {
		return nil
	}
	err = st.Write(ctx, func(tx *store.Tx) error { return tx.Apply(ctx, w) })
	if errors.Is(err, store.ErrConflict) {
		return nil // another process installed them first
	}
	return err
}

// rootWriter is the local environment installing its own actions.
type rootWriter struct{}

func (rootWriter) Check(context.Context, policy.Request) error { return nil }

func defaultServer(everything []policy.Policy, skills []action.Definition) action.Definition {
	var refs []action.SkillRef
	for _, skill := range skills {
		refs = append(refs, action.SkillRef{Name: skill.Name})
	}
	return action.Definition{
		Skills:      refs,
		Name:        "default",
		Description: "The local environment's MCP server: the platform's API, CEL and the session's own audit trail.",
		Kind:        action.KindMCP,
		Config:      map[string]any{},
		MCP: &action.MCP{
			Name:         "default",
			Instructions: "Tools for working with this local environment through its GraphQL API. State your intent with every call; audit reads this session's own record back. Load the skill basics first: the skills explain how to build, verify and serve tools here.",
			Session: &action.MCPSession{Start: &action.SessionStart{Input: map[string]string{
				"principal": "execution.input.principal",
				"subject":   "execution.input.subject",
			}}},
			Mode:   action.ModeLive,
			Intent: action.IntentRequired,
		},
		Session: &action.Session{
			InputSchema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"principal": map[string]any{"type": "string"}, "subject": map[string]any{"type": "string"}},
				"required":   []any{"principal", "subject"},
			},
			ID: "string(size(session.input.principal)) + ':' + session.input.principal + ':' + session.input.subject",
		},
		Tools: []action.ToolRef{
			{Name: action.NativeGraphQL}, {Name: action.NativeCEL}, {Name: action.NativeProgram}, {Name: action.NativeInvoke},
			{Name: action.NativeGetTask}, {Name: action.NativeCancelTask},
			{Name: "audit", Input: map[string]string{"session_id": "session.id", "server": "'default'"}},
		},
		Policies: everything,
	}
}

func auditTool() action.Definition {
	step := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"at": map[string]any{"type": "string"}, "did": map[string]any{"type": "string"}, "tool": map[string]any{"type": "string"},
			"intent": map[string]any{"type": "string"}, "status": map[string]any{"type": "string"},
			"error": map[string]any{"type": "object"}, "execution_id": map[string]any{"type": "string"},
		},
		"required": []any{"at", "did", "status", "execution_id"},
	}
	var output map[string]any
	json.Unmarshal([]byte(`{"type":"object","properties":{"server":{"type":"string"},"session_id":{"type":"string"},"complete":{"type":"boolean"}},"required":["server","session_id","steps","complete"]}`), &output)
	output["properties"].(map[string]any)["steps"] = map[string]any{"type": "array", "items": step}
	return action.Definition{
		Name:        "audit",
		Description: "Reads this session's own record back: its requests, oldest first, with what each did, its stated intent, status and error. The last few requests can take a moment to appear.",
		Kind:        action.KindTool,
		Config:      map[string]any{"source": auditSource},
		Tool: &action.ToolBlock{
			InputSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"session_id": map[string]any{"type": "string"},
					"server":     map[string]any{"type": "string"},
					"limit":      map[string]any{"type": "integer", "minimum": 1, "maximum": 100, "description": "How many of the latest requests to return (default 20)."},
				},
				"required":             []any{"session_id", "server"},
				"additionalProperties": false,
			},
			OutputSchema: output,
		},
		Tools:    []action.ToolRef{{Name: action.NativeGraphQL}},
		Policies: []policy.Policy{{Effect: policy.Allow, Actions: []string{"SELECT"}, Resources: []string{"actions.*"}}},
	}
}
