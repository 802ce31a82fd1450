package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
)

// ACT-484, ACT-485, ACT-488, ACT-489: start.input maps the request to the
// session's input and session.id names it: the seed's length-prefixed id
// keeps principal "a:b" with subject "c" apart from principal "a" with
// subject "b:c".
func TestSessionsGroupByPrincipalAndSubject(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "grouped", Intent: "NONE", Policies: at.Everything()}.Input())
		for _, p := range []string{"a:b", "a"} {
			env.PutPrincipal(p, at.Everything())
		}
		env.Connect("grouped", env.Token("a:b", "c"), rev)
		env.Connect("grouped", env.Token("a", "b:c"), rev)
		records := env.Executions(serverID)
		first, second := records[0]["sessionId"], records[1]["sessionId"]
		if first != "3:a:b:c" || second != "1:a:b:c" {
			t.Fatalf("sessions %v and %v, want 3:a:b:c and 1:a:b:c", first, second)
		}
		session := env.Session(serverID, "3:a:b:c")
		if !jsonEqual(session["input"], map[string]any{"principal": "a:b", "subject": "c"}) {
			t.Errorf("session input %s", asJSON(session["input"]))
		}
	})
}

// ACT-490, ACT-491, ACT-492, ACT-508, ACT-517-like data: a session's input is fixed at
// creation; a later server version mapping a request to another input
// under the same id is refused with 400 mcp_session_invalid until the
// session is closed, and a request that does not produce a valid session
// input is refused with 400.
func TestSessionInputFixedAtCreation(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		serverID := at.NewID()
		spec := at.ServerSpec{Name: "fixedsession", Intent: "NONE", Policies: at.Everything()}
		env.CreateAction(serverID, spec.Input())
		token := env.Token(principal, "alice")
		s := env.Connect("fixedsession", token, rev)
		listTools(t, s)

		// Version 2 adds kind to the input; the id reads it without
		// changing for kind "human", so alice's id names her old session.
		spec.StartInput = map[string]string{"principal": "execution.input.principal", "subject": "execution.input.subject", "kind": "'human'"}
		spec.SessionID = at.ByPrincipalAndSubject + " + (session.input.kind == 'human' ? '' : ':' + session.input.kind)"
		env.UpdateAction(serverID, map[string]any{"mcp": spec.MCPBlock(), "session": map[string]any{"inputSchema": at.Object(map[string]any{
			"principal": at.String(), "subject": at.String(), "kind": at.String()}, "principal", "subject"), "id": spec.SessionID}})
		before := len(env.Executions(serverID))
		for i := range 2 {
			reply := env.Post("fixedsession", token, at.Request{Method: "tools/list", Revision: rev})
			if reply.Status != 400 || reply.DataCode() != "mcp_session_invalid" || reply.ErrorCode() != -32602 {
				t.Fatalf("request %d after the mapping changed: %s", i, reply)
			}
		}
		if got := env.Session(serverID, at.SessionIDFor(principal, "alice"))["input"]; !jsonEqual(got, map[string]any{"principal": principal, "subject": "alice"}) {
			t.Errorf("the session's input changed to %s", asJSON(got))
		}
		refusals := env.Executions(serverID)[before:]
		if len(refusals) != 1 || refusals[0]["status"] != "FAILED" || refusals[0]["sessionId"] != nil || at.Dig(refusals[0], "error", "code") != "mcp_session_invalid" {
			t.Errorf("recorded refusals %s, want one FAILED outside any session (the second is throttled)", asJSON(refusals))
		}
		// Another user gets a session with the new input.
		if reply := env.Post("fixedsession", env.Token(principal, "bob"), at.Request{Method: "tools/list", Revision: rev}); reply.Status != 200 {
			t.Errorf("bob: %s", reply)
		}
		// Closing the session ends the mismatch: its requests are now closed.
		env.CloseSession(serverID, at.SessionIDFor(principal, "alice"))
		if reply := env.Post("fixedsession", token, at.Request{Method: "tools/list", Revision: rev}); reply.DataCode() != "session_closed" {
			t.Errorf("after closeSession: %s", reply)
		}

		// ACT-508: start.input reads a _meta field the request lacks.
		metaSpec := at.ServerSpec{Name: "bymeta", Intent: "NONE", Policies: at.Everything(),
			StartInput:    map[string]string{"principal": "execution.input.principal", "subject": "execution.input.subject", "host": "execution.input.params._meta['com.example/host']"},
			SessionID:     at.ByPrincipalAndSubject + " + ':' + session.input.host",
			SessionSchema: at.Object(map[string]any{"principal": at.String(), "subject": at.String(), "host": at.String()}, "principal", "subject", "host")}
		metaID := at.NewID()
		env.CreateAction(metaID, metaSpec.Input())
		with := at.Request{Method: "tools/list", Revision: rev, Params: map[string]any{"_meta": map[string]any{"com.example/host": "laptop"}}}
		if reply := env.Post("bymeta", token, with); reply.Status != 200 {
			t.Errorf("with the _meta field: %s", reply)
		}
		reply := env.Post("bymeta", token, at.Request{Method: "tools/list", Revision: rev})
		if reply.Status != 400 || reply.ErrorCode() != -32602 || reply.DataCode() != "mcp_request_mismatched" {
			t.Errorf("without the _meta field: %s, want 400", reply)
		}
		// Found tried as a new user would: error.data carried the server's
		// CEL mapping and its evaluation error, and the record kept {}. The
		// client gets only the code and hint; the detail is on the record.
		if data, _ := at.Dig(reply.RPC, "error", "data").(map[string]any); len(data) != 2 || data["hint"] == "" || strings.Contains(string(reply.Body), "com.example/host") {
			t.Errorf("mcp_request_mismatched's data %s", asJSON(data))
		}
		records := env.Executions(metaID)
		if len(records) != 2 || records[0]["sessionId"] != at.SessionIDFor(principal, "alice")+":laptop" ||
			records[1]["status"] != "FAILED" || records[1]["sessionId"] != nil ||
			!strings.Contains(asJSON(at.Dig(records[1], "invocation", "error", "details", "cause")), "mcp.session.start.input") {
			t.Errorf("bymeta records %s", asJSON(records))
		}
	})
}

