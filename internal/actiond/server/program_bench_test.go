package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// The sources the program benchmarks run: 64 cel calls, and 64 calls of a
// cel tool the server lists.
const (
	sixtyFourCEL = `
def run(event):
    n = 0
    for i in range(64):
        n = cel("x + 1", {"x": n})
    return n
`
	sixtyFourTools = `
def run(event):
    n = 0
    for i in range(64):
        n = tools.double({"n": i})
    return n
`
)

// BenchmarkPrograms measures, over loopback HTTP on a LIVE server, a
// program making 64 cel calls (target: under 5 ms of server time), a
// program making 64 tool calls, and an invoke preview of a draft, each
// beside a single plain tools/call of a cel tool in the same run. ns/op is
// the whole recorded request as the client sees it; server-ms/op is the
// call's own execution (the program, the invoke, or the plain call's
// tool), read back from the record.
func BenchmarkPrograms(b *testing.B) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		b.Run(string(d), func(b *testing.B) {
			env := at.New(b, d, at.Options{})
			doubleID := at.NewID()
			env.CreateAction(doubleID, at.CELTool("double", `double(event.data.n) * 2.0`, at.Object(map[string]any{"n": at.Integer()}, "n")))
			env.CreateAction(at.NewID(), at.ServerSpec{Name: "bench", Mode: "LIVE", Policies: at.Everything(),
				Tools: []map[string]any{at.Ref("double"), at.Ref("program"), at.Ref("invoke"), at.Ref("cel")}}.Input())
			token := env.Token(server.LocalPrincipal, "bench")
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			b.Cleanup(client.CloseIdleConnections)
			draft := at.CELTool("double", `double(event.data.n) * 3.0`, at.Object(map[string]any{"n": at.Integer()}, "n"))
			cases := []struct {
				name     string
				tool     string
				args     map[string]any
				recorded string // the action whose executions time the call
			}{
				{"plain_tools_call", "double", map[string]any{"n": 21}, doubleID},
				{"program_64_cel", "program", map[string]any{"source": sixtyFourCEL, "commit": true}, "native:program"},
				{"program_64_tools", "program", map[string]any{"source": sixtyFourTools, "commit": true}, "native:program"},
				{"invoke_preview_draft", "invoke", map[string]any{"action_id": doubleID, "input": map[string]any{"n": 21}, "draft": draft}, "native:invoke"},
			}
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					c.args["intent"] = "Benchmark."
					body, header := at.Request{Method: "tools/call", Params: map[string]any{"name": c.tool, "arguments": c.args}}.Body()
					b.ResetTimer()
					for b.Loop() {
						reply, err := at.PostBody(context.Background(), client, env.Endpoint("bench"), token, body, header)
						if err != nil || reply.Status != 200 || reply.Result()["isError"] == true {
							b.Fatalf("tools/call %s: %v %s", c.tool, err, reply)
						}
					}
					b.StopTimer()
					b.ReportMetric(serverMillis(b, env, c.recorded), "server-ms/op")
				})
			}
		})
	}
}

// serverMillis is the mean duration of an action's latest executions, as
// recorded.
func serverMillis(b *testing.B, env *at.Env, actionID string) float64 {
	data := env.MustGraphQL(`query($a: ID!) { actions { executions(where: {actionId: $a}, last: 200) { edges { node { startedAt endedAt } } } } }`,
		map[string]any{"a": actionID})
	edges, _ := at.Dig(data, "actions", "executions", "edges").([]any)
	var total time.Duration
	for _, edge := range edges {
		started, err1 := time.Parse(time.RFC3339Nano, at.Dig(edge, "node", "startedAt").(string))
		ended, err2 := time.Parse(time.RFC3339Nano, at.Dig(edge, "node", "endedAt").(string))
		if err1 != nil || err2 != nil {
			b.Fatalf("execution times: %v %v", err1, err2)
		}
		total += ended.Sub(started)
	}
	if len(edges) == 0 {
		b.Fatalf("no executions of %s recorded", actionID)
	}
	return float64(total.Microseconds()) / float64(len(edges)) / 1000
}
