package server_test

import (
	"context"
	"net/http"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// BenchmarkRecordedToolsCall is bench/actiond/run.sh's actiond side in
// process: a recorded, authenticated tools/call of a cel tool on a LIVE
// server over loopback HTTP, each committed before its answer. Run with
// -cpuprofile or -memprofile to see where a request's work goes.
func BenchmarkRecordedToolsCall(b *testing.B) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		b.Run(string(d), func(b *testing.B) { benchmarkToolsCall(b, d, at.Options{}) })
	}
}

// BenchmarkMeteredToolsCall is BenchmarkRecordedToolsCall on SQLite with
// the metrics off (the baseline) and on, side by side: what --metrics
// costs a request.
func BenchmarkMeteredToolsCall(b *testing.B) {
	for _, metered := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[metered], func(b *testing.B) {
			benchmarkToolsCall(b, store.SQLite, at.Options{Metrics: metered})
		})
	}
}

func benchmarkToolsCall(b *testing.B, d store.Dialect, opts at.Options) {
	env := at.New(b, d, opts)
	env.CreateAction(at.NewID(), at.CELTool("double", `event.data.n * 2`, at.Object(map[string]any{"n": at.Integer()}, "n")))
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "bench", Mode: "LIVE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("double")}}.Input())
	token := env.Token(server.LocalPrincipal, "bench")
	body, header := at.Request{Method: "tools/call", Params: map[string]any{"name": "double", "arguments": map[string]any{"n": 21, "intent": "Benchmark."}}}.Body()
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	client := &http.Client{Transport: transport}
	b.Cleanup(transport.CloseIdleConnections)
	b.SetParallelism(8) // 16 clients on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			reply, err := at.PostBody(context.Background(), client, env.Endpoint("bench"), token, body, header)
			if err != nil || reply.Status != 200 || reply.Result()["isError"] == true {
				b.Errorf("tools/call: %v %s", err, reply)
				return
			}
		}
	})
}
