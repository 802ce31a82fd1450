package graph_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

const (
	request1 = "e0000000-0000-4000-8000-000000000001"
	request2 = "e0000000-0000-4000-8000-000000000002"
	request3 = "e0000000-0000-4000-8000-000000000003"
	call1    = "c0000000-0000-4000-8000-000000000001"
	call2    = "c0000000-0000-4000-8000-000000000002"
	alice    = "3:ops:alice"
	bob      = "3:ops:bob"
)

// record writes what the MCP endpoint would record for three requests to
// fraud-ops: two in alice's session (the first with two calls, the first
// of them a preview with a write set), one in bob's.
func (a *api) record() {
	a.t.Helper()
	ctx := context.Background()
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	requestInput := func(subject string) json.RawMessage {
		return raw(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_account_context","arguments":{"account_id":"a1"}},` +
			`"principal":"ops","subject":"` + subject + `","client":"claude-code","protocolVersion":"2026-07-28"}`)
	}
	request := func(id, subject, session string) *store.Execution {
		return &store.Execution{ID: id, Account: "000000000000", ActionID: fraudOpsID, ActionVersion: 2, ActionName: "fraud-ops",
			EventType: "mcp.request", Role: store.RoleRequest, SessionID: session, Status: store.Succeeded,
			Caller: "ops", Subject: subject, Client: "claude-code", Input: requestInput(subject),
			Invocation: raw(`{"intent":"Check the account before the review.","output":{"isError":false}}`)}
	}
	calls := []*store.Execution{
		{ID: call1, Account: "000000000000", ActionID: contextToolID, ActionVersion: 1, ActionName: "get_account_context",
			EventType: "call", Role: store.RoleCall, ParentID: request1, Status: store.Succeeded, Caller: "ops", Subject: "alice",
			Input: raw(`{"account_id":"a1"}`), Output: raw(`{"balance":"12.50"}`), Preview: true,
			WriteSet: []store.Write{
				{Table: "KVValue", Key: "alerts/a1", Value: raw(`{"namespace":"alerts","key":"a1","value":{"low":true}}`)},
				{Table: "Principal", Key: "ops", Value: raw(`{"name":"ops","policies":[],"version":3}`)},
				{Table: "KVValue", Key: "alerts/a0", Deleted: true},
			}},
		{ID: call2, Account: "000000000000", ActionID: notifyToolID, ActionVersion: 1, ActionName: "notify_human_ops",
			EventType: "call", Role: store.RoleCall, ParentID: request1, Status: store.Failed, Caller: "ops", Subject: "alice",
			Error: raw(`{"code":"action_failure"}`)},
	}
	err := a.store.Write(ctx, func(tx *store.Tx) error {
		for _, e := range []*store.Execution{request(request1, "alice", alice), calls[0], calls[1], request(request2, "alice", alice), request(request3, "bob", bob)} {
			if err := tx.InsertExecution(ctx, e); err != nil {
				return err
			}
		}
		if err := tx.AddUse(ctx, request1, store.Use{Kind: store.UseTool, Ref: call1}); err != nil {
			return err
		}
		for _, s := range []struct{ id, subject string }{{alice, "alice"}, {bob, "bob"}} {
			key := store.SessionKey{Account: "000000000000", ServerID: fraudOpsID, ID: s.id}
			if _, _, err := tx.LockSession(ctx, key, raw(`{"principal":"ops","subject":"`+s.subject+`"}`)); err != nil {
				return err
			}
		}
		aliceKey := store.SessionKey{Account: "000000000000", ServerID: fraudOpsID, ID: alice}
		for _, id := range []string{request1, request2} {
			if _, err := tx.AppendSessionInput(ctx, aliceKey, id); err != nil {
				return err
			}
		}
		if err := tx.ConsumeSessionInput(ctx, aliceKey, request1, 2); err != nil {
			return err
		}
		_, err := tx.AppendSessionInput(ctx, store.SessionKey{Account: "000000000000", ServerID: fraudOpsID, ID: bob}, request3)
		return err
	})
	if err != nil {
		a.t.Fatal(err)
	}
}

