package main

import (
	"encoding/json"
	"strings"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// ACT-029, ACT-239, ACT-240, ACT-241, ACT-242, ACT-583: the real Claude Code, added over HTTP to
// the default server, shows the skill basics as a prompt and loads it when
// the user runs it; its model then attaches the skill's SKILL.md as a
// resource (ReadMcpResourceTool). The record shows both loads: a
// prompts/get and a resources/read, each with one load of basics v1.
func TestClaudeCodeLoadsASkillAsPromptAndResource(t *testing.T) {
	p := serve(t, store.SQLite)
	env := p.Env(store.SQLite)
	endpoint := p.URL + "/mcp/v1/000000000000/default"
	const uri = "skill://v1/basics/SKILL.md"
	api := newMessagesAPI(t, "ReadMcpResourceTool", map[string]any{"server": "actiond", "uri": uri})
	claude := newClaudeHost(t, api)
	claude.run("mcp", "add", "--transport", "http", "actiond", endpoint, "--header", "Authorization: Bearer "+env.Token("local", "ada"))

	out := claude.run("-p", "/mcp__actiond__basics", "--allowedTools", "ReadMcpResourceTool", "--output-format", "json")
	results := api.toolResults()
	if len(results) != 1 || !strings.Contains(results[0], "name: basics") || strings.HasPrefix(results[0], "error") {
		t.Fatalf("the resource the model attached: %v\n%s", results, out)
	}
	for _, method := range []string{"prompts/list", "prompts/get", "resources/read"} {
		if len(requestsOf(t, p, method)) == 0 {
			t.Errorf("Claude Code made no %s", method)
		}
	}
	for _, method := range []string{"prompts/get", "resources/read"} {
		for _, r := range requestsOf(t, p, method) {
			e := env.Execution(r["id"].(string))
			calls, _ := e["calls"].([]any)
			var output map[string]any
			json.Unmarshal([]byte(at.AsJSON(at.Decode(at.Dig(e, "invocation", "output")))), &output)
			if e["status"] != "SUCCEEDED" || len(calls) != 1 || at.Dig(calls[0], "actionName") != "basics" || at.Dig(calls[0], "actionVersion") != 1.0 ||
				output["uri"] != uri || output["digest"] == nil {
				t.Errorf("%s recorded %s", method, at.AsJSON(e))
			}
		}
	}
}
