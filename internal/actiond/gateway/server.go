package gateway

import (
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/skill"
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
	// Skills are the skill references that resolve to an available skill,
	// in reference order, each rendered beside this server's tools.
	Skills []*Skill
	// Templates are mcp.resources in order, each with the tool that reads
	// it; one whose tool can no longer be offered or can write is kept,
	// unavailable, so that its reads are refused with its URI.
	Templates []*Template
}

// Skill is one of a server's skills at the version its reference resolves
// to, rendered.
type Skill struct {
	Name   string
	Target action.Target
	File   skill.File
}

// Template is one mcp.resources entry, resolved.
type Template struct {
	Spec   action.ResourceTemplate
	Parsed *action.URITemplate
	// Tool reads the template's resources; nil when the tool is not offered.
	Tool *Tool
	// MIMEType is what the tool's output schema fixes, or empty.
	MIMEType string
	// Unavailable: the tool's current version can write, or is not
	// offered, so the template is left out and its reads refused.
	Unavailable bool
}

// offersResources: skills or resource templates (ACT-087, ACT-090).
func (s *Server) offersResources() bool {
	return len(s.Definition.Skills) > 0 || (s.Definition.MCP != nil && len(s.Definition.MCP.Resources) > 0)
}

// offersSkills: prompts and the Skills extension come with skills
// (ACT-088, ACT-089).
func (s *Server) offersSkills() bool { return len(s.Definition.Skills) > 0 }

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