func ids(t *testing.T, connection any) []string {
	t.Helper()
	var out []string
	for _, edge := range at(t, connection, "edges").([]any) {
		out = append(out, at(t, edge, "node", "id").(string))
	}
	return out
}

func sameIDs(t *testing.T, got []string, want ...string) {
	t.Helper()
	if jsonOf(t, got) != jsonOf(t, want) {
		t.Fatalf("executions %v, want %v", got, want)
	}
}

// ACT-097, ACT-099, ACT-100, ACT-109, ACT-116, ACT-500: an execution reads
// back with its request (mcpRequest from the recorded input, intent from the
// invocation), its calls in order, its uses and its session.
func TestExecution_ACT097_ACT099_ACT100_ACT109_ACT116_ACT500(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.record()
		got := a.root(`{ execution(id: "` + request1 + `") {
			id actionId actionVersion actionName eventType role status caller subject client sessionId parentId preview
			mcpRequest { method params id principal subject client protocolVersion intent }
			calls { id status parentId output error }
			uses { kind executionId }
			startedAt endedAt
		} }`).ok()
		want := `{"execution":{"actionId":"` + fraudOpsID + `","actionName":"fraud-ops","actionVersion":2,"caller":"ops",` +
			`"calls":[{"error":null,"id":"` + call1 + `","output":{"balance":"12.50"},"parentId":"` + request1 + `","status":"SUCCEEDED"},` +
			`{"error":{"code":"action_failure"},"id":"` + call2 + `","output":null,"parentId":"` + request1 + `","status":"FAILED"}],` +
			`"client":"claude-code","endedAt":null,"eventType":"mcp.request","id":"` + request1 + `",` +
			`"mcpRequest":{"client":"claude-code","id":7,"intent":"Check the account before the review.","method":"tools/call",` +
			`"params":{"arguments":{"account_id":"a1"},"name":"get_account_context"},"principal":"ops","protocolVersion":"2026-07-28","subject":"alice"},` +
			`"parentId":null,"preview":false,"role":"request","sessionId":"3:ops:alice","startedAt":"2026-03-02T09:00:00Z","status":"SUCCEEDED",` +
			`"subject":"alice","uses":[{"executionId":"` + call1 + `","kind":"TOOL"}]}}`
		if s := jsonOf(t, got); s != want {
			t.Fatalf("execution\n%s\nwant\n%s", s, want)
		}
		got = a.root(`{ execution(id: "` + call1 + `") { mcpRequest { method } } missing: execution(id: "nope") { id } }`).ok()
		if s := jsonOf(t, got); s != `{"execution":{"mcpRequest":null},"missing":null}` {
			t.Fatalf("a call has no request: %s", s)
		}
	})
}

// ACT-499, ACT-532: executions filter by action, session, parent and
// preview, in recorded order, a page at a time.
func TestExecutionsFilters_ACT499_ACT532(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.record()
		list := func(where string) []string {
			t.Helper()
			got := a.root(`{ actions { executions(where: ` + where + `) { edges { node { id } } } } }`).ok()
			return ids(t, at(t, got, "actions", "executions"))
		}
		sameIDs(t, list(`{actionId: "`+fraudOpsID+`"}`), request1, request2, request3)
		sameIDs(t, list(`{actionId: "`+fraudOpsID+`", sessionId: "`+alice+`"}`), request1, request2)
		sameIDs(t, list(`{parentId: "`+request1+`"}`), call1, call2)
		sameIDs(t, list(`{preview: true}`), call1)
		sameIDs(t, list(`{actionId: "`+fraudOpsID+`", preview: false}`), request1, request2, request3)
		got := a.root(`{ action(id: "` + fraudOpsID + `") { id } }`).ok()
		if at(t, got, "action") != nil {
			t.Fatalf("no such action was created: %v", got)
		}
		a.createTools()
		got = a.root(`{ action(id: "` + contextToolID + `") { executions(where: {preview: true}) { edges { node { id } } } } }`).ok()
		sameIDs(t, ids(t, at(t, got, "action", "executions")), call1)

		page := `query($after: String) { actions { executions(where: {actionId: "` + fraudOpsID + `"}, first: 2, after: $after) {
			edges { cursor node { id } } pageInfo { hasNextPage endCursor } } } }`
		first := at(t, a.root(page).ok(), "actions", "executions")
		sameIDs(t, ids(t, first), request1, request2)
		if at(t, first, "pageInfo", "hasNextPage") != true {
			t.Fatalf("first page %v", first)
		}
		second := at(t, a.root(page, map[string]any{"after": at(t, first, "pageInfo", "endCursor")}).ok(), "actions", "executions")
		sameIDs(t, ids(t, second), request3)
		if at(t, second, "pageInfo", "hasNextPage") != false {
			t.Fatalf("second page %v", second)
		}
		a.root(page, map[string]any{"after": "x"}).failsOn("BAD_REQUEST", "after")
		a.root(`{ actions { executions(first: 100000) { edges { cursor } } } }`).failsOn("BAD_REQUEST", "first")
	})
}

