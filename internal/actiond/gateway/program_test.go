package gateway_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/engine"
)

// kvPutSource writes event["data"]["value"] at p/<key> through graphql().
const kvPutSource = `
def run(event):
    d = event["data"]
    graphql("mutation($k: String!, $v: JSON!) { kv { put(namespace: \"p\", key: $k, value: $v) { key } } }", variables = {"k": d["key"], "v": d["value"]})
    return {"key": d["key"]}
`

// kvDeleteSource deletes p/<key>.
const kvDeleteSource = `
def run(event):
    graphql("mutation($k: String!) { kv { delete(namespace: \"p\", key: $k) { key } } }", variables = {"k": event["data"]["key"]})
    return {"deleted": event["data"]["key"]}
`

// refuseSource always fails.
const refuseSource = `
def run(event):
    fail("refused on purpose")
`

// programTools defines the tools the program tests call: kv_put, kv_delete
// and refuse.
func programTools(env *at.Env) {
	keyed := at.Object(map[string]any{"key": at.String(), "value": map[string]any{}}, "key")
	env.CreateAction(at.NewID(), at.StarlarkTool("kv_put", kvPutSource, keyed, []map[string]any{at.Ref("graphql")}))
	env.CreateAction(at.NewID(), at.StarlarkTool("kv_delete", kvDeleteSource, keyed, []map[string]any{at.Ref("graphql")}))
	env.CreateAction(at.NewID(), at.StarlarkTool("refuse", refuseSource, nil, nil))
}

// programServer is a LIVE server listing program, graphql, cel and the
// program tools, with the given policies (everything when nil).
func programServer(env *at.Env, name string, policies []map[string]any, extra ...map[string]any) string {
	if policies == nil {
		policies = at.Everything()
	}
	id := at.NewID()
	tools := append([]map[string]any{at.Ref("program"), at.Ref("graphql"), at.Ref("cel"), at.Ref("kv_put"), at.Ref("kv_delete"), at.Ref("refuse")}, extra...)
	env.CreateAction(id, at.ServerSpec{Name: name, Mode: "LIVE", Policies: policies, Tools: tools}.Input())
	return id
}

// runProgram calls program with source, input and commit.
func runProgram(t *testing.T, s *mcp.ClientSession, source string, input map[string]any, commit bool) map[string]any {
	t.Helper()
	args := map[string]any{"source": source, "commit": commit, "intent": "Run a program the test wrote."}
	if input != nil {
		args["input"] = input
	}
	res := callTool(t, s, "program", args)
	out := map[string]any{"isError": res.IsError, "text": text(res), "structured": res.StructuredContent, "meta": map[string]any(res.Meta)}
	if !res.IsError {
		native, _ := engine.Native("program")
		if err := native.CheckResult(res.StructuredContent); err != nil {
			t.Errorf("program's result does not match its outputSchema: %v\n%s", err, asJSON(res.StructuredContent))
		}
	}
	return out
}

