package graph_test

import (
	"testing"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// The filters an investigator narrows a history by: role, status, principal,
// method, tool and time, each also on a session's executions.
func TestExecutionsWhereRoleStatusCallerToolTime(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.record()
		list := func(where string) []string {
			t.Helper()
			got := a.root(`{ actions { executions(where: ` + where + `) { edges { node { id } } } } }`).ok()
			return ids(t, at(t, got, "actions", "executions"))
		}
		sameIDs(t, list(`{role: "call"}`), call1, call2)
		sameIDs(t, list(`{status: FAILED}`), call2)
		sameIDs(t, list(`{caller: "ops", role: "request"}`), request1, request2, request3)
		sameIDs(t, list(`{caller: "nobody"}`))
		sameIDs(t, list(`{tool: "get_account_context"}`), request1, call1, request2, request3)
		sameIDs(t, list(`{tool: "notify_human_ops"}`), call2)
		sameIDs(t, list(`{method: "tools/call"}`), request1, request2, request3)
		sameIDs(t, list(`{method: "tools/list"}`))
		sameIDs(t, list(`{startedBefore: "2026-03-02T09:00:01Z", role: "request"}`), request1, request2, request3)
		sameIDs(t, list(`{startedAfter: "2026-03-02T09:00:01Z"}`))
		a.root(`{ actions { executions(where: {role: "calls"}) { edges { cursor } } } }`).failsOn("BAD_REQUEST", "where.role")
		a.root(`{ actions { executions(where: {startedAfter: "2026-03-02T10:00:00Z", startedBefore: "2026-03-02T09:00:00Z"}) { edges { cursor } } } }`).
			failsOn("BAD_REQUEST", "where.startedAfter")

		got := a.root(`{ actions { session(actionId: "` + fraudOpsID + `", sessionId: "` + alice + `") {
			requestCount executions(where: {tool: "get_account_context", sessionId: "` + bob + `"}) { edges { node { id } } } } } }`).ok()
		if n := at(t, got, "actions", "session", "requestCount"); n != 2.0 {
			t.Fatalf("alice's session counts %v requests, want 2", n)
		}
		// A session's executions stay that session's, whatever where says.
		sameIDs(t, ids(t, at(t, got, "actions", "session", "executions")), request1, request2)
	})
}

// A page read with last ends at the newest execution: the explorer opens a
// long session at its latest requests and pages back with before.
func TestExecutionsLastBefore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.record()
		query := `query($before: String) { actions { executions(where: {actionId: "` + fraudOpsID + `"}, last: 2, before: $before) {
			edges { node { id } } pageInfo { hasPreviousPage hasNextPage startCursor endCursor } } } }`
		latest := at(t, a.root(query).ok(), "actions", "executions")
		sameIDs(t, ids(t, latest), request2, request3)
		if at(t, latest, "pageInfo", "hasPreviousPage") != true || at(t, latest, "pageInfo", "hasNextPage") != false {
			t.Fatalf("latest page %s", jsonOf(t, latest))
		}
		earlier := at(t, a.root(query, map[string]any{"before": at(t, latest, "pageInfo", "startCursor")}).ok(), "actions", "executions")
		sameIDs(t, ids(t, earlier), request1)
		if at(t, earlier, "pageInfo", "hasPreviousPage") != false || at(t, earlier, "pageInfo", "hasNextPage") != true {
			t.Fatalf("earlier page %s", jsonOf(t, earlier))
		}
		// Polling for what came after the newest finds nothing new yet.
		after := at(t, a.root(`query($after: String) { actions { executions(where: {actionId: "`+fraudOpsID+`"}, after: $after) {
			edges { node { id } } pageInfo { hasPreviousPage } } } }`, map[string]any{"after": at(t, latest, "pageInfo", "endCursor")}).ok(), "actions", "executions")
		if jsonOf(t, after) != `{"edges":[],"pageInfo":{"hasPreviousPage":true}}` {
			t.Fatalf("after the newest %s", jsonOf(t, after))
		}
		a.root(`{ actions { executions(first: 1, last: 1) { edges { cursor } } } }`).failsOn("BAD_REQUEST", "last")
		a.root(`{ actions { executions(last: 1, before: "x") { edges { cursor } } } }`).failsOn("BAD_REQUEST", "before")
	})
}

