package proxy_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
	"github.com/incusspawn/isx/internal/tracing"
	"github.com/incusspawn/isx/internal/tracing/tracingtest"
)

// Each model call through the proxy is a span with the tokens its response
// reported, streamed or whole, named for the instance; read back from a
// real Jaeger. The instance's own traceparent starts nothing of its.
func TestModelCallSpans(t *testing.T) {
	jaeger := tracingtest.Jaeger(t)
	service := "isx-proxy-test-" + randomHex(t, 4)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.OTLP, "OTEL_SERVICE_NAME": service, "OTEL_BSP_SCHEDULE_DELAY": "50"}
	provider, err := tracing.FromEnv(context.Background(), func(key string) string { return env[key] }, "isx-proxy", "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { provider.Shutdown(context.Background()) })

	w := newWorld(t, busyboxAccounts)
	w.anthropic.Reply = func(int, proxytest.Call) proxytest.Reply {
		return proxytest.Reply{Usage: proxytest.Usage{Input: 111, Output: 22, CacheRead: 3, CacheCreation: 4}}
	}
	opts := w.options(clock.Real{})
	opts.Tracer = provider.Tracer()
	w.start(opts)
	w.branch("traced", busyboxAccounts, instance.NetworkProxyOnly)
	instanceTrace, instanceSpan := tracingtest.NewIDs()
	for _, body := range []string{
		`{"model":"claude-test","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		req, err := http.NewRequestWithContext(w.ctx(), http.MethodPost, "http://isx-proxy"+proxy.AnthropicRoute+"/v1/messages", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Api-Key", w.secret("traced"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", "00-"+instanceTrace+"-"+instanceSpan+"-01")
		resp, err := w.hostClient("traced").Do(req)
		if status, text := answer(t, resp, err); status != http.StatusOK {
			t.Fatalf("model call: %d %s", status, text)
		}
	}

	spans := jaeger.Service(t, service, 2)
	if len(spans) != 2 {
		t.Fatalf("%d spans, want one per model call", len(spans))
	}
	for _, span := range spans {
		if span.Parent() != "" || span.TraceID == instanceTrace {
			t.Errorf("a model call's span has parent %q in trace %s: it must start a trace of its own", span.Parent(), span.TraceID)
		}
		for key, want := range map[string]any{
			"isx.instance": "traced", "gen_ai.system": "anthropic", "http.response.status_code": float64(200),
			"gen_ai.usage.input_tokens": float64(111), "gen_ai.usage.output_tokens": float64(22),
			"gen_ai.usage.cache_read.input_tokens": float64(3), "gen_ai.usage.cache_creation.input_tokens": float64(4),
			"isx.response.complete": true,
		} {
			if got := span.Tag(key); got != want {
				t.Errorf("span %s: %s = %v (%T), want %v", span.OperationName, key, got, got, want)
			}
		}
	}
}
