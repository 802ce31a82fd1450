package gateway

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/mcpkit"
)

// answer serves an admitted request of a method the endpoint answers
// itself: the protocol's checks first, as the SDK's transport made them,
// then the method, whose result is stamped with the server's identity and
// framed once.
func (h *Handler) answer(ctx context.Context, ex *exchange, rec *record, header http.Header) *reply {
	if plain := checkTransport(header); plain != nil {
		return plainReply(plain)
	}
	if plain, werr := checkMessage(header, ex.req); plain != nil {
		return plainReply(plain)
	} else if werr != nil {
		return ex.wireErrorReply(werr)
	}
	result, rerr := h.serveMethod(ctx, ex, rec)
	if rerr != nil {
		if ctx.Err() == context.DeadlineExceeded {
			rerr = ex.deadlineError()
		}
		return ex.errorReply(rec.fail(rerr))
	}
	annotate(ex.server, result)
	rep, err := resultReply(ex.req.ID, result)
	if err != nil {
		h.opts.Logger.Error("encode MCP result", "execution", ex.executionID, "method", ex.req.Method, "err", err)
		rerr := newError(codeInternal, errInternal, http.StatusInternalServerError, nil)
		rerr.Detail = err.Error()
		return ex.errorReply(rec.fail(rerr))
	}
	return rep
}

// serveMethod runs the method a request names, live or replayed: each
// method reads its params from the request, does its work under ctx, notes
// what its record keeps in rec, and answers with its result or a platform
// error.
func (h *Handler) serveMethod(ctx context.Context, ex *exchange, rec *record) (mcp.Result, *rpcError) {
	switch ex.req.Method {
	case "tools/list":
		return h.listTools(ex, rec), nil
	case "tools/call":
		return h.callTool(ctx, ex, rec)
	case "resources/list":
		return h.listResources(ex, rec), nil
	case "resources/templates/list":
		return h.listTemplates(ex, rec), nil
	case "resources/read":
		return h.readResource(ctx, ex, rec)
	case "prompts/list":
		return h.listPrompts(ex, rec), nil
	case "prompts/get":
		return h.getPrompt(ctx, ex, rec)
	case mcpkit.MethodListSkills:
		return listSkills(ex, rec), nil
	case mcpkit.MethodGetSkill:
		return h.getSkill(ctx, ex, rec)
	case mcpkit.MethodGetTask:
		return h.getTask(ctx, ex, rec)
	case mcpkit.MethodUpdateTask:
		return h.updateTask(ctx, ex, rec)
	case mcpkit.MethodCancelTask:
		return h.cancelTask(ctx, ex, rec)
	}
	return nil, rec.fail(newError(codeMethodNotFound, errMethodNotFound, http.StatusNotFound, map[string]any{"method": ex.req.Method}))
}
