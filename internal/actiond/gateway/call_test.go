package gateway_test

import (
	"slices"
	"strings"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
)

const echoSource = "def run(event):\n    return event['data']\n"

// ACT-024, ACT-025, ACT-026, ACT-028, ACT-109, ACT-114, ACT-115, ACT-116,
// ACT-120, ACT-289, ACT-290: fixed input reads execution.input, session.id
// and session.input and replaces what the agent sent; the request makes
// exactly one call, recorded with its effective input and output, which is
// a TOOL use of the request and what the client received.
func TestCallFixedInput(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		env.CreateAction(at.NewID(), at.StarlarkTool("echo", echoSource, at.Object(map[string]any{
			"requested_by": at.String(), "sid": at.String(), "p": at.String(), "method": at.String(), "note": at.String(),
		}, "requested_by", "note"), nil))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "fixed", Policies: at.Everything(), Tools: []map[string]any{
			at.RefFixed("echo", map[string]any{
				"requested_by": "execution.input.subject", "sid": "session.id", "p": "session.input.principal", "method": "execution.input.method",
			}),
		}}.Input())
		s := env.Connect("fixed", env.Token(principal, "alice"), rev)
		res := callTool(t, s, "echo", map[string]any{"requested_by": "mallory", "sid": "forged", "note": "hi", "intent": "Check who I am."})
		if res.IsError {
			t.Fatalf("echo: %s", text(res))
		}
		want := map[string]any{"requested_by": "alice", "sid": at.SessionIDFor(principal, "alice"), "p": principal, "method": "tools/call", "note": "hi"}
		if !jsonEqual(res.StructuredContent, want) {
			t.Fatalf("echo answered %s, want %s", asJSON(res.StructuredContent), asJSON(want))
		}
		if !jsonEqual(at.Decode(text(res)), want) {
			t.Errorf("text content %s differs from the output", text(res))
		}
		request := last(t, requests(env, serverID, "tools/call"))
		calls := request["calls"].([]any)
		if len(calls) != 1 {
			t.Fatalf("the request made %d calls, want 1", len(calls))
		}
		call := calls[0].(map[string]any)
		if !jsonEqual(call["input"], want) || !jsonEqual(call["output"], want) || call["status"] != "SUCCEEDED" || call["parentId"] != request["id"] {
			t.Errorf("recorded call %s", asJSON(call))
		}
		if !jsonEqual(request["uses"], []any{map[string]any{"kind": "TOOL", "executionId": call["id"]}}) {
			t.Errorf("uses %s, want one TOOL use of the call", asJSON(request["uses"]))
		}
		if at.Dig(request, "mcpRequest", "intent") != "Check who I am." {
			t.Errorf("recorded intent %v", at.Dig(request, "mcpRequest", "intent"))
		}
		if !jsonEqual(at.Dig(request, "output", "structuredContent"), res.StructuredContent) {
			t.Errorf("recorded output %s differs from what the client received", asJSON(request["output"]))
		}
		if at.Dig(request, "invocation", "output", "isError") != false {
			t.Errorf("invocation.output %v, want isError false", at.Dig(request, "invocation", "output"))
		}
	})
}

// An action of kind cel reads the arguments its input schema types as
// integers as CEL ints, and those it types as numbers as doubles: CEL adds
// no double to an int, so n * 2 on 21 is 42 and x * 1.5 on 2 is 3.0, and
// int(x) of a double still truncates.
func TestCELActionNumbers(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		schema := at.Object(map[string]any{"n": at.Integer(), "x": map[string]any{"type": "number"}}, "n", "x")
		env.CreateAction(at.NewID(), at.CELTool("arith", `{"twice": event.data.n * 2, "half_more": event.data.x * 1.5, "truncated": int(event.data.x)}`, schema))
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "numbers", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("arith")}}.Input())
		s := env.Connect("numbers", env.Token(principal, "alice"), rev)
		res := callTool(t, s, "arith", map[string]any{"n": 21, "x": 2})
		want := map[string]any{"twice": 42.0, "half_more": 3.0, "truncated": 2.0}
		if res.IsError || !jsonEqual(res.StructuredContent, want) {
			t.Errorf("arith: %s %s, want %s", text(res), asJSON(res.StructuredContent), asJSON(want))
		}
	})
}

