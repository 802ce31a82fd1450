package graph_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// The seed's createAction example, verbatim.
const seedCreate = `mutation {
  actions {
    createAction(
      id: "3c1e4d1a-7a1b-4bde-9b7e-6b8f3f0c5a21"
      input: {
        name: "fraud-ops"
        description: "Account review tools for the fraud operations team."
        kind: "mcp"
        config: {}
        mcp: {
          name: "fraud-ops"
          instructions: "Tools for reviewing account activity."
          session: {
            start: {
              input: { principal: "execution.input.principal", subject: "execution.input.subject" }
            }
          }
        }
        session: {
          inputSchema: {
            type: "object"
            properties: { principal: { type: "string" }, subject: { type: "string" } }
            required: ["principal", "subject"]
          }
          id: "string(size(session.input.principal)) + ':' + session.input.principal + ':' + session.input.subject"
        }
        tools: [
          { name: "get_account_context" }
          { name: "notify_human_ops", input: { requested_by: "execution.input.subject" } }
        ]
        policies: [{ effect: ALLOW, actions: [SELECT], resources: ["financial.*"] }]
      }
    ) {
      version
    }
  }
}`

// The seed's promotion to LIVE, verbatim.
const seedPromote = `mutation {
  actions {
    updateAction(
      id: "3c1e4d1a-7a1b-4bde-9b7e-6b8f3f0c5a21"
      input: {
        mcp: {
          name: "fraud-ops"
          instructions: "Tools for reviewing account activity."
          session: {
            start: {
              input: { principal: "execution.input.principal", subject: "execution.input.subject" }
            }
          }
          mode: LIVE
        }
      }
    ) {
      version
    }
  }
}`

const fraudOpsID = "3c1e4d1a-7a1b-4bde-9b7e-6b8f3f0c5a21"

const (
	contextToolID = "0b6a4c4e-2f7e-4c55-9d43-6a3f4e2b8d10"
	notifyToolID  = "7d2a9e04-5b1c-4f3e-8a6d-0c9b2e7f4a18"
)

// createTools creates the seed's two tools: a Starlark tool and a cel tool.
func (a *api) createTools() {
	a.t.Helper()
	a.root(`mutation {
  actions {
    createAction(id: "` + contextToolID + `", input: {
      name: "get_account_context"
      description: "An account's recent activity."
      kind: "tool"
      config: { source: """
def run(event):
    return {"account": event["data"]["account_id"]}
""" }
      tool: { inputSchema: { type: "object", properties: { account_id: { type: "string" } }, required: ["account_id"] } }
      policies: [{ effect: ALLOW, actions: [SELECT], resources: ["financial.*"] }]
    }) { version }
  }
}`).ok()
	a.root(`mutation {
  actions {
    createAction(id: "` + notifyToolID + `", input: {
      name: "notify_human_ops"
      kind: "cel"
      config: { expression: "event.data" }
      tool: { inputSchema: { type: "object", properties: { message: { type: "string" }, requested_by: { type: "string" } }, required: ["message"] } }
      policies: [{ effect: ALLOW, actions: ["SELECT", "INSERT"], resources: ["financial.*"] }]
    }) { version }
  }
}`).ok()
}

