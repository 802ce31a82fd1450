package gateway

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/skill"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// The Skills extension (skills/list, skills/get) and what every skill
// method shares: listing what the server's skills are at this request's
// versions, and loading one exact version as the request's one call.

// listSkills answers skills/list with the skills the server offers.
func listSkills(ex *exchange, rec *record) mcp.Result {
	res := &mcpkit.ListSkillsResult{ResultType: "complete", Skills: []mcpkit.Skill{}, TTLMs: 60_000, CacheScope: "private"}
	for _, s := range ex.server.Skills {
		res.Skills = append(res.Skills, skillEntry(s))
	}
	offeredSkills(ex, rec)
	return res
}

// getSkill answers skills/get: the skill's one file, loaded.
func (h *Handler) getSkill(ctx context.Context, ex *exchange, rec *record) (mcp.Result, *rpcError) {
	s, rerr := h.loadSkill(ctx, ex, rec, ex.req.param("uri"))
	if rerr != nil {
		return nil, rerr
	}
	return &mcpkit.GetSkillResult{ResultType: "complete", Skill: skillEntry(s), TTLMs: skill.CacheTTLMs, CacheScope: "private"}, nil
}

// skillEntry is a skill as the extension lists it: its one file.
func skillEntry(s *Skill) mcpkit.Skill {
	return mcpkit.Skill{
		URI:         s.File.URI,
		Frontmatter: skill.Frontmatter(s.Target.Definition),
		Resources:   []mcpkit.SkillResource{{URI: s.File.URI, Digest: s.File.Digest, Size: s.File.Size}},
	}
}

// offeredSkills records, on a listing, the version of each skill it
// offered (ACT-248). A listing loads nothing (ACT-247).
func offeredSkills(ex *exchange, rec *record) {
	rec.invocation.Skills = []offeredSkill{}
	for _, s := range ex.server.Skills {
		rec.invocation.Skills = append(rec.invocation.Skills, offeredSkill{Name: s.Name, ActionID: s.Target.ID, Version: s.Target.Version, URI: s.File.URI})
	}
}

// skillNamed is the server's available skill of that registry name.
func (s *Server) skillNamed(name string) *Skill {
	for _, sk := range s.Skills {
		if sk.Name == name {
			return sk
		}
	}
	return nil
}

// findSkill resolves a skill URI against the request's versions: an unknown
// or unavailable skill is mcp_resource_not_found, another version of one the
// server serves mcp_skill_superseded (ACT-250, ACT-251, ACT-255).
func (s *Server) findSkill(uri string) (*Skill, *rpcError) {
	name, version, ok := skill.ParseURI(uri)
	if !ok {
		return nil, resourceError(errResourceNotFound, uri)
	}
	sk := s.skillNamed(name)
	if sk == nil {
		return nil, resourceError(errResourceNotFound, uri)
	}
	if sk.Target.Version != version {
		rerr := resourceError(errSkillSuperseded, uri)
		rerr.Data["current"] = sk.File.URI
		return nil, rerr
	}
	return sk, nil
}

// resourceError is a -32602 naming the URI the request asked for.
func resourceError(code, uri string) *rpcError {
	return newError(codeInvalidParams, code, http.StatusBadRequest, map[string]any{"uri": uri})
}

// loadSkill loads the skill version a URI names: the request's one call,
// recorded beneath it with the file's uri, digest and size, and a SKILL
// use of it (ACT-239..245). The load runs under the request's authority:
// the principal and the server must allow INVOKE of the skill.
func (h *Handler) loadSkill(ctx context.Context, ex *exchange, rec *record, uri string) (*Skill, *rpcError) {
	sk, rerr := ex.server.findSkill(uri)
	if rerr != nil {
		return nil, rec.fail(rerr)
	}
	request := policy.Request{Operation: policy.Invoke, Resource: action.ResourceAction, Claims: ex.server.Claims, Document: action.Document(sk.Target)}
	if err := policy.Check(ctx, request, ex.server.Layers...); err != nil {
		rerr := resourceError(errLoadDenied, uri)
		rerr.Detail = err.Error()
		return nil, rec.fail(rerr)
	}
	now := h.opts.Clock.Now()
	file := sk.File
	e := &store.Execution{
		ID: h.opts.IDs.New(), Account: ex.account, ActionID: sk.Target.ID, ActionVersion: int64(sk.Target.Version),
		ActionName: sk.Name, EventType: "skill.load", Role: store.RoleCall, ParentID: ex.executionID, SessionID: ex.session.ID,
		Status: store.Succeeded, Caller: ex.who.Principal, Subject: ex.who.Subject, Client: ex.who.Client,
		Preview: ex.server.Preview, StartedAt: now, EndedAt: now,
	}
	e.Input, _ = json.Marshal(map[string]any{"uri": file.URI})
	e.Output, _ = json.Marshal(map[string]any{"name": sk.Name, "version": sk.Target.Version, "uri": file.URI, "digest": file.Digest, "size": file.Size})
	rec.addCalls([]*store.Execution{e})
	rec.addUse(store.Use{Kind: store.UseSkill, Ref: e.ID})
	rec.invocation.Output = map[string]any{"uri": file.URI, "digest": file.Digest, "size": file.Size}
	return sk, nil
}
