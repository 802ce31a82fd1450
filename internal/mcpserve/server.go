package mcpserve

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is an MCP server as one request sees it: the server's action at its
// current version, with each tool reference resolved when the request
// started. A Directory builds it.
type Server struct {
	Account  string
	ActionID string
	Version  int64
	// Name is the action's registry name, the <name> of the endpoint.
	Name string
	// MCPName is mcp.name, the name results carry in serverInfo.
	MCPName         string
	Instructions    string
	Preview         bool
	Intent          Intent
	CallsPerMinute  int
	ResponseTimeout time.Duration
	// Invokable says whether the principal holds INVOKE on the server.
	Invokable bool
	Session   SessionMapping
	// Tools in reference order, including those left out of listings.
	Tools []*Tool
}

// Intent is the server's stated-intent setting.
type Intent string

const (
	IntentRequired Intent = "REQUIRED"
	IntentOptional Intent = "OPTIONAL"
	IntentNone     Intent = "NONE"
)

// Expression is a compiled CEL expression.
type Expression interface {
	Eval(ctx context.Context, vars map[string]any) (any, error)
}

// Validator checks a JSON value against a schema.
type Validator interface {
	Validate(value any) error
}

// SessionMapping is how a server groups requests into sessions.
type SessionMapping struct {
	// Start maps each session input field to an expression over execution.
	Start map[string]Expression
	// ID names the session from session.input.
	ID Expression
	// Schema is the session block's inputSchema.
	Schema Validator
}

// Resolve computes a request's session input and id. A request whose record
// does not produce a valid session input is refused with 400.
func (m SessionMapping) Resolve(ctx context.Context, record map[string]any) (json.RawMessage, string, *rpcError) {
	mismatched := func(reason string) *rpcError {
		return newError(codeInvalidParams, errRequestMismatched, http.StatusBadRequest, map[string]any{"reason": reason})
	}
	input := map[string]any{}
	vars := map[string]any{"execution": map[string]any{"input": record}}
	for field, expr := range m.Start {
		v, err := expr.Eval(ctx, vars)
		if err != nil {
			return nil, "", mismatched("mcp.session.start.input." + field + ": " + err.Error())
		}
		input[field] = v
	}
	if m.Schema != nil {
		if err := m.Schema.Validate(input); err != nil {
			return nil, "", mismatched("the session input does not match session.inputSchema: " + err.Error())
		}
	}
	v, err := m.ID.Eval(ctx, map[string]any{"session": map[string]any{"input": input}})
	if err != nil {
		return nil, "", mismatched("session.id: " + err.Error())
	}
	id, ok := v.(string)
	if !ok || id == "" {
		return nil, "", mismatched("session.id must give a non-empty string")
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, "", mismatched(err.Error())
	}
	return raw, id, nil
}

// Tool is one tool reference of a server, resolved.
type Tool struct {
	// Name is the tool's name as the external agent sees it.
	Name        string
	Title       string
	Description string
	ActionID    string
	ActionName  string
	Version     int64
	// Unavailable, when set, leaves the tool out of tools/list; a call to it
	// is this tool error.
	Unavailable *ToolFailure
	// InputSchema is the schema as listed: the tool's own without fixed
	// properties and x-mcp-header, plus intent when intent is on.
	InputSchema  map[string]any
	OutputSchema map[string]any
	Annotations  *mcp.ToolAnnotations
	// Fixed input: property to expression over execution, session.
	Fixed map[string]Expression
	// Input validates the effective input against the tool's own schema.
	Input Validator
	// Target is what the Runner needs to run the tool.
	Target any
}

// serves says whether the server answers a method. Every server answers
// discovery, tools and the Tasks extension; resources, prompts and skills
// come with skills and resource templates (a later issue).
func (s *Server) serves(method string) bool {
	switch method {
	case "initialize", "ping", "server/discover", "tools/list", "tools/call", "tasks/get", "tasks/update", "tasks/cancel":
		return true
	}
	return false
}