// ACT-003, ACT-004, ACT-012, ACT-013, ACT-014, ACT-529: the seed's server is
// created with createAction as written in the seed, at version 1, and reads
// back as given, in preview mode.
func TestSeedCreateAction_ACT003_ACT004_ACT012_ACT013_ACT014_ACT529(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.createTools()
		data := a.root(seedCreate).ok()
		if v := at(t, data, "actions", "createAction", "version"); v != 1.0 {
			t.Fatalf("version %v", v)
		}
		got := a.root(`{ action(id: "` + fraudOpsID + `") {
			id version name description kind enabled deleted config
			mcp { name instructions session mode intent endpoint limits { callsPerMinute } }
			session
			tools { name version input }
			policies { effect actions resources }
			execution { responseTimeout }
			created modified
		} }`).ok()
		action := at(t, got, "action")
		for field, want := range map[string]any{
			"id": fraudOpsID, "version": 1.0, "name": "fraud-ops", "kind": "mcp", "enabled": true, "deleted": false,
			"description": "Account review tools for the fraud operations team.",
			"created":     "2026-03-02T09:00:00Z", "modified": "2026-03-02T09:00:00Z",
		} {
			if v := at(t, action, field); v != want {
				t.Errorf("%s = %v, want %v", field, v, want)
			}
		}
		wantJSON := map[string]string{
			"config":    `{}`,
			"mcp":       `{"endpoint":"/mcp/v1/000000000000/fraud-ops","instructions":"Tools for reviewing account activity.","intent":"REQUIRED","limits":null,"mode":"PREVIEW","name":"fraud-ops","session":{"start":{"input":{"principal":"execution.input.principal","subject":"execution.input.subject"}}}}`,
			"session":   `{"id":"string(size(session.input.principal)) + ':' + session.input.principal + ':' + session.input.subject","inputSchema":{"properties":{"principal":{"type":"string"},"subject":{"type":"string"}},"required":["principal","subject"],"type":"object"}}`,
			"tools":     `[{"input":null,"name":"get_account_context","version":null},{"input":{"requested_by":"execution.input.subject"},"name":"notify_human_ops","version":null}]`,
			"policies":  `[{"actions":["SELECT"],"effect":"ALLOW","resources":["financial.*"]}]`,
			"execution": `{"responseTimeout":60}`,
		}
		for field, want := range wantJSON {
			if got := jsonOf(t, at(t, action, field)); got != want {
				t.Errorf("%s = %s\nwant %s", field, got, want)
			}
		}
	})
}

// ACT-539, ACT-541: the seed's promotion writes version 2 in LIVE mode; the
// supplied mcp block replaced the stored one whole.
func TestSeedPromoteToLive_ACT539_ACT541(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.createTools()
		a.root(seedCreate).ok()
		a.clock.Advance(3600e9)
		data := a.root(seedPromote).ok()
		if v := at(t, data, "actions", "updateAction", "version"); v != 2.0 {
			t.Fatalf("version %v", v)
		}
		got := a.root(`{ action(id: "` + fraudOpsID + `") { version mcp { mode instructions } tools { name } created modified } }`).ok()
		if s := jsonOf(t, got); s != `{"action":{"created":"2026-03-02T09:00:00Z","mcp":{"instructions":"Tools for reviewing account activity.","mode":"LIVE"},"modified":"2026-03-02T10:00:00Z","tools":[{"name":"get_account_context"},{"name":"notify_human_ops"}],"version":2}}` {
			t.Fatalf("after promotion: %s", s)
		}
		// ACT-541: a block without instructions drops them.
		a.root(`mutation { actions { updateAction(id: "` + fraudOpsID + `", input: { mcp: {
			name: "fraud-ops", session: { start: { input: { principal: "execution.input.principal", subject: "execution.input.subject" } } }, mode: LIVE
		} }) { version mcp { instructions mode } } } }`).ok()
		got = a.root(`{ action(id: "` + fraudOpsID + `") { version mcp { instructions mode } } }`).ok()
		if s := jsonOf(t, got); s != `{"action":{"mcp":{"instructions":null,"mode":"LIVE"},"version":3}}` {
			t.Fatalf("after a block without instructions: %s", s)
		}
	})
}

func mustContain(t *testing.T, s, want string) {
	t.Helper()
	if !strings.Contains(s, want) {
		t.Fatalf("%q does not contain %q", s, want)
	}
}

