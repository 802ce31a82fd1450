package graph_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/graph"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

const putPrincipal = `mutation($input: PrincipalInput!) { auth { putPrincipal(input: $input) { name version policies { effect actions resources assertions } } } }`

func (a *api) principal(name string, policies ...map[string]any) {
	a.t.Helper()
	list := make([]any, len(policies))
	for i, p := range policies {
		list[i] = p
	}
	a.root(putPrincipal, map[string]any{"input": map[string]any{"name": name, "policies": list}}).ok()
}

func allow(actions []any, resources ...any) map[string]any {
	return map[string]any{"effect": "ALLOW", "actions": actions, "resources": resources}
}

// ACT-061: the local root has no limits; a GraphQL token makes the caller
// its principal, bounded by the Principal row; an MCP token, a token
// without the account, or no token where the root is not allowed, is
// refused.
func TestWhoCalls_ACT061(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		put := `mutation { kv { put(namespace: "alerts", key: "k", value: {low: true}) { value } } }`
		a.root(put).ok()

		// A principal without a row may do nothing.
		a.as(a.token("stranger"), `{ kv { value(namespace: "alerts", key: "k") { value } } }`).fails("ACCESS_DENIED")

		a.principal("reader", allow([]any{"SELECT"}, "financial.*"))
		reader := a.token("reader")
		got := a.as(reader, `{ kv { value(namespace: "alerts", key: "k") { value } } }`).ok()
		if s := jsonOf(t, got); s != `{"kv":{"value":{"value":{"low":true}}}}` {
			t.Fatalf("read: %s", s)
		}
		e := a.as(reader, put).fails("ACCESS_DENIED")
		mustContain(t, e.Message, "UPDATE on financial.KVValue")
		mustContain(t, e.Extensions["hint"].(string), "Your own permissions")

		// ACT-061: an MCP token is not accepted here.
		r := a.as(a.mcpToken("reader"), `{ kv { value(namespace: "alerts", key: "k") { value } } }`)
		if r.Status != http.StatusUnauthorized || r.Errors[0].Extensions["code"] != "UNAUTHENTICATED" {
			t.Fatalf("MCP token: %d %s", r.Status, r.body)
		}
		r = a.as("not-a-token", `{ kv { value(namespace: "alerts", key: "k") { value } } }`)
		if r.Status != http.StatusUnauthorized {
			t.Fatalf("garbage token: %d %s", r.Status, r.body)
		}

		// The account must be one of the token's.
		r = a.do(`{ kv { value(namespace: "alerts", key: "k") { value } } }`, call{token: reader, account: "111111111111"})
		if r.Status != http.StatusForbidden || r.Errors[0].Extensions["code"] != "ACCESS_DENIED" {
			t.Fatalf("other account: %d %s", r.Status, r.body)
		}
		r = a.do(`{ kv { value(namespace: "alerts", key: "k") { value } } }`, call{account: "bad account"})
		if r.Status != http.StatusBadRequest {
			t.Fatalf("malformed account: %d %s", r.Status, r.body)
		}
		// Accounts keep their own data.
		got = a.do(`{ kv { value(namespace: "alerts", key: "k") { value } } }`, call{account: "111111111111"}).ok()
		if at(t, got, "kv", "value") != nil {
			t.Fatalf("another account sees the value: %v", got)
		}
	})
}

