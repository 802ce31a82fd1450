package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// BenchmarkResourceRead is a recorded resources/read of a template beside
// the plain tools/call of the same tool, on SQLite over loopback HTTP: the
// read adds matching the URI and rendering the contents to the call.
func BenchmarkResourceRead(b *testing.B) {
	env := at.New(b, store.SQLite, at.Options{})
	env.CreateAction(at.NewID(), at.CELTool("get_account", `{"id": event.data.account_id, "balance": 100}`, at.Object(map[string]any{"account_id": at.String()}, "account_id")))
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "bench", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("get_account")},
		Resources: []map[string]any{at.Template("twisp://accounts/{account_id}", "account", "", "get_account")}}.Input())
	token := env.Token(server.LocalPrincipal, "bench")
	for _, req := range []struct {
		name string
		at.Request
	}{
		{"tools_call", at.Request{Method: "tools/call", Params: map[string]any{"name": "get_account", "arguments": map[string]any{"account_id": "a1"}}}},
		{"resources_read", at.Request{Method: "resources/read", Params: map[string]any{"uri": "twisp://accounts/a1"}}},
	} {
		b.Run(req.name, func(b *testing.B) {
			body, header := req.Body()
			transport := &http.Transport{MaxIdleConnsPerHost: 64}
			client := &http.Client{Transport: transport}
			b.Cleanup(transport.CloseIdleConnections)
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					reply, err := at.PostBody(context.Background(), client, env.Endpoint("bench"), token, body, header)
					if err != nil || reply.Status != 200 || reply.Result() == nil || reply.Result()["isError"] == true {
						b.Errorf("%s: %v %s", req.Method, err, reply)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// BenchmarkReplayThousand replays 1,000 recorded tools/call requests
// against a draft that pins a later version of their tool (target: under
// 2 s per 1,000), in mutations of 100 replays each; the baseline beside it
// is recording the same 1,000 requests through the endpoint.
func BenchmarkReplayThousand(b *testing.B) {
	const requests, batch = 1000, 100
	env := at.New(b, store.SQLite, at.Options{})
	toolID := at.NewID()
	env.CreateAction(toolID, at.CELTool("double", `event.data.n * 2`, at.Object(map[string]any{"n": at.Integer()}, "n")))
	serverID := at.NewID()
	env.CreateAction(serverID, at.ServerSpec{Name: "bench", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("double")}}.Input())
	token := env.Token(server.LocalPrincipal, "bench")
	record := func() {
		for i := range requests {
			reply := env.Post("bench", token, at.Request{Method: "tools/call", Params: map[string]any{"name": "double", "arguments": map[string]any{"n": i}}})
			if reply.Status != 200 {
				b.Fatalf("tools/call: %s", reply)
			}
		}
	}
	record()
	b.Run("record_1000", func(b *testing.B) {
		for b.Loop() {
			record()
		}
	})
	var ids []string
	for _, e := range env.ExecutionsWhere(map[string]any{"actionId": serverID, "method": "tools/call"}) {
		ids = append(ids, e["id"].(string))
	}
	ids = ids[:requests]
	env.UpdateAction(toolID, at.CELTool("double", `event.data.n * 3`, at.Object(map[string]any{"n": at.Integer()}, "n")))
	draft := map[string]any{"tools": []map[string]any{at.RefPinned("double", 2)}}
	b.Run("replay_1000_against_a_draft", func(b *testing.B) {
		for b.Loop() {
			for start := 0; start < requests; start += batch {
				var fields strings.Builder
				for i, id := range ids[start : start+batch] {
					fmt.Fprintf(&fields, "r%d: replayExecution(executionId: %q, draft: $draft) { outputChanged }\n", i, id)
				}
				res := env.GraphQL(`mutation($draft: ActionUpdateInput) { actions { `+fields.String()+` } }`, map[string]any{"draft": draft})
				if len(res.Errors) > 0 || !strings.Contains(string(res.Data), `"outputChanged":true`) {
					b.Fatalf("replay: %+v %s", res.Errors, res.Data)
				}
			}
		}
	})
}
