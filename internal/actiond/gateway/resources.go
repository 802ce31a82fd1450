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
func (h *Handler) listResources(ex *exchange) *mcp.ListResourcesResult {
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	for _, s := range ex.server.Skills {
		res.Resources = append(res.Resources, &mcp.Resource{
			URI: s.File.URI, Name: s.Name, Title: s.Name, Description: s.Target.Definition.Description,
			MIMEType: skill.MIMEType, Size: s.File.Size,
		})
	}
	ex.offeredSkills()
	res.TTLMs, res.CacheScope = 60_000, "private"
	return res
}

// listTemplates lists the available templates, with the MIME type their
// tool's output schema fixes; one whose tool can write now is left out.
func (h *Handler) listTemplates(ex *exchange) *mcp.ListResourceTemplatesResult {
	res := &mcp.ListResourceTemplatesResult{ResourceTemplates: []*mcp.ResourceTemplate{}}
	offered := []map[string]any{}
	for _, t := range ex.server.Templates {
		if t.Unavailable {
			continue
		}
		res.ResourceTemplates = append(res.ResourceTemplates, &mcp.ResourceTemplate{
			URITemplate: t.Spec.URITemplate, Name: t.Spec.Name, Description: t.Spec.Description, MIMEType: t.MIMEType,
		})
		offered = append(offered, map[string]any{"uriTemplate": t.Spec.URITemplate, "tool": t.Tool.Name, "actionId": t.Tool.Target.ID, "version": t.Tool.Target.Version})
	}
	ex.setInvocation("templates", offered)
	res.TTLMs, res.CacheScope = 60_000, "private"
	return res
}

// readResource reads a SKILL.md (a load) or the first template the URI
// matches (a call of its tool). It is never cached: ledger data is live,
// and every read is recorded.
func (h *Handler) readResource(ctx context.Context, ex *exchange, params *mcp.ReadResourceParams) (mcp.Result, error) {
	uri := ""
	if params != nil {
		uri = params.URI
	}
	if skill.IsSkillURI(uri) {
		sk, rerr := h.loadSkill(ctx, ex, uri)
		if rerr != nil {
			return nil, rerr.jsonrpc()
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
			rerr := resourceError(errResourceUnavailable, uri)
			ex.fail(rerr)
			return nil, rerr.jsonrpc()
		}
		return h.readTemplate(ctx, ex, t, uri, values)
	}
	rerr := resourceError(errResourceNotFound, uri)
	ex.fail(rerr)
	return nil, rerr.jsonrpc()
}

// readTemplate calls the template's tool with the URI's variables as
// top-level string properties, the reference's fixed input replacing any of
// the same name, and no stated intent: the host reads, not the model.
func (h *Handler) readTemplate(ctx context.Context, ex *exchange, t *Template, uri string, values map[string]string) (mcp.Result, error) {
	args := make(map[string]any, len(values))
	for name, value := range values {
		args[name] = value
	}
	effective, failure := ex.applyFixed(ctx, t.Tool, args)
	var out engine.Outcome
	if failure == nil {
		ex.ensureWork(h)
		out = h.opts.Runner.Call(ctx, ex.newCall(t.Tool, effective))
		failure = out.Failure
	}
	if ctx.Err() == context.DeadlineExceeded {
		return nil, ctx.Err() // the middleware answers mcp_request_deadline
	}
	if failure != nil {
		rerr := readError(failure, uri)
		ex.fail(rerr)
		return nil, rerr.jsonrpc()
	}
	ex.addUse(store.Use{Kind: store.UseTool, Ref: out.ExecutionID})
	for _, used := range out.Used {
		ex.addUse(store.Use{Kind: store.UseTool, Ref: used})
	}
	content := &mcp.ResourceContents{URI: uri}
	if text, isString := out.Output.(string); isString {
		content.MIMEType, content.Text = "text/plain", text
	} else {
		body, err := json.Marshal(out.Output) // map keys sorted: canonical
		if err != nil {
			rerr := readError(engine.NewFailure(errOutputInvalid, "The tool's output is not JSON.", ""), uri)
			ex.fail(rerr)
			return nil, rerr.jsonrpc()
		}
		content.MIMEType, content.Text = "application/json", string(body)
	}
	ex.setInvocation("output", map[string]any{"uri": uri, "template": t.Spec.URITemplate, "tool": t.Tool.Name, "mimeType": content.MIMEType})
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

// complete marks a result complete for 2026-07-28, which requires
// resultType on every result the SDK does not build itself.
func (ex *exchange) complete(res mcp.Result) mcp.Result {
	if ex.req.version < newProtocol {
		return res
	}
	return completeResult{res}
}

type completeResult struct{ mcp.Result }

func (r completeResult) MarshalJSON() ([]byte, error) {
	body, err := json.Marshal(r.Result)
	if err != nil || len(body) < 2 || body[0] != '{' {
		return body, err
	}
	if len(body) == 2 {
		return []byte(`{"resultType":"complete"}`), nil
	}
	return append([]byte(`{"resultType":"complete",`), body[1:]...), nil
}
