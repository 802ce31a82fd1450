package graph_test

import (
	"context"
	"errors"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/graph"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

func committedKV(t *testing.T, s *store.Store, key string) bool {
	t.Helper()
	_, ok, err := s.NewWork("000000000000").Get(context.Background(), "KVValue", "alerts/"+key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// One request is one transaction: when any field fails, data is null and
// none of the request's writes are applied, also those of fields that
// succeeded before it; fields see the writes of the fields before them.
func TestOneRequestOneTransaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.root(`mutation {
			kv { put(namespace: "alerts", key: "first", value: 1) { key } }
			actions { createAction(id: "`+id(1)+`", input: { name: "x", kind: "mcp", config: {} }) { version } }
		}`).failsOn("BAD_REQUEST", "mcp")
		if committedKV(t, a.store, "first") {
			t.Fatal("the first field's write was applied although the second failed")
		}
		vars := map[string]any{"a": starlarkInput("dup"), "b": starlarkInput("dup")}
		a.root(`mutation($a: ActionInput!, $b: ActionInput!) { actions {
			a: createAction(id: "`+id(1)+`", input: $a) { version }
			b: createAction(id: "`+id(2)+`", input: $b) { version }
		} }`, vars).failsOn("ALREADY_EXISTS", "name")
		if got := a.root(`{ actionByName(name: "dup") { id } }`).ok(); at(t, got, "actionByName") != nil {
			t.Fatalf("a rolled-back action is stored: %v", got)
		}

		// A later field reads an earlier one's writes: a server can list a tool
		// created in the same request.
		server := serverInput()
		server["tools"] = []any{map[string]any{"name": "get_account_context"}}
		vars = map[string]any{"tool": starlarkInput("get_account_context"), "server": server}
		a.root(`mutation($tool: ActionInput!, $server: ActionInput!) {
			kv { put(namespace: "alerts", key: "first", value: 1) { key } }
			actions {
				tool: createAction(id: "`+contextToolID+`", input: $tool) { version }
				server: createAction(id: "`+fraudOpsID+`", input: $server) { version }
			}
		}`, vars).ok()
		if !committedKV(t, a.store, "first") {
			t.Fatal("the request's writes were not applied")
		}

		// Fields of one namespace run in document order.
		data := a.root(`mutation { kv {
			a: put(namespace: "alerts", key: "order", value: 1) { value }
			b: put(namespace: "alerts", key: "order", value: 2) { value }
			c: delete(namespace: "alerts", key: "order") { value }
			d: delete(namespace: "alerts", key: "order") { value }
		} }`).ok()
		if s := jsonOf(t, data); s != `{"kv":{"a":{"value":1},"b":{"value":2},"c":{"value":2},"d":null}}` {
			t.Fatalf("order: %s", s)
		}

		// @dryRun answers as if and keeps nothing.
		data = a.root(`mutation @dryRun { kv { put(namespace: "alerts", key: "dry", value: 1) { key } } }`).ok()
		if at(t, data, "kv", "put", "key") != "dry" || committedKV(t, a.store, "dry") {
			t.Fatalf("dry run: %v", data)
		}
	})
}

