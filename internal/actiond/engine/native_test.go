package engine_test

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/incusspawn/isx/internal/actiond/action"
	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
	"github.com/incusspawn/isx/internal/mcpkit/toolsnap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every native tool's name, description and schemas are a golden file of
// their own, testdata/toolsnaps/<tool>.json.
func TestNativeToolSnapshots(t *testing.T) {
	var listings []*mcp.Tool
	for _, tool := range engine.Natives() {
		listings = append(listings, tool.Listing())
	}
	if len(listings) == 0 {
		t.Fatal("the engine runs no native tool")
	}
	toolsnap.CheckAll(t, listings)
}

// ACT-017, ACT-124: a server listing graphql and cel lists each with the
// schemas derived from its Go types, the stated intent added; each answers
// with a result its outputSchema accepts, and arguments failing its
// inputSchema are a tool error naming the argument.
func TestNativeToolsThroughTheEndpoint(t *testing.T) {
	for _, rev := range at.Revisions {
		t.Run(rev, func(t *testing.T) {
			env := at.New(t, store.SQLite, at.Options{})
			env.PutPrincipal("signin", at.Everything())
			env.CreateAction(at.NewID(), at.ServerSpec{Name: "natives", Policies: at.Everything(),
				Tools: []map[string]any{at.Ref("graphql"), at.Ref("cel"), at.Ref("get_task"), at.Ref("cancel_task")}}.Input())
			s := env.Connect("natives", env.Token("signin", "alice"), rev)

			listed := map[string]*mcp.Tool{}
			for _, tool := range at.ListTools(t, s).Tools {
				listed[tool.Name] = tool
			}
			for _, native := range engine.Natives() {
				tool := listed[native.Name()]
				if tool == nil {
					t.Fatalf("tools/list lacks %s", native.Name())
				}
				want := action.EffectiveInputSchema(mcpkit.SchemaMap(native.InputSchema()), action.ToolRef{Name: native.Name()}, action.IntentRequired)
				if !at.JSONEqual(tool.InputSchema, want) || !at.JSONEqual(tool.OutputSchema, mcpkit.SchemaMap(native.OutputSchema())) || tool.Description != native.Description() {
					t.Errorf("%s is listed as %s → %s, want %s → %s", native.Name(), at.AsJSON(tool.InputSchema), at.AsJSON(tool.OutputSchema),
						at.AsJSON(want), at.AsJSON(native.OutputSchema()))
				}
			}

			cases := []struct {
				tool string
				args map[string]any
				want any
			}{
				{"cel", map[string]any{"expression": "order.price * 2.0 + 1.0", "variables": map[string]any{"order": map[string]any{"price": 20.5}}}, map[string]any{"value": 42.0}},
				{"graphql", map[string]any{"query": "query Kind { __typename }", "operationName": "Kind"}, map[string]any{"data": map[string]any{"__typename": "Query"}}},
			}
			for _, c := range cases {
				c.args["intent"] = "Check the native " + c.tool + " tool."
				res := at.CallTool(t, s, c.tool, c.args)
				if res.IsError || !at.JSONEqual(res.StructuredContent, c.want) {
					t.Errorf("%s answered isError %v %s, want %s", c.tool, res.IsError, at.AsJSON(res.StructuredContent), at.AsJSON(c.want))
				}
				native, _ := engine.Native(c.tool)
				if err := native.CheckResult(res.StructuredContent); err != nil {
					t.Error(err)
				}
			}

			refused := []struct {
				tool    string
				args    map[string]any
				message string
			}{
				{"cel", map[string]any{}, "expression is required"},
				{"cel", map[string]any{"expression": "1", "variables": []any{1}}, "variables must be an object, not an array"},
				{"graphql", map[string]any{"query": ""}, "query is 0 characters long; at least 1 are required"},
				{"graphql", map[string]any{"query": "{ __typename }", "operation": "x"}, `this tool takes no argument "operation"`},
			}
			for _, c := range refused {
				c.args["intent"] = "Send bad arguments on purpose."
				res := at.CallTool(t, s, c.tool, c.args)
				code, _ := at.Dig(map[string]any(res.Meta), "com.twisp/error", "code").(string)
				if !res.IsError || code != engine.CodeInputInvalid || !strings.HasPrefix(at.Text(res), c.message) {
					t.Errorf("%s %s: isError %v code %q text %q, want %s: %s", c.tool, at.AsJSON(c.args), res.IsError, code, at.Text(res), engine.CodeInputInvalid, c.message)
				}
			}
		})
	}
}

// A script's cel() and graphql() run the native tools with the variables
// as the script gave them: its integers stay integers (CEL adds no double to
// an int), and a GraphQL Int! takes them.
func TestNativeToolsKeepAScriptsIntegers(t *testing.T) {
	env := at.New(t, store.SQLite, at.Options{})
	env.PutPrincipal("signin", at.Everything())
	const source = "def run(event):\n" +
		"    n = cel('order.count + 1', {'order': {'count': 41}})\n" +
		"    found = graphql('query($n: Int!) { kv { values(namespace: \"none\", first: $n) { edges { cursor } } } }', variables = {'n': 2})\n" +
		"    return {'n': n, 'edges': found['kv']['values']['edges']}\n"
	env.CreateAction(at.NewID(), at.StarlarkTool("adder", source, nil, []map[string]any{at.Ref("cel"), at.Ref("graphql")}))
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "adding", Policies: at.Everything(), Tools: []map[string]any{at.Ref("adder")}}.Input())
	s := env.Connect("adding", env.Token("signin", "alice"), at.Revision2026)
	res := at.CallTool(t, s, "adder", map[string]any{"intent": "Add one."})
	if res.IsError || !at.JSONEqual(res.StructuredContent, map[string]any{"n": 42, "edges": []any{}}) {
		t.Fatalf("adder answered isError %v %s", res.IsError, at.Text(res))
	}
}
