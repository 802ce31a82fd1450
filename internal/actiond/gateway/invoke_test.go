package gateway_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/modeltest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// invokeCall calls invoke and checks an answer against invoke's
// outputSchema.
func invokeCall(t *testing.T, s *mcp.ClientSession, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	if _, ok := args["intent"]; !ok {
		args["intent"] = "Check what the test built."
	}
	res := callTool(t, s, "invoke", args)
	if !res.IsError {
		native, _ := engine.Native("invoke")
		if err := native.CheckResult(res.StructuredContent); err != nil {
			t.Errorf("invoke's result does not match its outputSchema: %v\n%s", err, asJSON(res.StructuredContent))
		}
	}
	return res
}

// structured is a result's structuredContent as a map.
func structured(res *mcp.CallToolResult) map[string]any {
	out, _ := at.Decode(res.StructuredContent).(map[string]any)
	return out
}

// index is a JSON list's element i; nil when there is none.
func index(list any, i int) any {
	l, _ := list.([]any)
	if i >= len(l) {
		return nil
	}
	return l[i]
}

// keysOf lists a map's keys in order.
func keysOf(m map[string]any) string { return strings.Join(slices.Sorted(maps.Keys(m)), ",") }

// flagSource writes alerts/<account> = {low: balance < 20} through
// graphql(); brokenFlagSource divides by zero after reading the account,
// and wrongFlagSource writes the wrong namespace.
const (
	brokenFlagSource = `
def ratio(n):
    return n // 0

def run(event):
    graphql("query($k: String!) { kv { value(namespace: \"alerts\", key: $k) { value } } }", variables = {"k": event["data"]["account"]})
    return {"flagged": ratio(1) > 0}
`
	wrongFlagSource = `
def run(event):
    low = float(event["data"]["balance"]) < 20
    graphql("mutation($k: String!, $v: JSON!) { kv { put(namespace: \"scratch\", key: $k, value: $v) { key } } }", variables = {"k": event["data"]["account"], "v": {"low": low}})
    return {"flagged": low, "balance": event["data"]["balance"]}
`
	flagSource = `
def run(event):
    low = float(event["data"]["balance"]) < 20
    graphql("mutation($k: String!, $v: JSON!) { kv { put(namespace: \"alerts\", key: $k, value: $v) { key } } }", variables = {"k": event["data"]["account"], "v": {"low": low}})
    return {"flagged": low, "balance": event["data"]["balance"]}
`
)

func flagTool(source string) map[string]any {
	def := at.StarlarkTool("flag_low", source, at.Object(map[string]any{"account": at.String(), "balance": at.String()}, "account", "balance"),
		[]map[string]any{at.Ref("graphql")})
	return def
}

// builderServer is a LIVE server agents build with: it lists graphql and
// invoke, and its policies allow everything.
func builderServer(env *at.Env, name string, extra ...map[string]any) string {
	id := at.NewID()
	tools := append([]map[string]any{at.Ref("graphql"), at.Ref("invoke"), at.Ref("cel")}, extra...)
	env.CreateAction(id, at.ServerSpec{Name: name, Mode: "LIVE", Policies: at.Everything(), Tools: tools}.Input())
	return id
}

