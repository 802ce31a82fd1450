package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/tracing/tracingtest"
)

// isx mcp makes a span of each tool call, continuing the trace the host's
// agent names in the call's _meta, with what a refusal concerns and its
// code; read back from a real Jaeger.
func TestMCPToolCallSpans(t *testing.T) {
	jaeger := tracingtest.Jaeger(t)
	c := incustest.Project(t)
	x := newCLI(t, c)
	traceID, parent := tracingtest.NewIDs()
	requests := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_templates","arguments":{},"_meta":{"traceparent":"00-` + traceID + `-` + parent + `-01"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"stop_instance","arguments":{"instance":"mcp-nobody-here"},"_meta":{"traceparent":"00-` + traceID + `-` + parent + `-01"}}}`,
	}, "\n") + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := x.command(ctx, "mcp")
	cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_ENDPOINT="+jaeger.OTLP, "OTEL_SERVICE_NAME=isx-mcp-test", "OTEL_BSP_SCHEDULE_DELAY=50")
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(requests), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("isx mcp: %v\n%s", err, stderr.String())
	}

	spans := jaeger.Trace(t, traceID, 2)
	byName := map[string]tracingtest.Span{}
	for _, span := range spans {
		byName[span.OperationName] = span
		if span.Parent() != parent || span.Service != "isx-mcp-test" {
			t.Errorf("span %s: parent %q, service %q; want the agent's %s, isx-mcp-test", span.OperationName, span.Parent(), span.Service, parent)
		}
	}
	listed, ok := byName["tools/call list_templates"]
	if !ok || listed.Tag("gen_ai.tool.name") != "list_templates" || listed.Tag("error.type") != nil {
		t.Errorf("list_templates' span: %+v (found %v)", listed, ok)
	}
	refused, ok := byName["tools/call stop_instance"]
	if !ok || refused.Tag("error.type") == nil || refused.Tag("isx.instance") != "mcp-nobody-here" {
		t.Errorf("stop_instance's refusal: span %+v (found %v); isx mcp answered:\n%s", refused, ok, stdout.String())
	}
}
