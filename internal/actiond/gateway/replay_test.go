package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
)

// postSource posts an amount to the ledger, multiplied by factor: a later
// version changes the factor, and so both its output and its write set.
func postSource(factor int) string {
	return fmt.Sprintf(`
def run(event):
    d = event["data"]
    amount = d["amount"] * %d
    graphql("mutation($k: String!, $v: JSON!) { kv { put(namespace: \"ledger\", key: $k, value: $v) { key } } }", variables = {"k": d["key"], "v": {"amount": amount}})
    return {"posted": amount}
`, factor)
}

func postTool(factor int) map[string]any {
	return at.StarlarkTool("post", postSource(factor), at.Object(map[string]any{"key": at.String(), "amount": at.Integer()}, "key", "amount"),
		[]map[string]any{at.Ref("graphql")}, at.Allow([]string{"SELECT", "INSERT", "UPDATE"}, "financial.*"))
}

const replayFields = `original { id output } replay { id role status preview sessionId actionVersion output error invocation
	calls { id actionVersion input output preview rolledBackByExecutionId writeSet { table key value } } }
	serverVersion outputChanged writeSetChanged`

func replay(env *at.Env, token, id string, extra map[string]any) at.GraphQLResponse {
	vars := map[string]any{"id": id}
	args := "executionId: $id"
	decl := "$id: ID!"
	for name, value := range extra {
		vars[name] = value
		switch name {
		case "draft":
			decl += ", $draft: ActionUpdateInput"
		case "version":
			decl += ", $version: Int"
		case "model":
			decl += ", $model: ReplayModel"
		}
		args += fmt.Sprintf(", %s: $%s", name, name)
	}
	return env.GraphQLAs(token, `mutation(`+decl+`) { actions { replayExecution(`+args+`) { `+replayFields+` } } }`, vars)
}

func mustReplay(t *testing.T, env *at.Env, id string, extra map[string]any) map[string]any {
	t.Helper()
	res := replay(env, "", id, extra)
	if len(res.Errors) > 0 {
		t.Fatalf("replayExecution: %+v", res.Errors)
	}
	var data any
	json.Unmarshal(res.Data, &data)
	return at.Dig(data, "actions", "replayExecution").(map[string]any)
}

