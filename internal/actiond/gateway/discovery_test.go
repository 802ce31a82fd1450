package gateway_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
)

// ACT-001, ACT-017, ACT-076, ACT-077, ACT-078, ACT-079, ACT-080, ACT-081,
// ACT-084, ACT-117, ACT-133, ACT-134, ACT-286, ACT-287: tools/list offers one
// tool per callable reference, in reference order, leaving out disabled and
// deleted tools and versions; each inputSchema lacks the fixed input's
// properties and every x-mcp-header, and gains the required intent; the
// listing records the exact versions it offered.
func TestToolsListInReferenceOrder(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		ids := map[string]string{}
		create := func(name string, def map[string]any) {
			ids[name] = at.NewID()
			env.CreateAction(ids[name], def)
		}
		create("c_tool", at.CELTool("c_tool", `"c"`, at.Object(map[string]any{"x": at.String()})))
		create("a_tool", at.StarlarkTool("a_tool", "def run(event):\n    return event['data']\n", at.Object(map[string]any{
			"y":      map[string]any{"type": "string", "x-mcp-header": "Y"},
			"nested": map[string]any{"type": "object", "properties": map[string]any{"z": map[string]any{"type": "string", "x-mcp-header": "Z"}}},
		}, "y"), nil))
		create("b_tool", at.CELTool("b_tool", `event.data`, at.Object(map[string]any{"requested_by": at.String(), "note": at.String()}, "requested_by", "note")))
		create("d_tool", at.CELTool("d_tool", `1`, nil))
		create("e_tool", at.CELTool("e_tool", `1`, nil))
		create("f_tool", at.CELTool("f_tool", `1`, nil))
		create("g_tool", at.CELTool("g_tool", `1`, nil))
		env.UpdateAction(ids["g_tool"], map[string]any{"description": "g version 2"})

		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "ordered", Policies: at.Everything(), Tools: []map[string]any{
			at.Ref("c_tool"), at.Ref("a_tool"), at.Ref("graphql"),
			at.RefFixed("b_tool", map[string]any{"requested_by": "execution.input.subject"}),
			at.Ref("d_tool"), at.Ref("e_tool"), at.RefPinned("f_tool", 1), at.Ref("cel"), at.RefPinned("g_tool", 1),
		}}.Input())
		env.UpdateAction(ids["d_tool"], map[string]any{"enabled": false})
		env.DeleteAction(ids["e_tool"])
		env.UpdateAction(ids["f_tool"], map[string]any{"enabled": false})

		s := env.Connect("ordered", env.Token(principal, "alice"), rev)
		list := listTools(t, s)
		var names []string
		tools := map[string]*mcp.Tool{}
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
			tools[tool.Name] = tool
		}
		want := []string{"c_tool", "a_tool", "graphql", "b_tool", "cel", "g_tool"}
		if !slices.Equal(names, want) {
			t.Fatalf("tools/list names %v, want %v", names, want)
		}
		b := asMap(tools["b_tool"].InputSchema)
		if at.Dig(b, "properties", "requested_by") != nil {
			t.Errorf("b_tool lists its fixed input requested_by: %s", asJSON(b))
		}
		if !jsonEqual(b["required"], []string{"note", "intent"}) {
			t.Errorf("b_tool required %v, want [note intent]", b["required"])
		}
		a := asJSON(tools["a_tool"].InputSchema)
		if strings.Contains(a, "x-mcp-header") {
			t.Errorf("a_tool's listed schema keeps x-mcp-header: %s", a)
		}
		if at.Dig(asMap(tools["a_tool"].InputSchema), "properties", "nested", "properties", "z", "type") != "string" {
			t.Errorf("a_tool's nested property lost: %s", a)
		}
		for _, tool := range list.Tools {
			schema := asMap(tool.InputSchema)
			if at.Dig(schema, "properties", "intent", "type") != "string" || !slices.Contains(anyStrings(schema["required"]), "intent") {
				t.Errorf("%s: intent not a required argument under the default REQUIRED: %s", tool.Name, asJSON(schema))
			}
		}
		if tools["g_tool"].Description != "CEL tool g_tool" {
			t.Errorf("pinned g_tool lists description %q, want version 1's", tools["g_tool"].Description)
		}
		name, version := serverInfo(list.Meta)
		if name != "ordered" || version != "1" {
			t.Errorf("serverInfo %q %q, want ordered 1", name, version)
		}
		if list.TTLMs != 60_000 {
			t.Errorf("tools/list ttlMs %d, want 60000", list.TTLMs)
		}

		record := last(t, requests(env, serverID, "tools/list"))
		if record["status"] != "SUCCEEDED" {
			t.Fatalf("tools/list recorded %v", record["status"])
		}
		offered := at.Dig(record, "invocation", "tools").([]any)
		var recorded []string
		for _, o := range offered {
			o := o.(map[string]any)
			recorded = append(recorded, o["name"].(string))
			if id := ids[o["name"].(string)]; id != "" {
				if o["actionId"] != id {
					t.Errorf("offered %v: actionId %v, want %s", o["name"], o["actionId"], id)
				}
				wantVersion := 1.0
				if o["version"] != wantVersion {
					t.Errorf("offered %v at version %v, want %v", o["name"], o["version"], wantVersion)
				}
			}
		}
		if !slices.Equal(recorded, want) {
			t.Errorf("invocation.tools %v, want %v", recorded, want)
		}
		// g_tool unpinned would be version 2; a latest reference records it.
		env.UpdateAction(serverID, map[string]any{"tools": []map[string]any{at.Ref("g_tool")}})
		listTools(t, env.Connect("ordered", env.Token(principal, "alice"), rev))
		record = last(t, requests(env, serverID, "tools/list"))
		if v := at.Dig(record, "invocation", "tools").([]any)[0].(map[string]any)["version"]; v != 2.0 {
			t.Errorf("latest g_tool offered at version %v, want 2", v)
		}
		if record["actionVersion"] != 2.0 {
			t.Errorf("the listing recorded server version %v, want 2", record["actionVersion"])
		}
	})
}

