package gateway

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/tracing"
)

// The attributes of a request's span and its calls' spans: the MCP
// semantic conventions' where they say it, actiond's own for what links a
// span to the record.
const (
	attrMethod      = "mcp.method.name"
	attrSession     = "mcp.session.id"
	attrRequestID   = "jsonrpc.request.id"
	attrTool        = "gen_ai.tool.name"
	attrAccount     = "actiond.account"
	attrServer      = "actiond.server"
	attrVersion     = "actiond.action.version"
	attrRole        = "actiond.role"
	attrPrincipal   = "actiond.principal"
	attrSubject     = "actiond.subject"
	attrStatus      = "actiond.status"
	attrPreview     = "actiond.preview"
	attrExecution   = "actiond.execution.id"
	attrRefusalCode = "actiond.refusal.code"
)

// requestTrace is one MCP request's span; nil when tracing is off, and
// then every method does nothing. The calls' spans are made from the
// record once it committed, with the times the record holds, so tracing
// adds nothing to a call's own path.
type requestTrace struct {
	tracer trace.Tracer
	ctx    context.Context
	span   trace.Span
}

// startTrace begins the request's span, continuing the client's
// traceparent; the request's context carries it from then on.
func (h *Handler) startTrace(r *http.Request, req *rpcRequest) (*requestTrace, *http.Request) {
	if h.opts.Tracer == nil {
		return nil, r
	}
	name := req.Method
	if req.name != "" && req.Method == "tools/call" {
		name += " " + req.name
	}
	ctx, span := h.opts.Tracer.Start(tracing.Continue(r.Context(), r.Header), name,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String(attrMethod, req.Method), attribute.String(attrRequestID, string(req.ID))))
	return &requestTrace{tracer: h.opts.Tracer, ctx: ctx, span: span}, r.WithContext(ctx)
}

// recorded says what the record says of the request, and makes a span
// for each of its calls, beneath the call that made it.
func (t *requestTrace) recorded(ex *exchange, status string, calls []*store.Execution) {
	if t == nil {
		return
	}
	t.span.SetAttributes(ex.traceAttributes(status)...)
	if status != store.Succeeded {
		t.span.SetStatus(codes.Error, status)
	}
	spans := map[string]context.Context{ex.executionID: t.ctx}
	byID := make(map[string]*store.Execution, len(calls))
	for _, call := range calls {
		byID[call.ID] = call
	}
	for _, call := range calls {
		t.callSpan(call, byID, spans, 0)
	}
}

// callSpan makes the span of call once, after its parent's, and returns
// the context that carries it.
func (t *requestTrace) callSpan(call *store.Execution, byID map[string]*store.Execution, spans map[string]context.Context, depth int) context.Context {
	if ctx, done := spans[call.ID]; done {
		return ctx
	}
	parent := t.ctx
	if p, ok := byID[call.ParentID]; ok && depth < len(byID) {
		parent = t.callSpan(p, byID, spans, depth+1)
	}
	ctx, span := t.tracer.Start(parent, call.ActionName,
		trace.WithTimestamp(call.StartedAt), trace.WithAttributes(
			attribute.String(attrTool, call.ActionName), attribute.Int64(attrVersion, call.ActionVersion),
			attribute.String(attrRole, call.Role), attribute.String(attrPrincipal, call.Caller),
			attribute.String(attrSubject, call.Subject), attribute.String(attrSession, call.SessionID),
			attribute.String(attrStatus, call.Status), attribute.Bool(attrPreview, call.Preview),
			attribute.String(attrExecution, call.ID)))
	if call.Status != store.Succeeded {
		span.SetStatus(codes.Error, call.Status)
	}
	span.End(trace.WithTimestamp(call.EndedAt))
	spans[call.ID] = ctx
	return ctx
}

// refused marks the span of a request refused before it was served.
func (t *requestTrace) refused(ex *exchange, rerr *rpcError) {
	if t == nil {
		return
	}
	t.span.SetAttributes(ex.traceAttributes(store.Failed)...)
	t.span.SetAttributes(attribute.String(attrRefusalCode, rerr.Code))
	t.span.SetStatus(codes.Error, rerr.Message)
}

// failed marks the span of a request answered before it was known whose
// it is (a token refused).
func (t *requestTrace) failed(why string) {
	if t != nil {
		t.span.SetStatus(codes.Error, why)
	}
}

func (t *requestTrace) end() {
	if t != nil {
		t.span.End()
	}
}

func (ex *exchange) traceAttributes(status string) []attribute.KeyValue {
	out := []attribute.KeyValue{attribute.String(attrAccount, ex.account), attribute.String(attrStatus, status)}
	if ex.server != nil {
		out = append(out, attribute.String(attrServer, ex.server.Name), attribute.Int64(attrVersion, ex.server.Version),
			attribute.Bool(attrPreview, ex.server.Preview))
	}
	if ex.who != nil {
		out = append(out, attribute.String(attrPrincipal, ex.who.Principal), attribute.String(attrSubject, ex.who.Subject))
	}
	if ex.session.ID != "" {
		out = append(out, attribute.String(attrSession, ex.session.ID))
	}
	if ex.executionID != "" {
		out = append(out, attribute.String(attrExecution, ex.executionID))
	}
	return out
}