// ACT-379, ACT-380, ACT-382, ACT-383, ACT-384, ACT-385, ACT-386, ACT-393, ACT-423, ACT-425, ACT-426, ACT-429, ACT-433, ACT-434, ACT-435, ACT-436, ACT-438, ACT-439, ACT-460, ACT-461, ACT-462, ACT-463, ACT-466, ACT-467, ACT-468, ACT-472, ACT-474, ACT-475, ACT-476, ACT-477: the loop of seed 004, as one test.
// Through the endpoint, the external agent creates a tool disabled,
// previews it (it fails: FAILED with its traceback, not a tool error),
// previews drafts of it until one works (the rows it would write shown,
// nothing committed, no version stored), publishes that draft with
// updateAction and enabled: true, and invokes it with commit: true; then
// the whole lineage reads back through GraphQL.
func TestTheBuildLoop(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		serverID := builderServer(env, "builder")
		s := env.Connect("builder", env.Token(principal, "alice"), rev)
		toolID := at.NewID()
		create := flagTool(brokenFlagSource)
		create["enabled"] = false
		res := callTool(t, s, "graphql", map[string]any{"intent": "Create the low-balance flag, disabled.",
			"query":     `mutation($id: ID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { version enabled } } }`,
			"variables": map[string]any{"id": toolID, "input": create}})
		if res.IsError || at.Dig(structured(res), "data", "actions", "createAction", "enabled") != false {
			t.Fatalf("createAction: %s", text(res))
		}
		input := map[string]any{"account": "acct-1", "balance": "12.50"}

		// 1. The stored, disabled version: it runs, and fails.
		res = invokeCall(t, s, map[string]any{"action_id": toolID, "input": input, "intent": "Preview the new flag."})
		failed := structured(res)
		if res.IsError || failed["status"] != "FAILED" || failed["output"] != nil || at.Dig(failed, "error", "code") != "action_failure" {
			t.Fatalf("the broken version's preview: %v %s", res.IsError, text(res))
		}
		message := at.Dig(failed, "error", "message").(string)
		if !strings.HasPrefix(message, "Traceback (most recent call last):") || !strings.Contains(message, "flag_low.star:3:") ||
			!strings.Contains(message, "in ratio") || !strings.Contains(message, "division by zero") {
			t.Errorf("the failure's message is not the tool's own traceback:\n%s", message)
		}
		if keysOf(failed) != "calls,error,execution_id,omitted_writes,status,unreadable_writes,writes" || len(failed["writes"].([]any)) != 0 {
			t.Errorf("a failed preview answers %s", asJSON(failed))
		}
		calls := failed["calls"].([]any)
		if len(calls) != 1 || at.Dig(calls[0], "name") != "graphql" || at.Dig(calls[0], "status") != "SUCCEEDED" || at.Dig(calls[0], "rolled_back") != true {
			t.Errorf("the failed preview's calls: %s", asJSON(calls))
		}

		// 2. A draft that runs but writes the wrong namespace.
		wrong := flagTool(wrongFlagSource)
		res = invokeCall(t, s, map[string]any{"action_id": toolID, "input": input, "draft": wrong, "intent": "Preview a first fix."})
		first := structured(res)
		if res.IsError || first["status"] != "SUCCEEDED" || at.Dig(index(first["writes"], 0), "key") != "scratch/acct-1" {
			t.Fatalf("the first draft: %v %s", res.IsError, text(res))
		}

		// 3. The draft that works.
		fixed := flagTool(flagSource)
		res = invokeCall(t, s, map[string]any{"action_id": toolID, "input": input, "draft": fixed, "intent": "Preview the second fix."})
		works := structured(res)
		wantOutput := map[string]any{"flagged": true, "balance": "12.50"}
		if res.IsError || works["status"] != "SUCCEEDED" || !jsonEqual(works["output"], wantOutput) {
			t.Fatalf("the working draft: %v %s", res.IsError, text(res))
		}
		if keysOf(works) != "calls,execution_id,omitted_writes,output,status,unreadable_writes,writes" {
			t.Errorf("a preview answers %s", keysOf(works))
		}
		wantRow := map[string]any{"table": "KVValue", "key": "alerts/acct-1", "value": map[string]any{"namespace": "alerts", "key": "acct-1", "value": map[string]any{"low": true}}}
		if writes := works["writes"].([]any); len(writes) != 1 || !jsonEqual(writes[0], wantRow) || works["unreadable_writes"] != float64(0) || works["omitted_writes"] != float64(0) {
			t.Errorf("the working draft's writes: %s", asJSON(works["writes"]))
		}
		for _, ns := range []string{"alerts", "scratch"} {
			if env.KV(ns, "acct-1") != nil {
				t.Errorf("a preview committed %s/acct-1", ns)
			}
		}
		if v := at.Dig(env.MustGraphQL(`query($id: ID!) { action(id: $id) { version enabled } }`, map[string]any{"id": toolID}), "action"); !jsonEqual(v, map[string]any{"version": 1, "enabled": false}) {
			t.Errorf("previewing drafts stored a version: %s", asJSON(v))
		}
		// commit: true runs only a published, enabled version.
		for _, args := range []map[string]any{{"action_id": toolID, "input": input, "commit": true}, {"action_id": toolID, "input": input, "commit": true, "draft": fixed}} {
			if res := invokeCall(t, s, args); !res.IsError || toolErrorCode(res) != "action_input_invalid" {
				t.Errorf("commit of a disabled version or a draft: %v %s", res.IsError, text(res))
			}
		}

		// 4. Publish the draft that worked, enabled.
		update := flagTool(flagSource)
		update["enabled"] = true
		res = callTool(t, s, "graphql", map[string]any{"intent": "Publish the fix that worked.",
			"query":     `mutation($id: ID!, $input: ActionUpdateInput!) { actions { updateAction(id: $id, input: $input) { version enabled } } }`,
			"variables": map[string]any{"id": toolID, "input": update}})
		if res.IsError || !jsonEqual(at.Dig(structured(res), "data", "actions", "updateAction"), map[string]any{"version": 2, "enabled": true}) {
			t.Fatalf("updateAction: %s", text(res))
		}

		// 5. Invoke it for real.
		res = invokeCall(t, s, map[string]any{"action_id": toolID, "input": input, "commit": true, "intent": "Flag the account for real."})
		committed := structured(res)
		if res.IsError || keysOf(committed) != "execution_id,output,status" || committed["status"] != "SUCCEEDED" || !jsonEqual(committed["output"], wantOutput) {
			t.Fatalf("the commit answered %v %s", res.IsError, text(res))
		}
		if v := env.KV("alerts", "acct-1"); !jsonEqual(v, map[string]any{"low": true}) {
			t.Errorf("the commit's write reads %s", asJSON(v))
		}

		// 6. The lineage: request → invoke call → tool → its calls.
		var invokes []map[string]any
		for _, request := range requests(env, serverID, "tools/call") {
			if at.Dig(request, "mcpRequest", "params", "name") != "invoke" {
				continue
			}
			invokes = append(invokes, request)
		}
		if len(invokes) != 6 {
			t.Fatalf("%d invoke requests recorded, want 6", len(invokes))
		}
		wantIntents := []string{"Preview the new flag.", "Preview a first fix.", "Preview the second fix.", "Check what the test built.", "Check what the test built.", "Flag the account for real."}
		answers := []map[string]any{failed, first, works, nil, nil, committed}
		for i, request := range invokes {
			if at.Dig(request, "mcpRequest", "intent") != wantIntents[i] {
				t.Errorf("invoke %d's intent is %v", i, at.Dig(request, "mcpRequest", "intent"))
			}
			invoke := request["calls"].([]any)[0].(map[string]any)
			if invoke["actionId"] != "native:invoke" {
				t.Fatalf("invoke %d's call is %s", i, invoke["actionId"])
			}
			if i == 3 || i == 4 {
				if invoke["status"] != "FAILED" || at.Dig(invoke, "error", "code") != "action_input_invalid" {
					t.Errorf("the refused invoke %d is recorded %s", i, asJSON(invoke))
				}
				continue
			}
			if invoke["status"] != "SUCCEEDED" || !jsonEqual(invoke["output"], answers[i]) {
				t.Errorf("invoke %d's call output %s, want what it answered", i, asJSON(invoke["output"]))
			}
			if i == 2 && !jsonEqual(at.Dig(invoke, "input", "draft"), fixed) {
				t.Errorf("the invoke call's input does not hold the draft in full: %s", asJSON(invoke["input"]))
			}
			tools := invoke["calls"].([]any)
			if len(tools) != 1 {
				t.Fatalf("invoke %d has %d calls", i, len(tools))
			}
			tool := env.Execution(tools[0].(map[string]any)["id"].(string))
			if tool["actionId"] != toolID || tool["parentId"] != invoke["id"] || tool["id"] != answers[i]["execution_id"] || tool["preview"] != (i < 3) {
				t.Errorf("invoke %d's tool execution: %s", i, asJSON(tool))
			}
			grand := tool["calls"].([]any)
			if len(grand) != 1 || at.Dig(grand[0], "actionName") != "graphql" || at.Dig(grand[0], "preview") != (i < 3) {
				t.Errorf("invoke %d's tool's calls: %s", i, asJSON(grand))
			}
			if i == 0 && at.Dig(grand[0], "rolledBackByExecutionId") != tool["id"] {
				t.Errorf("beneath the failed tool, its call is not rolled back by it: %s", asJSON(grand[0]))
			}
		}
		// draft and actionVersion of each invoked execution.
		read := func(id any) map[string]any {
			return env.MustGraphQL(`query($id: ID!) { execution(id: $id) { actionVersion draft preview } }`, map[string]any{"id": id})["execution"].(map[string]any)
		}
		if e := read(failed["execution_id"]); e["draft"] != nil || e["actionVersion"] != float64(1) {
			t.Errorf("the stored version's execution: %s", asJSON(e))
		}
		e := read(works["execution_id"])
		if e["actionVersion"] != float64(1) || at.Dig(e, "draft", "config", "source") != flagSource || at.Dig(index(at.Dig(e, "draft", "tools"), 0), "name") != "graphql" {
			t.Errorf("the draft's execution: %s", asJSON(e))
		}
		if e := read(committed["execution_id"]); e["draft"] != nil || e["actionVersion"] != float64(2) || e["preview"] != false {
			t.Errorf("the commit's execution: %s", asJSON(e))
		}
		// Finding previews.
		ids := func(where map[string]any) []string {
			var out []string
			for _, e := range env.ExecutionsWhere(where) {
				out = append(out, e["id"].(string))
			}
			return out
		}
		previews := ids(map[string]any{"actionId": toolID, "preview": true})
		wantPreviews := []string{failed["execution_id"].(string), first["execution_id"].(string), works["execution_id"].(string)}
		if !slices.Equal(previews, wantPreviews) {
			t.Errorf("executions(where: {actionId, preview: true}) lists %v, want %v", previews, wantPreviews)
		}
		if live := ids(map[string]any{"actionId": toolID, "preview": false}); !slices.Equal(live, []string{committed["execution_id"].(string)}) {
			t.Errorf("executions(where: {actionId, preview: false}) lists %v", live)
		}
		history := env.MustGraphQL(`query($id: ID!) { action(id: $id) { executions(where: {preview: false}) { edges { node { id } } } } }`, map[string]any{"id": toolID})
		if edges := at.Dig(history, "action", "executions", "edges").([]any); len(edges) != 1 || at.Dig(edges[0], "node", "id") != committed["execution_id"] {
			t.Errorf("action(id:) { executions(where: {preview: false}) } lists %s", asJSON(edges))
		}
		// A successful invoke call's output is a TOOL use of the request.
		lastRequest := invokes[5]
		invoke := lastRequest["calls"].([]any)[0].(map[string]any)
		found := false
		for _, use := range lastRequest["uses"].([]any) {
			found = found || (at.Dig(use, "kind") == "TOOL" && at.Dig(use, "executionId") == invoke["id"])
		}
		if !found {
			t.Errorf("the request's uses %s lack the invoke call", asJSON(lastRequest["uses"]))
		}
	})
}