type annotation struct {
	readOnly    bool
	destructive string // "false" or "" (omitted)
	openWorld   bool
}

func annotationOf(t *testing.T, tool *mcp.Tool) annotation {
	t.Helper()
	raw := asMap(tool)
	a, _ := raw["annotations"].(map[string]any)
	got := annotation{}
	got.readOnly = a["readOnlyHint"] == true
	if d, present := a["destructiveHint"]; present {
		if d != false {
			t.Errorf("%s: destructiveHint %v: the seed only ever says false or omits it", tool.Name, d)
		}
		got.destructive = "false"
	}
	open, present := a["openWorldHint"]
	if !present {
		t.Errorf("%s: openWorldHint missing", tool.Name)
	}
	got.openWorld = open == true
	return got
}

// ACT-303, ACT-304, ACT-305, ACT-306, ACT-307, ACT-308, ACT-309, ACT-310, ACT-311, ACT-312, ACT-313, ACT-314, ACT-315, ACT-316, ACT-317, ACT-319, ACT-320: annotations are derived from policies by
// the seed's rules, per listing, from the versions it offers.
func TestAnnotationsDerivedFromPolicies(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		tool := func(name string, actions ...string) map[string]any {
			return at.StarlarkTool(name, "def run(event):\n    return 1\n", nil, nil, at.Allow(actions, "*"))
		}
		env.CreateAction(at.NewID(), tool("t_select", "SELECT"))
		env.CreateAction(at.NewID(), tool("t_invoke", "SELECT", "INVOKE"))
		env.CreateAction(at.NewID(), tool("t_respond", "SELECT", "RESPOND"))
		env.CreateAction(at.NewID(), tool("t_star", "*"))
		env.CreateAction(at.NewID(), tool("t_actions_star", "actions:*"))
		env.CreateAction(at.NewID(), tool("t_insert", "SELECT", "INSERT"))
		env.CreateAction(at.NewID(), tool("t_update", "UPDATE"))
		changing := at.NewID()
		env.CreateAction(changing, tool("t_changing", "SELECT"))
		env.CreateAction(at.NewID(), map[string]any{"name": "m_model", "description": "a model", "kind": "model", "config": map[string]any{}})
		via := at.NewID()
		env.CreateAction(via, at.StarlarkTool("t_via_model", "def run(event):\n    return 1\n", nil, []map[string]any{at.Ref("m_model")}))
		env.CreateAction(at.NewID(), at.StarlarkTool("t_chain", "def run(event):\n    return 1\n", nil, []map[string]any{at.Ref("t_via_model")}))
		env.CreateAction(at.NewID(), map[string]any{"name": "a_agent", "description": "a callable agent", "kind": "agent", "config": map[string]any{},
			"agent": map[string]any{"instructions": "x", "model": "m"}, "tool": map[string]any{"inputSchema": at.Object(map[string]any{})},
			"policies": []map[string]any{at.Allow([]string{"SELECT"}, "*")}})

		refs := []map[string]any{}
		for _, name := range []string{"t_select", "t_invoke", "t_respond", "t_star", "t_actions_star", "t_insert", "t_update", "t_changing",
			"m_model", "t_via_model", "t_chain", "a_agent", "graphql", "cel"} {
			refs = append(refs, at.Ref(name))
		}
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "all", Policies: at.Everything(), Intent: "NONE", Tools: refs}.Input())
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "selecting", Policies: []map[string]any{at.Allow([]string{"SELECT"}, "*")}, Intent: "NONE", Tools: refs}.Input())
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "inserting", Policies: []map[string]any{at.Allow([]string{"SELECT", "INSERT"}, "*")}, Intent: "NONE", Tools: refs}.Input())

		listed := func(server string) map[string]annotation {
			out := map[string]annotation{}
			for _, tool := range listTools(t, env.Connect(server, env.Token(principal, "alice"), rev)).Tools {
				out[tool.Name] = annotationOf(t, tool)
			}
			return out
		}
		ro, rw := true, false
		check := func(server string, got map[string]annotation, want map[string]annotation) {
			t.Helper()
			for name, w := range want {
				if got[name] != w {
					t.Errorf("%s/%s: annotations %+v, want %+v", server, name, got[name], w)
				}
			}
		}
		all := listed("all")
		check("all", all, map[string]annotation{
			"t_select":       {ro, "false", false}, // ACT-304, ACT-313
			"t_invoke":       {rw, "", false},      // ACT-305, ACT-309
			"t_respond":      {rw, "", false},      // ACT-306
			"t_star":         {rw, "", false},      // ACT-307
			"t_actions_star": {rw, "", false},      // ACT-308
			"t_insert":       {rw, "false", false}, // ACT-313
			"t_update":       {rw, "", false},      // ACT-314
			"m_model":        {rw, "", true},       // ACT-315
			"t_via_model":    {rw, "", true},       // ACT-316
			"t_chain":        {rw, "", true},       // ACT-317
			"a_agent":        {ro, "false", false}, // ACT-310
			"graphql":        {rw, "", false},      // ACT-312
			"cel":            {ro, "false", false}, // ACT-311
			"t_changing":     {ro, "false", false}, // before ACT-320's change
		})
		check("selecting", listed("selecting"), map[string]annotation{
			"t_star":   {ro, "false", false}, // ACT-303
			"t_update": {ro, "false", false},
			"graphql":  {ro, "false", false}, // ACT-312
			"m_model":  {ro, "false", true},
		})
		check("inserting", listed("inserting"), map[string]annotation{
			"graphql":  {rw, "false", false},
			"t_star":   {rw, "false", false},
			"t_update": {rw, "false", false},
		})
		// ACT-320: the next listing follows the tool's new policies.
		env.UpdateAction(changing, map[string]any{"policies": []map[string]any{at.Allow([]string{"SELECT", "INSERT", "UPDATE"}, "*")}})
		// ACT-317: the model leaves the resolved version of t_via_model.
		env.UpdateAction(via, map[string]any{"tools": []map[string]any{}})
		check("all", listed("all"), map[string]annotation{
			"t_changing":  {rw, "", false},
			"t_via_model": {rw, "", false},
			"t_chain":     {rw, "", false},
		})
	})
}

