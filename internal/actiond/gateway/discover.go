package gateway

import (
	"context"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/mcpkit"
)

// The SDK answers server/discover (2026-07-28) and the handshake (initialize
// and ping, before it) itself, from what this file gives it.

// Protocol revisions the endpoint serves. 2024-11-05 is refused.
var supportedVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}

// newProtocol is the revision with server/discover and no handshake.
const newProtocol = "2026-07-28"

// implementation is the server's name and answering version, as discovery
// and the handshake give them and as every result's _meta repeats them.
func implementation(server *Server) *mcp.Implementation {
	return &mcp.Implementation{Name: server.MCPName, Version: strconv.FormatInt(server.Version, 10)}
}

// serverOptions are what discovery says besides the name: the server's
// instructions, its capabilities (tools, and the Tasks extension), the
// revisions it speaks, and that a discovery may be cached for a minute.
func (h *Handler) serverOptions(server *Server) *mcp.ServerOptions {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	caps.AddExtension(mcpkit.TasksExtension, map[string]any{})
	if server.offersResources() {
		caps.Resources = &mcp.ResourceCapabilities{}
	}
	if server.offersSkills() {
		caps.Prompts = &mcp.PromptCapabilities{}
		caps.AddExtension(mcpkit.SkillsExtension, map[string]any{})
	}
	return &mcp.ServerOptions{
		Instructions:              server.Instructions,
		Capabilities:              caps,
		SupportedProtocolVersions: supportedVersions,
		Logger:                    h.servers.logger,
		SetCacheable: func(ctx context.Context, req mcp.Request, c *mcp.Cacheable) {
			// Discovery and listings may be cached for a minute.
			c.TTLMs, c.CacheScope = 60_000, "private"
		},
	}
}

// serves says whether the server answers a method at a protocol revision.
// Every server answers discovery, tools and the Tasks extension; resources
// come with skills or resource templates, prompts and the Skills extension
// with skills. server/discover exists from 2026-07-28 on, and the handshake
// (initialize, ping) only before it: the other revision's method is refused
// here with the fixed -32601, not left to the SDK's own wording.
func (s *Server) serves(method, version string) bool {
	switch method {
	case "tools/list", "tools/call", "tasks/get", "tasks/update", "tasks/cancel":
		return true
	case "resources/list", "resources/read", "resources/templates/list":
		return s.offersResources()
	case "prompts/list", "prompts/get", mcpkit.MethodListSkills, mcpkit.MethodGetSkill:
		return s.offersSkills()
	case "server/discover":
		return version >= newProtocol
	case "initialize", "ping":
		return version < newProtocol
	}
	return false
}