// ACT-389, ACT-392, ACT-396, ACT-397, ACT-398, ACT-399, ACT-400, ACT-401,
// ACT-403, ACT-404, ACT-405, ACT-406, ACT-407, ACT-457, ACT-458: refused
// invocations. Each is a tool error, nothing runs, and the invoke call is
// recorded FAILED with the refusal: an action that does not exist and one
// the principal may not read, in the same words; one the server may not
// INVOKE, as stored or as drafted; a skill, an MCP server and an agent
// without a tool block; another version of a tool the server lists; a
// draft of another kind; and a draft using a native tool the server does
// not list, directly or through a skill, in the seed's sentence.
func TestRefusedInvocations(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		hiddenID, lockedID, skillID, listedID := at.NewID(), at.NewID(), at.NewID(), at.NewID()
		env.CreateAction(hiddenID, at.CELTool("hidden_tool", "1", nil))
		env.CreateAction(lockedID, at.CELTool("locked_tool", "2", nil))
		env.CreateAction(skillID, map[string]any{"name": "howto", "description": "How to.", "kind": "skill", "config": map[string]any{"instructions": "Do it."}})
		env.CreateAction(listedID, at.CELTool("listed", "event.data.n", at.Object(map[string]any{"n": at.Integer()})))
		env.UpdateAction(listedID, map[string]any{"config": map[string]any{"expression": "event.data.n + 100"}})
		scriptID := at.NewID()
		env.CreateAction(scriptID, at.StarlarkTool("scripted", "def run(event):\n    return 0\n", nil, nil))
		plainAgentID := at.NewID()
		env.CreateAction(plainAgentID, map[string]any{"name": "plain_agent", "description": "An agent without a tool block.", "kind": "agent", "config": map[string]any{},
			"agent": map[string]any{"instructions": "Help.", "model": map[string]any{"name": "m"}}})
		// The principal may not read hidden_tool; the server may not INVOKE locked_tool.
		env.PutPrincipal("reader", []map[string]any{at.Allow([]string{"*"}, "*"),
			{"effect": "DENY", "actions": []any{"SELECT"}, "resources": []any{"actions.Action"}, "assertions": map[string]any{"hidden": "context.document.name == 'hidden_tool'"}}})
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "narrow", Mode: "LIVE", Tools: []map[string]any{at.Ref("invoke"), at.RefPinned("listed", 1)},
			Policies: []map[string]any{at.Allow([]string{"*"}, "*"),
				{"effect": "DENY", "actions": []any{"INVOKE"}, "resources": []any{"actions.Action"}, "assertions": map[string]any{"locked": "context.document.name == 'locked_tool'"}},
				{"effect": "DENY", "actions": []any{"INVOKE"}, "resources": []any{"actions.Action"}, "assertions": map[string]any{"form": "context.document.description == 'A forbidden form.'"}}}}.Input())
		s := env.Connect("narrow", env.Token("reader", "alice"), rev)

		missing := at.NewID()
		cases := []struct {
			name string
			args map[string]any
			code string
			want string
		}{
			{"missing", map[string]any{"action_id": missing}, "action_not_found", "No action with ID " + missing + " exists that you can read."},
			{"unreadable", map[string]any{"action_id": hiddenID}, "action_not_found", "No action with ID " + hiddenID + " exists that you can read."},
			{"server may not invoke", map[string]any{"action_id": lockedID}, "ACCESS_DENIED", "INVOKE on actions.Action is denied by the server's policies"},
			{"a skill", map[string]any{"action_id": skillID}, "action_not_runnable", "howto is of kind skill, which cannot be invoked."},
			{"an MCP server", map[string]any{"action_id": serverID}, "action_not_runnable", "narrow is of kind mcp, which cannot be invoked."},
			{"an agent without a tool block", map[string]any{"action_id": plainAgentID}, "action_not_runnable", "plain_agent is an agent without a tool block"},
			{"another version of a listed tool", map[string]any{"action_id": listedID, "version": 2}, "action_input_invalid", "runs its version 1"},
			{"a draft of another kind", map[string]any{"action_id": listedID, "draft": at.StarlarkTool("listed", "def run(event):\n    return 1\n", nil, nil)},
				"action_input_invalid", "A draft keeps its action's kind"},
			{"a draft of an action the server may not INVOKE", map[string]any{"action_id": lockedID, "draft": at.CELTool("locked_tool", "3", nil)},
				"ACCESS_DENIED", "INVOKE on actions.Action is denied by the server's policies"},
		}
		for _, c := range cases {
			res := invokeCall(t, s, c.args)
			if !res.IsError || toolErrorCode(res) != c.code || !strings.Contains(text(res), c.want) {
				t.Errorf("%s: answered %v %s %s, want %s naming %q", c.name, res.IsError, toolErrorCode(res), text(res), c.code, c.want)
				continue
			}
			invoke := last(t, requests(env, serverID, "tools/call"))["calls"].([]any)[0].(map[string]any)
			if invoke["actionId"] != "native:invoke" || invoke["status"] != "FAILED" || at.Dig(invoke, "error", "code") != c.code || len(invoke["calls"].([]any)) != 0 {
				t.Errorf("%s: the refused invoke is recorded %s", c.name, asJSON(invoke))
			}
		}
		// A draft of a native tool's kind, or whose tools name a native
		// tool, that the server does not list.
		res := invokeCall(t, s, map[string]any{"action_id": listedID, "draft": at.CELTool("listed", "event.data.n", nil)})
		if !res.IsError || toolErrorCode(res) != "action_input_invalid" || !strings.Contains(text(res), "the definition uses the native tool cel, which this server does not offer") {
			t.Errorf("a draft of kind cel: %v %s", res.IsError, text(res))
		}
		res = invokeCall(t, s, map[string]any{"action_id": scriptID, "draft": at.StarlarkTool("scripted", "def run(event):\n    return 1\n", nil, []map[string]any{at.Ref("graphql")})})
		if !res.IsError || toolErrorCode(res) != "action_input_invalid" || !strings.Contains(text(res), "the definition uses the native tool graphql, which this server does not offer") {
			t.Errorf("a draft declaring graphql: %v %s", res.IsError, text(res))
		}
		// ACT-401: INVOKE is checked on the action as the draft would store it.
		forbidden := at.StarlarkTool("scripted", "def run(event):\n    return 2\n", nil, nil)
		forbidden["description"] = "A forbidden form."
		res = invokeCall(t, s, map[string]any{"action_id": scriptID, "draft": forbidden})
		if !res.IsError || toolErrorCode(res) != "ACCESS_DENIED" {
			t.Errorf("a draft whose form the server may not INVOKE: %v %s %s", res.IsError, toolErrorCode(res), text(res))
		}
		if res := invokeCall(t, s, map[string]any{"action_id": scriptID}); res.IsError || structured(res)["status"] != "SUCCEEDED" {
			t.Errorf("the stored form: %v %s", res.IsError, text(res))
		}
		// ACT-398, ACT-406: a draft whose skills make available a native
		// tool the server does not list, or a tool it may not INVOKE.
		for name, tool := range map[string]string{"uses-graphql": "graphql", "uses-locked": "locked_tool"} {
			env.CreateAction(at.NewID(), map[string]any{"name": name, "description": "How to use " + tool + ".", "kind": "skill",
				"config": map[string]any{"instructions": "Use " + tool + "."}, "tools": []map[string]any{at.Ref(tool)}})
		}
		skilledID := at.NewID()
		env.CreateAction(skilledID, at.AgentSpec{Name: "skilled_agent", Model: "m"}.Input())
		for skill, want := range map[string]string{"uses-graphql": "the definition uses the native tool graphql, which this server does not offer", "uses-locked": "locked_tool"} {
			draft := at.AgentSpec{Name: "skilled_agent", Model: "m"}.Input()
			draft["skills"] = []map[string]any{{"name": skill}}
			res := invokeCall(t, s, map[string]any{"action_id": skilledID, "draft": draft})
			if !res.IsError || !strings.Contains(text(res), want) {
				t.Errorf("a draft with the skill %s: %v %s %s", skill, res.IsError, toolErrorCode(res), text(res))
			}
		}
		// ACT-397: a draft whose tools name one the server may not INVOKE.
		res = invokeCall(t, s, map[string]any{"action_id": scriptID, "draft": at.StarlarkTool("scripted", "def run(event):\n    return tools.locked_tool({})\n", nil, []map[string]any{at.Ref("locked_tool")})})
		if !res.IsError || toolErrorCode(res) != "ACCESS_DENIED" || !strings.Contains(text(res), "locked_tool") {
			t.Errorf("a draft referencing a tool the server may not INVOKE: %v %s %s", res.IsError, toolErrorCode(res), text(res))
		}
		if executions := env.Executions(scriptID); len(executions) != 1 {
			t.Errorf("the refused drafts ran, or the stored version did not: %s", asJSON(executions))
		}
		if len(env.Executions(listedID)) != 0 {
			t.Errorf("a refused invocation ran the tool: %s", asJSON(env.Executions(listedID)))
		}
	})
}

