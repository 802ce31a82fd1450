package gateway

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Prompts: each skill is a prompt of its name, and getting it loads the
// skill, as a resources/read of its SKILL.md does (ACT-029, ACT-240).

func (h *Handler) listPrompts(ex *exchange, rec *record) mcp.Result {
	res := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{}}
	for _, s := range ex.server.Skills {
		res.Prompts = append(res.Prompts, &mcp.Prompt{Name: s.Name, Title: s.Name, Description: s.Target.Definition.Description})
	}
	offeredSkills(ex, rec)
	res.TTLMs, res.CacheScope = 60_000, "private"
	return ex.complete(res)
}

// getPrompt answers a skill's prompt with its SKILL.md, at the version its
// reference resolves to now. A prompt takes no arguments.
func (h *Handler) getPrompt(ctx context.Context, ex *exchange, rec *record) (mcp.Result, *rpcError) {
	name := ex.req.param("name")
	s := ex.server.skillNamed(name)
	if s == nil {
		return nil, rec.fail(newError(codeInvalidParams, errPromptNotFound, http.StatusBadRequest, map[string]any{"name": name}))
	}
	loaded, rerr := h.loadSkill(ctx, ex, rec, s.File.URI)
	if rerr != nil {
		return nil, rerr
	}
	return ex.complete(&mcp.GetPromptResult{
		Description: loaded.Target.Definition.Description,
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: string(loaded.File.Content)}}},
	}), nil
}