// ACT-363, ACT-533: an execution's write set lists the rows the reader may
// SELECT (resource <namespace>.<table>, the row's new value as document) and
// counts the rest, deleted rows included, in writeSetUnreadable.
func TestWriteSetFilteredBySelect_ACT363_ACT533(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.record()
		query := `{ execution(id: "` + call1 + `") { preview writeSet { table key value deleted } writeSetUnreadable } }`
		got := a.root(query).ok()
		want := `{"execution":{"preview":true,"writeSet":[{"deleted":false,"key":"alerts/a1","table":"KVValue","value":{"key":"a1","namespace":"alerts","value":{"low":true}}},` +
			`{"deleted":false,"key":"ops","table":"Principal","value":{"name":"ops","policies":[],"version":3}},` +
			`{"deleted":true,"key":"alerts/a0","table":"KVValue","value":null}],"writeSetUnreadable":0}}`
		if s := jsonOf(t, got); s != want {
			t.Fatalf("root\n%s\nwant\n%s", s, want)
		}
		a.principal("auditor", allow([]any{"SELECT"}, "financial.*", "actions.Execution"))
		got = a.as(a.token("auditor"), query).ok()
		want = `{"execution":{"preview":true,"writeSet":[{"deleted":false,"key":"alerts/a1","table":"KVValue","value":{"key":"a1","namespace":"alerts","value":{"low":true}}}],"writeSetUnreadable":2}}`
		if s := jsonOf(t, got); s != want {
			t.Fatalf("auditor\n%s\nwant\n%s", s, want)
		}
		// Assertions see the row.
		a.principal("narrow", allow([]any{"SELECT"}, "actions.Execution"), map[string]any{"effect": "ALLOW", "actions": []any{"SELECT"},
			"resources": []any{"financial.KVValue"}, "assertions": map[string]any{"other": "context.document.key != 'a1'"}})
		got = a.as(a.token("narrow"), query).ok()
		if s := jsonOf(t, got); s != `{"execution":{"preview":true,"writeSet":[],"writeSetUnreadable":3}}` {
			t.Fatalf("narrow %s", s)
		}
		// Without SELECT on actions.Execution the records are closed.
		a.principal("outsider", allow([]any{"SELECT"}, "financial.*"))
		outsider := a.token("outsider")
		a.as(outsider, query).fails("ACCESS_DENIED")
		got = a.as(outsider, `{ actions { executions { edges { node { id } } } } }`).ok()
		if s := jsonOf(t, got); s != `{"actions":{"executions":{"edges":[]}}}` {
			t.Fatalf("outsider list %s", s)
		}
	})
}