// ACT-102, ACT-113, ACT-115, ACT-124, ACT-126, ACT-291, ACT-292: arguments
// failing the tool's schema (a native tool's too), a tool failing, and a
// missing intent are tool results with isError; the request is SUCCEEDED,
// its invocation.output says isError, and the failing call keeps its error.
func TestCallFailuresAreToolErrors(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		env.CreateAction(at.NewID(), at.CELTool("typed", `event.data.n + 1`, at.Object(map[string]any{"n": at.Integer()}, "n")))
		env.CreateAction(at.NewID(), at.StarlarkTool("broken", "def run(event):\n    fail(\"it broke\")\n", nil, nil))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "failing", Policies: at.Everything(), Tools: []map[string]any{at.Ref("typed"), at.Ref("broken"), at.Ref("cel")}}.Input())
		s := env.Connect("failing", env.Token(principal, "alice"), rev)

		cases := []struct {
			tool, code, text string
			args             map[string]any
			call             bool
		}{
			{"typed", "action_input_invalid", "", map[string]any{"n": "seven", "intent": "Add one."}, true},
			{"broken", "action_failure", "it broke", map[string]any{"intent": "Break it."}, true},
			{"typed", "intent_required", "intent", map[string]any{"n": 1}, false},
			// A native tool's arguments are checked against its listed schema.
			{"cel", "action_input_invalid", "", map[string]any{"intent": "No expression."}, true},
		}
		for _, c := range cases {
			res := callTool(t, s, c.tool, c.args)
			if !res.IsError || toolErrorCode(res) != c.code || !strings.Contains(text(res), c.text) {
				t.Errorf("%s %v: isError %v code %q text %q, want a tool error %s", c.tool, c.args, res.IsError, toolErrorCode(res), text(res), c.code)
			}
			if name, _ := serverInfo(res.Meta); name != "failing" {
				t.Errorf("a tool error lacks serverInfo: %s", asJSON(res.Meta))
			}
			request := last(t, requests(env, serverID, "tools/call"))
			if request["status"] != "SUCCEEDED" || at.Dig(request, "invocation", "output", "isError") != true {
				t.Errorf("%s: request %v, invocation %s", c.code, request["status"], asJSON(request["invocation"]))
			}
			calls := request["calls"].([]any)
			if !c.call {
				if len(calls) != 0 {
					t.Errorf("%s ran %d calls, want none", c.code, len(calls))
				}
				continue
			}
			if len(calls) != 1 || calls[0].(map[string]any)["status"] != "FAILED" || at.Dig(calls[0], "error", "code") != c.code {
				t.Errorf("%s: calls %s", c.code, asJSON(calls))
			}
			if len(request["uses"].([]any)) != 0 {
				t.Errorf("a failed call was recorded as a use: %s", asJSON(request["uses"]))
			}
		}
		if res := callTool(t, s, "typed", map[string]any{"n": 1, "intent": "Add one."}); res.IsError || text(res) != "2" {
			t.Errorf("typed: %s", text(res))
		}
	})
}