// ACT-543, ACT-544, ACT-545, ACT-546, ACT-548, ACT-549, ACT-550, ACT-551: replay of a recorded tools/call, with its
// recorded arguments, against the server's later version (unpinned
// references call the version the original used) and against a draft
// pinning a later version of the tool, which changed its output and its
// write set: compared side by side, the writes rolled back into write sets,
// no request recorded in any session.
func TestReplayAgainstDraft(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		toolID := at.NewID()
		env.CreateAction(toolID, postTool(1))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "ledger", Mode: "LIVE", Intent: "NONE", Policies: at.Everything(),
			Tools: []map[string]any{at.Ref("post")}}.Input())
		token := env.Token(principal, "alice")
		reply := env.Post("ledger", token, at.Request{Method: "tools/call", Params: map[string]any{"name": "post", "arguments": map[string]any{"key": "k1", "amount": 5}}})
		if reply.Status != 200 || at.Dig(reply.Result(), "structuredContent", "posted") != 5.0 {
			t.Fatalf("the original call: %s", reply)
		}
		original := last(t, requests(env, serverID, "tools/call"))
		sessionID := original["sessionId"].(string)
		requestsBefore := len(at.Dig(env.Session(serverID, sessionID), "inputs").([]any))

		env.UpdateAction(toolID, postTool(3))
		env.UpdateAction(serverID, map[string]any{"description": "v2 of the server"})
		// Unpinned: the version the original called, v1, whatever is latest;
		// the server's latest version, v2, answers.
		same := mustReplay(t, env, original["id"].(string), nil)
		if same["outputChanged"] != false || same["writeSetChanged"] != false || same["serverVersion"] != 2.0 || at.Dig(same, "replay", "actionVersion") != 2.0 {
			t.Errorf("replay against the latest server: %s", asJSON(same))
		}
		originalCalls := original["calls"].([]any)
		if calls := at.Dig(same, "replay", "calls").([]any); len(calls) != 1 || at.Dig(calls[0], "actionVersion") != 1.0 ||
			!jsonEqual(at.Decode(at.Dig(calls[0], "input")), at.Decode(at.Dig(originalCalls[0], "input"))) {
			t.Errorf("the replay's call %s; the original's %s", asJSON(calls), asJSON(originalCalls))
		}
		if v1 := mustReplay(t, env, original["id"].(string), map[string]any{"version": 1}); v1["serverVersion"] != 1.0 {
			t.Errorf("replay against version 1: %s", asJSON(v1))
		}

		// A draft pinning v2: output and write set differ, side by side.
		draft := map[string]any{"tools": []map[string]any{at.RefPinned("post", 2)}}
		changed := mustReplay(t, env, original["id"].(string), map[string]any{"draft": draft})
		replayed := changed["replay"].(map[string]any)
		if changed["outputChanged"] != true || changed["writeSetChanged"] != true || changed["serverVersion"] != nil {
			t.Errorf("replay against the draft: %s", asJSON(changed))
		}
		if replayed["role"] != "replay" || replayed["status"] != "SUCCEEDED" || replayed["preview"] != true || replayed["sessionId"] != nil ||
			at.Dig(at.Decode(replayed["output"]), "structuredContent", "posted") != 15.0 ||
			at.Dig(at.Decode(changed["original"].(map[string]any)["output"]), "structuredContent", "posted") != 5.0 {
			t.Errorf("the draft's replay record %s", asJSON(replayed))
		}
		calls := replayed["calls"].([]any)
		if len(calls) != 1 || at.Dig(calls[0], "actionVersion") != 2.0 || at.Dig(calls[0], "preview") != true ||
			at.Dig(calls[0], "rolledBackByExecutionId") != replayed["id"] ||
			!strings.Contains(asJSON(at.Dig(calls[0], "writeSet")), `"amount":15`) {
			t.Errorf("the draft replay's call %s", asJSON(calls))
		}
		// Nothing committed, no request in the session; the record keeps
		// the replay and its calls.
		if got := env.KV("ledger", "k1"); !jsonEqual(got, map[string]any{"amount": 5.0}) {
			t.Errorf("the ledger after the replays: %s", asJSON(got))
		}
		if n := len(at.Dig(env.Session(serverID, sessionID), "inputs").([]any)); n != requestsBefore {
			t.Errorf("the session has %d requests after replays, %d before", n, requestsBefore)
		}
		stored := env.Execution(replayed["id"].(string))
		if stored == nil || len(stored["calls"].([]any)) != 1 {
			t.Errorf("the replay's record: %s", asJSON(stored))
		}
		if replays := env.ExecutionsWhere(map[string]any{"actionId": serverID, "role": "replay"}); len(replays) != 3 {
			t.Errorf("%d replays recorded", len(replays))
		}
	})
}