// Execute runs against a caller's unit of work: the database is untouched
// until the caller applies it; a failed operation leaves the work as it was;
// record writes come back for the caller to commit.
func TestExecuteAgainstAWork(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.record()
		ctx := context.Background()
		work := a.store.NewWork("000000000000")
		env := graph.Env{Store: a.store, Work: work, Account: "000000000000", Access: graph.RootAccess(), Clock: a.clock, RecordWrites: true}

		resp := graph.Execute(ctx, env, graph.Request{Query: `mutation($v: JSON!) { kv { put(namespace: "alerts", key: "x", value: $v) { key } } }`,
			Variables: map[string]any{"v": map[string]any{"low": true}}})
		if len(resp.Errors) > 0 || string(resp.Data) != `{"kv":{"put":{"key":"x"}}}` {
			t.Fatalf("put: %s %v", resp.Data, resp.Errors)
		}
		if committedKV(t, a.store, "x") {
			t.Fatal("Execute committed")
		}
		resp = graph.Execute(ctx, env, graph.Request{Query: `query Q { kv { value(namespace: "alerts", key: "x") { value } } }`, OperationName: "Q"})
		if string(resp.Data) != `{"kv":{"value":{"value":{"low":true}}}}` {
			t.Fatalf("the work's write is not read back: %s %v", resp.Data, resp.Errors)
		}

		before := len(work.Writes())
		resp = graph.Execute(ctx, env, graph.Request{Query: `mutation {
			kv { put(namespace: "alerts", key: "y", value: 1) { key } }
			actions { deleteAction(id: "` + id(9) + `") { id } }
		}`})
		if len(resp.Errors) != 1 || resp.Errors[0].Extensions["code"] != "NOT_FOUND" || resp.Data != nil {
			t.Fatalf("failed operation: %s %v", resp.Data, resp.Errors)
		}
		if len(work.Writes()) != before {
			t.Fatalf("a failed operation left writes in the work: %+v", work.Writes())
		}

		closeBob := graph.Request{Query: `mutation { actions { closeSession(actionId: "` + fraudOpsID + `", sessionId: "` + bob + `") { closed } } }`}
		unaware := env
		unaware.RecordWrites = false
		resp = graph.Execute(ctx, unaware, closeBob)
		if len(resp.Errors) != 1 || resp.Errors[0].Extensions["code"] != "BAD_REQUEST" {
			t.Fatalf("closeSession for a caller that cannot commit records: %v", resp.Errors)
		}
		resp = graph.Execute(ctx, env, closeBob)
		if len(resp.Errors) > 0 || len(resp.Records) != 1 {
			t.Fatalf("closeSession: %v, %d records", resp.Errors, len(resp.Records))
		}
		got := a.root(`{ actions { session(actionId: "` + fraudOpsID + `", sessionId: "` + bob + `") { closed } } }`).ok()
		if at(t, got, "actions", "session", "closed") != false {
			t.Fatal("Execute closed the session on its own")
		}

		err := a.store.Write(ctx, func(tx *store.Tx) error {
			if err := tx.Apply(ctx, work); err != nil {
				return err
			}
			return resp.ApplyRecords(ctx, tx)
		})
		if err != nil {
			t.Fatal(err)
		}
		if !committedKV(t, a.store, "x") || committedKV(t, a.store, "y") {
			t.Fatal("applying the work did not commit exactly its writes")
		}
		got = a.root(`{ actions { session(actionId: "` + fraudOpsID + `", sessionId: "` + bob + `") { closed } } }`).ok()
		if at(t, got, "actions", "session", "closed") != true {
			t.Fatal("the returned record write did not close the session")
		}
	})
}

// A tool's graphql() runs under the principal, then the server's and the
// tool's policies: each layer narrows the one before, and a denial names
// the layer.
func TestExecuteUnderLayers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		ctx := context.Background()
		everything := []policy.Policy{{Effect: policy.Allow, Actions: []string{"*"}, Resources: []string{"*"}}}
		selectOnly := []policy.Policy{{Effect: policy.Allow, Actions: []string{"SELECT"}, Resources: []string{"financial.*"}}}
		access := graph.Access{Principal: "ops", Claims: map[string]any{"sub": "alice"}, Layers: []policy.Layer{
			{Name: policy.LayerPrincipal, Policies: everything, PrincipalID: "ops"},
			{Name: policy.LayerServer, Policies: selectOnly, ActionID: fraudOpsID},
		}}
		work := a.store.NewWork("000000000000")
		env := graph.Env{Store: a.store, Work: work, Access: access, Clock: a.clock}
		resp := graph.Execute(ctx, env, graph.Request{Query: `mutation { kv { put(namespace: "alerts", key: "x", value: 1) { key } } }`})
		if len(resp.Errors) != 1 || resp.Errors[0].Extensions["code"] != "ACCESS_DENIED" {
			t.Fatalf("put under a SELECT-only server: %v", resp.Errors)
		}
		mustContain(t, resp.Errors[0].Message, "INSERT on financial.KVValue is not allowed by the server's policies")
		mustContain(t, resp.Errors[0].Extensions["hint"].(string), "This MCP server's policies")
		resp = graph.Execute(ctx, env, graph.Request{Query: `{ kv { value(namespace: "alerts", key: "x") { key } } }`})
		if len(resp.Errors) > 0 {
			t.Fatalf("read under a SELECT-only server: %v", resp.Errors)
		}
		resp = graph.Execute(ctx, graph.Env{Store: a.store}, graph.Request{Query: `{ kv { value(namespace: "a", key: "b") { key } } }`})
		if len(resp.Errors) != 1 || resp.Errors[0].Extensions["code"] != "INTERNAL" {
			t.Fatalf("Execute without a work: %v", resp.Errors)
		}
	})
}