// id is the n-th test action ID.
func id(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

const createWithVariables = `mutation($id: ID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { id version name } } }`

const updateWithVariables = `mutation($id: ID!, $input: ActionUpdateInput!) { actions { updateAction(id: $id, input: $input) { id version name } } }`

// create creates an action from a JSON-shaped input passed as a variable.
func (a *api) create(id string, input map[string]any) *result {
	a.t.Helper()
	return a.root(createWithVariables, map[string]any{"id": id, "input": input})
}

func (a *api) update(id string, input map[string]any) *result {
	a.t.Helper()
	return a.root(updateWithVariables, map[string]any{"id": id, "input": input})
}

func starlarkInput(name string) map[string]any {
	return map[string]any{
		"name": name, "kind": "tool",
		"config":   map[string]any{"source": "def run(event):\n    return event[\"data\"]\n"},
		"tool":     map[string]any{"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"account_id": map[string]any{"type": "string"}}}},
		"policies": []any{map[string]any{"effect": "ALLOW", "actions": []any{"SELECT"}, "resources": []any{"financial.*"}}},
	}
}

func skillInput(name, description string) map[string]any {
	return map[string]any{"name": name, "kind": "skill", "description": description, "config": map[string]any{"instructions": "Review the account."}}
}

// serverInput is a small valid MCP server over the seed's tools.
func serverInput() map[string]any {
	return map[string]any{
		"name": "ops", "kind": "mcp", "config": map[string]any{},
		"mcp": map[string]any{"name": "ops", "session": map[string]any{"start": map[string]any{"input": map[string]any{
			"principal": "execution.input.principal", "subject": "execution.input.subject"}}}},
		"session": map[string]any{
			"inputSchema": map[string]any{"type": "object"},
			"id":          "string(size(session.input.principal)) + ':' + session.input.principal + ':' + session.input.subject",
		},
		"tools": []any{
			map[string]any{"name": "get_account_context"},
			map[string]any{"name": "notify_human_ops", "input": map[string]any{"requested_by": "execution.input.subject"}},
		},
	}
}

// createMany creates actions in one request, each with its alias.
func (a *api) createMany(inputs map[string]map[string]any) {
	a.t.Helper()
	var doc strings.Builder
	doc.WriteString("mutation(")
	vars := map[string]any{}
	n := 0
	var fields strings.Builder
	for actionID, input := range inputs {
		n++
		fmt.Fprintf(&doc, "$i%d: ActionInput!, ", n)
		vars[fmt.Sprintf("i%d", n)] = input
		fmt.Fprintf(&fields, "a%d: createAction(id: %q, input: $i%d) { version }\n", n, actionID, n)
	}
	doc.WriteString(") { actions {\n" + fields.String() + "} }")
	a.root(doc.String(), vars).ok()
}

// ACT-005, ACT-006, ACT-008, ACT-009, ACT-010, ACT-011, ACT-019, ACT-022, ACT-023, ACT-027, ACT-031, ACT-041, ACT-542, ACT-600, ACT-601, ACT-602: every rejected definition is a GraphQL error with
// data null, the rule's code, and the field at fault in the message and in
// extensions.field; nothing is stored.
func TestDefinitionRejections_ACT005_ACT006_ACT008_ACT009_ACT010_ACT011_ACT600_ACT601_ACT602(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.createTools()
		a.create(id(900), skillInput("fraud-review-2", "How to review an account for fraud.")).ok()
		cases := []struct {
			name   string
			change func(map[string]any)
			code   string
			field  string
		}{
			{"ACT-005 ACT-600 no mcp block", func(in map[string]any) { delete(in, "mcp") }, "BAD_REQUEST", "mcp"},
			{"ACT-006 ACT-601 no session block", func(in map[string]any) { delete(in, "session") }, "BAD_REQUEST", "session"},
			{"ACT-008 triggers", func(in map[string]any) { in["triggers"] = []any{map[string]any{"schedule": "@hourly"}} }, "BAD_REQUEST", "triggers"},
			{"ACT-009 tool block", func(in map[string]any) { in["tool"] = map[string]any{"inputSchema": map[string]any{"type": "object"}} }, "BAD_REQUEST", "tool"},
			{"ACT-010 agent block", func(in map[string]any) { in["agent"] = map[string]any{"model": "m"} }, "BAD_REQUEST", "agent"},
			{"ACT-011 ACT-602 config", func(in map[string]any) { in["config"] = map[string]any{"a": 1} }, "BAD_REQUEST", "config"},
			{"ACT-022 duplicate tool names", func(in map[string]any) {
				in["tools"] = []any{map[string]any{"name": "get_account_context"}, map[string]any{"name": "get_account_context"}}
			}, "BAD_REQUEST", "tools[1].name"},
			{"ACT-023 approval", func(in map[string]any) {
				in["tools"] = []any{map[string]any{"name": "get_account_context", "approval": map[string]any{"required": true}}}
			}, "BAD_REQUEST", "tools[0].approval.required"},
			{"ACT-027 fixed input reads event", func(in map[string]any) {
				in["tools"] = []any{map[string]any{"name": "notify_human_ops", "input": map[string]any{"requested_by": "event.data.subject"}}}
			}, "BAD_REQUEST", "tools[0].input.requested_by"},
			{"ACT-031 skill preload", func(in map[string]any) {
				in["skills"] = []any{map[string]any{"name": "fraud-review-2", "preload": true}}
			}, "BAD_REQUEST", "skills[0].preload"},
			{"ACT-041 response timeout over 10 minutes", func(in map[string]any) {
				in["execution"] = map[string]any{"responseTimeout": "11m"}
			}, "BAD_REQUEST", "execution.responseTimeout"},
			{"unknown tool", func(in map[string]any) { in["tools"] = []any{map[string]any{"name": "no_such_tool"}} }, "NOT_FOUND", "tools[0].name"},
			// An id reading a field start.input does not map would refuse
			// every request as mismatched (found tried as a new user would).
			{"session id reads a field start.input does not map", func(in map[string]any) {
				in["session"].(map[string]any)["id"] = "session.input.subject + ':' + session.input.tenant"
			}, "BAD_REQUEST", "session.id"},
			{"policy without resources", func(in map[string]any) {
				in["policies"] = []any{map[string]any{"effect": "ALLOW", "actions": []any{"SELECT"}, "resources": []any{}}}
			}, "BAD_REQUEST", "policies[0].resources"},
			{"unknown kind", func(in map[string]any) { in["kind"] = "robot" }, "BAD_REQUEST", "kind"},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				input := serverInput()
				c.change(input)
				a.create(id(i+1), input).failsOn(c.code, c.field)
				if got := a.root(`{ action(id: "` + id(i+1) + `") { id } }`).ok(); at(t, got, "action") != nil {
					t.Fatalf("a rejected action was stored: %v", got)
				}
			})
		}
		// ACT-007: mcp, session and config {} are enough.
		minimal := serverInput()
		delete(minimal, "tools")
		a.create(id(100), minimal).ok()
		// ACT-041: ten minutes is allowed.
		tenMinutes := serverInput()
		tenMinutes["name"] = "ops10"
		tenMinutes["execution"] = map[string]any{"responseTimeout": "10m"}
		a.create(id(101), tenMinutes).ok()
	})
}