// ACT-080, ACT-303, ACT-311, ACT-312, ACT-313: a server's offered tools are
// what its listing would offer, with the input schema the agent sees and
// the annotations derived from policies; a reader who may not read a tool's
// action sees it only counted.
func TestOfferedTools_ACT080_ACT303_ACT311_ACT312_ACT313(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.createTools()
		a.root(seedCreate).ok()
		query := `{ action(id: "` + fraudOpsID + `") { offeredTools { unreadable tools {
			name actionId version native inputSchema unavailable annotations { readOnlyHint destructiveHint openWorldHint } } } } }`
		got := jsonOf(t, at(t, a.root(query).ok(), "action", "offeredTools"))
		want := `{"tools":[` +
			`{"actionId":"` + contextToolID + `","annotations":{"destructiveHint":false,"openWorldHint":false,"readOnlyHint":true},` +
			`"inputSchema":{"properties":{"account_id":{"type":"string"},"intent":{"description":"Why you make this call: one sentence, 1 to 1,024 characters. It is recorded for whoever reviews this session.","maxLength":1024,"minLength":1,"type":"string"}},"required":["account_id","intent"],"type":"object"},` +
			`"name":"get_account_context","native":false,"unavailable":null,"version":1},` +
			`{"actionId":"` + notifyToolID + `","annotations":{"destructiveHint":false,"openWorldHint":false,"readOnlyHint":true},` +
			`"inputSchema":{"properties":{"intent":{"description":"Why you make this call: one sentence, 1 to 1,024 characters. It is recorded for whoever reviews this session.","maxLength":1024,"minLength":1,"type":"string"},"message":{"type":"string"}},"required":["message","intent"],"type":"object"},` +
			`"name":"notify_human_ops","native":false,"unavailable":null,"version":1}],"unreadable":0}`
		if got != want {
			t.Fatalf("offered tools\n%s\nwant\n%s", got, want)
		}

		// Natives: graphql has the server's policies alone, cel is always
		// read-only, and one the engine does not run yet is left out.
		a.create(id(50), map[string]any{
			"name": "builder", "kind": "mcp", "config": map[string]any{},
			"mcp":      map[string]any{"name": "builder", "intent": "NONE", "session": map[string]any{"start": map[string]any{"input": map[string]any{"principal": "execution.input.principal"}}}},
			"session":  map[string]any{"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"principal": map[string]any{"type": "string"}}}, "id": "session.input.principal"},
			"tools":    []any{map[string]any{"name": "graphql"}, map[string]any{"name": "cel"}, map[string]any{"name": "get_task"}},
			"policies": []any{allow([]any{"*"}, "*")},
		}).ok()
		got = jsonOf(t, at(t, a.root(`{ action(id: "`+id(50)+`") { offeredTools { unreadable tools { name native actionId version
			annotations { readOnlyHint destructiveHint openWorldHint } } } } }`).ok(), "action", "offeredTools"))
		want = `{"tools":[{"actionId":null,"annotations":{"destructiveHint":null,"openWorldHint":false,"readOnlyHint":false},"name":"graphql","native":true,"version":null},` +
			`{"actionId":null,"annotations":{"destructiveHint":false,"openWorldHint":false,"readOnlyHint":true},"name":"cel","native":true,"version":null}],"unreadable":0}`
		if got != want {
			t.Fatalf("natives\n%s\nwant\n%s", got, want)
		}

		a.principal("viewer", map[string]any{"effect": "ALLOW", "actions": []any{"SELECT"}, "resources": []any{"actions.Action"},
			"assertions": map[string]any{"server": "context.document.kind == 'mcp'"}})
		got = jsonOf(t, at(t, a.as(a.token("viewer"), `{ action(id: "`+fraudOpsID+`") { offeredTools { unreadable tools { name } } } }`).ok(), "action", "offeredTools"))
		if got != `{"tools":[],"unreadable":2}` {
			t.Fatalf("a viewer who may read only servers sees %s", got)
		}
		got = jsonOf(t, a.root(`{ action(id: "`+contextToolID+`") { offeredTools { unreadable } } }`).ok())
		if got != `{"action":{"offeredTools":null}}` {
			t.Fatalf("a tool offers nothing: %s", got)
		}
	})
}