// Validate checks a document against the schema without running it, and
// names the variables a call must pass.
func TestValidate(t *testing.T) {
	op, err := graph.Validate(`query Get($ns: String!, $key: String!, $first: Int = 10, $after: String) {
		kv { value(namespace: $ns, key: $key) { value } values(namespace: $ns, first: $first, after: $after) { edges { cursor } } }
	}`, "")
	if err != nil {
		t.Fatal(err)
	}
	if jsonOf(t, op) != `{"Name":"Get","Type":"query","Variables":[{"Name":"ns","Type":"String!","Required":true},{"Name":"key","Type":"String!","Required":true},{"Name":"first","Type":"Int","Required":false},{"Name":"after","Type":"String","Required":false}]}` {
		t.Fatalf("operation %s", jsonOf(t, op))
	}
	op, err = graph.Validate(`query A { kv { value(namespace: "a", key: "b") { key } } } mutation B { kv { delete(namespace: "a", key: "b") { key } } }`, "B")
	if err != nil || op.Type != "mutation" || op.Name != "B" {
		t.Fatalf("B: %+v %v", op, err)
	}
	for _, c := range []struct{ document, operation, want string }{
		{`{ kv { nothing } }`, "", `1:8: Cannot query field "nothing" on type "KVQuery".`},
		{`{ kv { value(namespace: "a") { key } } }`, "", "argument \"key\" of type \"String!\" is required"},
		{`query A { kv { value(namespace: "a", key: "b") { key } } } query B { auth { principals { name } } }`, "", "2 operations"},
		{`query A { kv { value(namespace: "a", key: "b") { key } } }`, "C", `no operation named "C"`},
		{`{ kv `, "", "Expected Name"},
	} {
		_, err := graph.Validate(c.document, c.operation)
		var e *graph.Error
		if !errors.As(err, &e) || e.Code != "GRAPHQL_VALIDATION_FAILED" {
			t.Fatalf("%s: %v", c.document, err)
		}
		mustContain(t, e.Message, c.want)
	}
}

func BenchmarkExecute(b *testing.B) {
	s := storetest.Open(b, store.SQLite, nil)
	ctx := context.Background()
	env := graph.Env{Store: s, Work: s.NewWork("000000000000"), Access: graph.RootAccess()}
	graph.Execute(ctx, env, graph.Request{Query: `mutation { kv { put(namespace: "alerts", key: "x", value: {low: true}) { key } } }`})
	query := graph.Request{Query: `query($k: String!) { kv { value(namespace: "alerts", key: $k) { value } } }`, Variables: map[string]any{"k": "x"}}
	b.ResetTimer()
	for b.Loop() {
		if resp := graph.Execute(ctx, env, query); len(resp.Errors) > 0 {
			b.Fatal(resp.Errors)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	document := `query($k: String!) { kv { value(namespace: "alerts", key: $k) { value } } }`
	for b.Loop() {
		if _, err := graph.Validate(document, ""); err != nil {
			b.Fatal(err)
		}
	}
}
