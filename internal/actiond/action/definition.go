// Package action holds action definitions (what createAction and
// updateAction's input carries), the validation of every definition write,
// and the helpers the MCP endpoint needs to list and call a server's tools:
// visible names, effective input schemas, stated intent, fixed input and
// session ids, compiled once per definition version.
package action

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/incusspawn/isx/internal/actiond/policy"
)

// Kind is an action's kind. Only cel, graphql, tool and mcp run today; agent,
// skill and model are stored and validated structurally.
type Kind string

const (
	KindCEL     Kind = "cel"
	KindGraphQL Kind = "graphql"
	KindTool    Kind = "tool" // a Starlark program
	KindMCP     Kind = "mcp"
	KindAgent   Kind = "agent"
	KindSkill   Kind = "skill"
	KindModel   Kind = "model"
)

var kinds = []Kind{KindCEL, KindGraphQL, KindTool, KindMCP, KindAgent, KindSkill, KindModel}

// Definition is an action definition: createAction's input, and
// updateAction's after Update merged it into the stored one. JSON names are
// the seed's.
type Definition struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Kind        Kind   `json:"kind"`
	// Enabled defaults to true; see IsEnabled.
	Enabled *bool `json:"enabled,omitempty"`
	// Config is kind-specific: cel {expression}, graphql {document,
	// operationName?, variables?}, tool {source}, mcp {}. nil reads as {}.
	Config map[string]any `json:"config,omitempty"`
	// Tool makes the action callable: required on cel, graphql and tool; an
	// agent with one is a callable agent; forbidden on mcp and skill.
	Tool      *ToolBlock      `json:"tool,omitempty"`
	Policies  []policy.Policy `json:"policies,omitempty"`
	Tools     []ToolRef       `json:"tools,omitempty"`
	Skills    []SkillRef      `json:"skills,omitempty"`
	Execution *Execution      `json:"execution,omitempty"`
	// Triggers are stored as given. Agent is stored as given too, and read
	// as an AgentBlock for a callable agent (see AgentSettings).
	Triggers []any          `json:"triggers,omitempty"`
	Agent    map[string]any `json:"agent,omitempty"`
	Session  *Session       `json:"session,omitempty"`
	MCP      *MCP           `json:"mcp,omitempty"`
}

// ToolBlock declares a callable action's input and output, as JSON Schemas
// (2020-12). The input schema is an object schema.
type ToolBlock struct {
	InputSchema  map[string]any `json:"inputSchema"`
	OutputSchema map[string]any `json:"outputSchema,omitempty"`
}

// ToolRef references a tool, callable agent, model or native tool.
type ToolRef struct {
	Name string `json:"name"`
	// Version pins a version; nil calls the latest, resolved per request.
	Version *int `json:"version,omitempty"`
	// Input is fixed input: property name → CEL expression. Fixed values
	// replace what the caller supplies.
	Input    map[string]string `json:"input,omitempty"`
	Approval *Approval         `json:"approval,omitempty"`
}

// Approval of a call by a person; never required on an MCP server.
type Approval struct {
	Required bool `json:"required"`
}

// SkillRef references a skill.
type SkillRef struct {
	Name    string `json:"name"`
	Version *int   `json:"version,omitempty"`
	// Preload is for agents; an MCP server's reference may not set it.
	Preload *bool `json:"preload,omitempty"`
}

// Execution settings.
type Execution struct {
	// ResponseTimeout is a Go duration ("90s", "10m") or an ISO 8601
	// duration ("PT1M"); see ParseDuration.
	ResponseTimeout string `json:"responseTimeout,omitempty"`
	// Retries is how many times a started execution (a callable agent's
	// task) runs again after an attempt that failed for a reason that can
	// pass: its worker died, the model's provider was unavailable, its
	// writes conflicted. Default DefaultRetries.
	Retries *int `json:"retries,omitempty"`
}

// Session names the session a request belongs to.
type Session struct {
	// InputSchema validates the session's input.
	InputSchema map[string]any `json:"inputSchema,omitempty"`
	// ID is a CEL expression over session.input producing the session's id.
	ID string `json:"id"`
}

// MCP is the block of a kind mcp action. A supplied block replaces the whole
// stored one.
type MCP struct {
	Name         string             `json:"name"`
	Instructions string             `json:"instructions,omitempty"`
	Session      *MCPSession        `json:"session,omitempty"`
	Mode         Mode               `json:"mode,omitempty"`
	Intent       Intent             `json:"intent,omitempty"`
	Limits       *Limits            `json:"limits,omitempty"`
	Resources    []ResourceTemplate `json:"resources,omitempty"`
}

// MCPSession maps a request to its session's input.
type MCPSession struct {
	Start *SessionStart `json:"start,omitempty"`
}

// SessionStart.Input maps each session input field to a CEL expression over
// execution.input, the request.
type SessionStart struct {
	Input map[string]string `json:"input"`
}