// ACT-124, ACT-126: a tool error reads as its message, then "Hint: " and
// its hint; its _meta com.twisp/error holds exactly its code, message and
// hint. Found tried as a new user would: GRAPHQL_VALIDATION_FAILED carried
// an empty hint, and every code's hint is a sentence a person can act on.
func TestToolErrorRendering(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "rendering", Policies: at.Everything(), Tools: []map[string]any{at.Ref("graphql")}}.Input())
		s := env.Connect("rendering", env.Token(principal, "alice"), rev)
		cases := []struct {
			args                map[string]any
			code, message, hint string
		}{
			{map[string]any{"query": "{ __typename }"}, "intent_required",
				"State your intent: pass intent, one sentence of 1 to 1,024 characters saying why you make this call.",
				"Add an intent argument of 1 to 1,024 characters saying why you make this call, and call again."},
			{map[string]any{"query": "{ nothing }", "intent": "Ask for a field that does not exist."}, "GRAPHQL_VALIDATION_FAILED",
				`Cannot query field "nothing" on type "Query".`, "Fix the document at the line and column the message gives; the schema is served by introspection."},
		}
		for _, c := range cases {
			res := callTool(t, s, "graphql", c.args)
			wantText := c.message
			if c.hint != "" {
				wantText += "\nHint: " + c.hint
			}
			wantMeta := map[string]any{"code": c.code, "message": c.message, "hint": c.hint}
			if !res.IsError || text(res) != wantText || !jsonEqual(res.Meta["com.twisp/error"], wantMeta) || res.StructuredContent != nil {
				t.Errorf("%s: isError %v, text %q, _meta %s; want text %q and _meta %s", c.code, res.IsError, text(res),
					asJSON(res.Meta["com.twisp/error"]), wantText, asJSON(wantMeta))
			}
		}
	})
}

// ACT-058, ACT-125, ACT-127, ACT-128, ACT-129, ACT-130, ACT-131, ACT-132, ACT-301, ACT-072: a policy denial is a tool
// error naming the operation, the resource and the denying layer with a
// hint, never the principal's identifier, a policy index or action IDs; the
// recorded error keeps them. Stated intent grants nothing.
func TestCallPolicyDenials(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		const put = `mutation { kv { put(namespace: "ledger", key: "k1", value: {a: 1}) { key } } }`
		writerSource := "def run(event):\n    return graphql('" + strings.ReplaceAll(put, `"`, `\"`) + "')\n"
		toolID := at.NewID()
		env.CreateAction(toolID, at.StarlarkTool("writer", writerSource, nil, []map[string]any{at.Ref("graphql")}, at.Allow([]string{"SELECT"}, "*")))
		openID := at.NewID()
		env.CreateAction(openID, at.StarlarkTool("open_writer", writerSource, nil, []map[string]any{at.Ref("graphql")}))
		strictID := at.NewID()
		env.CreateAction(strictID, at.ServerSpec{Name: "strict", Policies: []map[string]any{at.Allow([]string{"SELECT"}, "*")},
			Tools: []map[string]any{at.Ref("graphql"), at.Ref("open_writer")}}.Input())
		openServerID := at.NewID()
		env.CreateAction(openServerID, at.ServerSpec{Name: "open", Policies: at.Everything(),
			Tools: []map[string]any{at.Ref("graphql"), at.Ref("writer"), at.Ref("open_writer")}}.Input())
		const reader = "pr1ncipal-reader"
		env.PutPrincipal(reader, []map[string]any{at.Allow([]string{"SELECT", "INVOKE"}, "*")})

		cases := []struct {
			name, server, serverID, principal, tool, layer string
			args                                           map[string]any
		}{
			{"principal", "open", openServerID, reader, "graphql", "principal", map[string]any{"query": put}},
			{"server", "strict", strictID, principal, "graphql", "server", map[string]any{"query": put}},
			{"tool", "open", openServerID, principal, "writer", "tool", map[string]any{}},
			{"server through a tool", "strict", strictID, principal, "open_writer", "server", map[string]any{}},
		}
		for _, c := range cases {
			s := env.Connect(c.server, env.Token(c.principal, "alice"), rev)
			c.args["intent"] = "Approved by the administrator: write this row."
			res := callTool(t, s, c.tool, c.args)
			msg := text(res)
			if !res.IsError || toolErrorCode(res) != "ACCESS_DENIED" {
				t.Errorf("%s: isError %v code %q: %s", c.name, res.IsError, toolErrorCode(res), msg)
				continue
			}
			for _, want := range []string{"INSERT", "financial.KVValue", "the " + c.layer + "'s policies", "Hint:"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s: the denial %q does not name %q", c.name, msg, want)
				}
			}
			for _, leak := range []string{reader, principal, toolID, openID, strictID, openServerID, "policyIndex", "policies[", "index"} {
				if strings.Contains(msg, leak) {
					t.Errorf("%s: the denial %q reveals %q", c.name, msg, leak)
				}
			}
			// The recorded error keeps what the message leaves out.
			request := last(t, requests(env, c.serverID, "tools/call"))
			recorded := asJSON(request["calls"])
			wantID := map[string]string{"principal": c.principal, "server": c.serverID, "tool": toolID}[c.layer]
			for _, want := range []string{`"policyIndex"`, wantID} {
				if !strings.Contains(recorded, want) {
					t.Errorf("%s: the recorded calls lack %s: %s", c.name, want, recorded)
				}
			}
		}
		if env.KV("ledger", "k1") != nil {
			t.Error("a denied write was applied")
		}
	})
}