// ACT-019: only an MCP server lists program, invoke, get_task and
// cancel_task; ACT-017, ACT-018: graphql and cel anywhere, all six on a
// server.
func TestNativeTools_ACT017_ACT018_ACT019(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		for i, native := range []string{"program", "invoke", "get_task", "cancel_task"} {
			agent := map[string]any{"name": "agent" + native, "kind": "agent", "agent": map[string]any{"model": "m"},
				"tools": []any{map[string]any{"name": native}}}
			a.create(id(i+1), agent).failsOn("BAD_REQUEST", "tools[0].name")
		}
		agent := map[string]any{"name": "reviewer", "kind": "agent", "agent": map[string]any{"model": "m"},
			"tools": []any{map[string]any{"name": "graphql"}, map[string]any{"name": "cel"}}}
		a.create(id(10), agent).ok()
		server := serverInput()
		var tools []any
		for _, native := range []string{"graphql", "cel", "program", "invoke", "get_task", "cancel_task"} {
			tools = append(tools, map[string]any{"name": native})
		}
		server["tools"] = tools
		a.create(id(11), server).ok()
		got := a.root(`{ action(id: "` + id(11) + `") { tools { name } } }`).ok()
		if s := jsonOf(t, got); s != `{"action":{"tools":[{"name":"graphql"},{"name":"cel"},{"name":"program"},{"name":"invoke"},{"name":"get_task"},{"name":"cancel_task"}]}}` {
			t.Fatalf("tools %s", s)
		}
	})
}