// ACT-552, ACT-554, ACT-555, ACT-556, ACT-557: what cannot be replayed — a recorded model, a
// call, a refusal, a method outside tools, resources, prompts and skills —
// a JSON-RPC error replayed as the same code, and a replay's authority: the
// replayer needs INVOKE, and the original principal's authority bounds it.
func TestReplayRefusals(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		env.CreateAction(at.NewID(), postTool(1))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "ledger", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("post")}}.Input())
		token := env.Token(principal, "alice")
		env.Post("ledger", token, at.Request{Method: "tools/call", Params: map[string]any{"name": "post", "arguments": map[string]any{"key": "k", "amount": 1}}})
		call := last(t, requests(env, serverID, "tools/call"))

		// A JSON-RPC error replays as the same code.
		reply := env.Post("ledger", token, at.Request{Method: "tools/call", Params: map[string]any{"name": "nope", "arguments": map[string]any{}}})
		if reply.ErrorCode() != -32602 {
			t.Fatalf("a call of an unknown tool: %s", reply)
		}
		failed := last(t, requests(env, serverID, "tools/call"))
		again := mustReplay(t, env, failed["id"].(string), nil)
		if at.Dig(again, "replay", "status") != "FAILED" || again["outputChanged"] != false ||
			at.Dig(at.Decode(at.Dig(again, "replay", "output")), "error", "code") != -32602.0 {
			t.Errorf("the replay of a JSON-RPC error: %s", asJSON(again))
		}

		refuse := func(what string, res at.GraphQLResponse, code, says string) {
			t.Helper()
			if len(res.Errors) == 0 || res.Errors[0].Extensions["code"] != code || !strings.Contains(res.Errors[0].Message, says) {
				t.Errorf("%s: %+v", what, res.Errors)
			}
		}
		refuse("model RECORDED", replay(env, "", call["id"].(string), map[string]any{"model": "RECORDED"}), "BAD_REQUEST", "involves no model")
		calls := call["calls"].([]any)
		refuse("a call", replay(env, "", at.Dig(calls[0], "id").(string), nil), "BAD_REQUEST", "this execution is a call")
		refuse("both", replay(env, "", call["id"].(string), map[string]any{"version": 1, "draft": map[string]any{}}), "BAD_REQUEST", "not both")
		refuse("a draft that does not validate", replay(env, "", call["id"].(string), map[string]any{"draft": map[string]any{"tools": []map[string]any{at.Ref("missing")}}}),
			"NOT_FOUND", "missing")

		// A listing replays; a method outside tools, resources, prompts and
		// skills cannot be replayed yet.
		env.Post("ledger", token, at.Request{Method: "tools/list"})
		if listed := mustReplay(t, env, last(t, requests(env, serverID, "tools/list"))["id"].(string), nil); listed["outputChanged"] != false {
			t.Errorf("the replay of tools/list: %s", asJSON(listed))
		}
		env.Post("ledger", token, at.Request{Method: "server/discover"})
		refuse("server/discover", replay(env, "", last(t, requests(env, serverID, "server/discover"))["id"].(string), nil), "replay_unsupported", "cannot be replayed yet")

		// A refused request (a missing token is not recorded; a forbidden one is).
		env.PutPrincipal("outsider", []map[string]any{at.Allow([]string{"SELECT"}, "*")})
		if reply := env.Post("ledger", env.Token("outsider", "olga"), at.Request{Method: "tools/list"}); reply.Status != 403 {
			t.Fatalf("an outsider's request: %s", reply)
		}
		refusals := env.ExecutionsWhere(map[string]any{"actionId": serverID, "role": "refusal"})
		if len(refusals) == 0 {
			t.Fatal("no refusal recorded")
		}
		refuse("a refusal", replay(env, "", refusals[0]["id"].(string), nil), "BAD_REQUEST", "refused and ran nothing")

		// The replayer needs INVOKE on the server; a reader cannot replay.
		env.PutPrincipal("reader", []map[string]any{at.Allow([]string{"SELECT"}, "*")})
		refuse("a reader", replay(env, env.GraphQLToken("reader", "rita"), call["id"].(string), nil), "ACCESS_DENIED", "may not invoke")
		// A principal allowed everything replays.
		if res := replay(env, env.GraphQLToken(principal, "alice"), call["id"].(string), nil); len(res.Errors) > 0 {
			t.Errorf("a principal with INVOKE: %+v", res.Errors)
		}
		// The original principal's authority bounds the replay: once it
		// loses INVOKE, its requests cannot be replayed.
		env.PutPrincipal(principal, []map[string]any{at.Allow([]string{"SELECT"}, "*")})
		refuse("the original principal without INVOKE", replay(env, "", call["id"].(string), nil), "ACCESS_DENIED", "original request's principal")
	})
}

