package gateway_test

import (
	"slices"
	"strings"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// accountSource reads an "account": the variables it was given, and fails
// for the account "boom".
const accountSource = `
def run(event):
    data = event["data"]
    if data["account_id"] == "boom":
        fail("no such account")
    return {"id": data["account_id"], "region": data.get("region", "")}
`

func accountTool(policies ...map[string]any) map[string]any {
	def := at.StarlarkTool("get_account", accountSource, at.Object(map[string]any{"account_id": at.String(), "region": at.String()}, "account_id"), nil, policies...)
	def["tool"].(map[string]any)["outputSchema"] = at.Object(map[string]any{"id": at.String(), "region": at.String()})
	return def
}

var selectOnly = at.Allow([]string{"SELECT"}, "financial.*")

func fraudReview(description string) map[string]any {
	return at.Skill("fraud-review", description, "Review the account's recent activity before acting.", []map[string]any{
		{"situation": "A card is used in two countries within an hour.", "resolution": "Hold the card and ask the owner.", "reason": "Travel that fast is unlikely."},
		{"situation": "A refund larger than the purchase.", "resolution": "Refuse it.", "reason": "Refunds never exceed what was paid."},
	}, "get_account", "close_account")
}

// rpc posts one request and fails the test on a JSON-RPC error.
func rpc(t *testing.T, env *at.Env, server, token, method string, params map[string]any) map[string]any {
	t.Helper()
	reply := env.Post(server, token, at.Request{Method: method, Params: params})
	if reply.Status != 200 || reply.Result() == nil {
		t.Fatalf("%s: %s", method, reply)
	}
	return reply.Result()
}

// ACT-029, ACT-053, ACT-087, ACT-088, ACT-089, ACT-228, ACT-229, ACT-231, ACT-232, ACT-233, ACT-234, ACT-235, ACT-236, ACT-238, ACT-239, ACT-240, ACT-241, ACT-242, ACT-243, ACT-244, ACT-245, ACT-246, ACT-247, ACT-248, ACT-256, ACT-284: a server with one skill serves it as
// SKILL.md through resources, prompts and the Skills extension; loads are
// the request's one call, recorded with uri, digest and size and a SKILL
// use, and listings load nothing but record the versions they offered.
func TestSkillServedAsFileAndPrompt(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		env.CreateAction(at.NewID(), accountTool(selectOnly))
		env.CreateAction(at.NewID(), at.StarlarkTool("close_account", `def run(event): return 1`, nil, nil))
		skillID := at.NewID()
		env.CreateAction(skillID, fraudReview("Reviewing an account for fraud."))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "skilled", Policies: at.Everything(), Intent: "NONE",
			Tools: []map[string]any{at.Ref("get_account")}, Skills: []map[string]any{at.Ref("fraud-review")}}.Input())
		token := env.Token(principal, "alice")

		discover := rpc(t, env, "skilled", token, "server/discover", nil)
		caps, _ := discover["capabilities"].(map[string]any)
		if caps["resources"] == nil || caps["prompts"] == nil || at.Dig(caps, "extensions", mcpkit.SkillsExtension) == nil {
			t.Errorf("server/discover of a server with a skill: %s", asJSON(caps))
		}

		listed := rpc(t, env, "skilled", token, "resources/list", nil)
		resources, _ := listed["resources"].([]any)
		const uri = "skill://v1/fraud-review/SKILL.md"
		if len(resources) != 1 || at.Dig(resources[0], "uri") != uri || at.Dig(resources[0], "mimeType") != "text/markdown" {
			t.Fatalf("resources/list: %s", asJSON(listed))
		}

		read := rpc(t, env, "skilled", token, "resources/read", map[string]any{"uri": uri})
		contents, _ := read["contents"].([]any)
		if len(contents) != 1 || read["ttlMs"] != 3_600_000.0 {
			t.Fatalf("resources/read: %s", asJSON(read))
		}
		file, _ := at.Dig(contents[0], "text").(string)
		front, body, ok := strings.Cut(strings.TrimPrefix(file, "---\n"), "\n---\n")
		if !strings.HasPrefix(file, "---\n") || !ok || !strings.Contains(front, "name: fraud-review") || !strings.Contains(front, "description: Reviewing an account for fraud.") {
			t.Errorf("SKILL.md frontmatter: %q", file)
		}
		for _, want := range []string{"Review the account's recent activity", "## Examples", "A card is used in two countries", "Hold the card", "Travel that fast",
			"A refund larger", "Refuse it.", "Refunds never exceed", "## Tools", "`get_account`"} {
			if !strings.Contains(body, want) {
				t.Errorf("SKILL.md lacks %q:\n%s", want, file)
			}
		}
		if strings.Contains(file, "close_account") || strings.Contains(file, "allowed-tools") {
			t.Errorf("SKILL.md names a tool the server does not offer, or grants tools:\n%s", file)
		}
		if strings.Index(body, "## Examples") > strings.Index(body, "## Tools") {
			t.Errorf("## Tools is not the closing section:\n%s", file)
		}

		loads := func(method string) map[string]any {
			t.Helper()
			request := last(t, requests(env, serverID, method))
			calls, _ := request["calls"].([]any)
			// The server is in preview mode: the load is a preview call (ACT-284).
			if len(calls) != 1 || at.Dig(calls[0], "actionId") != skillID || at.Dig(calls[0], "actionVersion") != 1.0 || at.Dig(calls[0], "preview") != true {
				t.Fatalf("%s recorded calls %s", method, asJSON(calls))
			}
			uses, _ := request["uses"].([]any)
			if len(uses) != 1 || at.Dig(uses[0], "kind") != "SKILL" || at.Dig(uses[0], "executionId") != at.Dig(calls[0], "id") {
				t.Errorf("%s recorded uses %s", method, asJSON(uses))
			}
			return request
		}
		request := loads("resources/read")
		output := at.Decode(at.Dig(request, "invocation", "output"))
		if at.Dig(output, "uri") != uri || at.Dig(output, "digest") != mcpkit.Digest([]byte(file)) || at.Dig(output, "size") != float64(len(file)) {
			t.Errorf("the load's invocation.output %s; the file is %d bytes", asJSON(output), len(file))
		}

		prompts := rpc(t, env, "skilled", token, "prompts/list", nil)
		if list, _ := prompts["prompts"].([]any); len(list) != 1 || at.Dig(list[0], "name") != "fraud-review" || at.Dig(list[0], "description") != "Reviewing an account for fraud." {
			t.Errorf("prompts/list: %s", asJSON(prompts))
		}
		prompt := rpc(t, env, "skilled", token, "prompts/get", map[string]any{"name": "fraud-review"})
		if messages, _ := prompt["messages"].([]any); len(messages) != 1 || at.Dig(messages[0], "content", "text") != file {
			t.Errorf("prompts/get: %s", asJSON(prompt))
		}
		loads("prompts/get")

		skills := rpc(t, env, "skilled", token, mcpkit.MethodListSkills, nil)
		entries, _ := skills["skills"].([]any)
		if skills["resultType"] != "complete" || len(entries) != 1 || at.Dig(entries[0], "uri") != uri ||
			at.Dig(entries[0], "frontmatter", "name") != "fraud-review" || at.Dig(entries[0], "frontmatter", "description") != "Reviewing an account for fraud." {
			t.Fatalf("skills/list: %s", asJSON(skills))
		}
		files, _ := at.Dig(entries[0], "resources").([]any)
		if len(files) != 1 || at.Dig(files[0], "digest") != mcpkit.Digest([]byte(file)) || at.Dig(files[0], "size") != float64(len(file)) {
			t.Errorf("skills/list resources %s", asJSON(files))
		}
		got := rpc(t, env, "skilled", token, mcpkit.MethodGetSkill, map[string]any{"uri": uri})
		if at.Dig(got, "skill", "uri") != uri || got["ttlMs"] != 3_600_000.0 {
			t.Errorf("skills/get: %s", asJSON(got))
		}
		loads(mcpkit.MethodGetSkill)

		// Listings load nothing and record what they offered (ACT-247, ACT-248).
		for _, method := range []string{"resources/list", "prompts/list", mcpkit.MethodListSkills} {
			request := last(t, requests(env, serverID, method))
			if calls, _ := request["calls"].([]any); len(calls) != 0 {
				t.Errorf("%s loaded %s", method, asJSON(calls))
			}
			offered, _ := at.Decode(at.Dig(request, "invocation", "skills")).([]any)
			if len(offered) != 1 || at.Dig(offered[0], "name") != "fraud-review" || at.Dig(offered[0], "version") != 1.0 {
				t.Errorf("%s recorded invocation.skills %s", method, asJSON(at.Dig(request, "invocation")))
			}
			// A listing replays: against the same version it answers the same.
			if replayed := mustReplay(t, env, request["id"].(string), nil); at.Dig(replayed, "replay", "status") != "SUCCEEDED" || replayed["outputChanged"] != false {
				t.Errorf("the replay of %s: %s", method, asJSON(replayed))
			}
		}

		// Hosts of an earlier revision get resources and prompts (ACT-053).
		for _, method := range []string{"resources/list", "prompts/list"} {
			reply := env.Post("skilled", token, at.Request{Method: method, Revision: at.Revision2025})
			if reply.Status != 200 || !strings.Contains(string(reply.Body), "fraud-review") {
				t.Errorf("%s at %s: %s", method, at.Revision2025, reply)
			}
		}

		// A load makes none of the skill's tools available (ACT-246).
		reply := env.Post("skilled", token, at.Request{Method: "tools/call", Params: map[string]any{"name": "close_account", "arguments": map[string]any{}}})
		if reply.ErrorCode() != -32602 || reply.DataCode() != "tool_not_declared" {
			t.Errorf("a call of the skill's tool the server lacks: %s", reply)
		}
	})
}

