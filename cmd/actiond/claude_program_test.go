package main

import (
	"encoding/json"
	"strings"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// The low-balance flag the external agent builds: brokenFlag divides by
// zero, workingFlag writes alerts/<account>.
const (
	brokenFlag = `
def run(event):
    return {"flagged": 1 // 0 > 0}
`
	workingFlag = `
def run(event):
    low = float(event["data"]["balance"]) < 20
    graphql("mutation($k: String!, $v: JSON!) { kv { put(namespace: \"alerts\", key: $k, value: $v) { key } } }", variables = {"k": event["data"]["account"], "v": {"low": low}})
    return {"flagged": low}
`
	checkProgram = `
def run(event):
    found = graphql("query($k: String!) { kv { value(namespace: \"alerts\", key: $k) { value } } }", variables = {"k": event["data"]["account"]})
    return {"low": found["kv"]["value"]["value"]["low"], "checked": cel("x + 1", {"x": 41})}
`
)

func flagDefinition(source string, enabled bool) map[string]any {
	return map[string]any{"name": "flag_low", "description": "Flags an account whose balance is low.", "kind": "tool", "enabled": enabled,
		"config": map[string]any{"source": source}, "tools": []any{map[string]any{"name": "graphql"}},
		"tool": map[string]any{"inputSchema": map[string]any{"type": "object", "required": []any{"account", "balance"},
			"properties": map[string]any{"account": map[string]any{"type": "string"}, "balance": map[string]any{"type": "string"}}}}}
}

// ACT-322, ACT-379, ACT-382, ACT-383, ACT-385, ACT-393: the real Claude
// Code, added over HTTP with a bearer token from `actiond token` to the
// default server (which lists program and invoke), driven by a fake model
// that scripts the loop of seed 004: create a tool disabled, preview it,
// preview a draft that works, publish it enabled with updateAction, invoke
// it with commit: true, and check the result with a program. The record
// shows each step, in order, with its stated intent.
func TestClaudeCodeBuildsAToolThroughInvokeAndProgram(t *testing.T) {
	p := serve(t, store.SQLite)
	endpoint := p.URL + "/mcp/v1/000000000000/default"
	token := p.Token("local", "ada")
	toolID := at.NewID()
	sample := map[string]any{"account": "acct-1", "balance": "12.50"}
	steps := []toolStep{
		{"mcp__actiond__graphql", map[string]any{"intent": "Create the low-balance flag disabled, so nothing calls it before it works.",
			"query":     `mutation($id: ID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { version enabled } } }`,
			"variables": map[string]any{"id": toolID, "input": flagDefinition(brokenFlag, false)}}},
		{"mcp__actiond__invoke", map[string]any{"intent": "Preview the new flag on a sample account.", "action_id": toolID, "input": sample}},
		{"mcp__actiond__invoke", map[string]any{"intent": "Preview a fix of the flag as a draft.", "action_id": toolID, "input": sample,
			"draft": flagDefinition(workingFlag, false)}},
		{"mcp__actiond__graphql", map[string]any{"intent": "Publish the draft that worked, enabled.",
			"query":     `mutation($id: ID!, $input: ActionUpdateInput!) { actions { updateAction(id: $id, input: $input) { version enabled } } }`,
			"variables": map[string]any{"id": toolID, "input": flagDefinition(workingFlag, true)}}},
		{"mcp__actiond__invoke", map[string]any{"intent": "Flag the sample account for real.", "action_id": toolID, "input": sample, "commit": true}},
		{"mcp__actiond__program", map[string]any{"intent": "Check the committed flag with a program.", "source": checkProgram,
			"input": map[string]any{"account": "acct-1"}}},
	}
	api := newScriptedAPI(t, steps...)
	claude := newClaudeHost(t, api)
	claude.run("mcp", "add", "--transport", "http", "actiond", endpoint, "--header", "Authorization: Bearer "+token)
	var allowed []string
	for _, s := range steps {
		allowed = append(allowed, s.tool)
	}
	out := claude.run("-p", "Build the low-balance flag and check it.", "--allowedTools", strings.Join(allowed, ","), "--output-format", "json")
	results := api.toolResults()
	if len(results) != len(steps) {
		t.Fatalf("Claude Code sent %d tool results, want %d: %q\n%s", len(results), len(steps), results, out)
	}
	for i, r := range results {
		if strings.HasPrefix(r, "error") {
			t.Errorf("step %d answered a tool error: %s", i+1, r)
		}
	}

	calls := requestsOf(t, p, "tools/call")
	if len(calls) != len(steps) {
		t.Fatalf("%d tools/call recorded, want %d", len(calls), len(steps))
	}
	// Each step's call, in order: its tool, its intent, and what it ran.
	wantStatus := []string{"SUCCEEDED", "FAILED", "SUCCEEDED", "SUCCEEDED", "SUCCEEDED", "SUCCEEDED"}
	for i, call := range calls {
		tool := strings.TrimPrefix(steps[i].tool, "mcp__actiond__")
		if call["tool"] != tool || call["intent"] != steps[i].input["intent"] || call["status"] != "SUCCEEDED" || call["subject"] != "ada" {
			t.Errorf("step %d is recorded %v %q %v", i+1, call["tool"], call["intent"], call["status"])
			continue
		}
		if tool != "invoke" {
			continue
		}
		tree := executionOf(t, p, call["id"].(string))
		native := index(tree["calls"], 0)
		invoked := index(native["calls"], 0)
		if invoked["name"] != "flag_low" || invoked["status"] != wantStatus[i] || invoked["preview"] != (i != 4) {
			t.Errorf("step %d's invoked tool: %v %v preview %v", i+1, invoked["name"], invoked["status"], invoked["preview"])
		}
	}
	env := p.Env(store.SQLite)
	if v := env.KV("alerts", "acct-1"); !at.JSONEqual(v, map[string]any{"low": true}) {
		t.Errorf("the committed flag wrote %s", at.AsJSON(v))
	}
	var checked struct {
		Value map[string]any `json:"value"`
	}
	if err := json.Unmarshal([]byte(results[5]), &checked); err != nil || !at.JSONEqual(checked.Value, map[string]any{"low": true, "checked": 42}) {
		t.Errorf("the program answered %s", results[5])
	}
}

// executionOf reads one request with its call tree, through the CLI.
func executionOf(t *testing.T, p *at.Process, id string) map[string]any {
	t.Helper()
	var row map[string]any
	if err := json.Unmarshal([]byte(mustActiond(t, append([]string{"execution", id, "--json"}, at.StoreArgs(p.Store)...)...)), &row); err != nil {
		t.Fatal(err)
	}
	return row
}

// index is a JSON list's object i; nil when there is none.
func index(list any, i int) map[string]any {
	l, _ := list.([]any)
	if i >= len(l) {
		return nil
	}
	m, _ := l[i].(map[string]any)
	return m
}
