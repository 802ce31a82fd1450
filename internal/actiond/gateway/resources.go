package gateway

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/skill"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
)

// Resources: skills' SKILL.md files, and mcp.resources templates read by
// read-only tools.

// listResources lists the skills' files and nothing else (ACT-262).
func (h *Handler) listResources(ex *exchange, rec *record) mcp.Result {
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	for _, s := range ex.server.Skills {
		res.Resources = append(res.Resources, &mcp.Resource{
			URI: s.File.URI, Name: s.Name, Title: s.Name, Description: s.Target.Definition.Description,
			MIMEType: skill.MIMEType, Size: s.File.Size,
		})
	}
	offeredSkills(ex, rec)
	res.TTLMs, res.CacheScope = 60_000, "private"
	return ex.complete(res)
}

// listTemplates lists the available templates, with the MIME type their
// tool's output schema fixes; one whose tool can write now is left out.
func (h *Handler) listTemplates(ex *exchange, rec *record) mcp.Result {
	res := &mcp.ListResourceTemplatesResult{ResourceTemplates: []*mcp.ResourceTemplate{}}
	rec.invocation.Templates = []offeredTemplate{}
	for _, t := range ex.server.Templates {
		if t.Unavailable {
			continue
		}
		res.ResourceTemplates = append(res.ResourceTemplates, &mcp.ResourceTemplate{
			URITemplate: t.Spec.URITemplate, Name: t.Spec.Name, Description: t.Spec.Description, MIMEType: t.MIMEType,
		})
		rec.invocation.Templates = append(rec.invocation.Templates, offeredTemplate{URITemplate: t.Spec.URITemplate, Tool: t.Tool.Name, ActionID: t.Tool.Target.ID, Version: t.Tool.Target.Version})
	}
	res.TTLMs, res.CacheScope = 60_000, "private"
	return ex.complete(res)
}

// readResource reads a SKILL.md (a load) or the first template the URI
// matches (a call of its tool). It is never cached: ledger data is live,
// and every read is recorded.
func (h *Handler) readResource(ctx context.Context, ex *exchange, rec *record) (mcp.Result, *rpcError) {
	uri := ex.req.param("uri")
	if skill.IsSkillURI(uri) {
		sk, rerr := h.loadSkill(ctx, ex, rec, uri)
		if rerr != nil {
			return nil, rerr
		}
		res := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: sk.File.URI, MIMEType: skill.MIMEType, Text: string(sk.File.Content)}}}
		res.TTLMs, res.CacheScope = skill.CacheTTLMs, "private"
		return ex.complete(res), nil
	}
	for _, t := range ex.server.Templates {
		values, ok := t.Parsed.Match(uri)
		if !ok {
			continue
		}
		if t.Unavailable {
			return nil, rec.fail(resourceError(errResourceUnavailable, uri))
		}
		return h.readTemplate(ctx, ex, rec, t, uri, values)
	}
	return nil, rec.fail(resourceError(errResourceNotFound, uri))
}

// readTemplate calls the template's tool with the URI's variables as
// top-level string properties, the reference's fixed input replacing any of
// the same name, and no stated intent: the host reads, not the model.
func (h *Handler) readTemplate(ctx context.Context, ex *exchange, rec *record, t *Template, uri string, values map[string]string) (mcp.Result, *rpcError) {
	args := make(map[string]any, len(values))
	for name, value := range values {
		args[name] = value
	}
	effective, failure := ex.applyFixed(ctx, t.Tool, args)
	var out engine.Outcome
	if failure == nil {
		out = h.opts.Runner.Call(ctx, ex.newCall(rec, t.Tool, effective))
		rec.addCalls(out.Recorded)
		failure = out.Failure
	}
	if ctx.Err() == context.DeadlineExceeded {
		return nil, rec.fail(ex.deadlineError())
	}
	if failure != nil {
		return nil, rec.fail(readError(failure, uri))
	}
	rec.addUse(store.Use{Kind: store.UseTool, Ref: out.ExecutionID})
	for _, used := range out.Used {
		rec.addUse(store.Use{Kind: store.UseTool, Ref: used})
	}
	content := &mcp.ResourceContents{URI: uri}
	if text, isString := out.Output.(string); isString {
		content.MIMEType, content.Text = "text/plain", text
	} else {
		body, err := json.Marshal(out.Output) // map keys sorted: canonical
		if err != nil {
			return nil, rec.fail(readError(engine.NewFailure(errOutputInvalid, "The tool's output is not JSON.", ""), uri))
		}
		content.MIMEType, content.Text = "application/json", string(body)
	}
	rec.invocation.Output = map[string]any{"uri": uri, "template": t.Spec.URITemplate, "tool": t.Tool.Name, "mimeType": content.MIMEType}
	res := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{content}}
	res.TTLMs, res.CacheScope = 0, "private"
	return ex.complete(res), nil
}

// readError is a failed read: -32602 with the call's own code and hint, and
// the URI (ACT-280).
func readError(f *engine.Failure, uri string) *rpcError {
	data := map[string]any{"code": f.Code, "uri": uri}
	if f.Hint != "" {
		data["hint"] = f.Hint
	}
	return &rpcError{Base: coded.Base{Code: f.Code, Message: f.Message, Hint: f.Hint}, RPC: codeInvalidParams, Status: http.StatusBadRequest, Data: data, Detail: f.Detail}
}
