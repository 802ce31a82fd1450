package server_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/tracing/tracingtest"
)

// A tools/call continues the client's trace: its span is a child of the
// client's, and each call it made is a span beneath the call that made it,
// carrying the execution id that links it to the record. Read back from a
// real Jaeger, which received them over OTLP/HTTP.
func TestATraceOfARequestAndItsCalls(t *testing.T) {
	jaeger := tracingtest.Jaeger(t)
	serviceID, _ := tracingtest.NewIDs()
	service := "actiond-test-" + serviceID[:8]
	env := at.New(t, store.SQLite, at.Options{Env: map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.OTLP, "OTEL_SERVICE_NAME": service, "OTEL_BSP_SCHEDULE_DELAY": "50",
	}})
	env.CreateAction(at.NewID(), at.CELTool("double", `double(event.data.n) * 2.0`, at.Object(map[string]any{"n": at.Integer()}, "n")))
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "traced", Mode: "LIVE", Policies: at.Everything(),
		Tools: []map[string]any{at.Ref("double"), at.Ref("program")}}.Input())
	source := "def run(event):\n    return tools.double({\"n\": 1}) + tools.double({\"n\": 2})\n"
	body, header := at.Request{Method: "tools/call", Params: map[string]any{"name": "program",
		"arguments": map[string]any{"source": source, "commit": true, "intent": "Trace it."}}}.Body()
	traceID, clientSpan := tracingtest.NewIDs()
	header.Set("traceparent", "00-"+traceID+"-"+clientSpan+"-01")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	reply, err := at.PostBody(context.Background(), client, env.Endpoint("traced"), env.Token(server.LocalPrincipal, "traced"), body, header)
	if err != nil || reply.Status != http.StatusOK || reply.Result()["isError"] == true {
		t.Fatalf("tools/call program: %v %s", err, reply)
	}

	spans := jaeger.Trace(t, traceID, 4)
	byName := map[string][]tracingtest.Span{}
	for _, span := range spans {
		if span.Service != service {
			t.Errorf("span %s comes from service %q, want %q", span.OperationName, span.Service, service)
		}
		byName[span.OperationName] = append(byName[span.OperationName], span)
	}
	request := only(t, byName, "tools/call program")
	if request.Parent() != clientSpan {
		t.Errorf("the request's span has parent %q, want the client's %s", request.Parent(), clientSpan)
	}
	for key, want := range map[string]any{"actiond.server": "traced", "actiond.status": store.Succeeded,
		"mcp.method.name": "tools/call", "actiond.principal": server.LocalPrincipal} {
		if got := request.Tag(key); got != want {
			t.Errorf("the request's %s = %v, want %v", key, got, want)
		}
	}
	program := only(t, byName, "program")
	if program.Parent() != request.SpanID {
		t.Errorf("the program's span has parent %s, want the request's %s", program.Parent(), request.SpanID)
	}
	doubles := byName["double"]
	if len(doubles) != 2 {
		t.Fatalf("%d spans of double, want 2: %v", len(doubles), names(spans))
	}
	for _, d := range doubles {
		if d.Parent() != program.SpanID || d.Tag("actiond.status") != store.Succeeded {
			t.Errorf("double's span: parent %s, status %v; want the program's %s, SUCCEEDED", d.Parent(), d.Tag("actiond.status"), program.SpanID)
		}
	}

	// The spans name the executions the record holds, the same tree.
	recorded := env.MustGraphQL(`query($id: ID!) { execution(id: $id) { calls { id actionName calls { id actionName } } } }`,
		map[string]any{"id": request.Tag("actiond.execution.id")})
	calls, _ := at.Dig(recorded, "execution", "calls").([]any)
	if len(calls) != 1 || at.Dig(calls[0], "id") != program.Tag("actiond.execution.id") {
		t.Fatalf("the record's calls %v do not match the program's span (execution %v)", calls, program.Tag("actiond.execution.id"))
	}
	inner, _ := at.Dig(calls[0], "calls").([]any)
	var want, got []string
	for _, call := range inner {
		want = append(want, at.Dig(call, "id").(string))
	}
	for _, d := range doubles {
		got = append(got, d.Tag("actiond.execution.id").(string))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("double's spans name executions %v, the record %v", got, want)
	}
}

func only(t *testing.T, byName map[string][]tracingtest.Span, name string) tracingtest.Span {
	t.Helper()
	if len(byName[name]) != 1 {
		t.Fatalf("%d spans named %q, want 1 (have %v)", len(byName[name]), name, byName)
	}
	return byName[name][0]
}

func names(spans []tracingtest.Span) []string {
	out := make([]string, 0, len(spans))
	for _, s := range spans {
		out = append(out, s.OperationName)
	}
	return out
}

// What tracing costs a recorded tools/call: the same call on a server that
// traces nothing and on one exporting every span to Jaeger, side by side.
func BenchmarkTracing(b *testing.B) {
	jaeger := tracingtest.Jaeger(b)
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			opts := at.Options{}
			if mode == "on" {
				opts.Env = map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.OTLP, "OTEL_SERVICE_NAME": "actiond-bench"}
			}
			env := at.New(b, store.SQLite, opts)
			env.CreateAction(at.NewID(), at.CELTool("double", `double(event.data.n) * 2.0`, at.Object(map[string]any{"n": at.Integer()}, "n")))
			env.CreateAction(at.NewID(), at.ServerSpec{Name: "bench", Mode: "LIVE", Policies: at.Everything(),
				Tools: []map[string]any{at.Ref("double")}}.Input())
			token := env.Token(server.LocalPrincipal, "bench")
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			b.Cleanup(client.CloseIdleConnections)
			body, header := at.Request{Method: "tools/call", Params: map[string]any{"name": "double",
				"arguments": map[string]any{"n": 21, "intent": "Benchmark."}}}.Body()
			b.ResetTimer()
			for b.Loop() {
				reply, err := at.PostBody(context.Background(), client, env.Endpoint("bench"), token, body, header)
				if err != nil || reply.Status != 200 || reply.Result()["isError"] == true {
					b.Fatalf("tools/call double: %v %s", err, reply)
				}
			}
		})
	}
}