// ACT-111, ACT-112, ACT-322, ACT-323, ACT-324, ACT-325, ACT-326, ACT-329, ACT-350, ACT-351, ACT-352, ACT-353, ACT-364: a server
// listing program offers it; a program reads event["data"], calls a tool,
// graphql and cel, uses decimal and money as builtins, and answers with
// what run returned as {value}; the request has one call, the program's
// execution, whose input holds the source and whose output is its result,
// and the program's own calls are its children. Committed, its write is
// there.
func TestProgramCallsToolsGraphQLAndCEL(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		programTools(env)
		serverID := programServer(env, "programs", nil)
		s := env.Connect("programs", env.Token(principal, "alice"), rev)
		listed := map[string]bool{}
		for _, tool := range listTools(t, s).Tools {
			listed[tool.Name] = true
		}
		if !listed["program"] {
			t.Fatalf("tools/list lacks program: %v", listed)
		}
		const source = `
def run(event):
    key = event["data"]["key"]
    tools.kv_put({"key": key, "value": {"n": 41}})
    found = graphql("query($k: String!) { kv { value(namespace: \"p\", key: $k) { value } } }", variables = {"k": key})
    n = cel("x + 1", {"x": found["kv"]["value"]["value"]["n"]})
    total = money("5", "USD") + money("2.50", "USD")
    return {"n": n, "total": total, "price": decimal("10.50")}
`
		got := runProgram(t, s, source, map[string]any{"key": "k1"}, true)
		want := map[string]any{"value": map[string]any{"n": 42, "total": map[string]any{"amount": "7.50", "currency": "USD"}, "price": "10.50"}}
		if got["isError"] == true || !jsonEqual(got["structured"], want) {
			t.Fatalf("program answered %v %s, want %s", got["isError"], got["text"], asJSON(want))
		}
		if v := env.KV("p", "k1"); !jsonEqual(v, map[string]any{"n": 41}) {
			t.Errorf("the committed program's write reads %s", asJSON(v))
		}
		request := last(t, requests(env, serverID, "tools/call"))
		calls := request["calls"].([]any)
		if len(calls) != 1 {
			t.Fatalf("the request has %d calls, want the program's one", len(calls))
		}
		program := calls[0].(map[string]any)
		if program["actionId"] != "native:program" || program["status"] != "SUCCEEDED" || at.Dig(program, "input", "source") != source ||
			!jsonEqual(program["output"], want) || program["preview"] != false {
			t.Errorf("the program's execution: %s", asJSON(program))
		}
		if found := env.ExecutionsWhere(map[string]any{"actionId": "native:program"}); len(found) != 1 || found[0]["id"] != program["id"] {
			t.Errorf("executions(where: {actionId: native:program}) lists %d", len(found))
		}
		var names []string
		for _, c := range program["calls"].([]any) {
			names = append(names, c.(map[string]any)["actionName"].(string))
		}
		if strings.Join(names, ",") != "kv_put,graphql,cel" {
			t.Errorf("the program's children are %v, want kv_put, graphql, cel (no call for decimal or money)", names)
		}
	})
}

// programCall is the program's execution of the last tools/call request.
func programCall(t *testing.T, env *at.Env, serverID string) map[string]any {
	t.Helper()
	request := last(t, requests(env, serverID, "tools/call"))
	calls, _ := request["calls"].([]any)
	if len(calls) != 1 {
		t.Fatalf("the request has %d calls, want the program's one: %s", len(calls), asJSON(request))
	}
	return calls[0].(map[string]any)
}

// ACT-342, ACT-344, ACT-346, ACT-348, ACT-354: a program whose third call fails rolls
// back the first two: neither write is there, the answer is a tool error
// with the failed tool's code, its message led by the program's own
// traceback, and every call, the rolled-back ones included, is recorded
// beneath the program with rolledBackByExecutionId naming it.
func TestProgramThirdCallFailureRollsBackTheFirstTwo(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		programTools(env)
		serverID := programServer(env, "atomic", nil)
		s := env.Connect("atomic", env.Token(principal, "alice"), rev)
		const source = `
def run(event):
    tools.kv_put({"key": "a", "value": 1})
    tools.kv_put({"key": "b", "value": 2})
    tools.refuse({})
    return "unreachable"
`
		got := runProgram(t, s, source, nil, true)
		message := got["text"].(string)
		if got["isError"] != true || !strings.HasPrefix(message, "Traceback (most recent call last):") ||
			!strings.Contains(message, "program.star:5:") || !strings.Contains(message, "refused on purpose") {
			t.Fatalf("the failed program answered %v:\n%s", got["isError"], message)
		}
		if code, _ := at.Dig(got["meta"], "com.twisp/error", "code").(string); code != "action_failure" {
			t.Errorf("the failed program's code is %q, want the failed tool's action_failure", code)
		}
		for _, key := range []string{"a", "b"} {
			if v := env.KV("p", key); v != nil {
				t.Errorf("p/%s was committed by a program that failed: %s", key, asJSON(v))
			}
		}
		program := programCall(t, env, serverID)
		if program["status"] != "FAILED" || at.Dig(program, "error", "code") != "action_failure" {
			t.Errorf("the program's record: %s", asJSON(program))
		}
		children := program["calls"].([]any)
		if len(children) != 3 {
			t.Fatalf("the program has %d calls, want 3: %s", len(children), asJSON(children))
		}
		for i, c := range children {
			call := c.(map[string]any)
			if call["rolledBackByExecutionId"] != program["id"] {
				t.Errorf("call %d (%s) has rolledBackByExecutionId %v, want the program's %v", i, call["actionName"], call["rolledBackByExecutionId"], program["id"])
			}
		}
		first := children[0].(map[string]any)
		if ws, _ := first["writeSet"].([]any); len(ws) != 1 {
			t.Errorf("the rolled-back kv_put keeps its write set: %s", asJSON(first["writeSet"]))
		}
		// The rolled-back graphql call beneath kv_put is kept too.
		inner, _ := env.Execution(first["id"].(string))["calls"].([]any)
		if len(inner) != 1 || inner[0].(map[string]any)["rolledBackByExecutionId"] == nil {
			t.Errorf("kv_put's own graphql call: %s", asJSON(inner))
		}
	})
}