// Limits of an MCP server.
type Limits struct {
	CallsPerMinute int `json:"callsPerMinute"`
}

// ResourceTemplate is a template of resource URIs read by one of the
// server's tools.
type ResourceTemplate struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Tool is the visible name of one of the server's tools.
	Tool string `json:"tool"`
}

// Mode of an MCP server.
type Mode string

const (
	ModePreview Mode = "PREVIEW"
	ModeLive    Mode = "LIVE"
)

// Intent is whether an MCP server asks for stated intent.
type Intent string

const (
	IntentRequired Intent = "REQUIRED"
	IntentOptional Intent = "OPTIONAL"
	IntentNone     Intent = "NONE"
)

// Defaults and bounds of execution.responseTimeout and execution.retries.
const (
	DefaultResponseTimeout = time.Minute
	MaxResponseTimeout     = 10 * time.Minute
	// An agent runs for minutes: its attempts are bounded by 10 minutes
	// unless its definition says otherwise.
	DefaultAgentResponseTimeout = 10 * time.Minute
	DefaultRetries              = 2
	MaxRetries                  = 10
)

// IsEnabled is Enabled, true when unset.
func (d Definition) IsEnabled() bool { return d.Enabled == nil || *d.Enabled }

// ResponseTimeout is execution.responseTimeout, DefaultResponseTimeout when
// unset. A stored definition was validated; an unreadable value reads as the
// default.
func (d Definition) ResponseTimeout() time.Duration {
	if d.Execution == nil || d.Execution.ResponseTimeout == "" {
		return DefaultResponseTimeout
	}
	timeout, err := ParseDuration(d.Execution.ResponseTimeout)
	if err != nil {
		return DefaultResponseTimeout
	}
	return timeout
}

// Retries is execution.retries, DefaultRetries when unset.
func (d Definition) Retries() int {
	if d.Execution == nil || d.Execution.Retries == nil {
		return DefaultRetries
	}
	return *d.Execution.Retries
}

// AttemptTimeout bounds one attempt of a started execution: the response
// timeout, DefaultAgentResponseTimeout for an agent that sets none.
func (d Definition) AttemptTimeout() time.Duration {
	if d.Kind == KindAgent && (d.Execution == nil || d.Execution.ResponseTimeout == "") {
		return DefaultAgentResponseTimeout
	}
	return d.ResponseTimeout()
}

// IsCallableAgent reports an agent with a tool block.
func (d Definition) IsCallableAgent() bool { return d.Kind == KindAgent && d.Tool != nil }

// ServerMode is mcp.mode, PREVIEW when unset.
func (d Definition) ServerMode() Mode {
	if d.MCP == nil || d.MCP.Mode == "" {
		return ModePreview
	}
	return d.MCP.Mode
}

// ServerIntent is mcp.intent, REQUIRED when unset.
func (d Definition) ServerIntent() Intent {
	if d.MCP == nil || d.MCP.Intent == "" {
		return IntentRequired
	}
	return d.MCP.Intent
}

// Decode reads a definition from JSON, refusing unknown fields, as a
// BAD_REQUEST *Error.
func Decode(data []byte) (Definition, error) {
	var def Definition
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&def); err != nil {
		return Definition{}, decodeError(err)
	}
	if _, err := decoder.Token(); !errors.Is(err, io.EOF) {
		return Definition{}, badRequest("input", "the definition must be one JSON object")
	}
	return def, nil
}

func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		path := typeErr.Field
		if path == "" {
			path = "input"
		}
		return newError(CodeBadRequest, path, fmt.Sprintf("expected %s, got a JSON %s", typeErr.Type, typeErr.Value), err)
	}
	return wrapped(CodeBadRequest, "input", err)
}

// Update applies updateAction's input to the stored definition: each
// top-level field the input supplies replaces the stored one whole (so a
// supplied mcp block replaces the whole block); the others are kept. An
// explicit null clears a field.
func Update(stored Definition, input []byte) (Definition, error) {
	var patch map[string]json.RawMessage
	if err := json.Unmarshal(input, &patch); err != nil {
		return Definition{}, newError(CodeBadRequest, "input", "the input must be a JSON object", err)
	}
	if _, err := Decode(input); err != nil {
		return Definition{}, err
	}
	base, err := json.Marshal(stored)
	if err != nil {
		return Definition{}, fmt.Errorf("action: encoding the stored definition: %w", err)
	}
	var merged map[string]json.RawMessage
	if err := json.Unmarshal(base, &merged); err != nil {
		return Definition{}, fmt.Errorf("action: decoding the stored definition: %w", err)
	}
	for field, value := range patch {
		if string(value) == "null" {
			delete(merged, field)
			continue
		}
		merged[field] = value
	}
	out, err := json.Marshal(merged)
	if err != nil {
		return Definition{}, fmt.Errorf("action: merging the definition: %w", err)
	}
	return Decode(out)
}
