package graph_test

import (
	"context"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/graph"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

// An operation whose request has already ended (a program's graphql()
// past the request's deadline) gets an error response, where gqlgen's
// handler gives none: once it gave nil and the server panicked.
func TestAnEndedOperationAnswersWithAnError(t *testing.T) {
	start := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	s := storetest.Open(t, store.SQLite, clock.NewFake(start))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, query := range []string{`{ kv { value(namespace: "c", key: "n") { value } } }`, `mutation { kv { put(namespace: "c", key: "n", value: 1) { key } } }`} {
		env := graph.Env{Store: s, Work: s.NewWork(graph.DefaultAccount), Access: graph.RootAccess(), Clock: clock.NewFake(start), IDs: fuzzIDs{}}
		resp := graph.Execute(ctx, env, graph.Request{Query: query})
		if resp == nil || len(resp.Errors) == 0 {
			t.Errorf("%s after its context ended: %+v", query, resp)
		}
	}
}