// ACT-332, ACT-333, ACT-334, ACT-335, ACT-336, ACT-337, ACT-338, ACT-339, ACT-376: checked first. A literal document with a variable
// it does not declare, a constant document passed through the program's
// own function without a variable it requires, an operation_name the
// document lacks, and a tool the server does not list are each refused
// with action_input_invalid, the message saying how the document reaches
// the call, and the program makes no call.
func TestProgramCheckedFirst(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		programTools(env)
		env.CreateAction(at.NewID(), at.AgentSpec{Name: "helper", Model: "m"}.Input())
		serverID := programServer(env, "checked", nil, at.Ref("helper"), at.Ref("get_task"), at.Ref("invoke"), at.Ref("cancel_task"))
		s := env.Connect("checked", env.Token(principal, "alice"), rev)
		cases := []struct {
			name, source string
			want         []string
		}{
			{"undeclared variable in a literal", `
def run(event):
    tools.kv_put({"key": "x", "value": 1})
    return graphql("query { kv { value(namespace: \"p\", key: $k) { value } } }", variables = {"k": "x"})
`, []string{"program.star:4", "$k"}},
			{"required variable left out, through a function", `
READ = "query($k: String!) { kv { value(namespace: \"p\", key: $k) { value } } }"

def read(document):
    return graphql(document, variables = {})

def run(event):
    tools.kv_put({"key": "x", "value": 1})
    return read(READ)
`, []string{"READ", "read", "$k"}},
			{"operation name the document lacks", `
def run(event):
    tools.kv_put({"key": "x", "value": 1})
    return graphql("query Read { kv { value(namespace: \"p\", key: \"x\") { value } } }", operation_name = "Write")
`, []string{"Write"}},
			{"a tool the server does not list", `
def run(event):
    tools.kv_put({"key": "x", "value": 1})
    return tools.not_listed({})
`, []string{"tools.not_listed is not a tool this server offers"}},
			{"a program calling program", `
def run(event):
    return tools.program({"source": "def run(event):\n    return 1\n"})
`, []string{"a program cannot call program"}},
			{"a program calling invoke", `
def run(event):
    return tools.invoke({"action_id": "x"})
`, []string{"a program cannot call invoke"}},
			{"a program calling get_task", `
def run(event):
    return tools.get_task({"task_id": "x"})
`, []string{"a program cannot call get_task"}},
			{"a program calling a callable agent", `
def run(event):
    return tools.helper({})
`, []string{"helper is a callable agent, which runs only as a task: a program cannot call it"}},
		}
		for _, c := range cases {
			got := runProgram(t, s, c.source, nil, true)
			message, _ := got["text"].(string)
			if got["isError"] != true || at.Dig(got["meta"], "com.twisp/error", "code") != "action_input_invalid" {
				t.Errorf("%s: answered %v %s, want action_input_invalid", c.name, got["isError"], message)
				continue
			}
			for _, want := range c.want {
				if !strings.Contains(message, want) {
					t.Errorf("%s: the message does not name %q:\n%s", c.name, want, message)
				}
			}
			program := programCall(t, env, serverID)
			if calls, _ := program["calls"].([]any); len(calls) != 0 {
				t.Errorf("%s: the refused program made calls: %s", c.name, asJSON(calls))
			}
		}
		if v := env.KV("p", "x"); v != nil {
			t.Errorf("a refused program wrote p/x: %s", asJSON(v))
		}

		// ACT-340, ACT-341: a document chosen at run time, or passed with
		// check=False, is checked when the call runs: the program runs.
		got := runProgram(t, s, `
def run(event):
    tools.kv_put({"key": "y", "value": 1})
    bad = graphql("query { nope }", check = False)
    docs = ["query { nope }"]
    for d in docs:
        chosen = graphql(d, check = False)
    return {"ok": bad["ok"], "chosen": chosen["ok"], "coded": bad["error"]["code"] != ""}
`, nil, true)
		if got["isError"] == true || !jsonEqual(at.Dig(got["structured"], "value"), map[string]any{"ok": false, "chosen": false, "coded": true}) {
			t.Errorf("documents checked at run time: %v %s", got["isError"], got["text"])
		}
	})
}