// ACT-390, ACT-391, ACT-402, ACT-410: invoke never goes around the server's
// reference: the version it pins runs, its fixed input applies in both
// modes and to a draft, and a draft's call of a tool the server lists goes
// through that reference too.
func TestInvokeGoesThroughTheServersReference(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		listedID, callerID := at.NewID(), at.NewID()
		env.CreateAction(listedID, at.CELTool("echo", "{'n': event.data.n, 'v': 1}", at.Object(map[string]any{"n": at.Integer()})))
		env.UpdateAction(listedID, map[string]any{"config": map[string]any{"expression": "{'n': event.data.n, 'v': 2}"}})
		env.CreateAction(at.NewID(), at.CELTool("other", "{'other': true}", nil))
		env.CreateAction(callerID, at.StarlarkTool("caller", "def run(event):\n    return tools.echo({\"n\": 5})\n", nil, []map[string]any{at.Ref("echo")}))
		builderServer(env, "pinned", map[string]any{"name": "echo", "version": 1, "input": map[string]any{"n": "7"}})
		s := env.Connect("pinned", env.Token(principal, "alice"), rev)
		source := "def run(event):\n    return tools.echo({\"n\": 5})\n"
		cases := []struct {
			name string
			args map[string]any
			want map[string]any
		}{
			{"a listed tool's preview", map[string]any{"action_id": listedID, "input": map[string]any{"n": 5}}, map[string]any{"n": 7, "v": 1}},
			{"a listed tool's commit", map[string]any{"action_id": listedID, "input": map[string]any{"n": 5}, "commit": true}, map[string]any{"n": 7, "v": 1}},
			{"a listed tool's draft", map[string]any{"action_id": listedID, "input": map[string]any{"n": 5},
				"draft": at.CELTool("echo", "{'n': event.data.n, 'v': 3}", at.Object(map[string]any{"n": at.Integer()}))}, map[string]any{"n": 7, "v": 3}},
			{"a stored tool calling a listed one, as it would when called", map[string]any{"action_id": callerID}, map[string]any{"n": 5, "v": 2}},
			{"a draft calling a listed tool", map[string]any{"action_id": callerID, "draft": at.StarlarkTool("caller", source, nil, []map[string]any{at.Ref("echo")})}, map[string]any{"n": 7, "v": 1}},
			{"a draft calling a listed tool it does not declare", map[string]any{"action_id": callerID, "draft": at.StarlarkTool("caller", source, nil, nil)}, map[string]any{"n": 7, "v": 1}},
			// ACT-411, ACT-412: and one the server does not list, through its own reference.
			{"a draft calling an unlisted tool", map[string]any{"action_id": callerID, "draft": at.StarlarkTool("caller", "def run(event):\n    return tools.other({})\n", nil, []map[string]any{at.Ref("other")})},
				map[string]any{"other": true}},
		}
		for _, c := range cases {
			res := invokeCall(t, s, c.args)
			if got := structured(res); res.IsError || got["status"] != "SUCCEEDED" || !jsonEqual(got["output"], c.want) {
				t.Errorf("%s: %v %s, want output %s", c.name, res.IsError, text(res), asJSON(c.want))
			}
		}
	})
}

