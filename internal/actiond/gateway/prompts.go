package gateway

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Prompts: each skill is a prompt of its name, and getting it loads the
// skill, as a resources/read of its SKILL.md does (ACT-029, ACT-240).

func (h *Handler) listPrompts(ex *exchange) *mcp.ListPromptsResult {
	res := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{}}
	for _, s := range ex.server.Skills {
		res.Prompts = append(res.Prompts, &mcp.Prompt{Name: s.Name, Title: s.Name, Description: s.Target.Definition.Description})
	}
	ex.offeredSkills()
	res.TTLMs, res.CacheScope = 60_000, "private"
	return res
}

// getPrompt answers a skill's prompt with its SKILL.md, at the version its
// reference resolves to now. A prompt takes no arguments.
func (h *Handler) getPrompt(ctx context.Context, ex *exchange, params *mcp.GetPromptParams) (mcp.Result, error) {
	name := ""
	if params != nil {
		name = params.Name
	}
	s := ex.server.skillNamed(name)
	if s == nil {
		rerr := newError(codeInvalidParams, errPromptNotFound, http.StatusBadRequest, map[string]any{"name": name})
		ex.fail(rerr)
		return nil, rerr.jsonrpc()
	}
	loaded, rerr := h.loadSkill(ctx, ex, s.File.URI)
	if rerr != nil {
		return nil, rerr.jsonrpc()
	}
	return ex.complete(&mcp.GetPromptResult{
		Description: loaded.Target.Definition.Description,
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: string(loaded.File.Content)}}},
	}), nil
}