// ACT-491, ACT-492 as the seed tells it: a later version adds a field to
// start.input that session.id does not include. The write is accepted
// (found tried as a new user would: it was rejected); the sessions whose
// input it changes are refused with 400 mcp_session_invalid until they are
// closed, and a new session takes the new input.
func TestStartFieldLeftOutOfTheID(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		serverID := at.NewID()
		spec := at.ServerSpec{Name: "grown", Intent: "NONE", Policies: at.Everything()}
		env.CreateAction(serverID, spec.Input())
		token := env.Token(principal, "alice")
		listTools(t, env.Connect("grown", token, rev))
		spec.StartInput = map[string]string{"principal": "execution.input.principal", "subject": "execution.input.subject", "client": "execution.input.client"}
		env.UpdateAction(serverID, map[string]any{"mcp": spec.MCPBlock()})
		for range 2 {
			if reply := env.Post("grown", token, at.Request{Method: "tools/list", Revision: rev}); reply.Status != 400 || reply.DataCode() != "mcp_session_invalid" {
				t.Fatalf("alice after the new field: %s", reply)
			}
		}
		if reply := env.Post("grown", env.Token(principal, "carol"), at.Request{Method: "tools/list", Revision: rev}); reply.Status != 200 {
			t.Errorf("a new session: %s", reply)
		}
		if got := env.Session(serverID, at.SessionIDFor(principal, "carol"))["input"]; at.Dig(got, "client") != "client-carol" {
			t.Errorf("carol's session input %s", asJSON(got))
		}
		env.CloseSession(serverID, at.SessionIDFor(principal, "alice"))
		if reply := env.Post("grown", token, at.Request{Method: "tools/list", Revision: rev}); reply.DataCode() != "session_closed" {
			t.Errorf("after closeSession: %s", reply)
		}
	})
}

