package action_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/policy"
)

func marshal(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ACT-080, ACT-081, ACT-286, ACT-287, ACT-293, ACT-294: the listed input
// schema drops fixed-input properties (also from required) and every
// x-mcp-header, and gains intent per the server's setting.
func TestEffectiveInputSchema_ACT080_ACT081_ACT286_ACT294(t *testing.T) {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"message":      map[string]any{"type": "string", "x-mcp-header": "Message"},
			"requested_by": map[string]any{"type": "string"},
			"nested": map[string]any{"type": "object", "properties": map[string]any{
				"deep": map[string]any{"type": "string", "x-mcp-header": "Deep"}}},
			"list": map[string]any{"type": "array", "items": []any{map[string]any{"x-mcp-header": "Item"}}},
		},
		"required": []any{"message", "requested_by"},
	}
	before := marshal(t, schema)
	ref := action.ToolRef{Name: "notify_human_ops", Input: map[string]string{"requested_by": "execution.input.subject"}}
	intentProperty := `"intent":{"description":"Why you make this call: one sentence, 1 to 1,024 characters. It is recorded for whoever reviews this session.","maxLength":1024,"minLength":1,"type":"string"}`
	base := `"list":{"items":[{}],"type":"array"},"message":{"type":"string"},"nested":{"properties":{"deep":{"type":"string"}},"type":"object"}`
	cases := []struct {
		intent action.Intent
		want   string
	}{
		{"", `{"properties":{` + strings.Replace(base, `"list"`, intentProperty+`,"list"`, 1) + `},"required":["message","intent"],"type":"object"}`},
		{action.IntentRequired, `{"properties":{` + strings.Replace(base, `"list"`, intentProperty+`,"list"`, 1) + `},"required":["message","intent"],"type":"object"}`},
		{action.IntentOptional, `{"properties":{` + strings.Replace(base, `"list"`, intentProperty+`,"list"`, 1) + `},"required":["message"],"type":"object"}`},
		{action.IntentNone, `{"properties":{` + base + `},"required":["message"],"type":"object"}`},
	}
	for _, c := range cases {
		got := marshal(t, action.EffectiveInputSchema(schema, ref, c.intent))
		if got != c.want {
			t.Errorf("intent %q:\n got %s\nwant %s", c.intent, got, c.want)
		}
	}
	if marshal(t, schema) != before {
		t.Fatal("the tool's schema must not be modified")
	}
	onlyFixed := action.EffectiveInputSchema(map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{}}, "required": []any{"a"}},
		action.ToolRef{Input: map[string]string{"a": "'x'"}}, action.IntentNone)
	if marshal(t, onlyFixed) != `{"properties":{},"type":"object"}` {
		t.Fatalf("an emptied required list is dropped: %s", marshal(t, onlyFixed))
	}
}