// ACT-036, ACT-037, ACT-038, ACT-134: a pinned reference calls its version,
// an unpinned one the latest when each request starts, and every result
// names the server version that answered.
func TestVersionsPinnedAndLatestPerRequest(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		toolID := at.NewID()
		env.CreateAction(toolID, at.CELTool("which", `"v1"`, nil))
		env.UpdateAction(toolID, map[string]any{"config": map[string]any{"expression": `"v2"`}})
		env.CreateAction(at.NewID(), at.CELTool("which_pinned", `"p1"`, nil))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "versions", Intent: "NONE", Policies: at.Everything(),
			Tools: []map[string]any{at.Ref("which"), at.RefPinned("which_pinned", 1)}}.Input())
		s := env.Connect("versions", env.Token(principal, "alice"), rev)
		if got := text(callTool(t, s, "which", nil)); got != "v2" {
			t.Fatalf("latest reference answered %q, want v2", got)
		}
		env.UpdateAction(toolID, map[string]any{"config": map[string]any{"expression": `"v3"`}})
		res := callTool(t, s, "which", nil)
		if text(res) != "v3" {
			t.Errorf("after an update the latest reference answered %q, want v3 (resolved per request)", text(res))
		}
		if _, version := serverInfo(res.Meta); version != "1" {
			t.Errorf("serverInfo version %q, want 1", version)
		}
		call := last(t, requests(env, serverID, "tools/call"))["calls"].([]any)[0].(map[string]any)
		if call["actionVersion"] != 3.0 {
			t.Errorf("the call ran version %v, want 3", call["actionVersion"])
		}
		// The pinned tool keeps version 1 after updates.
		data := env.MustGraphQL(`{ actionByName(name: "which_pinned") { id } }`, nil)
		pinned := at.Dig(data, "actionByName", "id").(string)
		env.UpdateAction(pinned, map[string]any{"config": map[string]any{"expression": `"p2"`}})
		if got := text(callTool(t, s, "which_pinned", nil)); got != "p1" {
			t.Errorf("pinned reference answered %q, want p1", got)
		}
		// ACT-038: the server answers at its current version, per request.
		env.UpdateAction(serverID, map[string]any{"description": "second version"})
		res = callTool(t, s, "which", nil)
		if name, version := serverInfo(res.Meta); name != "versions" || version != "2" {
			t.Errorf("after updating the server, serverInfo %q %q, want versions 2", name, version)
		}
		if r := last(t, requests(env, serverID, "tools/call")); r["actionVersion"] != 2.0 {
			t.Errorf("request recorded at server version %v, want 2", r["actionVersion"])
		}
	})
}