// ACT-230, ACT-249, ACT-250, ACT-251, ACT-252, ACT-255, ACT-575: a new version serves at a new URI and the old one
// is superseded; a pin keeps its version; a disabled skill is left out of
// every listing and refused.
func TestSkillVersionsAndAvailability(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		env.CreateAction(at.NewID(), accountTool(selectOnly))
		env.CreateAction(at.NewID(), at.StarlarkTool("close_account", `def run(event): return 1`, nil, nil))
		skillID := at.NewID()
		env.CreateAction(skillID, fraudReview("Reviewing an account for fraud."))
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "latest", Policies: at.Everything(), Skills: []map[string]any{at.Ref("fraud-review")}}.Input())
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "pinned", Policies: at.Everything(), Skills: []map[string]any{{"name": "fraud-review", "version": 1}}}.Input())
		env.UpdateAction(skillID, map[string]any{"description": "Reviewing an account for fraud, v2."})
		token := env.Token(principal, "alice")

		uris := func(server string) []string {
			t.Helper()
			var out []string
			for _, r := range rpc(t, env, server, token, "resources/list", nil)["resources"].([]any) {
				out = append(out, at.Dig(r, "uri").(string))
			}
			return out
		}
		const v1, v2 = "skill://v1/fraud-review/SKILL.md", "skill://v2/fraud-review/SKILL.md"
		if got := uris("latest"); !slices.Equal(got, []string{v2}) {
			t.Errorf("latest lists %v", got)
		}
		if got := uris("pinned"); !slices.Equal(got, []string{v1}) {
			t.Errorf("pinned lists %v", got)
		}
		if read := rpc(t, env, "pinned", token, "resources/read", map[string]any{"uri": v1}); !strings.Contains(at.AsJSON(read), "Reviewing an account for fraud.") {
			t.Errorf("the pin reads %s", asJSON(read))
		}
		for _, method := range []string{"resources/read", mcpkit.MethodGetSkill} {
			reply := env.Post("latest", token, at.Request{Method: method, Params: map[string]any{"uri": v1}})
			if reply.ErrorCode() != -32602 || reply.DataCode() != "mcp_skill_superseded" || at.Dig(reply.RPC, "error", "data", "uri") != v1 ||
				at.Dig(reply.RPC, "error", "data", "current") != v2 {
				t.Errorf("%s of the superseded URI: %s", method, reply)
			}
		}

		env.UpdateAction(skillID, map[string]any{"enabled": false})
		for _, server := range []string{"latest", "pinned"} {
			if got := uris(server); len(got) != 0 {
				t.Errorf("%s lists a disabled skill: %v", server, got)
			}
			if prompts := rpc(t, env, server, token, "prompts/list", nil)["prompts"].([]any); len(prompts) != 0 {
				t.Errorf("%s prompts a disabled skill: %s", server, asJSON(prompts))
			}
			if skills := rpc(t, env, server, token, mcpkit.MethodListSkills, nil)["skills"].([]any); len(skills) != 0 {
				t.Errorf("%s lists a disabled skill's entry: %s", server, asJSON(skills))
			}
			reply := env.Post(server, token, at.Request{Method: "resources/read", Params: map[string]any{"uri": v1}})
			if reply.ErrorCode() != -32602 || reply.DataCode() != "mcp_resource_not_found" || at.Dig(reply.RPC, "error", "data", "uri") != v1 {
				t.Errorf("%s: a read of a disabled skill: %s", server, reply)
			}
			reply = env.Post(server, token, at.Request{Method: "prompts/get", Params: map[string]any{"name": "fraud-review"}})
			if reply.ErrorCode() != -32602 || reply.DataCode() != "mcp_prompt_not_found" {
				t.Errorf("%s: prompts/get of a disabled skill: %s", server, reply)
			}
		}
	})
}