// ACT-288, ACT-289, ACT-291, ACT-293, ACT-294, ACT-296: stated intent is
// taken out of the arguments, required under REQUIRED, 1 to 1,024 characters.
func TestSplitIntent_ACT288_ACT296(t *testing.T) {
	long := strings.Repeat("é", 1024)
	cases := []struct {
		name      string
		intent    action.Intent
		arguments map[string]any
		stated    string
		rest      string
		fails     bool
	}{
		{"ACT-289 removed before the call", action.IntentRequired, map[string]any{"intent": "Check the balance.", "a": 1}, "Check the balance.", `{"a":1}`, false},
		{"ACT-288 1,024 characters", action.IntentRequired, map[string]any{"intent": long}, long, `{}`, false},
		{"ACT-288 1,025 characters", action.IntentRequired, map[string]any{"intent": long + "x"}, "", "", true},
		{"ACT-288 empty", action.IntentRequired, map[string]any{"intent": ""}, "", "", true},
		{"not a string", action.IntentRequired, map[string]any{"intent": 3}, "", "", true},
		{"ACT-291 missing under REQUIRED", action.IntentRequired, map[string]any{"a": 1}, "", "", true},
		{"ACT-293 missing under OPTIONAL", action.IntentOptional, map[string]any{"a": 1}, "", `{"a":1}`, false},
		{"ACT-293 given under OPTIONAL", action.IntentOptional, map[string]any{"intent": "Why.", "a": 1}, "Why.", `{"a":1}`, false},
		{"ACT-293 invalid under OPTIONAL", action.IntentOptional, map[string]any{"intent": ""}, "", "", true},
		{"ACT-294/296 NONE passes a tool's own intent through", action.IntentNone, map[string]any{"intent": "tool's own"}, "", `{"intent":"tool's own"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stated, rest, err := action.SplitIntent(c.arguments, c.intent)
			if c.fails {
				var rejected *action.Error
				if !errors.As(err, &rejected) || rejected.Path != "intent" || !strings.Contains(rejected.Message, "intent") {
					t.Fatalf("want an intent error, got %v", err)
				}
				return
			}
			if err != nil || stated != c.stated || marshal(t, rest) != c.rest {
				t.Fatalf("got %q %s %v", stated, marshal(t, rest), err)
			}
		})
	}
}

// The recorded MCP request, as execution.input.
func request(subject string) map[string]any {
	return map[string]any{
		"principal": "org_2f1c9a",
		"subject":   subject,
		"client":    "claude-code",
		"method":    "tools/call",
		"params":    map[string]any{"name": "notify_human_ops", "arguments": map[string]any{"requested_by": "mallory"}},
	}
}

// ACT-024, ACT-025, ACT-026, ACT-028, ACT-587: sessions and fixed input
// evaluate against the request and the session, and fixed values replace
// the caller's.
func TestFixedInputAndSessions_ACT024_ACT028(t *testing.T) {
	def := fraudOps()
	def.Tools = append(def.Tools, action.ToolRef{Name: "audit", Input: map[string]string{
		"session_id": "session.id", "principal": "session.input.principal", "server": "'fraud-ops'",
		"amount": `decimal("10.50") * decimal("2")`, "count": "size(execution.input.params.arguments)",
	}})
	compiled, err := action.Compile(def)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	input, err := compiled.SessionInput(ctx, request("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if marshal(t, input) != `{"principal":"org_2f1c9a","subject":"alice"}` {
		t.Fatalf("session input %s", marshal(t, input))
	}
	id, err := compiled.SessionID(ctx, input)
	if err != nil || id != "10:org_2f1c9a:alice" {
		t.Fatalf("session id %q, %v", id, err)
	}
	otherInput, _ := compiled.SessionInput(ctx, request("bob"))
	otherID, _ := compiled.SessionID(ctx, otherInput)
	if otherID == id {
		t.Fatal("ACT-587: each subject gets its own session")
	}
	scope := action.Scope{Request: request("alice"), SessionID: id, SessionInput: input}

	// ACT-024, ACT-028
	effective, err := compiled.ApplyFixedInput(ctx, 1, scope, map[string]any{"requested_by": "mallory", "message": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if marshal(t, effective) != `{"message":"hi","requested_by":"alice"}` {
		t.Fatalf("effective input %s", marshal(t, effective))
	}
	// ACT-025, ACT-026
	fixed, err := compiled.FixedInput(ctx, 2, scope)
	if err != nil {
		t.Fatal(err)
	}
	if marshal(t, fixed) != `{"amount":"21.00","count":1,"principal":"org_2f1c9a","server":"fraud-ops","session_id":"10:org_2f1c9a:alice"}` {
		t.Fatalf("fixed input %s", marshal(t, fixed))
	}
	if none, err := compiled.FixedInput(ctx, 0, scope); err != nil || len(none) != 0 {
		t.Fatalf("a reference without fixed input: %v, %v", none, err)
	}
	if _, err := compiled.FixedInput(ctx, 9, scope); err == nil {
		t.Fatal("an out-of-range reference must fail")
	}

	// A failed evaluation names the field and carries CEL_EVALUATION_ERROR.
	_, err = compiled.FixedInput(ctx, 1, action.Scope{Request: map[string]any{"principal": "p"}})
	var failed *action.Error
	if !errors.As(err, &failed) || failed.Code != "CEL_EVALUATION_ERROR" || failed.Path != "tools[1].input.requested_by" {
		t.Fatalf("want a CEL_EVALUATION_ERROR at tools[1].input.requested_by, got %v", err)
	}

	// A request without the fields its grouping reads has no valid session.
	if _, err := compiled.SessionInput(ctx, map[string]any{"principal": "p"}); !errors.Is(err, action.ErrSessionInvalid) {
		t.Fatalf("missing subject: %v", err)
	}
	if _, err := compiled.SessionInput(ctx, map[string]any{"principal": "p", "subject": 7}); !errors.Is(err, action.ErrSessionInvalid) {
		t.Fatalf("a subject that fails the session schema: %v", err)
	}
}

func TestInputValidation(t *testing.T) {
	r := fixtures()
	target, _ := r.Resolve(context.Background(), "get_account_context", 0)
	compiled, err := action.Compile(target.Definition)
	if err != nil {
		t.Fatal(err)
	}
	if err := compiled.ValidateInput(map[string]any{"account_id": "a"}); err != nil {
		t.Fatal(err)
	}
	if err := compiled.ValidateInput(map[string]any{}); err == nil || !strings.Contains(err.Error(), "account_id") {
		t.Fatalf("a missing required property must fail: %v", err)
	}
}

// ACT-264, ACT-265: resource templates match in full, each variable one or
// more characters, percent-decoded.
func TestURITemplate_ACT264_ACT265(t *testing.T) {
	tmpl, err := action.ParseURITemplate("twisp://accounts/{account_id}/entries/{entry}")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		uri  string
		want string
	}{
		{"twisp://accounts/123/entries/9", `{"account_id":"123","entry":"9"}`},
		{"twisp://accounts/a%20b/entries/x%2Fy", `{"account_id":"a b","entry":"x/y"}`},
		{"twisp://accounts/a/b/entries/c", `{"account_id":"a/b","entry":"c"}`},
		{"twisp://accounts//entries/c", ``},
		{"twisp://accounts/1/entries/", ``},
		{"twisp://accounts/1/entries", ``},
		{"xtwisp://accounts/1/entries/2", ``},
		{"twisp://accounts/%zz/entries/2", ``},
	}
	for _, c := range cases {
		values, ok := tmpl.Match(c.uri)
		if c.want == "" {
			if ok {
				t.Errorf("%s matched %v", c.uri, values)
			}
			continue
		}
		if !ok || marshal(t, values) != c.want {
			t.Errorf("%s: %v %v, want %s", c.uri, values, ok, c.want)
		}
	}
	if got := strings.Join(tmpl.Variables(), ","); got != "account_id,entry" {
		t.Fatalf("variables %s", got)
	}
	for _, bad := range []string{"", "a/{x", "a/}x", "a/{x}{y}", "a/{x}/{x}", "a/{+x}", "a/{}", "a/{x-y}"} {
		if _, err := action.ParseURITemplate(bad); err == nil {
			t.Errorf("%q must be refused", bad)
		}
	}
	literal, err := action.ParseURITemplate("twisp://status")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := literal.Match("twisp://status"); !ok {
		t.Fatal("a template without variables matches its text")
	}
}

// ACT-310, ACT-315, ACT-316, ACT-317, ACT-318 through the action helpers: names,
// kinds, annotations and open world at the versions references resolve to.
func TestListingHelpers_ACT310_ACT318(t *testing.T) {
	ctx := context.Background()
	r := fixtures()
	r.add(starlarkTool("asks_model", selectOnly, map[string]any{}))
	r.versions["asks_model"][0].Definition.Tools = []action.ToolRef{{Name: "gpt"}}
	r.add(starlarkTool("indirect", selectOnly, map[string]any{}))
	r.versions["indirect"][0].Definition.Tools = []action.ToolRef{{Name: "asks_model"}}
	// cycle: loop_a → loop_b → loop_a
	r.add(starlarkTool("loop_a", nil, map[string]any{}))
	r.add(starlarkTool("loop_b", nil, map[string]any{}))
	r.versions["loop_a"][0].Definition.Tools = []action.ToolRef{{Name: "loop_b"}}
	r.versions["loop_b"][0].Definition.Tools = []action.ToolRef{{Name: "loop_a"}, {Name: "gone"}, {Name: "missing"}}
	// version 2 of indirect drops the model path (ACT-317).
	second := r.versions["indirect"][0]
	second.Version, second.Definition.Tools = 2, []action.ToolRef{{Name: "get_account"}}
	r.versions["indirect"] = append(r.versions["indirect"], second)

	server := fraudOps()
	server.Policies = everything
	cases := []struct {
		name    string
		version int
		open    bool
		kind    policy.ToolKind
		visible string
	}{
		{"gpt", 0, true, policy.KindModel, "gpt"},              // ACT-315
		{"asks_model", 0, true, policy.KindTool, "asks_model"}, // ACT-316
		{"indirect", 1, true, policy.KindTool, "indirect"},     // ACT-317
		{"indirect", 2, false, policy.KindTool, "indirect"},    // ACT-317
		{"reviewer", 0, false, policy.KindAgent, "reviewer"},   // ACT-310
		{"loop_a", 0, false, policy.KindTool, "loop_a"},        // terminates
		{"alias", 2, false, policy.KindTool, "get_account"},    // visible name at the version
		{"cel", 0, false, policy.KindNativeCEL, "cel"},         // ACT-311
		{"program", 0, false, policy.KindNativeProgram, "program"},
	}
	for _, c := range cases {
		target, err := action.ResolveTool(ctx, r, c.name, c.version)
		if err != nil {
			t.Fatal(err)
		}
		open, err := action.OpenWorld(ctx, r, target)
		if err != nil || open != c.open {
			t.Errorf("OpenWorld(%s@%d) = %v, %v; want %v", c.name, c.version, open, err, c.open)
		}
		if action.ToolKindOf(target) != c.kind || action.VisibleName(target) != c.visible {
			t.Errorf("%s: kind %v name %s", c.name, action.ToolKindOf(target), action.VisibleName(target))
		}
	}
	reviewer, _ := r.Resolve(ctx, "reviewer", 0)
	if !action.Annotations(server, reviewer, false).ReadOnlyHint {
		t.Fatal("ACT-310: a callable agent with SELECT-only policies on an ALLOW * server is read-only")
	}
	writer, _ := r.Resolve(ctx, "writer", 0)
	if action.Annotations(server, writer, false).ReadOnlyHint {
		t.Fatal("a tool allowed everything on an ALLOW * server is not read-only")
	}

	// ACT-318: program is open world when the server lists an open-world tool.
	server.Tools = []action.ToolRef{{Name: "get_account"}, {Name: "program"}}
	if open, err := action.ServerOpenWorld(ctx, r, server); err != nil || open {
		t.Fatalf("no open-world tool listed: %v %v", open, err)
	}
	server.Tools = append(server.Tools, action.ToolRef{Name: "asks_model"})
	if open, err := action.ServerOpenWorld(ctx, r, server); err != nil || !open {
		t.Fatalf("an open-world tool listed: %v %v", open, err)
	}
}

// Compiled CEL is kept per definition version.
func TestCache(t *testing.T) {
	cache := action.NewCache(2)
	def := fraudOps()
	first, err := cache.Get("id-1", 1, def)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := cache.Get("id-1", 1, action.Definition{})
	if again != first {
		t.Fatal("a version compiles once")
	}
	other, _ := cache.Get("id-1", 2, def)
	if other == first {
		t.Fatal("another version compiles on its own")
	}
	if _, err := cache.Get("id-2", 1, action.Definition{Kind: action.KindMCP, Session: &action.Session{ID: "+"}}); err == nil {
		t.Fatal("a compile error is returned, not cached")
	}
}

// The MCP endpoint evaluates the session and every fixed input on each
// request: session input, session id and one reference's fixed input.
func BenchmarkFixedInput(b *testing.B) {
	compiled, err := action.Compile(fraudOps())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := request("alice")
	arguments := map[string]any{"message": "look at 70eec1a6", "requested_by": "mallory"}
	b.Run("session", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			input, err := compiled.SessionInput(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := compiled.SessionID(ctx, input); err != nil {
				b.Fatal(err)
			}
		}
	})
	input, _ := compiled.SessionInput(ctx, req)
	id, _ := compiled.SessionID(ctx, input)
	scope := action.Scope{Request: req, SessionID: id, SessionInput: input}
	b.Run("fixed input", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := compiled.ApplyFixedInput(ctx, 1, scope, arguments); err != nil {
				b.Fatal(err)
			}
		}
	})
}