// ACT-085, ACT-091, ACT-092, ACT-093, ACT-572, ACT-570: every server answers
// discovery, tools/list and tools/call; any method it does not offer, like
// any unknown method, is HTTP 404 with -32601, a fixed message and the
// method in data.
func TestUnservedMethods404(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "plain", Intent: "NONE", Policies: at.Everything()}.Input())
		token := env.Token(principal, "alice")
		s := env.Connect("plain", token, rev)
		if rev == at.Revision2026 {
			caps := s.InitializeResult().Capabilities
			if caps.Resources != nil || caps.Prompts != nil || caps.Logging != nil || caps.Completions != nil {
				t.Errorf("server/discover declares capabilities the server does not offer: %s", asJSON(caps))
			}
			if _, ok := caps.Extensions["io.modelcontextprotocol/skills"]; ok {
				t.Errorf("server/discover declares skills on a server without skills")
			}
			if _, ok := caps.Extensions["io.modelcontextprotocol/tasks"]; !ok {
				t.Errorf("server/discover lacks the Tasks extension: %s", asJSON(caps))
			}
		}
		methods := []string{"prompts/list", "resources/list", "resources/templates/list", "completion/complete", "foo/bar", "logging/setLevel"}
		if rev == at.Revision2026 {
			methods = append(methods, "initialize", "ping")
		} else {
			methods = append(methods, "server/discover")
		}
		messages := map[string]bool{}
		for i, method := range methods {
			// Each from its own user, so that refusal throttling records all.
			reply := env.Post("plain", env.Token(principal, "m"+method), at.Request{Method: method, ID: i + 10, Revision: rev})
			if reply.Status != 404 || reply.ErrorCode() != -32601 {
				t.Errorf("%s: %s, want 404 -32601", method, reply)
				continue
			}
			if got := at.Dig(reply.RPC, "error", "data", "method"); got != method {
				t.Errorf("%s: data.method %v", method, got)
			}
			if at.Dig(reply.RPC, "id") != float64(i+10) {
				t.Errorf("%s: id %v, want %d", method, at.Dig(reply.RPC, "id"), i+10)
			}
			messages[at.Dig(reply.RPC, "error", "message").(string)] = true
		}
		if len(messages) != 1 {
			t.Errorf("-32601 messages differ by request: %v", messages)
		}
		if _, err := s.CallTool(ctx(t), &mcp.CallToolParams{Name: "nope"}); err == nil {
			t.Error("calling a tool the server does not list succeeded")
		} else if werr := rpcError(t, err); werr.Code != -32602 || errorData(t, werr)["code"] != "tool_not_declared" || errorData(t, werr)["tool"] != "nope" {
			t.Errorf("unknown tool: %v %s, want -32602 tool_not_declared naming the tool", werr, werr.Data) // ACT-020, ACT-573
		}
	})
}