// ACT-090, ACT-091, ACT-092, ACT-257, ACT-259, ACT-260, ACT-261, ACT-262, ACT-263, ACT-264, ACT-265, ACT-266, ACT-267, ACT-268, ACT-269, ACT-270, ACT-271, ACT-272, ACT-274, ACT-275, ACT-276, ACT-277, ACT-278, ACT-279, ACT-280, ACT-282, ACT-575: templates read by a read-only tool;
// the first match reads, each variable percent-decoded, fixed input wins;
// canonical JSON, never cached, no intent; a failed read carries the call's
// code and the URI; a tool that gains a write makes its template
// unavailable, and a write naming a writing tool is refused.
func TestResourceTemplates(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		toolID := at.NewID()
		env.CreateAction(toolID, accountTool(selectOnly))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "ledger", Policies: at.Everything(),
			Tools: []map[string]any{at.RefFixed("get_account", map[string]any{"region": "'eu'"})},
			Resources: []map[string]any{
				at.Template("twisp://regions/{region}/accounts/{account_id}", "regional", "An account in a region.", "get_account"),
				at.Template("twisp://accounts/{account_id}", "account", "An account and its balances.", "get_account"),
			}}.Input())
		token := env.Token(principal, "alice")

		discover := rpc(t, env, "ledger", token, "server/discover", nil)
		caps, _ := discover["capabilities"].(map[string]any)
		if caps["resources"] == nil || caps["prompts"] != nil || at.Dig(caps, "extensions", mcpkit.SkillsExtension) != nil {
			t.Errorf("server/discover of a server with templates only: %s", asJSON(caps))
		}
		if reply := env.Post("ledger", token, at.Request{Method: "prompts/list"}); reply.Status != 404 || reply.ErrorCode() != -32601 {
			t.Errorf("prompts/list without skills: %s", reply)
		}
		if listed := rpc(t, env, "ledger", token, "resources/list", nil); len(listed["resources"].([]any)) != 0 {
			t.Errorf("resources/list lists more than skills' files: %s", asJSON(listed))
		}
		templates := rpc(t, env, "ledger", token, "resources/templates/list", nil)
		list, _ := templates["resourceTemplates"].([]any)
		if len(list) != 2 || at.Dig(list[1], "uriTemplate") != "twisp://accounts/{account_id}" || at.Dig(list[1], "name") != "account" ||
			at.Dig(list[1], "description") != "An account and its balances." || at.Dig(list[1], "mimeType") != "application/json" || templates["ttlMs"] != 60000.0 {
			t.Errorf("resources/templates/list: %s", asJSON(templates))
		}

		const uri = "twisp://accounts/acme%2Fmain"
		read := rpc(t, env, "ledger", token, "resources/read", map[string]any{"uri": uri})
		contents, _ := read["contents"].([]any)
		if len(contents) != 1 || at.Dig(contents[0], "uri") != uri || at.Dig(contents[0], "mimeType") != "application/json" ||
			at.Dig(contents[0], "text") != `{"id":"acme/main","region":"eu"}` || read["ttlMs"] != 0.0 {
			t.Errorf("resources/read: %s", asJSON(read))
		}
		request := last(t, requests(env, serverID, "resources/read"))
		calls, _ := request["calls"].([]any)
		if len(calls) != 1 || at.Dig(calls[0], "actionId") != toolID || !jsonEqual(at.Decode(at.Dig(calls[0], "input")), map[string]any{"account_id": "acme/main", "region": "eu"}) {
			t.Errorf("the read's call %s", asJSON(calls))
		}
		if uses, _ := request["uses"].([]any); len(uses) != 1 || at.Dig(uses[0], "kind") != "TOOL" {
			t.Errorf("the read's uses %s", asJSON(request["uses"]))
		}
		if at.Dig(request, "mcpRequest", "intent") != nil {
			t.Errorf("a read recorded an intent: %s", asJSON(request["mcpRequest"]))
		}
		// The first template that matches reads; the fixed region wins.
		read = rpc(t, env, "ledger", token, "resources/read", map[string]any{"uri": "twisp://regions/us/accounts/a1"})
		if text := at.Dig(read["contents"].([]any)[0], "text"); text != `{"id":"a1","region":"eu"}` {
			t.Errorf("the regional read answered %v", text)
		}

		for _, bad := range []string{"twisp://accounts/", "twisp://ledgers/x", "skill://v1/nothing/SKILL.md"} {
			reply := env.Post("ledger", token, at.Request{Method: "resources/read", Params: map[string]any{"uri": bad}})
			if reply.ErrorCode() != -32602 || reply.DataCode() != "mcp_resource_not_found" || at.Dig(reply.RPC, "error", "data", "uri") != bad {
				t.Errorf("resources/read %s: %s", bad, reply)
			}
		}
		reply := env.Post("ledger", token, at.Request{Method: "resources/read", Params: map[string]any{"uri": "twisp://accounts/boom"}})
		failed := last(t, requests(env, serverID, "resources/read"))
		failedCalls, _ := failed["calls"].([]any)
		if reply.ErrorCode() != -32602 || reply.DataCode() == "" || at.Dig(reply.RPC, "error", "data", "uri") != "twisp://accounts/boom" ||
			len(failedCalls) != 1 || at.Dig(failedCalls[0], "error", "code") != reply.DataCode() {
			t.Errorf("a failed read: %s; recorded calls %s", reply, asJSON(failedCalls))
		}

		// The tool gains a write: its templates go, and reads are refused.
		env.UpdateAction(toolID, map[string]any{"policies": []map[string]any{at.Allow([]string{"SELECT", "INSERT"}, "financial.*")}})
		if list := rpc(t, env, "ledger", token, "resources/templates/list", nil)["resourceTemplates"].([]any); len(list) != 0 {
			t.Errorf("templates of a tool that can write: %s", asJSON(list))
		}
		reply = env.Post("ledger", token, at.Request{Method: "resources/read", Params: map[string]any{"uri": uri}})
		if reply.ErrorCode() != -32602 || reply.DataCode() != "mcp_resource_unavailable" || at.Dig(reply.RPC, "error", "data", "uri") != uri {
			t.Errorf("a read through a tool that can write: %s", reply)
		}
		// A definition write naming it is refused.
		res := env.GraphQL(`mutation($id: ID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { version } } }`, map[string]any{"id": at.NewID(),
			"input": at.ServerSpec{Name: "writer", Tools: []map[string]any{at.Ref("get_account")},
				Resources: []map[string]any{at.Template("twisp://accounts/{account_id}", "account", "", "get_account")}}.Input()})
		if len(res.Errors) == 0 || !strings.Contains(res.Errors[0].Message, "read-only") {
			t.Errorf("a template on a writing tool was accepted: %+v", res)
		}
	})
}