// ACT-384, ACT-413, ACT-414, ACT-415, ACT-416, ACT-421, ACT-464: nothing a preview commits. A
// draft that reads a value reads it for real; one that calls createAction
// publishes nothing; its calls are preview, each with its write set. On a
// PREVIEW server, commit: true commits nothing either.
func TestNothingAPreviewCommits(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		makerID := at.NewID()
		env.CreateAction(makerID, at.StarlarkTool("maker", "def run(event):\n    return 0\n", nil, []map[string]any{at.Ref("graphql")}))
		env.MustGraphQL(`mutation($v: JSON!) { kv { put(namespace: "live", key: "k", value: $v) { key } } }`, map[string]any{"v": map[string]any{"n": 3}})
		builderServer(env, "makers")
		s := env.Connect("makers", env.Token(principal, "alice"), rev)
		madeID := at.NewID()
		draft := at.StarlarkTool("maker", `
def run(event):
    seen = graphql("query { kv { value(namespace: \"live\", key: \"k\") { value } } }")
    graphql("mutation($id: ID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { version } } }",
            variables = {"id": event["data"]["id"], "input": {"name": "made", "kind": "cel", "description": "Made in a preview.", "config": {"expression": "1"}, "tool": {"inputSchema": {"type": "object"}}}})
    return {"seen": seen["kv"]["value"]["value"]["n"]}
`, at.Object(map[string]any{"id": at.String()}), []map[string]any{at.Ref("graphql")})
		res := invokeCall(t, s, map[string]any{"action_id": makerID, "input": map[string]any{"id": madeID}, "draft": draft})
		got := structured(res)
		if res.IsError || got["status"] != "SUCCEEDED" || !jsonEqual(got["output"], map[string]any{"seen": 3}) {
			t.Fatalf("the draft's preview: %v %s", res.IsError, text(res))
		}
		if resp := env.GraphQL(`query($id: ID!) { action(id: $id) { id } }`, map[string]any{"id": madeID}); !strings.Contains(string(resp.Data), "null") {
			t.Errorf("a createAction inside a preview published %s", resp.Data)
		}
		invoked := env.Execution(got["execution_id"].(string))
		for _, c := range invoked["calls"].([]any) {
			if at.Dig(c, "preview") != true {
				t.Errorf("a call beneath the preview is not preview: %s", asJSON(c))
			}
		}
		if ws, _ := at.Dig(index(invoked["calls"], 1), "writeSet").([]any); len(ws) == 0 {
			t.Errorf("the preview's createAction call keeps no write set: %s", asJSON(invoked["calls"]))
		}

		// A PREVIEW server: commit: true commits nothing either.
		writerID := at.NewID()
		env.CreateAction(writerID, at.StarlarkTool("writer", `
def run(event):
    graphql("mutation { kv { put(namespace: \"rehearsed\", key: \"k\", value: 1) { key } } }")
    return "wrote"
`, nil, []map[string]any{at.Ref("graphql")}))
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "rehearsal", Policies: at.Everything(), Tools: []map[string]any{at.Ref("invoke")}}.Input())
		rehearsal := env.Connect("rehearsal", env.Token(principal, "alice"), rev)
		res = invokeCall(t, rehearsal, map[string]any{"action_id": writerID, "commit": true})
		if got := structured(res); res.IsError || got["status"] != "SUCCEEDED" || at.Dig(map[string]any(res.Meta), "com.twisp/preview") != true {
			t.Errorf("commit on a PREVIEW server: %v %s %s", res.IsError, text(res), asJSON(res.Meta))
		}
		if env.KV("rehearsed", "k") != nil {
			t.Error("commit: true on a PREVIEW server committed")
		}
		if e := env.Execution(structured(res)["execution_id"].(string)); e["preview"] != true || len(e["calls"].([]any)) != 1 {
			t.Errorf("the execution on a PREVIEW server: %s", asJSON(e))
		}
	})
}

// previewHint is the seed's sentence for a previewed agent's task
// ("Invoking an agent").
const previewHint = "It runs on its own, and nothing it does is committed. Read it with get_task, passing task_id, every poll_interval_ms, or with tasks/get when your client has the Tasks extension."