// ACT-285, ACT-550, ACT-551: a replay reruns a resource read against the draft's versions: a
// draft pinning the template tool's later version reads through it.
func TestReplayResourceReadAgainstDraft(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		toolID := at.NewID()
		env.CreateAction(toolID, accountTool(selectOnly))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "ledger", Policies: at.Everything(), Tools: []map[string]any{at.Ref("get_account")},
			Resources: []map[string]any{at.Template("twisp://accounts/{account_id}", "account", "", "get_account")}}.Input())
		rpc(t, env, "ledger", env.Token(principal, "alice"), "resources/read", map[string]any{"uri": "twisp://accounts/a1"})
		read := last(t, requests(env, serverID, "resources/read"))
		v2 := accountTool(selectOnly)
		v2["config"] = map[string]any{"source": strings.Replace(accountSource, `"region": data.get("region", "")`, `"region": "moved"`, 1)}
		env.UpdateAction(toolID, v2)

		same := mustReplay(t, env, read["id"].(string), nil)
		if same["outputChanged"] != false {
			t.Errorf("a replay calling the version the read used: %s", asJSON(same))
		}
		changed := mustReplay(t, env, read["id"].(string), map[string]any{"draft": map[string]any{"tools": []map[string]any{at.RefPinned("get_account", 2)}}})
		calls := at.Dig(changed, "replay", "calls").([]any)
		if changed["outputChanged"] != true || len(calls) != 1 || at.Dig(calls[0], "actionVersion") != 2.0 ||
			!strings.Contains(asJSON(at.Dig(changed, "replay", "output")), `moved`) {
			t.Errorf("the read replayed against the draft: %s", asJSON(changed))
		}
	})
}

// ACT-552, ACT-553: the original principal's policies are evaluated with the
// original request's claims: a principal allowed only for the subject alice
// has alice's requests replayed by the local root, whose own claims name
// no subject; replayed by that principal signed in as bob, the replayer's
// own authority (bob's claims) refuses it: bob may not even read it.
func TestReplayUsesTheOriginalClaims(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		env.CreateAction(at.NewID(), postTool(1))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "ledger", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("post")}}.Input())
		env.PutPrincipal("alice-only", []map[string]any{{"effect": "ALLOW", "actions": []any{"*"}, "resources": []any{"*"},
			"assertions": map[string]any{"alice": "context.auth.claims.sub == 'alice'"}}})
		reply := env.Post("ledger", env.Token("alice-only", "alice"), at.Request{Method: "tools/call", Params: map[string]any{"name": "post", "arguments": map[string]any{"key": "c", "amount": 2}}})
		if reply.Status != 200 || reply.Result()["isError"] == true {
			t.Fatalf("alice's call: %s", reply)
		}
		call := last(t, requests(env, serverID, "tools/call"))
		replayed := mustReplay(t, env, call["id"].(string), nil)
		if at.Dig(replayed, "replay", "status") != "SUCCEEDED" || replayed["outputChanged"] != false {
			t.Errorf("the root's replay of alice's request: %s", asJSON(replayed))
		}
		res := replay(env, env.GraphQLToken("alice-only", "bob"), call["id"].(string), nil)
		if len(res.Errors) == 0 || res.Errors[0].Extensions["code"] != "ACCESS_DENIED" {
			t.Errorf("bob's replay of alice's request: %+v %s", res.Errors, res.Data)
		}
	})
}

// ACT-547: a replay reads current data: a read replayed after the row it
// read changed answers the new value.
func TestReplayReadsCurrentData(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		const source = `
def run(event):
    found = graphql("query($k: String!) { kv { value(namespace: \"ledger\", key: $k) { value } } }", variables = {"k": event["data"]["key"]})
    return {"value": found["kv"]["value"]}
`
		env.CreateAction(at.NewID(), at.StarlarkTool("read", source, at.Object(map[string]any{"key": at.String()}, "key"), []map[string]any{at.Ref("graphql")}))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "ledger", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("read")}}.Input())
		env.MustGraphQL(`mutation { kv { put(namespace: "ledger", key: "r", value: {amount: 1}) { key } } }`, nil)
		env.Post("ledger", env.Token(principal, "alice"), at.Request{Method: "tools/call", Params: map[string]any{"name": "read", "arguments": map[string]any{"key": "r"}}})
		call := last(t, requests(env, serverID, "tools/call"))
		env.MustGraphQL(`mutation { kv { put(namespace: "ledger", key: "r", value: {amount: 7}) { key } } }`, nil)
		replayed := mustReplay(t, env, call["id"].(string), nil)
		if replayed["outputChanged"] != true || !strings.Contains(asJSON(at.Dig(replayed, "replay", "output")), `"amount":7`) {
			t.Errorf("the replayed read: %s", asJSON(replayed))
		}
	})
}
