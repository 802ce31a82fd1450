package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/incusspawn/isx/internal/tracing"
)

// The attributes of a tool call's span: the MCP semantic conventions'
// where they say it, isx's own for what a refusal concerns.
const (
	attrMethod   = "mcp.method.name"
	attrTool     = "gen_ai.tool.name"
	attrSession  = "mcp.session.id"
	attrIsx      = "isx.session"
	attrInstance = "isx.instance"
	attrTask     = "isx.task_id"
	attrRefusal  = "isx.refusal.code"
)

// startSpan begins a tool call's span, or returns ctx and nil when tracing
// is off. It continues the trace the call's _meta names (traceparent, as
// the MCP semantic conventions carry it) for the host's own agent only: a
// coordinator is an instance, and nothing an instance sends is trusted.
func (s *Server) startSpan(ctx context.Context, tool string, req *mcp.CallToolRequest) (context.Context, trace.Span) {
	if s.opts.Tracer == nil {
		return ctx, nil
	}
	options := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String(attrMethod, "tools/call"), attribute.String(attrTool, tool), attribute.String(attrIsx, s.opts.Session))}
	if req.Session != nil {
		options = append(options, trace.WithAttributes(attribute.String(attrSession, req.Session.ID())))
	}
	if s.opts.Coordinator {
		options = append(options, trace.WithNewRoot())
	} else if carrier := metaCarrier(req.Params.Meta); len(carrier) > 0 {
		ctx = tracing.Propagator.Extract(ctx, carrier)
	}
	return s.opts.Tracer.Start(ctx, "tools/call "+tool, options...)
}

// metaCarrier is the W3C trace context entries of a request's _meta.
func metaCarrier(meta mcp.Meta) propagation.MapCarrier {
	carrier := propagation.MapCarrier{}
	for _, key := range tracing.Propagator.Fields() {
		if value, ok := meta[key].(string); ok {
			carrier[key] = value
		}
	}
	return carrier
}

// endSpan closes a tool call's span with what it concerned and, for a
// refusal, its code.
func endSpan(span trace.Span, result *mcp.CallToolResult) {
	if span == nil {
		return
	}
	if result != nil && result.IsError {
		if details, ok := result.Meta[ErrorMetaKey].(map[string]any); ok {
			for key, attr := range map[string]string{"code": attrRefusal, aboutInstance: attrInstance, aboutTask: attrTask} {
				if value, ok := details[key].(string); ok {
					span.SetAttributes(attribute.String(attr, value))
				}
			}
			code, _ := details["code"].(string)
			span.SetStatus(codes.Error, code)
		}
	}
	span.End()
}