// ACT-137, ACT-201, ACT-204, ACT-388, ACT-420, ACT-444, ACT-445, ACT-446, ACT-447, ACT-448, ACT-450, ACT-453, ACT-454, ACT-455, ACT-465, ACT-469, ACT-470, ACT-471, ACT-473:
// invoke starts a callable agent as a task and answers at once, in both
// modes. To a client without the Tasks extension, a preview answers with
// task_id, working, poll_interval_ms 5000 and the preview hint; the task
// is started by the request (its START edge), is preview, its calls' writes
// are discarded and kept in their write sets, and get_task reads its
// result. A draft agent runs the draft, recorded on the task's execution. A
// client with the extension gets the task itself, and a commit's writes
// commit.
func TestInvokeStartsAnAgentAsATask(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		// The writer, except that for fail-1 the model refuses the
		// second turn, which does not pass on a retry.
		script := writer(g)
		env, _ := taskEnv(t, d, at.Options{}, func(x modeltest.Exchange) modeltest.Reply {
			if x.Input()["k"] == "fail-1" && x.Turn() > 1 {
				return modeltest.Reply{Status: 400, ErrorType: "invalid_request_error"}
			}
			return script(x)
		})
		agentID := at.NewID()
		spec := at.AgentSpec{Name: "writer", Model: "writer", InputSchema: at.Object(map[string]any{"k": at.String()}, "k"),
			Tools: []map[string]any{at.Ref("stamp")}, Policies: at.Everything()}
		env.CreateAction(agentID, spec.Input())
		serverID := builderServer(env, "agent-desk", at.Ref("get_task"), at.Ref("cancel_task"))
		s := env.Connect("agent-desk", env.Token(principal, "alice"), at.Revision2026)

		res := invokeCall(t, s, map[string]any{"action_id": agentID, "input": map[string]any{"k": "preview-1"}})
		answer := structured(res)
		if res.IsError || keysOf(answer) != "hint,poll_interval_ms,status,task_id" || answer["status"] != "working" ||
			answer["poll_interval_ms"] != float64(5000) || answer["hint"] != previewHint {
			t.Fatalf("invoke of an agent answered %v %s", res.IsError, text(res))
		}
		taskID := answer["task_id"].(string)
		request := last(t, requests(env, serverID, "tools/call"))
		invoke := request["calls"].([]any)[0].(map[string]any)
		if invoke["actionId"] != "native:invoke" || at.Dig(invoke, "output", "task_id") != taskID {
			t.Errorf("the invoke call's output does not name the task: %s", asJSON(invoke))
		}
		g.open("preview-1")
		task := waitExecution(t, env, taskID, "SUCCEEDED")
		if at.Dig(task, "startedBy", "executionId") != request["id"] || task["preview"] != true || task["actionId"] != agentID || task["role"] != "task" {
			t.Errorf("the task's execution: %s", asJSON(task))
		}
		stamped := false
		for _, c := range task["calls"].([]any) {
			if at.Dig(c, "actionName") != "stamp" {
				continue
			}
			stamped = true
			if ws, _ := at.Dig(c, "writeSet").([]any); at.Dig(c, "preview") != true || len(ws) != 1 {
				t.Errorf("the preview agent's stamp call: %s", asJSON(c))
			}
		}
		if !stamped || env.KV("tasks", "preview-1") != nil {
			t.Errorf("the preview agent stamped %v, committed %v", stamped, env.KV("tasks", "preview-1"))
		}
		read := callTool(t, s, "get_task", map[string]any{"task_id": taskID, "intent": "Read the agent's result."})
		if read.IsError || !strings.Contains(text(read), "done preview-1") {
			t.Errorf("get_task of the finished agent: %v %s", read.IsError, text(read))
		}
		// ACT-204: get_task's intent is the request's stated intent.
		if got := at.Dig(last(t, requests(env, serverID, "tools/call")), "mcpRequest", "intent"); got != "Read the agent's result." {
			t.Errorf("the get_task request recorded intent %v", got)
		}
		// ACT-454, ACT-455: only the session that started it reads it.
		other := env.Connect("agent-desk", env.Token(principal, "bob"), at.Revision2026)
		if res := callTool(t, other, "get_task", map[string]any{"task_id": taskID, "intent": "Read another's task."}); !res.IsError || toolErrorCode(res) != "mcp_task_not_found" {
			t.Errorf("get_task from another session: %v %s %s", res.IsError, toolErrorCode(res), text(res))
		}

		// ACT-473: an invoked agent that fails keeps its calls, rolled back.
		res = invokeCall(t, s, map[string]any{"action_id": agentID, "input": map[string]any{"k": "fail-1"}, "commit": true})
		failedTask := structured(res)["task_id"].(string)
		waitExecution(t, env, failedTask, "FAILED")
		kept := 0
		for _, c := range env.Execution(failedTask)["calls"].([]any) {
			if at.Dig(c, "actionName") == "stamp" {
				kept++
				if at.Dig(c, "rolledBackByExecutionId") != failedTask {
					t.Errorf("the failed agent's call: %s", asJSON(c))
				}
			}
		}
		if kept != 1 || env.KV("tasks", "fail-1") != nil {
			t.Errorf("the failed agent kept %d stamp calls; its write %v", kept, env.KV("tasks", "fail-1"))
		}

		// A draft agent: its definition is recorded on the task.
		draft := spec
		draft.Instructions = "You are the drafted writer."
		res = invokeCall(t, s, map[string]any{"action_id": agentID, "input": map[string]any{"k": "draft-1"}, "draft": draft.Input()})
		if res.IsError {
			t.Fatalf("invoke of a draft agent: %s", text(res))
		}
		draftTask := structured(res)["task_id"].(string)
		g.open("draft-1")
		waitExecution(t, env, draftTask, "SUCCEEDED")
		drafted := env.MustGraphQL(`query($id: ID!) { execution(id: $id) { actionVersion draft preview } }`, map[string]any{"id": draftTask})["execution"]
		if at.Dig(drafted, "draft", "agent", "instructions") != "You are the drafted writer." || at.Dig(drafted, "actionVersion") != float64(1) || at.Dig(drafted, "preview") != true {
			t.Errorf("the draft agent's execution: %s", asJSON(drafted))
		}
		if env.KV("tasks", "draft-1") != nil {
			t.Error("a draft agent's preview committed its write")
		}

		// With the extension, the task itself; a commit commits.
		ts := env.ConnectTasks("agent-desk", env.Token(principal, "alice"), at.Revision2026, true)
		created, raw := ts.CallForTask(t, "invoke", map[string]any{"action_id": agentID, "input": map[string]any{"k": "commit-1"}, "commit": true, "intent": "Run the agent for real."})
		if created == nil || created.Status != mcpkit.TaskWorking {
			t.Fatalf("invoke with the extension answered %s", asJSON(raw))
		}
		g.open("commit-1")
		done := ts.WaitTask(t, created.TaskID, taskWait, mcpkit.TaskCompleted, mcpkit.TaskFailed)
		if done.Status != mcpkit.TaskCompleted || !jsonEqual(env.KV("tasks", "commit-1"), map[string]any{"stamped": true}) {
			t.Errorf("the committed agent: %s, its write %v", asJSON(done), env.KV("tasks", "commit-1"))
		}
		if e := env.Execution(created.TaskID); e["preview"] != false {
			t.Errorf("the committed agent's execution is preview")
		}

		// A client that could not read the task: invoke starts nothing.
		started := len(tasksOf(env, agentID))
		builderServer(env, "taskless")
		res = invokeCall(t, env.Connect("taskless", env.Token(principal, "alice"), at.Revision2026), map[string]any{"action_id": agentID, "input": map[string]any{"k": "never"}})
		if !res.IsError || toolErrorCode(res) != "mcp_task_required" || len(tasksOf(env, agentID)) != started {
			t.Errorf("invoke of an agent for a client that cannot read tasks: %v %s %s", res.IsError, toolErrorCode(res), text(res))
		}
	})
}

// probeSource catches a failing call, writes a row the limited principal
// may read, one it may not, deletes one, writes rows past the preview's
// size limit, and fails when asked.
const probeSource = `
def run(event):
    missing = tools.refuse({}, check = False)
    graphql("mutation { kv { put(namespace: \"p\", key: \"open\", value: 1) { key } } }")
    graphql("mutation { kv { put(namespace: \"p\", key: \"hidden-x\", value: 2) { key } } }")
    graphql("mutation { kv { delete(namespace: \"p\", key: \"old\") { key } } }")
    big = "y" * 100000
    for i in range(4):
        graphql("mutation($k: String!, $v: JSON!) { kv { put(namespace: \"p\", key: $k, value: $v) { key } } }", variables = {"k": "big%d" % i, "v": big})
    if event["data"].get("fail"):
        fail("asked to fail")
    return {"caught": missing["error"]["code"]}
`