// ACT-021: 128 tools are accepted, 129 are not; ACT-030: 64 skills are,
// 65 are not.
func TestReferenceLimits_ACT021_ACT030(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		inputs := map[string]map[string]any{}
		var tools, skills []any
		for i := range 129 {
			name := fmt.Sprintf("tool_%03d", i)
			inputs[id(1000+i)] = starlarkInput(name)
			tools = append(tools, map[string]any{"name": name})
		}
		for i := range 65 {
			name := fmt.Sprintf("skill-%03d", i)
			inputs[id(2000+i)] = skillInput(name, "A skill.")
			skills = append(skills, map[string]any{"name": name})
		}
		a.createMany(inputs)

		server := serverInput()
		server["tools"] = tools
		a.create(id(1), server).failsOn("BAD_REQUEST", "tools")
		server["tools"] = tools[:128]
		server["skills"] = skills
		a.create(id(1), server).failsOn("BAD_REQUEST", "skills")
		server["skills"] = skills[:64]
		a.create(id(1), server).ok()
		got := a.root(`{ action(id: "` + id(1) + `") { tools { name } skills { name } } }`).ok()
		if n, m := len(at(t, got, "action", "tools").([]any)), len(at(t, got, "action", "skills").([]any)); n != 128 || m != 64 {
			t.Fatalf("%d tools, %d skills", n, m)
		}
	})
}

// ACT-032, ACT-033, ACT-034, ACT-035: a skill's name and description follow the Agent Skills
// rules, checked when the skill is written.
func TestSkillNames_ACT032_ACT033_ACT034_ACT035(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		n := 0
		next := func() string { n++; return id(n) }
		for _, bad := range []string{"Bad_Name", "a--b", "-a", strings.Repeat("a", 65)} {
			a.create(next(), skillInput(bad, "x")).failsOn("BAD_REQUEST", "name")
		}
		a.create(next(), skillInput("fraud-review-2", "x")).ok()
		a.create(next(), skillInput(strings.Repeat("a", 64), "x")).ok()
		a.create(next(), skillInput("no-description", "")).failsOn("BAD_REQUEST", "description")
		a.create(next(), skillInput("long-description", strings.Repeat("é", 1025))).failsOn("BAD_REQUEST", "description")
		a.create(next(), skillInput("long-enough", strings.Repeat("é", 1024))).ok()
		server := serverInput()
		delete(server, "tools")
		server["skills"] = []any{map[string]any{"name": "fraud-review-2"}, map[string]any{"name": "long-enough"}}
		a.create(next(), server).ok()
	})
}

// Versions: every write is a new version, history lists them oldest first,
// and each stays readable by number.
func TestVersionsAndHistory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.create(contextToolID, starlarkInput("get_account")).ok()
		for i, description := range []string{"second", "third"} {
			a.clock.Advance(60e9)
			data := a.update(contextToolID, map[string]any{"description": description}).ok()
			if v := at(t, data, "actions", "updateAction", "version"); v != float64(i+2) {
				t.Fatalf("version %v", v)
			}
		}
		got := a.root(`{ action(id: "` + contextToolID + `") { version description history { version description created modified } } }`).ok()
		want := `{"action":{"description":"third","history":[` +
			`{"created":"2026-03-02T09:00:00Z","description":null,"modified":"2026-03-02T09:00:00Z","version":1},` +
			`{"created":"2026-03-02T09:00:00Z","description":"second","modified":"2026-03-02T09:01:00Z","version":2},` +
			`{"created":"2026-03-02T09:00:00Z","description":"third","modified":"2026-03-02T09:02:00Z","version":3}],"version":3}}`
		if s := jsonOf(t, got); s != want {
			t.Fatalf("history\n%s\nwant\n%s", s, want)
		}
		got = a.root(`{ action(id: "` + contextToolID + `", version: 2) { version description } }`).ok()
		if s := jsonOf(t, got); s != `{"action":{"description":"second","version":2}}` {
			t.Fatalf("version 2: %s", s)
		}
		if got := a.root(`{ action(id: "` + contextToolID + `", version: 9) { version } }`).ok(); at(t, got, "action") != nil {
			t.Fatalf("a missing version reads %v", got)
		}
		a.root(`{ action(id: "not-a-uuid") { version } }`).failsOn("BAD_REQUEST", "id")
	})
}