// Without LocalRoot (actiond not on loopback), from an address that is not
// loopback, or on a connection whose listener is not known to be loopback,
// a request without a token is refused.
func TestNoLocalRootWithoutLoopback(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		listener := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
		for _, c := range []struct {
			localRoot bool
			remote    string
			local     net.Addr
			status    int
		}{
			{false, "127.0.0.1:4000", listener, http.StatusUnauthorized},
			{true, "192.0.2.1:4000", listener, http.StatusUnauthorized},
			{true, "127.0.0.1:4000", nil, http.StatusUnauthorized},
			{true, "127.0.0.1:4000", &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 8080}, http.StatusUnauthorized},
			{true, "[::1]:4000", listener, http.StatusOK},
			{true, "127.0.0.1:4000", listener, http.StatusOK},
		} {
			h := graph.NewHandler(graph.Options{Store: a.store, PublicURL: publicURL, LocalRoot: c.localRoot})
			req, _ := http.NewRequest(http.MethodPost, graph.Path, strings.NewReader(`{"query":"{ actions { list { edges { cursor } } } }"}`))
			req.Header.Set("Content-Type", "application/json")
			req.RemoteAddr = c.remote
			req.Host = "127.0.0.1:8080"
			if c.local != nil {
				req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, c.local))
			}
			rec := newRecorder()
			h.ServeHTTP(rec, req)
			if rec.status != c.status {
				t.Fatalf("local root %v from %s to %v: %d %s", c.localRoot, c.remote, c.local, rec.status, rec.body.String())
			}
			if c.status == http.StatusUnauthorized && !strings.HasPrefix(rec.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("no challenge: %v", rec.header)
			}
		}
	})
}

// ACT-043, ACT-044: a definition may reference only tools and skills its
// writer may read and INVOKE; what the writer may not read is reported as
// missing.
func TestWriterMustInvokeReferences_ACT043_ACT044(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.createTools()
		a.create(id(900), skillInput("fraud-review-2", "How to review an account for fraud.")).ok()
		a.principal("builder", allow([]any{"SELECT", "INSERT"}, "actions.*"))
		builder := a.token("builder")
		vars := map[string]any{"id": fraudOpsID, "input": serverInput()}
		e := a.as(builder, createWithVariables, vars).failsOn("ACCESS_DENIED", "tools[0].name")
		mustContain(t, e.Message, "INVOKE")

		a.principal("builder", allow([]any{"SELECT", "INSERT", "INVOKE"}, "actions.Action"),
			map[string]any{"effect": "DENY", "actions": []any{"SELECT"}, "resources": []any{"actions.Action"},
				"assertions": map[string]any{"skill": "context.document.kind == 'skill'"}})
		withSkill := serverInput()
		withSkill["skills"] = []any{map[string]any{"name": "fraud-review-2"}}
		a.as(builder, createWithVariables, map[string]any{"id": fraudOpsID, "input": withSkill}).failsOn("NOT_FOUND", "skills[0].name")

		data := a.as(builder, createWithVariables, vars).ok()
		if at(t, data, "actions", "createAction", "version") != 1.0 {
			t.Fatalf("create: %v", data)
		}
		// INSERT is checked before anything else.
		a.principal("viewer", allow([]any{"SELECT", "INVOKE"}, "actions.*"))
		vars["id"] = id(5)
		a.as(a.token("viewer"), createWithVariables, vars).fails("ACCESS_DENIED")
	})
}

// Reads are filtered by SELECT, with assertions over the row.
func TestReadsFilteredBySelect(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.createTools()
		a.principal("partial", map[string]any{"effect": "ALLOW", "actions": []any{"SELECT"}, "resources": []any{"actions.Action"},
			"assertions": map[string]any{"cel only": "context.document.kind == 'cel'"}})
		token := a.token("partial")
		got := a.as(token, `{ actions { list { edges { node { name } } } } }`).ok()
		if s := jsonOf(t, got); s != `{"actions":{"list":{"edges":[{"node":{"name":"notify_human_ops"}}]}}}` {
			t.Fatalf("list: %s", s)
		}
		a.as(token, `{ action(id: "`+contextToolID+`") { name } }`).fails("ACCESS_DENIED")
		got = a.as(token, `{ action(id: "`+notifyToolID+`") { name } }`).ok()
		if at(t, got, "action", "name") != "notify_human_ops" {
			t.Fatalf("readable action: %v", got)
		}
	})
}