// ACT-387, ACT-394, ACT-409, ACT-410, ACT-424, ACT-427, ACT-428, ACT-429, ACT-430, ACT-431, ACT-432, ACT-440,
// ACT-441: what an invoked tool answers. A preview lists the tool's direct
// calls in order, a failed one with its error; counts the rows the
// principal may not read, deleted rows, and rows past the size limit;
// after a failure, every call is rolled_back. The whole tree reads back by
// execution_id. A tool of kind graphql or cel answers at once. A denial,
// by the server's policies or by the tool's own narrower ones, is the
// tool's failure naming the operation, the resource and the layer; a
// tool past its own response timeout FAILED, not the request; a draft's
// graphql() through a server that does not list it, tool_not_declared in
// the result.
func TestInvokedToolResults(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		env.CreateAction(at.NewID(), at.StarlarkTool("refuse", refuseSource, nil, nil))
		probeID := at.NewID()
		env.CreateAction(probeID, at.StarlarkTool("probe", probeSource, at.Object(map[string]any{"fail": map[string]any{"type": "boolean"}}), []map[string]any{at.Ref("refuse"), at.Ref("graphql")}))
		env.MustGraphQL(`mutation { kv { put(namespace: "p", key: "old", value: 0) { key } } }`, nil)
		env.PutPrincipal("limited", []map[string]any{at.Allow([]string{"*"}, "*"), hiddenKeys})
		builderServer(env, "probing")
		s := env.Connect("probing", env.Token("limited", "bob"), rev)

		var invokeSchema map[string]any
		for _, tool := range listTools(t, s).Tools {
			if tool.Name == "invoke" {
				invokeSchema = asMap(tool.InputSchema)
			}
		}
		if props := asMap(invokeSchema["properties"]); props["action_id"] == nil || props["input"] == nil || props["intent"] == nil || props["commit"] == nil || props["draft"] == nil {
			t.Errorf("invoke's inputSchema: %s", asJSON(invokeSchema))
		}

		res := invokeCall(t, s, map[string]any{"action_id": probeID})
		got := structured(res)
		if res.IsError || got["status"] != "SUCCEEDED" || !jsonEqual(got["output"], map[string]any{"caught": "action_failure"}) {
			t.Fatalf("the probe's preview: %v %s", res.IsError, text(res))
		}
		calls := got["calls"].([]any)
		if len(calls) != 8 || at.Dig(calls[0], "name") != "refuse" || at.Dig(calls[0], "status") != "FAILED" ||
			at.Dig(calls[0], "error", "code") != "action_failure" || !strings.Contains(at.Dig(calls[0], "error", "message").(string), "refused on purpose") {
			t.Errorf("the preview's calls: %s", asJSON(calls))
		}
		for _, c := range calls[1:] {
			if at.Dig(c, "name") != "graphql" || at.Dig(c, "status") != "SUCCEEDED" || at.Dig(c, "error") != nil || at.Dig(c, "rolled_back") != nil {
				t.Errorf("a call of the preview: %s", asJSON(c))
			}
		}
		var keys []string
		for _, w := range got["writes"].([]any) {
			keys = append(keys, at.Dig(w, "key").(string))
		}
		omitted, _ := got["omitted_writes"].(float64)
		if !slices.Contains(keys, "p/open") || slices.Contains(keys, "p/hidden-x") || slices.Contains(keys, "p/old") || got["unreadable_writes"] != float64(2) ||
			omitted < 1 || len(keys)+int(omitted) != 5 || strings.Contains(text(res), "\"value\":2") {
			t.Errorf("the preview's writes %v, unreadable %v, omitted %v", keys, got["unreadable_writes"], got["omitted_writes"])
		}
		// The whole tree, by execution_id: the tool, its calls, and the
		// failed refuse's own record.
		tree := env.Execution(got["execution_id"].(string))
		if tree["actionId"] != probeID || len(tree["calls"].([]any)) != 8 || at.Dig(index(tree["calls"], 0), "status") != "FAILED" {
			t.Errorf("the tree read by execution_id: %s", asJSON(tree))
		}

		// Failed: every call rolled back.
		res = invokeCall(t, s, map[string]any{"action_id": probeID, "input": map[string]any{"fail": true}})
		failed := structured(res)
		if res.IsError || failed["status"] != "FAILED" || len(failed["writes"].([]any)) != 0 || failed["unreadable_writes"] != float64(0) {
			t.Fatalf("the failed probe: %v %s", res.IsError, text(res))
		}
		for _, c := range failed["calls"].([]any) {
			if at.Dig(c, "rolled_back") != true {
				t.Errorf("a call of the failed tool is not rolled_back: %s", asJSON(c))
			}
		}
		for _, c := range env.Execution(failed["execution_id"].(string))["calls"].([]any) {
			if at.Dig(c, "rolledBackByExecutionId") != failed["execution_id"] {
				t.Errorf("beneath the failed tool: %s", asJSON(c))
			}
		}

		// Kinds graphql and cel answer at once.
		gqlID, celID := at.NewID(), at.NewID()
		env.CreateAction(gqlID, map[string]any{"name": "read_old", "description": "Reads p/old.", "kind": "graphql",
			"config": map[string]any{"document": `query { kv { value(namespace: "p", key: "old") { value } } }`}, "tool": map[string]any{"inputSchema": at.Object(map[string]any{})}})
		env.CreateAction(celID, at.CELTool("sum", "{'sum': 1 + 2}", nil))
		for id, want := range map[string]any{gqlID: map[string]any{"kv": map[string]any{"value": map[string]any{"value": 0}}}, celID: map[string]any{"sum": 3}} {
			res := invokeCall(t, s, map[string]any{"action_id": id})
			if got := structured(res); res.IsError || got["status"] != "SUCCEEDED" || !jsonEqual(got["output"], want) {
				t.Errorf("invoke of %s: %v %s", id, res.IsError, text(res))
			}
		}

		// Denials: the server's, and the tool's own narrower policies.
		guardedID, narrowID := at.NewID(), at.NewID()
		write := "def run(event):\n    graphql(\"mutation { kv { put(namespace: \\\"p\\\", key: \\\"w\\\", value: 1) { key } } }\")\n"
		env.CreateAction(guardedID, at.StarlarkTool("writes", write, nil, []map[string]any{at.Ref("graphql")}))
		env.CreateAction(narrowID, at.StarlarkTool("narrow_writes", write, nil, []map[string]any{at.Ref("graphql")}, at.Allow([]string{"SELECT"}, "*")))
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "guarded", Mode: "LIVE", Tools: []map[string]any{at.Ref("invoke"), at.Ref("graphql")},
			Policies: []map[string]any{at.Allow([]string{"*"}, "*"), at.Deny([]string{"INSERT", "UPDATE"}, "financial.KVValue")}}.Input())
		guarded := env.Connect("guarded", env.Token(principal, "alice"), rev)
		for id, layer := range map[string]string{guardedID: "server's policies", narrowID: "tool's"} {
			res := invokeCall(t, guarded, map[string]any{"action_id": id})
			if id == narrowID {
				res = invokeCall(t, s, map[string]any{"action_id": id})
			}
			got := structured(res)
			message, _ := at.Dig(got, "error", "message").(string)
			if res.IsError || got["status"] != "FAILED" || at.Dig(got, "error", "code") != "ACCESS_DENIED" || !strings.Contains(message, "INSERT on financial.KVValue") || !strings.Contains(message, layer) {
				t.Errorf("a denial by the %s: %v %s", layer, res.IsError, text(res))
			}
		}

		// A tool past its own response timeout: FAILED, the request answered.
		defineGate(env)
		slow := at.StarlarkTool("slow_gate", gateSource, at.Object(map[string]any{"key": at.String()}, "key"), []map[string]any{at.Ref("spin"), at.Ref("graphql")})
		slow["execution"] = map[string]any{"responseTimeout": "1s"}
		slowID := at.NewID()
		env.CreateAction(slowID, slow)
		res = invokeCall(t, s, map[string]any{"action_id": slowID, "input": map[string]any{"key": gateKey(t)}})
		if got := structured(res); res.IsError || got["status"] != "FAILED" || at.Dig(got, "error", "code") != "action_timeout" {
			t.Errorf("a tool past its own timeout: %v %s", res.IsError, text(res))
		}

		// A draft's graphql() through a server that does not list graphql.
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "nographql", Mode: "LIVE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("invoke")}}.Input())
		bare := env.Connect("nographql", env.Token(principal, "alice"), rev)
		res = invokeCall(t, bare, map[string]any{"action_id": guardedID, "draft": at.StarlarkTool("writes", write, nil, nil)})
		if got := structured(res); res.IsError || got["status"] != "FAILED" || at.Dig(got, "error", "code") != "tool_not_declared" {
			t.Errorf("a draft's graphql() on a server without graphql: %v %s", res.IsError, text(res))
		}
	})
}