// updateAction: each supplied top-level field replaces the stored one whole,
// fields left out are kept, an explicit null clears one; the kind never
// changes; an mcp block with only mode is rejected (ACT-542).
func TestUpdateSemantics_ACT542(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.createTools()
		server := serverInput()
		server["description"] = "Ops tools."
		server["policies"] = []any{
			map[string]any{"effect": "ALLOW", "actions": []any{"SELECT"}, "resources": []any{"financial.*"}},
			map[string]any{"effect": "DENY", "actions": []any{"*"}, "resources": []any{"auth.*"}},
		}
		a.create(fraudOpsID, server).ok()
		a.update(fraudOpsID, map[string]any{
			"tools":       []any{map[string]any{"name": "get_account_context"}},
			"policies":    []any{map[string]any{"effect": "ALLOW", "actions": []any{"SELECT", "INSERT"}, "resources": []any{"financial.KVValue"}}},
			"description": nil,
		}).ok()
		got := a.root(`{ action(id: "` + fraudOpsID + `") { version description tools { name } policies { effect actions resources } mcp { name } session } }`).ok()
		want := `{"action":{"description":null,"mcp":{"name":"ops"},"policies":[{"actions":["SELECT","INSERT"],"effect":"ALLOW","resources":["financial.KVValue"]}],` +
			`"session":{"id":"string(size(session.input.principal)) + ':' + session.input.principal + ':' + session.input.subject","inputSchema":{"type":"object"}},` +
			`"tools":[{"name":"get_account_context"}],"version":2}}`
		if s := jsonOf(t, got); s != want {
			t.Fatalf("after update\n%s\nwant\n%s", s, want)
		}
		a.update(fraudOpsID, map[string]any{"kind": "tool"}).failsOn("BAD_REQUEST", "kind")
		// The merged definition is validated as a whole.
		a.update(fraudOpsID, map[string]any{"config": map[string]any{"a": 1}}).failsOn("BAD_REQUEST", "config")
		// ACT-542, as a literal and as a variable.
		r := a.root(`mutation { actions { updateAction(id: "` + fraudOpsID + `", input: { mcp: { mode: LIVE } }) { version } } }`)
		r.fails("GRAPHQL_VALIDATION_FAILED")
		a.update(fraudOpsID, map[string]any{"mcp": map[string]any{"mode": "LIVE"}}).fails("GRAPHQL_VALIDATION_FAILED")
		a.update(id(77), map[string]any{"description": "x"}).failsOn("NOT_FOUND", "id")
		if got := a.root(`{ action(id: "` + fraudOpsID + `") { version } }`).ok(); at(t, got, "action", "version") != 2.0 {
			t.Fatalf("a rejected update wrote a version: %v", got)
		}
	})
}

// deleteAction writes a deleted version: the action leaves listings and name
// lookups, references to it fail, its name is free, its history stays.
func TestDeleteAction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.createTools()
		data := a.root(`mutation { actions { deleteAction(id: "` + contextToolID + `") { version deleted } } }`).ok()
		if s := jsonOf(t, data); s != `{"actions":{"deleteAction":{"deleted":true,"version":2}}}` {
			t.Fatalf("delete: %s", s)
		}
		got := a.root(`{ actionByName(name: "get_account_context") { id } actions { list { edges { node { name } } } } action(id: "` + contextToolID + `") { deleted history { version deleted } } }`).ok()
		want := `{"action":{"deleted":true,"history":[{"deleted":false,"version":1},{"deleted":true,"version":2}]},"actionByName":null,"actions":{"list":{"edges":[{"node":{"name":"notify_human_ops"}}]}}}`
		if s := jsonOf(t, got); s != want {
			t.Fatalf("after delete\n%s\nwant\n%s", s, want)
		}
		a.create(fraudOpsID, serverInput()).failsOn("NOT_FOUND", "tools[0].name")
		a.root(`mutation { actions { deleteAction(id: "`+contextToolID+`") { version } } }`).failsOn("NOT_FOUND", "id")
		a.update(contextToolID, map[string]any{"description": "back"}).failsOn("NOT_FOUND", "id")
		a.create(id(5), starlarkInput("get_account_context")).ok()
		a.create(fraudOpsID, serverInput()).ok()
	})
}

