package gateway_test

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
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

// ACT-111, ACT-112, ACT-322..326, ACT-329, ACT-350..353, ACT-364: a server
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
		var names []string
		for _, c := range program["calls"].([]any) {
			names = append(names, c.(map[string]any)["actionName"].(string))
		}
		if strings.Join(names, ",") != "kv_put,graphql,cel" {
			t.Errorf("the program's children are %v, want kv_put, graphql, cel (no call for decimal or money)", names)
		}
	})
}
