package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/policy"
)

// Server is an MCP server as one request sees it: the server's action at its
// current version, with each tool reference resolved when the request
// started.
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
	Intent          action.Intent
	CallsPerMinute  int
	ResponseTimeout time.Duration
	Definition      action.Definition
	Compiled        *action.Compiled
	// Invokable says whether the principal holds INVOKE on the server.
	Invokable bool
	// Layers are the principal's policies then the server's: every call
	// beneath the request runs under them, then its tool's own.
	Layers []policy.Layer
	Claims map[string]any
	// Tools in reference order, including those left out of listings.
	Tools []*Tool
}

// Tool is one tool reference of a server, resolved.
type Tool struct {
	// Name is the tool's name as the external agent sees it.
	Name        string
	Description string
	// Ref is the reference's index in the server's tools.
	Ref    int
	Target action.Target
	// Compiled is the target's compiled definition; nil for a native tool.
	Compiled *action.Compiled
	// Unavailable, when set, leaves the tool out of tools/list; a call to
	// it is this tool error.
	Unavailable *engine.Failure
	// InputSchema is the schema as listed.
	InputSchema  map[string]any
	OutputSchema map[string]any
	Annotations  *mcp.ToolAnnotations
}

// resolveSession computes a request's session input and id. A request whose
// record does not produce a valid session input is refused with 400.
func (s *Server) resolveSession(ctx context.Context, record map[string]any) (json.RawMessage, string, *rpcError) {
	mismatched := func(err error) *rpcError {
		return newError(codeInvalidParams, errRequestMismatched, http.StatusBadRequest, map[string]any{"reason": err.Error()})
	}
	input, err := s.Compiled.SessionInput(ctx, record)
	if err != nil {
		if errors.Is(err, action.ErrSessionInvalid) {
			return nil, "", mismatched(err)
		}
		return nil, "", newError(codeInternal, errInternal, http.StatusInternalServerError, nil)
	}
	id, err := s.Compiled.SessionID(ctx, input)
	if err != nil || id == "" {
		if err == nil {
			err = errors.New("session.id gave an empty string")
		}
		return nil, "", mismatched(err)
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, "", mismatched(err)
	}
	return raw, id, nil
}

// serves says whether the server answers a method at a protocol revision.
// Every server answers discovery, tools and the Tasks extension; resources,
// prompts and skills come with skills and resource templates (a later
// issue). server/discover exists from 2026-07-28 on, and the handshake
// (initialize, ping) only before it: the other revision's method is refused
// here with the fixed -32601, not left to the SDK's own wording.
func (s *Server) serves(method, version string) bool {
	switch method {
	case "tools/list", "tools/call", "tasks/get", "tasks/update", "tasks/cancel":
		return true
	case "server/discover":
		return version >= newProtocol
	case "initialize", "ping":
		return version < newProtocol
	}
	return false
}