// Names are unique among an account's non-deleted actions; IDs are unique;
// a rename frees the old name.
func TestNameUniqueness(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		a.create(id(1), starlarkInput("alpha")).ok()
		a.create(id(2), starlarkInput("alpha")).failsOn("ALREADY_EXISTS", "name")
		a.create(id(1), starlarkInput("beta")).failsOn("ALREADY_EXISTS", "id")
		a.create(id(2), starlarkInput("beta")).ok()
		a.update(id(2), map[string]any{"name": "alpha"}).failsOn("ALREADY_EXISTS", "name")
		a.update(id(1), map[string]any{"name": "gamma"}).ok()
		a.create(id(3), starlarkInput("alpha")).ok()
		got := a.root(`{ actions { list { edges { cursor node { id name } } } } }`).ok()
		want := `{"actions":{"list":{"edges":[` +
			`{"cursor":"alpha","node":{"id":"` + id(3) + `","name":"alpha"}},` +
			`{"cursor":"beta","node":{"id":"` + id(2) + `","name":"beta"}},` +
			`{"cursor":"gamma","node":{"id":"` + id(1) + `","name":"gamma"}}]}}}`
		if s := jsonOf(t, got); s != want {
			t.Fatalf("list\n%s\nwant\n%s", s, want)
		}
		// Another account has its own names.
		r := a.do(createWithVariables, call{vars: map[string]any{"id": id(1), "input": starlarkInput("alpha")}, account: "111111111111"})
		r.ok()
		page := a.root(`{ actions { list(first: 1, after: "alpha") { edges { node { name } } pageInfo { hasNextPage endCursor } } } }`).ok()
		if s := jsonOf(t, page); s != `{"actions":{"list":{"edges":[{"node":{"name":"beta"}}],"pageInfo":{"endCursor":"beta","hasNextPage":true}}}}` {
			t.Fatalf("page %s", s)
		}
	})
}

// An action created with enabled: false is stored disabled, and a server may
// still reference it (it is left out of tools/list at run time); enabling
// it is an update like any other.
func TestEnabledFalse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		tool := starlarkInput("get_account_context")
		tool["enabled"] = false
		a.create(contextToolID, tool).ok()
		a.create(notifyToolID, starlarkInput("notify_human_ops")).ok()
		got := a.root(`{ actionByName(name: "get_account_context") { enabled version definition } }`).ok()
		if at(t, got, "actionByName", "enabled") != false || at(t, got, "actionByName", "definition", "enabled") != false {
			t.Fatalf("disabled: %v", got)
		}
		a.create(fraudOpsID, serverInput()).ok()
		a.update(contextToolID, map[string]any{"enabled": true}).ok()
		got = a.root(`{ actionByName(name: "get_account_context") { enabled version } }`).ok()
		if s := jsonOf(t, got); s != `{"actionByName":{"enabled":true,"version":2}}` {
			t.Fatalf("enabled: %s", s)
		}
	})
}

// ACT-603: nothing in the API runs an action; an mcp action runs only when
// its endpoint serves a request.
func TestNoMutationRunsAnAction_ACT603(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		a := newAPI(t, d)
		for _, field := range []string{"rerunExecution(id: \"x\") { id }", "replayExecution(id: \"x\") { id }", "invoke(id: \"x\") { id }"} {
			a.root(`mutation { actions { ` + field + ` } }`).fails("GRAPHQL_VALIDATION_FAILED")
		}
	})
}