// graphQLAs runs a GraphQL request with a bearer token: the reader's own
// policies decide what it reads.
func graphQLAs(t *testing.T, env *at.Env, token, query string, variables map[string]any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": variables})
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/financial/v1/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []any          `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Errors) > 0 {
		t.Fatalf("graphql as a reader: %v %s", err, asJSON(out.Errors))
	}
	return out.Data
}

// hiddenKeys denies SELECT of the KV rows whose key starts with hidden.
var hiddenKeys = map[string]any{"effect": "DENY", "actions": []any{"SELECT"}, "resources": []any{"financial.KVValue"},
	"assertions": map[string]any{"hidden": "context.document.key.startsWith('hidden')"}}

// ACT-355, ACT-356, ACT-357, ACT-358, ACT-359, ACT-360, ACT-361, ACT-362, ACT-363: a preview runs every call and commits none. Its result is
// {value, writes, unreadable_writes, omitted_writes}: a row the principal
// may read is shown with its table, key and new value; a row it may not
// read and a deleted row are only counted; rows past the size limit are
// counted in omitted_writes. The program's execution is preview with every
// row in its writeSet, and a reader limited as the principal is reads the
// same limit, counted in writeSetUnreadable.
func TestProgramPreviewCountsWhatItCannotShow(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		programTools(env)
		env.PutPrincipal("limited", []map[string]any{at.Allow([]string{"*"}, "*"), hiddenKeys})
		serverID := programServer(env, "previews", nil)
		s := env.Connect("previews", env.Token(principal, "alice"), rev)
		runProgram(t, s, `
def run(event):
    tools.kv_put({"key": "gone", "value": 0})
`, nil, true)
		if env.KV("p", "gone") == nil {
			t.Fatal("the committed setup write is not there")
		}

		limited := env.Connect("previews", env.Token("limited", "bob"), rev)
		const source = `
def run(event):
    tools.kv_put({"key": "shown", "value": {"n": 1}})
    tools.kv_put({"key": "hidden-balance", "value": {"n": 1000000}})
    tools.kv_delete({"key": "gone"})
    big = "x" * 100000
    for i in range(4):
        tools.kv_put({"key": "big%d" % i, "value": big})
    return "previewed"
`
		got := runProgram(t, limited, source, nil, false)
		structured, _ := got["structured"].(map[string]any)
		if got["isError"] == true || structured == nil {
			t.Fatalf("the preview answered %v %s", got["isError"], got["text"])
		}
		keys := slices.Sorted(maps.Keys(structured))
		if strings.Join(keys, ",") != "omitted_writes,unreadable_writes,value,writes" {
			t.Errorf("the preview's result has %v", keys)
		}
		writes := structured["writes"].([]any)
		var shown []string
		for _, w := range writes {
			row := w.(map[string]any)
			if row["table"] != "KVValue" || row["value"] == nil {
				t.Errorf("a shown row lacks its table or value: %s", asJSON(row))
			}
			shown = append(shown, row["key"].(string))
		}
		if !slices.Contains(shown, "p/shown") || slices.Contains(shown, "p/hidden-balance") || slices.Contains(shown, "p/gone") {
			t.Errorf("the preview shows %v", shown)
		}
		if strings.Contains(got["text"].(string), "1000000") {
			t.Errorf("the preview reveals the row the principal may not read: %s", got["text"])
		}
		if structured["unreadable_writes"] != float64(2) {
			t.Errorf("unreadable_writes is %v, want 2 (the hidden row and the deleted one)", structured["unreadable_writes"])
		}
		omitted, _ := structured["omitted_writes"].(float64)
		if omitted < 1 || len(writes)+int(omitted) != 5 {
			t.Errorf("omitted_writes is %v beside %d shown rows, want the big rows past the limit counted", structured["omitted_writes"], len(writes))
		}
		for _, key := range []string{"shown", "hidden-balance", "big0"} {
			if v := env.KV("p", key); v != nil {
				t.Errorf("the preview committed p/%s", key)
			}
		}
		if env.KV("p", "gone") == nil {
			t.Error("the preview's delete committed")
		}

		program := programCall(t, env, serverID)
		if program["preview"] != true || program["status"] != "SUCCEEDED" {
			t.Errorf("the preview's execution: preview %v status %v", program["preview"], program["status"])
		}
		// The root reads every row of every call's write set.
		rows := 0
		for _, c := range program["calls"].([]any) {
			call := c.(map[string]any)
			if call["preview"] != true {
				t.Errorf("a call beneath the preview is not preview: %s", asJSON(call))
			}
			ws, _ := call["writeSet"].([]any)
			rows += len(ws)
		}
		if rows != 7 {
			t.Errorf("the calls' write sets hold %d rows, want 7", rows)
		}
		// A reader limited as the principal is sees the same limit.
		read := graphQLAs(t, env, env.MintToken(auth.MintOptions{Principal: "limited", Subject: "bob", Audience: auth.GraphQLAudience(env.URL)}), `query($id: ID!) { execution(id: $id) { writeSet { key } writeSetUnreadable
			calls { writeSet { key } writeSetUnreadable } } }`, map[string]any{"id": program["id"]})
		hidden := 0
		for _, c := range at.Dig(read, "execution", "calls").([]any) {
			call := c.(map[string]any)
			hidden += int(call["writeSetUnreadable"].(float64))
			for _, row := range call["writeSet"].([]any) {
				if k := row.(map[string]any)["key"]; k == "p/hidden-balance" || k == "p/gone" {
					t.Errorf("the limited reader reads %v", k)
				}
			}
		}
		if hidden != 2 {
			t.Errorf("the limited reader's writeSetUnreadable sum to %d, want 2", hidden)
		}
	})
}

// ACT-365, ACT-366, ACT-367: on a server in preview mode a program never commits: with
// commit: true it runs as it would live, its writes are rolled back and
// recorded, and its result carries the preview marker.
func TestProgramOnAPreviewServerNeverCommits(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		programTools(env)
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "rehearsal", Policies: at.Everything(),
			Tools: []map[string]any{at.Ref("program"), at.Ref("kv_put")}}.Input())
		s := env.Connect("rehearsal", env.Token(principal, "alice"), rev)
		got := runProgram(t, s, `
def run(event):
    tools.kv_put({"key": "r", "value": 1})
    return "ran"
`, nil, true)
		if got["isError"] == true || at.Dig(got["structured"], "value") != "ran" {
			t.Fatalf("the program answered %v %s", got["isError"], got["text"])
		}
		if at.Dig(got["meta"], "com.twisp/preview") != true {
			t.Errorf("the result lacks the preview marker: %s", asJSON(got["meta"]))
		}
		if env.KV("p", "r") != nil {
			t.Error("a program on a preview server committed")
		}
		program := programCall(t, env, serverID)
		put := program["calls"].([]any)[0].(map[string]any)
		if program["preview"] != true || len(put["writeSet"].([]any)) != 1 {
			t.Errorf("the program's record: %s", asJSON(program))
		}
	})
}

// ACT-327, ACT-328, ACT-330, ACT-370, ACT-372, ACT-373: limits. Through a
// server without graphql and cel, graphql() and cel() fail with
// tool_not_declared while decimal() still runs; the 65th cel call fails,
// as does a loop past 1,000,000 steps.
func TestProgramLimits(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		programTools(env)
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "bare", Mode: "LIVE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("program")}}.Input())
		programServer(env, "limits", nil)
		bare := env.Connect("bare", env.Token(principal, "alice"), rev)
		got := runProgram(t, bare, `
def run(event):
    g = graphql("query { kv { value(namespace: \"p\", key: \"k\") { value } } }", check = False)
    c = cel("uuid.New()", check = False)
    return {"graphql": g["error"]["code"], "cel": c["error"]["code"], "price": decimal("10.50")}
`, nil, true)
		if want := map[string]any{"graphql": "tool_not_declared", "cel": "tool_not_declared", "price": "10.50"}; !jsonEqual(at.Dig(got["structured"], "value"), want) {
			t.Errorf("without graphql and cel listed: %v %s", got["isError"], got["text"])
		}

		s := env.Connect("limits", env.Token(principal, "alice"), rev)
		got = runProgram(t, s, `
def run(event):
    n = 0
    for i in range(64):
        n = cel("x + 1", {"x": n})
    return n
`, nil, true)
		if at.Dig(got["structured"], "value") != float64(64) {
			t.Errorf("64 cel calls: %v %s", got["isError"], got["text"])
		}
		got = runProgram(t, s, `
def run(event):
    for i in range(65):
        cel("1")
`, nil, true)
		if got["isError"] != true || !strings.Contains(got["text"].(string), "64") {
			t.Errorf("65 cel calls: %v %s", got["isError"], got["text"])
		}
		got = runProgram(t, s, `
def run(event):
    n = 0
    for i in range(2000000):
        n += 1
    return n
`, nil, true)
		if got["isError"] != true || !strings.Contains(got["text"].(string), "step") {
			t.Errorf("2,000,000 steps: %v %s", got["isError"], got["text"])
		}
	})
}

// The native cel tool types each variable from its JSON value: 41 is an
// int, so x + 1 is 42 rather than "no matching overload".
func TestCELVariablesTakeTheirValuesTypes(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		programTools(env)
		programServer(env, "typed", nil)
		s := env.Connect("typed", env.Token(principal, "alice"), rev)
		cases := []struct {
			expression string
			variables  map[string]any
			want       any
		}{
			{"x + 1", map[string]any{"x": 41}, float64(42)},
			{"x * 2.0", map[string]any{"x": 1.25}, 2.5},
			{"s + '!'", map[string]any{"s": "hi"}, "hi!"},
			{"size(l) + l[0]", map[string]any{"l": []any{5, 6}}, float64(7)},
			{"m.a.b == true", map[string]any{"m": map[string]any{"a": map[string]any{"b": true}}}, true},
		}
		for _, c := range cases {
			res := callTool(t, s, "cel", map[string]any{"expression": c.expression, "variables": c.variables, "intent": "Check CEL's typing."})
			if res.IsError || !jsonEqual(at.Dig(res.StructuredContent, "value"), c.want) {
				t.Errorf("%s over %s: %v %s, want %v", c.expression, asJSON(c.variables), res.IsError, text(res), c.want)
			}
		}
	})
}

// ACT-374, ACT-377, ACT-378, ACT-442: a program that passes the server's
// response timeout fails the request with mcp_request_deadline, and
// nothing it did is recorded: no call beneath the request, no write. An
// invoked tool that passes it fails the request the same way.
func TestProgramPastTheDeadline(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		programTools(env)
		defineGate(env)
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "hasty", Mode: "LIVE", ResponseTimeout: "1s", Policies: at.Everything(),
			Tools: []map[string]any{at.Ref("program"), at.Ref("invoke"), at.Ref("kv_put"), at.Ref("gate")}}.Input())
		s := env.Connect("hasty", env.Token(principal, "alice"), rev)
		source := `
def run(event):
    tools.kv_put({"key": "late", "value": 1})
    tools.gate({"key": event["data"]["gate"]})
    return "never"
`
		_, err := s.CallTool(ctx(t), &mcp.CallToolParams{Name: "program", Arguments: map[string]any{"source": source, "commit": true,
			"input": map[string]any{"gate": gateKey(t)}, "intent": "Wait past the deadline."}})
		werr := rpcError(t, err)
		if data := errorData(t, werr); data["code"] != "mcp_request_deadline" {
			t.Fatalf("a program past the deadline: %d %s %s", werr.Code, werr.Message, werr.Data)
		}
		request := last(t, requests(env, serverID, "tools/call"))
		if request["status"] != "FAILED" || at.Dig(request, "error", "code") != "mcp_request_deadline" || len(request["calls"].([]any)) != 0 {
			t.Errorf("the request past the deadline is recorded %s", asJSON(request))
		}
		if env.KV("p", "late") != nil {
			t.Error("a program past the deadline committed its write")
		}
		for _, e := range env.ExecutionsWhere(map[string]any{"actionId": "native:program"}) {
			t.Errorf("the program past the deadline was recorded: %s", asJSON(e))
		}

		var gateID string
		for _, e := range env.MustGraphQL(`{ actions { list { edges { node { id name } } } } }`, nil)["actions"].(map[string]any)["list"].(map[string]any)["edges"].([]any) {
			if at.Dig(e, "node", "name") == "gate" {
				gateID = at.Dig(e, "node", "id").(string)
			}
		}
		_, err = s.CallTool(ctx(t), &mcp.CallToolParams{Name: "invoke", Arguments: map[string]any{"action_id": gateID,
			"input": map[string]any{"key": gateKey(t)}, "intent": "Invoke past the deadline."}})
		if data := errorData(t, rpcError(t, err)); data["code"] != "mcp_request_deadline" {
			t.Errorf("an invoke past the deadline: %s", asJSON(data))
		}
	})
}

// ACT-321, ACT-368, ACT-369, ACT-422: program and invoke are annotated
// from the server's own policies: read-only only when they allow only
// SELECT, destructiveHint false only when they allow only SELECT and
// INSERT, whatever the tools' own policies say.
func TestProgramAndInvokeAnnotations(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		env.CreateAction(at.NewID(), at.CELTool("reader", "1", nil, at.Allow([]string{"SELECT"}, "*")))
		servers := []struct {
			name          string
			actions       []string
			readOnly      bool
			nonDestructve bool
		}{
			{"selecting", []string{"SELECT"}, true, true},
			{"inserting", []string{"SELECT", "INSERT"}, false, true},
			{"deleting", []string{"SELECT", "INSERT", "DELETE"}, false, false},
		}
		for _, server := range servers {
			env.CreateAction(at.NewID(), at.ServerSpec{Name: server.name, Policies: []map[string]any{at.Allow(server.actions, "*")},
				Tools: []map[string]any{at.Ref("program"), at.Ref("invoke"), at.Ref("reader")}}.Input())
			s := env.Connect(server.name, env.Token(principal, "alice"), rev)
			for _, tool := range listTools(t, s).Tools {
				if tool.Name == "reader" {
					continue
				}
				a := tool.Annotations
				if a == nil || a.ReadOnlyHint != server.readOnly || (a.DestructiveHint != nil && !*a.DestructiveHint) != server.nonDestructve ||
					a.OpenWorldHint == nil || *a.OpenWorldHint {
					t.Errorf("%s on %s is annotated %s", tool.Name, server.name, asJSON(a))
				}
			}
		}
	})
}

// ACT-375, ACT-443: the program's call and each call it makes count
// against the session's rate limit, as do the invoke call and the calls
// beneath it.
func TestProgramAndInvokeCountAgainstTheRateLimit(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		countID := at.NewID()
		env.CreateAction(countID, at.StarlarkTool("count", "def run(event):\n    return cel(\"1 + 1\")\n", nil, []map[string]any{at.Ref("cel")}))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "metered", Mode: "LIVE", Intent: "NONE", CallsPerMinute: 9, Policies: at.Everything(),
			Tools: []map[string]any{at.Ref("program"), at.Ref("invoke"), at.Ref("cel")}}.Input())
		token := env.Token(principal, "alice")
		program := map[string]any{"source": "def run(event):\n    for i in range(4):\n        cel(\"1\")\n", "commit": true}
		if reply := env.Post("metered", token, call("program", program, rev)); reply.Status != 200 || reply.Result()["isError"] == true {
			t.Fatalf("program: %s", reply)
		}
		if reply := env.Post("metered", token, call("invoke", map[string]any{"action_id": countID}, rev)); reply.Status != 200 || reply.Result()["isError"] == true {
			t.Fatalf("invoke: %s", reply)
		}
		var counted []any
		for _, in := range env.Session(serverID, at.SessionIDFor(principal, "alice"))["inputs"].([]any) {
			counted = append(counted, at.Dig(in, "calls"))
		}
		// program and its 4 cel calls; invoke, the tool and its cel call.
		if !jsonEqual(counted, []any{5, 3}) {
			t.Errorf("the session counted %v calls, want [5 3]", counted)
		}
		if reply := env.Post("metered", token, call("cel", map[string]any{"expression": "1"}, rev)); reply.Status != 200 {
			t.Fatalf("the ninth call: %s", reply)
		}
		if reply := env.Post("metered", token, call("cel", map[string]any{"expression": "1"}, rev)); reply.Status != 429 || reply.DataCode() != "mcp_rate_limited" {
			t.Errorf("past the limit: %s", reply)
		}
	})
}

// ACT-331, ACT-347: a program can do nothing its tools could not do one
// call at a time: a write the server's policies deny inside a program is
// the same denial, naming the operation, the resource and the denying
// layer, as the call made alone.
func TestProgramDenialIsTheCallsDenial(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		programTools(env)
		programServer(env, "guarded", []map[string]any{at.Allow([]string{"*"}, "*"), at.Deny([]string{"INSERT", "UPDATE"}, "financial.KVValue")})
		s := env.Connect("guarded", env.Token(principal, "alice"), rev)
		alone := callTool(t, s, "kv_put", map[string]any{"key": "g", "value": 1, "intent": "Write alone."})
		got := runProgram(t, s, "def run(event):\n    tools.kv_put({\"key\": \"g\", \"value\": 1})\n", nil, true)
		const denial = "INSERT on financial.KVValue is denied by the server's policies"
		if !alone.IsError || !strings.Contains(text(alone), denial) {
			t.Fatalf("the call alone: %v %s", alone.IsError, text(alone))
		}
		if got["isError"] != true || !strings.Contains(got["text"].(string), denial) || !strings.HasPrefix(got["text"].(string), "Traceback") {
			t.Errorf("the same call in a program: %v %s", got["isError"], got["text"])
		}
		if code := at.Dig(got["meta"], "com.twisp/error", "code"); code != toolErrorCode(alone) {
			t.Errorf("the program's code %v, the call's %v", code, toolErrorCode(alone))
		}
	})
}
