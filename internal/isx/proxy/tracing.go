package proxy

import (
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/incusspawn/isx/internal/isx/template"
)

// The attributes of a model call's span: the GenAI and HTTP semantic
// conventions' where they say it, isx's own for the instance.
const (
	attrInstance      = "isx.instance"
	attrSystem        = "gen_ai.system"
	attrInputTokens   = "gen_ai.usage.input_tokens"
	attrOutputTokens  = "gen_ai.usage.output_tokens"
	attrCacheRead     = "gen_ai.usage.cache_read.input_tokens"
	attrCacheCreation = "gen_ai.usage.cache_creation.input_tokens"
	attrServer        = "server.address"
	attrMethod        = "http.request.method"
	attrPath          = "url.path"
	attrStatusCode    = "http.response.status_code"
	attrComplete      = "isx.response.complete"
)

// modelTrace is one model call's span, nil when tracing is off. It is a
// root of its own: a traceparent the instance sent is the instance's
// word, and nothing an instance sends is trusted.
type modelTrace struct {
	span   trace.Span
	mu     sync.Mutex
	usage  Usage
	status int
}

func (s *Server) startModelTrace(r *http.Request, x *exchange) *modelTrace {
	if s.opts.Tracer == nil {
		return nil
	}
	_, span := s.opts.Tracer.Start(r.Context(), "model call "+x.t.host, trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String(attrInstance, x.e.name), attribute.String(attrSystem, genAISystem(x.t.kind)),
			attribute.String(attrServer, x.t.host), attribute.String(attrMethod, r.Method),
			attribute.String(attrPath, x.path)))
	return &modelTrace{span: span}
}

// genAISystem is the semantic conventions' name of a provider.
func genAISystem(kind string) string {
	switch kind {
	case template.AccountClaude:
		return "anthropic"
	case template.AccountOpenAI:
		return "openai"
	}
	return kind
}

// credited adds usage the response reported.
func (t *modelTrace) credited(u Usage) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.usage = t.usage.plus(u)
}

// answered notes the status the upstream answered with.
func (t *modelTrace) answered(status int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status = status
}

// end closes the span with the tokens counted and how the call ended.
func (t *modelTrace) end(complete bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.span.SetAttributes(attribute.Int64(attrInputTokens, t.usage.Input), attribute.Int64(attrOutputTokens, t.usage.Output),
		attribute.Int64(attrCacheRead, t.usage.CacheRead), attribute.Int64(attrCacheCreation, t.usage.CacheCreation),
		attribute.Bool(attrComplete, complete))
	if t.status != 0 {
		t.span.SetAttributes(attribute.Int(attrStatusCode, t.status))
	}
	if !complete || t.status == 0 || t.status >= 500 {
		t.span.SetStatus(codes.Error, "the model call did not end with a whole response")
	}
	t.span.End()
}