// ACT-107, ACT-501, ACT-502, ACT-503, ACT-504, ACT-505, ACT-520, ACT-521: closeSession closes one session:
// its new tools/call is a tool error session_closed and any other request a
// JSON-RPC error session_closed, run nothing, and are recorded FAILED
// outside the session; a request already running finishes and is recorded
// in it; other sessions go on.
func TestCloseSession(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		defineGate(env)
		env.CreateAction(at.NewID(), at.StarlarkTool("echo", echoSource, nil, nil))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "closing", Intent: "NONE", Policies: at.Everything(),
			Tools: []map[string]any{at.Ref("echo"), at.Ref("gate")}}.Input())
		alice := env.Connect("closing", env.Token(principal, "alice"), rev)
		bob := env.Connect("closing", env.Token(principal, "bob"), rev)
		aliceSession := at.SessionIDFor(principal, "alice")

		key := gateKey(t)
		running := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "gate", Arguments: map[string]any{"key": key}})
			if err != nil {
				t.Error(err)
			}
			running <- res
		}()
		waitFor(t, "the gate call to run", func() bool { return len(requests(env, serverID, "tools/call")) == 1 })
		env.CloseSession(serverID, aliceSession)

		res := callTool(t, alice, "echo", map[string]any{"x": 1})
		if !res.IsError || toolErrorCode(res) != "session_closed" {
			t.Errorf("tools/call in a closed session: %v %s", res.IsError, text(res))
		}
		if name, _ := serverInfo(res.Meta); name != "closing" {
			t.Errorf("session_closed result lacks serverInfo: %s", asJSON(res.Meta))
		}
		_, err := alice.ListTools(ctx(t), nil)
		if werr := rpcError(t, err); errorData(t, werr)["code"] != "session_closed" {
			t.Errorf("tools/list in a closed session: %v %s", werr, werr.Data)
		}
		if res := callTool(t, bob, "echo", map[string]any{"x": 2}); res.IsError {
			t.Errorf("bob's session was affected: %s", text(res))
		}
		openGate(env, key)
		if res := <-running; res == nil || res.IsError || at.Dig(res.StructuredContent, "opened") != true {
			t.Fatalf("the running request did not finish: %v", res)
		}
		session := env.Session(serverID, aliceSession)
		if session["closed"] != true {
			t.Errorf("session not closed: %s", asJSON(session))
		}
		inputs := session["inputs"].([]any)
		lastInput := inputs[len(inputs)-1].(map[string]any)
		gateRequest := requests(env, serverID, "tools/call")[0]
		if lastInput["executionId"] != gateRequest["id"] || lastInput["state"] != "CONSUMED" || gateRequest["status"] != "SUCCEEDED" || gateRequest["sessionId"] != aliceSession {
			t.Errorf("the request running at close: input %s, request %v in %v", asJSON(lastInput), gateRequest["status"], gateRequest["sessionId"])
		}
		var refused []map[string]any
		for _, r := range env.Executions(serverID) {
			if r["role"] == "refusal" {
				refused = append(refused, r)
			}
		}
		// The tools/list refusal came in the same minute: throttled.
		if len(refused) != 1 || refused[0]["status"] != "FAILED" || refused[0]["sessionId"] != nil ||
			at.Dig(refused[0], "error", "code") != "session_closed" || len(refused[0]["calls"].([]any)) != 0 {
			t.Errorf("refusals %s", asJSON(refused))
		}
		if !strings.Contains(asJSON(refused[0]["input"]), `"echo"`) {
			t.Errorf("the refusal does not keep its request: %s", asJSON(refused[0]["input"]))
		}
	})
}

