package actiondtest

import (
	"crypto/rand"
	"fmt"
)

// NewID makes an action ID.
func NewID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ServerSpec describes an MCP server for createAction.
type ServerSpec struct {
	Name         string
	Instructions string
	Tools        []map[string]any
	Policies     []map[string]any
	// Mode is PREVIEW or LIVE; empty leaves it out (PREVIEW).
	Mode string
	// Intent is REQUIRED, OPTIONAL or NONE; empty leaves it out (REQUIRED).
	Intent          string
	CallsPerMinute  int
	ResponseTimeout string
	// StartInput is mcp.session.start.input; nil groups by principal and
	// subject as the seed's example does.
	StartInput map[string]string
	// SessionID is session.id; empty is the seed's length-prefixed
	// principal:subject.
	SessionID string
	// SessionSchema is session.inputSchema; nil requires principal and
	// subject strings.
	SessionSchema map[string]any
	Enabled       *bool
	// Skills are skill references; Resources mcp.resources templates.
	Skills    []map[string]any
	Resources []map[string]any
}

// ByPrincipalAndSubject is the seed's session id.
const ByPrincipalAndSubject = "string(size(session.input.principal)) + ':' + session.input.principal + ':' + session.input.subject"

// SessionIDFor is the session id ByPrincipalAndSubject gives.
func SessionIDFor(principal, subject string) string {
	return fmt.Sprintf("%d:%s:%s", len(principal), principal, subject)
}

// MCPBlock is the spec's mcp block.
func (s ServerSpec) MCPBlock() map[string]any {
	start := s.StartInput
	if start == nil {
		start = map[string]string{"principal": "execution.input.principal", "subject": "execution.input.subject"}
	}
	startAny := map[string]any{}
	for k, v := range start {
		startAny[k] = v
	}
	block := map[string]any{"name": s.Name, "session": map[string]any{"start": map[string]any{"input": startAny}}}
	if s.Instructions != "" {
		block["instructions"] = s.Instructions
	}
	if s.Mode != "" {
		block["mode"] = s.Mode
	}
	if s.Intent != "" {
		block["intent"] = s.Intent
	}
	if s.CallsPerMinute > 0 {
		block["limits"] = map[string]any{"callsPerMinute": s.CallsPerMinute}
	}
	if s.Resources != nil {
		block["resources"] = s.Resources
	}
	return block
}

// Input is createAction's input.
func (s ServerSpec) Input() map[string]any {
	schema := s.SessionSchema
	if schema == nil {
		schema = map[string]any{
			"type":       "object",
			"properties": map[string]any{"principal": map[string]any{"type": "string"}, "subject": map[string]any{"type": "string"}},
			"required":   []any{"principal", "subject"},
		}
	}
	id := s.SessionID
	if id == "" {
		id = ByPrincipalAndSubject
	}
	tools := s.Tools
	if tools == nil {
		tools = []map[string]any{}
	}
	input := map[string]any{
		"name": s.Name, "description": "Test server " + s.Name, "kind": "mcp", "config": map[string]any{},
		"mcp":     s.MCPBlock(),
		"session": map[string]any{"inputSchema": schema, "id": id},
		"tools":   tools,
	}
	if s.Policies != nil {
		input["policies"] = s.Policies
	}
	if s.ResponseTimeout != "" {
		input["execution"] = map[string]any{"responseTimeout": s.ResponseTimeout}
	}
	if s.Enabled != nil {
		input["enabled"] = *s.Enabled
	}
	if s.Skills != nil {
		input["skills"] = s.Skills
	}
	return input
}

// Allow is an ALLOW policy.
func Allow(actions []string, resources ...string) map[string]any {
	return map[string]any{"effect": "ALLOW", "actions": actions, "resources": resources}
}

// Deny is a DENY policy.
func Deny(actions []string, resources ...string) map[string]any {
	return map[string]any{"effect": "DENY", "actions": actions, "resources": resources}
}

// Everything allows every action on every resource.
func Everything() []map[string]any { return []map[string]any{Allow([]string{"*"}, "*")} }

// Ref is a tool reference.
func Ref(name string) map[string]any { return map[string]any{"name": name} }

// RefFixed is a tool reference with fixed input.
func RefFixed(name string, fixed map[string]any) map[string]any {
	return map[string]any{"name": name, "input": fixed}
}

// RefPinned is a tool reference pinned to a version.
func RefPinned(name string, version int) map[string]any {
	return map[string]any{"name": name, "version": version}
}

// Object is an object schema with the given properties and required names.
func Object(properties map[string]any, required ...string) map[string]any {
	schema := map[string]any{"type": "object", "properties": properties}
	if len(required) > 0 {
		list := make([]any, len(required))
		for i, r := range required {
			list[i] = r
		}
		schema["required"] = list
	}
	return schema
}

// String is a string property schema.
func String() map[string]any { return map[string]any{"type": "string"} }

// Integer is an integer property schema.
func Integer() map[string]any { return map[string]any{"type": "integer"} }

// CELTool is a kind cel action evaluating expression over event.data.
func CELTool(name, expression string, inputSchema map[string]any, policies ...map[string]any) map[string]any {
	if inputSchema == nil {
		inputSchema = Object(map[string]any{})
	}
	def := map[string]any{
		"name": name, "description": "CEL tool " + name, "kind": "cel",
		"config": map[string]any{"expression": expression},
		"tool":   map[string]any{"inputSchema": inputSchema},
	}
	if len(policies) > 0 {
		def["policies"] = policies
	}
	return def
}

// StarlarkTool is a kind tool action running source's run(event); tools are
// the references it may call (graphql and cel included).
func StarlarkTool(name, source string, inputSchema map[string]any, tools []map[string]any, policies ...map[string]any) map[string]any {
	if inputSchema == nil {
		inputSchema = Object(map[string]any{})
	}
	def := map[string]any{
		"name": name, "description": "Starlark tool " + name, "kind": "tool",
		"config": map[string]any{"source": source},
		"tool":   map[string]any{"inputSchema": inputSchema},
	}
	if tools != nil {
		def["tools"] = tools
	}
	if len(policies) > 0 {
		def["policies"] = policies
	}
	return def
}

// Skill is a skill's createAction input: instructions, examples as
// {situation, resolution, reason}, and the tools it names.
func Skill(name, description, instructions string, examples []map[string]any, tools ...string) map[string]any {
	config := map[string]any{"instructions": instructions}
	if examples != nil {
		config["examples"] = examples
	}
	refs := []map[string]any{}
	for _, t := range tools {
		refs = append(refs, Ref(t))
	}
	return map[string]any{"name": name, "description": description, "kind": "skill", "config": config, "tools": refs}
}

// Template is an mcp.resources entry.
func Template(uriTemplate, name, description, tool string) map[string]any {
	return map[string]any{"uriTemplate": uriTemplate, "name": name, "description": description, "tool": tool}
}
