package tracing

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/incusspawn/isx/internal/coded"
)

// ErrorType is the attribute OpenTelemetry's conventions name for what
// kind of failure ended an operation: here the failure's code.
const ErrorType = "error.type"

// ToolCall is one MCP tools/call as its span tells it.
type ToolCall struct {
	Tool       string
	Attributes []attribute.KeyValue
	// Meta is the request's _meta, where the MCP semantic conventions
	// carry the caller's traceparent.
	Meta map[string]any
	// Untrusted starts a trace of its own rather than continuing the
	// one Meta names: a caller that is not trusted does not choose the
	// trace its calls join.
	Untrusted bool
}

// StartToolCall begins call's span; with a nil tracer it returns ctx and
// a nil span, which End accepts.
func StartToolCall(ctx context.Context, tracer trace.Tracer, call ToolCall) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, nil
	}
	attributes := append([]attribute.KeyValue{attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", call.Tool)}, call.Attributes...)
	options := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attributes...)}
	if call.Untrusted {
		options = append(options, trace.WithNewRoot())
	} else {
		ctx = Propagator.Extract(ctx, metaCarrier(call.Meta))
	}
	return tracer.Start(ctx, "tools/call "+call.Tool, options...)
}

// metaCarrier is the W3C trace context entries of a request's _meta.
func metaCarrier(meta map[string]any) propagation.MapCarrier {
	carrier := propagation.MapCarrier{}
	for _, key := range Propagator.Fields() {
		if value, ok := meta[key].(string); ok {
			carrier[key] = value
		}
	}
	return carrier
}

// End closes span at the time given (now when zero). A failure marks the
// span failed with its code and what it concerned, as prefix+kind
// attributes ("isx." and "instance" make isx.instance).
func End(span trace.Span, at time.Time, failure *coded.Error, prefix string) {
	if span == nil {
		return
	}
	if failure != nil {
		span.SetAttributes(attribute.String(ErrorType, failure.Code))
		for _, what := range slices.Sorted(maps.Keys(failure.About)) {
			span.SetAttributes(attribute.String(prefix+what, failure.About[what]))
		}
		span.SetStatus(codes.Error, failure.Code)
	}
	if at.IsZero() {
		span.End()
		return
	}
	span.End(trace.WithTimestamp(at))
}

// Open holds the spans of work that outlives the call that began it (a
// task one tool call starts and a later one sees finish), by key.
type Open struct {
	mu    sync.Mutex
	spans map[string]trace.Span
}

// Begin starts a span named name, a child of ctx's, under key, unless one
// is open there already (a repeated call that started nothing new); with
// a nil tracer it does nothing.
func (o *Open) Begin(ctx context.Context, tracer trace.Tracer, key, name string, attributes ...attribute.KeyValue) {
	if tracer == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.spans[key] != nil {
		return
	}
	if o.spans == nil {
		o.spans = map[string]trace.Span{}
	}
	_, o.spans[key] = tracer.Start(ctx, name, trace.WithAttributes(attributes...))
}

// End closes key's span, if one is open, at the time given (now when zero
// or before the span began), with attributes set first.
func (o *Open) End(key string, at time.Time, attributes ...attribute.KeyValue) {
	o.mu.Lock()
	span := o.spans[key]
	delete(o.spans, key)
	o.mu.Unlock()
	if span == nil {
		return
	}
	span.SetAttributes(attributes...)
	if at.Before(spanStart(span)) {
		at = time.Time{}
	}
	End(span, at, nil, "")
}

// EndAll closes every open span, marked with attributes: the program is
// stopping before it saw their work end.
func (o *Open) EndAll(attributes ...attribute.KeyValue) {
	o.mu.Lock()
	spans := o.spans
	o.spans = nil
	o.mu.Unlock()
	for _, span := range spans {
		span.SetAttributes(attributes...)
		span.End()
	}
}

// spanStart is when a span began, where the SDK says; a time given to
// Open.End from another clock (an instance's) must not precede it.
func spanStart(span trace.Span) time.Time {
	if started, ok := span.(interface{ StartTime() time.Time }); ok {
		return started.StartTime()
	}
	return time.Time{}
}