// ACT-039, ACT-506, ACT-507, ACT-526, ACT-527, ACT-528, ACT-571: disabling the server
// refuses every new request with 404 mcp_server_not_found, unrecorded, and
// lets a running request finish; a name that is no MCP server the
// principal can read gets the same answer.
func TestDisableServer(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		defineGate(env)
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "disabled", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("gate")}}.Input())
		s := env.Connect("disabled", env.Token(principal, "alice"), rev)
		key := gateKey(t)
		running := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "gate", Arguments: map[string]any{"key": key}})
			if err != nil {
				t.Error(err)
			}
			running <- res
		}()
		waitFor(t, "the gate call to run", func() bool { return len(requests(env, serverID, "tools/call")) == 1 })
		env.UpdateAction(serverID, map[string]any{"enabled": false})
		before := len(env.Executions(serverID))
		messages := map[string]bool{}
		for _, name := range []string{"disabled", "nonexistent", "gate"} {
			reply := env.Post(name, env.Token(principal, "alice"), at.Request{Method: "tools/list", Revision: rev})
			if reply.Status != 404 || reply.DataCode() != "mcp_server_not_found" || at.Dig(reply.RPC, "error", "data", "name") != name {
				t.Errorf("%s: %s, want 404 mcp_server_not_found naming it", name, reply)
			}
			messages[at.Dig(reply.RPC, "error", "message").(string)] = true
		}
		if len(messages) != 1 {
			t.Errorf("mcp_server_not_found messages differ: %v", messages)
		}
		openGate(env, key)
		if res := <-running; res == nil || res.IsError {
			t.Fatalf("the running request did not finish: %v", res)
		}
		records := env.Executions(serverID)
		if len(records) != before || last(t, requests(env, serverID, "tools/call"))["status"] != "SUCCEEDED" {
			t.Errorf("after disabling: %d records (before %d), last call %v", len(records), before, last(t, requests(env, serverID, "tools/call"))["status"])
		}

		// ACT-070, ACT-526: a server the principal may not read.
		hidden := at.NewID()
		env.CreateAction(hidden, at.ServerSpec{Name: "hidden", Intent: "NONE", Policies: at.Everything()}.Input())
		env.PutPrincipal("outsider", []map[string]any{at.Allow([]string{"*"}, "*"), at.Deny([]string{"SELECT"}, "actions.Action")})
		if reply := env.Post("hidden", env.Token("outsider", "eve"), at.Request{Method: "tools/list", Revision: rev}); reply.Status != 404 || reply.DataCode() != "mcp_server_not_found" {
			t.Errorf("an unreadable server: %s", reply)
		}
		if n := len(env.Executions(hidden)); n != 0 {
			t.Errorf("an unreadable server's refusal was recorded (%d)", n)
		}
	})
}