// ACT-048, ACT-050, ACT-073, ACT-074, ACT-075, ACT-083, ACT-133, ACT-134, ACT-085:
// server/discover,
// sent alone with no handshake, names 2026-07-28, the capabilities with the
// Tasks extension and the instructions, may be cached for a minute, and
// carries serverInfo in _meta; a 2025-11-25 initialize answers with the
// same identity.
func TestServerDiscover(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "discovered", Instructions: "Use these tools carefully.", Intent: "NONE", Policies: at.Everything()}.Input())
		env.UpdateAction(serverID, map[string]any{"description": "v2"})
		token := env.Token(principal, "alice")
		reply := env.Post("discovered", token, at.Request{Method: "server/discover"})
		result := reply.Result()
		if reply.Status != 200 || result == nil {
			t.Fatalf("server/discover: %s", reply)
		}
		if !slices.Contains(anyStrings(result["supportedVersions"]), "2026-07-28") || result["instructions"] != "Use these tools carefully." ||
			at.Dig(result, "capabilities", "extensions", "io.modelcontextprotocol/tasks") == nil || at.Dig(result, "capabilities", "tools") == nil ||
			result["ttlMs"] != 60000.0 {
			t.Errorf("server/discover answered %s", asJSON(result))
		}
		if at.Dig(result, "_meta", "io.modelcontextprotocol/serverInfo", "name") != "discovered" ||
			at.Dig(result, "_meta", "io.modelcontextprotocol/serverInfo", "version") != "2" {
			t.Errorf("server/discover serverInfo %s", asJSON(result["_meta"]))
		}
		reply = env.Post("discovered", token, at.Request{Method: "initialize", Revision: at.Revision2025, Params: map[string]any{
			"protocolVersion": at.Revision2025, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}})
		result = reply.Result()
		if at.Dig(result, "serverInfo", "name") != "discovered" || at.Dig(result, "serverInfo", "version") != "2" || result["protocolVersion"] != at.Revision2025 ||
			at.Dig(result, "_meta", "io.modelcontextprotocol/serverInfo", "version") != "2" || result["instructions"] != "Use these tools carefully." {
			t.Errorf("initialize answered %s", reply)
		}
		// ping is served before 2026-07-28; its empty result has no room
		// for _meta (annotating it once ended the process).
		reply = env.Post("discovered", token, at.Request{Method: "ping", Revision: at.Revision2025})
		if reply.Status != 200 || reply.Result() == nil {
			t.Errorf("ping: %s", reply)
		}
		if reply := env.Post("discovered", token, at.Request{Method: "ping", Revision: at.Revision2025}); reply.Status != 200 {
			t.Errorf("a second ping: %s", reply)
		}
		// Every 2026-07-28 tools/call result says resultType complete, a
		// tool error and a session_closed refusal included.
		env.CreateAction(at.NewID(), at.CELTool("one", `1`, nil))
		env.UpdateAction(serverID, map[string]any{"tools": []map[string]any{at.Ref("one")}})
		call := at.Request{Method: "tools/call", Params: map[string]any{"name": "one", "arguments": map[string]any{}}}
		bad := at.Request{Method: "tools/call", Params: map[string]any{"name": "one", "arguments": map[string]any{"x": []any{}}}}
		for _, q := range []at.Request{call, bad} {
			if reply := env.Post("discovered", token, q); reply.Result()["resultType"] != "complete" {
				t.Errorf("tools/call at 2026-07-28: %s", reply)
			}
		}
		env.CloseSession(serverID, at.SessionIDFor(principal, "alice"))
		if reply := env.Post("discovered", token, call); reply.Result()["resultType"] != "complete" || reply.Result()["isError"] != true {
			t.Errorf("session_closed at 2026-07-28: %s", reply)
		}
		if reply := env.Post("discovered", token, at.Request{Method: "tools/call", Revision: at.Revision2025, Params: call.Params}); reply.Result() == nil || reply.Result()["resultType"] != nil {
			t.Errorf("session_closed at 2025-11-25 carries resultType: %s", reply)
		}
	})
}

// ACT-052: hosts on the earlier revisions 2025-06-18 and 2025-03-26 list
// and call tools too.
func TestEarlierRevisions(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		env.CreateAction(at.NewID(), at.CELTool("one", `1`, nil))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "older", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("one")}}.Input())
		for _, rev := range []string{"2025-06-18", "2025-03-26"} {
			s := env.Connect("older", env.Token(principal, "alice"), rev)
			if got := s.InitializeResult().ProtocolVersion; got != rev {
				t.Errorf("negotiated %s, want %s", got, rev)
			}
			if list := listTools(t, s); len(list.Tools) != 1 {
				t.Errorf("%s: tools/list %s", rev, asJSON(list))
			}
			if res := callTool(t, s, "one", nil); res.IsError || text(res) != "1" {
				t.Errorf("%s: tools/call %s", rev, text(res))
			}
			if r := last(t, requests(env, serverID, "tools/call")); at.Dig(r, "mcpRequest", "protocolVersion") != rev || r["status"] != "SUCCEEDED" {
				t.Errorf("%s: recorded %s", rev, asJSON(r["mcpRequest"]))
			}
		}
	})
}