// Principals: putPrincipal creates, then versions; policies take bare and
// quoted actions; the principal's policies bound its token at once.
func TestPrincipals(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		data := a.root(`mutation { auth { putPrincipal(input: { name: "ops", policies: [
			{ effect: ALLOW, actions: [SELECT, "INSERT", "actions:*", "*"], resources: ["financial.*"], assertions: { mine: "context.auth.claims.sub == 'user-ops'" } }
		] }) { name version policies { effect actions resources assertions } } } }`).ok()
		want := `{"auth":{"putPrincipal":{"name":"ops","policies":[{"actions":["SELECT","INSERT","actions:*","*"],"assertions":{"mine":"context.auth.claims.sub == 'user-ops'"},"effect":"ALLOW","resources":["financial.*"]}],"version":1}}}`
		if s := jsonOf(t, data); s != want {
			t.Fatalf("put\n%s\nwant\n%s", s, want)
		}
		ops := a.token("ops")
		a.as(ops, `mutation { kv { put(namespace: "n", key: "k", value: 1) { value } } }`).ok()
		a.principal("ops", allow([]any{"SELECT"}, "financial.*"))
		a.as(ops, `mutation { kv { put(namespace: "n", key: "k", value: 2) { value } } }`).fails("ACCESS_DENIED")
		got := a.root(`{ auth { principal(name: "ops") { version } principals { name } } }`).ok()
		if s := jsonOf(t, got); s != `{"auth":{"principal":{"version":2},"principals":[{"name":"ops"}]}}` {
			t.Fatalf("read: %s", s)
		}
		// A principal may not read principals without SELECT on auth.Principal.
		a.as(ops, `{ auth { principal(name: "ops") { version } } }`).fails("ACCESS_DENIED")
		got = a.as(ops, `{ auth { principals { name } } }`).ok()
		if s := jsonOf(t, got); s != `{"auth":{"principals":[]}}` {
			t.Fatalf("filtered principals: %s", s)
		}
		a.root(putPrincipal, map[string]any{"input": map[string]any{"name": "bad", "policies": []any{
			map[string]any{"effect": "ALLOW", "actions": []any{"SELECT"}, "resources": []any{}}}}}).
			failsOn("BAD_REQUEST", "policies[0].resources")
		a.root(`mutation { auth { putPrincipal(input: { name: "bad", policies: [{ effect: ALLOW, actions: [1], resources: ["*"] }] }) { name } } }`).
			fails("BAD_REQUEST")
		a.root(`mutation { auth { putPrincipal(input: { name: "bad", policies: [{ effect: MAYBE, actions: [SELECT], resources: ["*"] }] }) { name } } }`).
			fails("GRAPHQL_VALIDATION_FAILED")
		data = a.root(`mutation { auth { deletePrincipal(name: "ops") { name } } }`).ok()
		if at(t, data, "auth", "deletePrincipal", "name") != "ops" {
			t.Fatalf("delete: %v", data)
		}
		a.as(ops, `{ kv { value(namespace: "n", key: "k") { value } } }`).fails("ACCESS_DENIED")
		data = a.root(`mutation { auth { deletePrincipal(name: "ops") { name } } }`).ok()
		if at(t, data, "auth", "deletePrincipal") != nil {
			t.Fatalf("delete twice: %v", data)
		}
	})
}