// ACT-529, ACT-530, ACT-531, ACT-532, ACT-533, ACT-534, ACT-535, ACT-536, ACT-537, ACT-539, ACT-540, ACT-541, ACT-542: every server starts in preview mode: calls run
// as live, on real data, their writes roll back into write sets, the
// request, its session history and uses commit, and results carry
// com.twisp/preview; promotion sends the whole mcp block with mode LIVE.
func TestPreviewMode(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		const putter = `
def run(event):
    before = graphql("query { kv { value(namespace: \"p\", key: \"seen\") { value } } }")
    graphql("mutation($v: JSON!) { kv { put(namespace: \"p\", key: \"w\", value: $v) { key } } }", variables = {"v": {"by": event["data"]["by"]}})
    return {"seen": before["kv"]["value"]["value"], "wrote": event["data"]["by"]}
`
		env.CreateAction(at.NewID(), at.StarlarkTool("putter", putter, at.Object(map[string]any{"by": at.String()}, "by"), []map[string]any{at.Ref("graphql")}))
		env.MustGraphQL(`mutation { kv { put(namespace: "p", key: "seen", value: {real: true}) { key } } }`, nil)
		serverID := at.NewID()
		spec := at.ServerSpec{Name: "previewed", Instructions: "Mind the preview.", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("putter")}}
		env.CreateAction(serverID, spec.Input())
		mode := at.Dig(env.MustGraphQL(`query($id: ID!) { action(id: $id) { mcp { mode } } }`, map[string]any{"id": serverID}), "action", "mcp", "mode")
		if mode != "PREVIEW" {
			t.Errorf("a new server's mode is %v", mode)
		}
		s := env.Connect("previewed", env.Token(principal, "alice"), rev)
		res := callTool(t, s, "putter", map[string]any{"by": "preview"})
		want := map[string]any{"seen": map[string]any{"real": true}, "wrote": "preview"}
		if res.IsError || !jsonEqual(res.StructuredContent, want) {
			t.Fatalf("preview call: %s", text(res))
		}
		if res.Meta["com.twisp/preview"] != true {
			t.Errorf("a preview result lacks com.twisp/preview: %s", asJSON(res.Meta))
		}
		if list := listTools(t, s); list.Meta["com.twisp/preview"] != true {
			t.Errorf("a preview listing lacks com.twisp/preview")
		}
		if env.KV("p", "w") != nil {
			t.Fatal("a preview call's write was committed")
		}
		request := last(t, requests(env, serverID, "tools/call"))
		call := request["calls"].([]any)[0].(map[string]any)
		if request["preview"] != true || call["preview"] != true || request["status"] != "SUCCEEDED" {
			t.Errorf("preview flags: request %v call %v", request["preview"], call["preview"])
		}
		// The row is in the write set of the call and of its graphql call.
		if !strings.Contains(asJSON(call["writeSet"]), `"key":"p/w"`) || !strings.Contains(asJSON(call["writeSet"]), `"preview"`) {
			t.Errorf("the call's write set %s lacks the row it would have written", asJSON(call["writeSet"]))
		}
		if len(request["uses"].([]any)) != 1 {
			t.Errorf("preview request uses %s", asJSON(request["uses"]))
		}
		if in := env.Session(serverID, at.SessionIDFor(principal, "alice"))["inputs"].([]any); in[len(in)-1].(map[string]any)["state"] != "CONSUMED" {
			t.Errorf("preview session history %s", asJSON(in))
		}

		// ACT-542: a block with only mode is rejected.
		if resp := env.GraphQL(`mutation($id: ID!) { actions { updateAction(id: $id, input: {mcp: {mode: LIVE}}) { version } } }`, map[string]any{"id": serverID}); len(resp.Errors) == 0 {
			t.Error("an mcp block with only mode was accepted")
		}
		// ACT-539, ACT-541: the whole block, with mode LIVE and without
		// instructions, replaces the old one.
		spec.Mode, spec.Instructions = "LIVE", ""
		env.UpdateAction(serverID, map[string]any{"mcp": spec.MCPBlock()})
		live := env.Connect("previewed", env.Token(principal, "alice"), rev)
		if rev == at.Revision2026 && live.InitializeResult().Instructions != "" {
			t.Errorf("instructions survived a block without them: %q", live.InitializeResult().Instructions)
		}
		res = callTool(t, live, "putter", map[string]any{"by": "live"})
		if res.IsError || res.Meta["com.twisp/preview"] != nil {
			t.Errorf("live call: %s meta %s", text(res), asJSON(res.Meta))
		}
		if got := env.KV("p", "w"); !jsonEqual(got, map[string]any{"by": "live"}) {
			t.Errorf("a LIVE call's write reads %s", asJSON(got))
		}
		if request := last(t, requests(env, serverID, "tools/call")); request["preview"] != false || request["calls"].([]any)[0].(map[string]any)["preview"] != false {
			t.Errorf("a LIVE request recorded as preview")
		}
	})
}