// ACT-193, ACT-456, ACT-478: agent runs started by invoke count against the
// session's and the user's 32 unfinished tasks together with those a
// tools/call started: after 16 of each, the 33rd of either kind is
// start_limit and starts nothing.
// A read that returns an invoked agent's output records a use of its
// execution.
func TestInvokedAgentsCountAgainstTheTaskLimit(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, _ := taskEnv(t, d, at.Options{}, writer(g))
		agentID := at.NewID()
		env.CreateAction(agentID, at.AgentSpec{Name: "writer", Model: "writer", InputSchema: at.Object(map[string]any{"k": at.String()}, "k"),
			Tools: []map[string]any{at.Ref("stamp")}, Policies: at.Everything()}.Input())
		serverID := builderServer(env, "busy", at.Ref("get_task"), at.Ref("cancel_task"), at.Ref("writer"))
		s := env.Connect("busy", env.Token(principal, "alice"), at.Revision2026)
		for i := range 16 {
			res := callTool(t, s, "writer", map[string]any{"k": fmt.Sprintf("called-%d", i), "intent": "Start the writer."})
			if res.IsError {
				t.Fatalf("tools/call %d: %s", i, text(res))
			}
		}
		var first string
		for i := range 16 {
			res := invokeCall(t, s, map[string]any{"action_id": agentID, "input": map[string]any{"k": fmt.Sprintf("busy-%d", i)}})
			if res.IsError {
				t.Fatalf("invoke %d: %s", i, text(res))
			}
			if i == 0 {
				first = structured(res)["task_id"].(string)
			}
		}
		if n := len(tasksOf(env, agentID)); n != 32 {
			t.Fatalf("%d tasks after 16 tools/call and 16 invoke starts, want 32", n)
		}
		res := invokeCall(t, s, map[string]any{"action_id": agentID, "input": map[string]any{"k": "one-too-many"}})
		if !res.IsError || toolErrorCode(res) != "start_limit" || len(tasksOf(env, agentID)) != 32 {
			t.Errorf("the 33rd start, an invoke: %v %s %s, %d tasks", res.IsError, toolErrorCode(res), text(res), len(tasksOf(env, agentID)))
		}
		res = callTool(t, s, "writer", map[string]any{"k": "one-too-many", "intent": "Start the writer once more."})
		if !res.IsError || toolErrorCode(res) != "start_limit" || len(tasksOf(env, agentID)) != 32 {
			t.Errorf("the 33rd start, a tools/call: %v %s %s, %d tasks", res.IsError, toolErrorCode(res), text(res), len(tasksOf(env, agentID)))
		}

		// The workers may all be holding tools/call starts: let those end.
		for i := range 16 {
			g.open(fmt.Sprintf("called-%d", i))
		}
		g.open("busy-0")
		waitExecution(t, env, first, "SUCCEEDED")
		read := callTool(t, s, "get_task", map[string]any{"task_id": first, "intent": "Read the first agent's result."})
		if read.IsError || !strings.Contains(text(read), "done busy-0") {
			t.Fatalf("get_task: %v %s", read.IsError, text(read))
		}
		poll := last(t, requests(env, serverID, "tools/call"))
		used := false
		for _, use := range poll["uses"].([]any) {
			used = used || at.Dig(use, "executionId") == first
		}
		if !used {
			t.Errorf("the read of the agent's output records uses %s", asJSON(poll["uses"]))
		}
	})
}

// ACT-394, ACT-449: an invoked agent runs under the principal and the
// server's policies, then its own: its policies allow everything, the
// server's deny writing KV rows, and its stamp call is denied by the
// server's layer.
func TestInvokedAgentRunsUnderTheServersPolicies(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, _ := taskEnv(t, d, at.Options{}, writer(g))
		agentID := at.NewID()
		env.CreateAction(agentID, at.AgentSpec{Name: "writer", Model: "writer", InputSchema: at.Object(map[string]any{"k": at.String()}, "k"),
			Tools: []map[string]any{at.Ref("stamp")}, Policies: at.Everything()}.Input())
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "guarded", Mode: "LIVE", Tools: []map[string]any{at.Ref("invoke"), at.Ref("get_task"), at.Ref("cancel_task")},
			Policies: []map[string]any{at.Allow([]string{"*"}, "*"), at.Deny([]string{"INSERT", "UPDATE"}, "financial.KVValue")}}.Input())
		s := env.Connect("guarded", env.Token(principal, "alice"), at.Revision2026)
		res := invokeCall(t, s, map[string]any{"action_id": agentID, "input": map[string]any{"k": "guarded-1"}, "commit": true})
		if res.IsError {
			t.Fatalf("invoke: %s", text(res))
		}
		taskID := structured(res)["task_id"].(string)
		g.open("guarded-1")
		task := waitExecution(t, env, taskID, "SUCCEEDED")
		denied := false
		for _, c := range task["calls"].([]any) {
			if at.Dig(c, "actionName") == "stamp" {
				message, _ := at.Dig(c, "error", "message").(string)
				denied = at.Dig(c, "status") == "FAILED" && strings.Contains(message, "INSERT on financial.KVValue is denied by the server's policies")
			}
		}
		if !denied || env.KV("tasks", "guarded-1") != nil {
			t.Errorf("the agent's stamp under the server's policies: %s; its write %v", asJSON(task["calls"]), env.KV("tasks", "guarded-1"))
		}
	})
}