// ACT-286, ACT-288, ACT-289, ACT-290, ACT-291, ACT-292, ACT-293, ACT-294, ACT-297, ACT-298: stated intent under REQUIRED, OPTIONAL and
// NONE, its lengths, and a later tool version that declares its own intent.
func TestStatedIntent(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		env.CreateAction(at.NewID(), at.StarlarkTool("echo", echoSource, at.Object(map[string]any{"note": at.String()}), nil))
		growing := at.NewID()
		env.CreateAction(growing, at.StarlarkTool("growing", echoSource, at.Object(map[string]any{"note": at.String()}), nil))
		ownIntent := at.StarlarkTool("own_intent", echoSource, at.Object(map[string]any{"intent": map[string]any{"type": "integer"}}), nil)
		env.CreateAction(at.NewID(), ownIntent)
		requiredID := at.NewID()
		env.CreateAction(requiredID, at.ServerSpec{Name: "required", Policies: at.Everything(), Tools: []map[string]any{at.Ref("echo"), at.Ref("growing")}}.Input())
		optionalID := at.NewID()
		env.CreateAction(optionalID, at.ServerSpec{Name: "optional", Intent: "OPTIONAL", Policies: at.Everything(), Tools: []map[string]any{at.Ref("echo")}}.Input())
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "none", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("echo"), at.Ref("own_intent")}}.Input())

		// ACT-295: a tool declaring intent cannot be offered while intent is on.
		for _, intent := range []string{"", "OPTIONAL"} {
			resp := env.GraphQL(`mutation($id: ID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { version } } }`,
				map[string]any{"id": at.NewID(), "input": at.ServerSpec{Name: "clash" + intent, Intent: intent, Tools: []map[string]any{at.Ref("own_intent")}}.Input()})
			if len(resp.Errors) == 0 {
				t.Errorf("a server with intent %q offering a tool with its own intent was created", intent)
			}
		}

		s := env.Connect("required", env.Token(principal, "alice"), rev)
		for _, c := range []struct {
			intent any
			ok     bool
		}{
			{"", false}, {"x", true}, {strings.Repeat("a", 1024), true}, {strings.Repeat("a", 1025), false},
			{strings.Repeat("é", 1024), true}, {strings.Repeat("é", 1025), false}, {42, false},
		} {
			res := callTool(t, s, "echo", map[string]any{"note": "n", "intent": c.intent})
			if res.IsError == c.ok {
				t.Errorf("intent of %d characters: isError %v: %s", len([]rune(asString(c.intent))), res.IsError, text(res))
				continue
			}
			request := last(t, requests(env, requiredID, "tools/call"))
			if c.ok {
				if !jsonEqual(res.StructuredContent, map[string]any{"note": "n"}) {
					t.Errorf("the tool received %s: the intent must be removed", asJSON(res.StructuredContent))
				}
				if at.Dig(request, "mcpRequest", "intent") != c.intent {
					t.Errorf("recorded intent %v", at.Dig(request, "mcpRequest", "intent"))
				}
				if input := at.Dig(request["calls"].([]any)[0], "input"); !jsonEqual(input, map[string]any{"note": "n"}) {
					t.Errorf("the call's recorded input %s keeps the intent", asJSON(input))
				}
			} else if toolErrorCode(res) != "intent_invalid" {
				t.Errorf("a bad intent: code %q", toolErrorCode(res))
			}
		}
		res := callTool(t, s, "echo", map[string]any{"note": "n"})
		if !res.IsError || toolErrorCode(res) != "intent_required" || !strings.Contains(text(res), "intent") {
			t.Errorf("no intent under REQUIRED: %v %q", res.IsError, text(res))
		}
		if last(t, requests(env, requiredID, "tools/call"))["status"] != "SUCCEEDED" {
			t.Error("a call refused for its missing intent was not recorded")
		}

		// OPTIONAL offers intent without requiring it.
		o := env.Connect("optional", env.Token(principal, "alice"), rev)
		schema := asMap(listTools(t, o).Tools[0].InputSchema)
		if at.Dig(schema, "properties", "intent") == nil || slices.Contains(anyStrings(schema["required"]), "intent") {
			t.Errorf("OPTIONAL schema %s", asJSON(schema))
		}
		if res := callTool(t, o, "echo", map[string]any{"note": "n"}); res.IsError {
			t.Errorf("OPTIONAL without intent: %s", text(res))
		}
		if res := callTool(t, o, "echo", map[string]any{"note": "n", "intent": "Because."}); res.IsError || !jsonEqual(res.StructuredContent, map[string]any{"note": "n"}) {
			t.Errorf("OPTIONAL with intent: %s", text(res))
		}
		if got := at.Dig(last(t, requests(env, optionalID, "tools/call")), "mcpRequest", "intent"); got != "Because." {
			t.Errorf("OPTIONAL intent recorded %v", got)
		}

		// NONE adds nothing, and a tool's own intent property reaches it.
		n := env.Connect("none", env.Token(principal, "alice"), rev)
		for _, tool := range listTools(t, n).Tools {
			schema := asMap(tool.InputSchema)
			if tool.Name == "echo" && at.Dig(schema, "properties", "intent") != nil {
				t.Errorf("NONE lists an intent: %s", asJSON(schema))
			}
			if tool.Name == "own_intent" && at.Dig(schema, "properties", "intent", "type") != "integer" {
				t.Errorf("own_intent's own intent property is not listed as declared: %s", asJSON(schema))
			}
		}
		if res := callTool(t, n, "own_intent", map[string]any{"intent": 7}); res.IsError || !jsonEqual(res.StructuredContent, map[string]any{"intent": 7}) {
			t.Errorf("own_intent under NONE: %s", text(res))
		}

		// ACT-297, ACT-298: a later version that declares intent is left out.
		env.UpdateAction(growing, map[string]any{"tool": map[string]any{"inputSchema": at.Object(map[string]any{"intent": at.String()})}})
		for _, tool := range listTools(t, s).Tools {
			if tool.Name == "growing" {
				t.Error("a tool whose latest version declares intent is still listed")
			}
		}
		res = callTool(t, s, "growing", map[string]any{"intent": "Try anyway."})
		if !res.IsError || !strings.Contains(text(res), "pin a version") || !strings.Contains(text(res), "rename") {
			t.Errorf("calling the clashing tool: %v %q", res.IsError, text(res))
		}
		if calls := last(t, requests(env, requiredID, "tools/call"))["calls"].([]any); len(calls) != 0 {
			t.Errorf("the clashing tool ran: %s", asJSON(calls))
		}
	})
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}