// The KV store: put creates and replaces, value reads, values lists in key
// order a page at a time, delete removes and answers what was there.
func TestKV(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		for _, key := range []string{"b", "a/1", "c", "ü"} {
			a.root(`mutation($k: String!, $v: JSON!) { kv { put(namespace: "alerts", key: $k, value: $v) { key } } }`,
				map[string]any{"k": key, "v": map[string]any{"key": key, "n": 1.5}}).ok()
		}
		a.root(`mutation { kv { put(namespace: "alerts2", key: "a", value: [1, "two", null]) { value } } }`).ok()
		got := a.root(`{ kv { value(namespace: "alerts", key: "a/1") { namespace key value } } }`).ok()
		if s := jsonOf(t, got); s != `{"kv":{"value":{"key":"a/1","namespace":"alerts","value":{"key":"a/1","n":1.5}}}}` {
			t.Fatalf("value %s", s)
		}
		page := `query($after: String) { kv { values(namespace: "alerts", first: 2, after: $after) { edges { cursor node { key } } pageInfo { hasNextPage endCursor } } } }`
		got = a.root(page).ok()
		if s := jsonOf(t, got); s != `{"kv":{"values":{"edges":[{"cursor":"a/1","node":{"key":"a/1"}},{"cursor":"b","node":{"key":"b"}}],"pageInfo":{"endCursor":"b","hasNextPage":true}}}}` {
			t.Fatalf("first page %s", s)
		}
		got = a.root(page, map[string]any{"after": "b"}).ok()
		if s := jsonOf(t, got); s != `{"kv":{"values":{"edges":[{"cursor":"c","node":{"key":"c"}},{"cursor":"ü","node":{"key":"ü"}}],"pageInfo":{"endCursor":"ü","hasNextPage":false}}}}` {
			t.Fatalf("second page %s", s)
		}
		a.root(`mutation { kv { put(namespace: "alerts", key: "b", value: "replaced") { value } } }`).ok()
		got = a.root(`mutation { kv { delete(namespace: "alerts", key: "b") { value } } }`).ok()
		if s := jsonOf(t, got); s != `{"kv":{"delete":{"value":"replaced"}}}` {
			t.Fatalf("delete %s", s)
		}
		got = a.root(`mutation { kv { delete(namespace: "alerts", key: "b") { value } } }`).ok()
		if at(t, got, "kv", "delete") != nil {
			t.Fatalf("delete twice %v", got)
		}
		a.root(`mutation { kv { put(namespace: "a/b", key: "k", value: 1) { key } } }`).failsOn("BAD_REQUEST", "namespace")
		a.root(`mutation { kv { put(namespace: "a", key: "", value: 1) { key } } }`).failsOn("BAD_REQUEST", "key")
		a.root(`mutation { kv { put(namespace: "a", key: "k", value: null) { key } } }`).fails("GRAPHQL_VALIDATION_FAILED")

		// INSERT and UPDATE are told apart.
		a.principal("inserter", allow([]any{"SELECT", "INSERT"}, "financial.KVValue"))
		inserter := a.token("inserter")
		a.as(inserter, `mutation { kv { put(namespace: "alerts", key: "new", value: 1) { key } } }`).ok()
		a.as(inserter, `mutation { kv { put(namespace: "alerts", key: "new", value: 2) { key } } }`).fails("ACCESS_DENIED")
		a.as(inserter, `mutation { kv { delete(namespace: "alerts", key: "new") { key } } }`).fails("ACCESS_DENIED")
	})
}

// The endpoint takes POST with a JSON body only.
func TestHTTPShape(t *testing.T) {
	a := newAPI(t, store.SQLite)
	resp, err := http.Get(a.server.URL + graph.Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	resp, err = http.Post(a.server.URL+graph.Path, "text/plain", bytes.NewReader([]byte(`{"query":"{ kv { value(namespace: \"a\", key: \"b\") { key } } }"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain: %d", resp.StatusCode)
	}
	r := a.root(`{ kv { value(namespace: "a" key: "b") { key } `)
	r.fails("GRAPHQL_VALIDATION_FAILED")
	r = a.root(`{ kv { nothing } }`)
	r.fails("GRAPHQL_VALIDATION_FAILED")
}

type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder                    { return &recorder{header: http.Header{}} }
func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(status int)      { r.status = status }

// A scalar that does not read is a BAD_REQUEST naming what is wrong: a
// policy action with surrounding spaces, or one that is not a string.
func TestScalarsThatDoNotRead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		e := a.root(putPrincipal, map[string]any{"input": map[string]any{"name": "spaced",
			"policies": []any{allow([]any{" SELECT"}, "*")}}}).fails("BAD_REQUEST")
		mustContain(t, e.Message, `policy action " SELECT" is empty or has surrounding spaces`)
		e = a.root(putPrincipal, map[string]any{"input": map[string]any{"name": "numbered",
			"policies": []any{allow([]any{7}, "*")}}}).fails("BAD_REQUEST")
		mustContain(t, e.Message, "a policy action is a name such as SELECT")
	})
}