// ACT-493, ACT-494, ACT-496, ACT-497, ACT-498, ACT-501: a session reads with its ordered request log
// and its requests; closeSession closes that session only.
func TestSessions_ACT493_ACT494_ACT496_ACT497_ACT498_ACT501(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.record()
		got := a.root(`{ actions { session(actionId: "` + fraudOpsID + `", sessionId: "` + alice + `") {
			actionId id input closed closedAt createdAt
			inputs { seq type executionId state calls admittedAt }
			executions { edges { node { id } } }
		} } }`).ok()
		want := `{"actions":{"session":{"actionId":"` + fraudOpsID + `","closed":false,"closedAt":null,"createdAt":"2026-03-02T09:00:00Z",` +
			`"executions":{"edges":[{"node":{"id":"` + request1 + `"}},{"node":{"id":"` + request2 + `"}}]},"id":"3:ops:alice",` +
			`"input":{"principal":"ops","subject":"alice"},"inputs":[` +
			`{"admittedAt":"2026-03-02T09:00:00Z","calls":2,"executionId":"` + request1 + `","seq":1,"state":"CONSUMED","type":"REQUEST"},` +
			`{"admittedAt":"2026-03-02T09:00:00Z","calls":0,"executionId":"` + request2 + `","seq":2,"state":"CLAIMED","type":"REQUEST"}]}}}`
		if s := jsonOf(t, got); s != want {
			t.Fatalf("session\n%s\nwant\n%s", s, want)
		}
		got = a.root(`{ actions { sessions(actionId: "` + fraudOpsID + `") { id } none: session(actionId: "` + fraudOpsID + `", sessionId: "x") { id } } }`).ok()
		if s := jsonOf(t, got); s != `{"actions":{"none":null,"sessions":[{"id":"3:ops:alice"},{"id":"3:ops:bob"}]}}` {
			t.Fatalf("sessions %s", s)
		}

		a.clock.Advance(time.Minute)
		got = a.root(`mutation { actions { closeSession(actionId: "` + fraudOpsID + `", sessionId: "` + alice + `") { id closed closedAt } } }`).ok()
		if s := jsonOf(t, got); s != `{"actions":{"closeSession":{"closed":true,"closedAt":"2026-03-02T09:01:00Z","id":"3:ops:alice"}}}` {
			t.Fatalf("close %s", s)
		}
		got = a.root(`{ actions { sessions(actionId: "` + fraudOpsID + `") { id closed closedAt } } }`).ok()
		if s := jsonOf(t, got); s != `{"actions":{"sessions":[{"closed":true,"closedAt":"2026-03-02T09:01:00Z","id":"3:ops:alice"},{"closed":false,"closedAt":null,"id":"3:ops:bob"}]}}` {
			t.Fatalf("after close %s", s)
		}
		// Closing again is allowed and changes nothing.
		a.clock.Advance(time.Minute)
		got = a.root(`mutation { actions { closeSession(actionId: "` + fraudOpsID + `", sessionId: "` + alice + `") { closedAt } } }`).ok()
		if s := jsonOf(t, got); s != `{"actions":{"closeSession":{"closedAt":"2026-03-02T09:01:00Z"}}}` {
			t.Fatalf("close twice %s", s)
		}
		a.root(`mutation { actions { closeSession(actionId: "`+fraudOpsID+`", sessionId: "nope") { id } } }`).failsOn("NOT_FOUND", "sessionId")

		// closeSession is an UPDATE of actions.Session.
		a.principal("watcher", allow([]any{"SELECT"}, "actions.*"))
		a.as(a.token("watcher"), `mutation { actions { closeSession(actionId: "`+fraudOpsID+`", sessionId: "`+bob+`") { id } } }`).fails("ACCESS_DENIED")
	})
}

// One request, one transaction: a closeSession in a request whose later
// field fails is not committed, like the request's row writes.
func TestCloseSessionCommitsWithTheRequest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.record()
		a.root(`mutation {
			actions { closeSession(actionId: "` + fraudOpsID + `", sessionId: "` + bob + `") { closed } }
			kv { put(namespace: "bad/namespace", key: "k", value: 1) { key } }
		}`).fails("BAD_REQUEST")
		closed := func() bool {
			var s *store.Session
			err := a.store.Read(context.Background(), func(tx *store.Tx) error {
				var err error
				s, err = tx.Session(context.Background(), store.SessionKey{Account: "000000000000", ServerID: fraudOpsID, ID: bob})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return s.Closed()
		}
		if closed() {
			t.Fatal("a failed request closed the session")
		}
		a.root(`mutation @dryRun { actions { closeSession(actionId: "` + fraudOpsID + `", sessionId: "` + bob + `") { closed } } }`).ok()
		if closed() {
			t.Fatal("a dry run closed the session")
		}
		a.root(`mutation { actions { closeSession(actionId: "` + fraudOpsID + `", sessionId: "` + bob + `") { closed } } }`).ok()
		if !closed() {
			t.Fatal("closeSession did not commit")
		}
	})
}