// ACT-575: a load runs under the request's authority: a principal that may
// invoke the server but not the skill gets -32602 mcp_skill_denied with the
// uri, and a deleted skill is left out and refused like a disabled one.
func TestSkillLoadDeniedAndDeleted(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		env.CreateAction(at.NewID(), accountTool(selectOnly))
		env.CreateAction(at.NewID(), at.StarlarkTool("close_account", `def run(event): return 1`, nil, nil))
		skillID := at.NewID()
		env.CreateAction(skillID, fraudReview("Reviewing an account for fraud."))
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "guarded", Policies: at.Everything(), Skills: []map[string]any{at.Ref("fraud-review")}}.Input())
		env.PutPrincipal("limited", []map[string]any{at.Allow([]string{"SELECT", "INVOKE"}, "*"),
			{"effect": "DENY", "actions": []any{"INVOKE"}, "resources": []any{"actions.Action"}, "assertions": map[string]any{"skill": "context.document.kind == 'skill'"}}})
		const uri = "skill://v1/fraud-review/SKILL.md"
		limited := env.Token("limited", "lee")
		if listed := rpc(t, env, "guarded", limited, "resources/list", nil); len(listed["resources"].([]any)) != 1 {
			t.Fatalf("the limited principal's listing: %s", asJSON(listed))
		}
		for _, q := range []at.Request{{Method: "resources/read", Params: map[string]any{"uri": uri}}, {Method: mcpkit.MethodGetSkill, Params: map[string]any{"uri": uri}},
			{Method: "prompts/get", Params: map[string]any{"name": "fraud-review"}}} {
			reply := env.Post("guarded", limited, q)
			if reply.ErrorCode() != -32602 || reply.DataCode() != "mcp_skill_denied" || at.Dig(reply.RPC, "error", "data", "uri") != uri {
				t.Errorf("%s by a principal denied the skill: %s", q.Method, reply)
			}
		}
		env.DeleteAction(skillID)
		token := env.Token(principal, "alice")
		if listed := rpc(t, env, "guarded", token, "resources/list", nil); len(listed["resources"].([]any)) != 0 {
			t.Errorf("a deleted skill is listed: %s", asJSON(listed))
		}
		reply := env.Post("guarded", token, at.Request{Method: mcpkit.MethodGetSkill, Params: map[string]any{"uri": uri}})
		if reply.ErrorCode() != -32602 || reply.DataCode() != "mcp_resource_not_found" {
			t.Errorf("skills/get of a deleted skill: %s", reply)
		}
	})
}
