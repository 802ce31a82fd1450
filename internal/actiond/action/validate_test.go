package action_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/expr"
	"github.com/incusspawn/isx/internal/actiond/policy"
)

func ptr[T any](v T) *T { return &v }

// ACT-003, ACT-004, ACT-007, ACT-012, ACT-013, ACT-014: the seed's example
// server is a valid definition, and so is one with only mcp, session and
// config {}.
func TestValidServers_ACT003_ACT014(t *testing.T) {
	if err := validate(t, fraudOps()); err != nil {
		t.Fatalf("the seed's example must validate: %v", err)
	}
	minimal := fraudOps()
	minimal.Tools, minimal.Policies, minimal.Description = nil, nil, ""
	if err := validate(t, minimal); err != nil {
		t.Fatalf("ACT-007: tools, skills and policies are optional: %v", err)
	}
	noConfig := fraudOps()
	noConfig.Config = nil
	if err := validate(t, noConfig); err != nil {
		t.Fatalf("an absent config reads as {}: %v", err)
	}
	full := fraudOps()
	full.Tools = append(full.Tools,
		action.ToolRef{Name: "get_account", Version: ptr(1), Input: map[string]string{"account_id": "session.input.subject"}},
		action.ToolRef{Name: "reviewer"},
		action.ToolRef{Name: "gpt"},
		action.ToolRef{Name: "graphql"}, action.ToolRef{Name: "cel"}, action.ToolRef{Name: "program"},
		action.ToolRef{Name: "invoke"}, action.ToolRef{Name: "get_task"}, action.ToolRef{Name: "cancel_task"},
		action.ToolRef{Name: "writer", Approval: &action.Approval{Required: false}},
	)
	full.Skills = []action.SkillRef{{Name: "fraud-review-2", Version: ptr(1)}}
	full.Execution = &action.Execution{ResponseTimeout: "10m"}
	full.MCP.Mode, full.MCP.Intent = action.ModeLive, action.IntentOptional
	full.MCP.Limits = &action.Limits{CallsPerMinute: 60}
	full.MCP.Resources = []action.ResourceTemplate{{URITemplate: "twisp://accounts/{account_id}", Name: "account", Tool: "get_account"}}
	if err := validate(t, full); err != nil {
		t.Fatalf("tools, agents, models and natives, pinned versions and fixed input: %v", err)
	}
}

type rejection struct {
	name   string
	mutate func(*action.Definition)
	code   string
	path   string
	says   string
}

func TestRejections(t *testing.T) {
	cases := []rejection{
		// ACT-005, ACT-600
		{"ACT-005 mcp block required", func(d *action.Definition) { d.MCP = nil }, "BAD_REQUEST", "mcp", "needs an mcp block"},
		// ACT-006, ACT-601
		{"ACT-006 session required", func(d *action.Definition) { d.Session = nil }, "BAD_REQUEST", "session", "needs a session"},
		{"ACT-008 no triggers", func(d *action.Definition) { d.Triggers = []any{map[string]any{"type": "schedule"}} }, "BAD_REQUEST", "triggers", "no triggers"},
		{"ACT-009 no tool block", func(d *action.Definition) { d.Tool = &action.ToolBlock{InputSchema: object(nil)} }, "BAD_REQUEST", "tool", "no tool block"},
		{"ACT-010 no agent block", func(d *action.Definition) { d.Agent = map[string]any{} }, "BAD_REQUEST", "agent", "no agent block"},
		// ACT-011, ACT-602
		{"ACT-011 config must be {}", func(d *action.Definition) { d.Config = map[string]any{"a": 1} }, "BAD_REQUEST", "config", "config is {}"},
		{"ACT-019 program only on mcp", nil, "", "", ""}, // see TestNativeToolsOnlyOnServers_ACT019
		{"ACT-022 duplicate visible names", func(d *action.Definition) {
			d.Tools = append(d.Tools, action.ToolRef{Name: "get_account_context", Version: ptr(1)})
		}, "BAD_REQUEST", "tools[2].name", "tools[0] already offers"},
		{"ACT-022 names at the versions read", func(d *action.Definition) {
			d.Tools = []action.ToolRef{{Name: "get_account"}, {Name: "alias"}}
		}, "BAD_REQUEST", "tools[1].name", `named "get_account"`},
		{"ACT-022 duplicate natives", func(d *action.Definition) {
			d.Tools = []action.ToolRef{{Name: "cel"}, {Name: "cel"}}
		}, "BAD_REQUEST", "tools[1].name", "already offers"},
		{"ACT-023 approval cannot be required", func(d *action.Definition) {
			d.Tools[1].Approval = &action.Approval{Required: true}
		}, "BAD_REQUEST", "tools[1].approval.required", "cannot require approval"},
		{"ACT-027 event is not available", func(d *action.Definition) {
			d.Tools[1].Input["requested_by"] = "event.data.subject"
		}, "BAD_REQUEST", "tools[1].input.requested_by", "undeclared reference to 'event'"},
		{"fixed input must compile", func(d *action.Definition) {
			d.Tools[1].Input["requested_by"] = "execution.input.subject +"
		}, "BAD_REQUEST", "tools[1].input.requested_by", "Syntax error"},
		{"fixed input for a property the tool forbids", func(d *action.Definition) {
			d.Tools = []action.ToolRef{{Name: "closed", Input: map[string]string{"b": "'x'"}}}
		}, "BAD_REQUEST", "tools[0].input.b", "no property"},
		{"ACT-030 skills are skill references", func(d *action.Definition) {
			d.Skills = []action.SkillRef{{Name: "get_account"}}
		}, "BAD_REQUEST", "skills[0].name", "not a skill"},
		{"ACT-031 no preload", func(d *action.Definition) {
			d.Skills = []action.SkillRef{{Name: "fraud-review-2", Preload: ptr(true)}}
		}, "BAD_REQUEST", "skills[0].preload", "no preload"},
		{"ACT-032 Bad_Name", func(d *action.Definition) { d.Skills = []action.SkillRef{{Name: "Bad_Name"}} }, "BAD_REQUEST", "skills[0].name", "lowercase letters"},
		{"ACT-032 a--b", func(d *action.Definition) { d.Skills = []action.SkillRef{{Name: "a--b"}} }, "BAD_REQUEST", "skills[0].name", "single hyphens"},
		{"ACT-032 -a", func(d *action.Definition) { d.Skills = []action.SkillRef{{Name: "-a"}} }, "BAD_REQUEST", "skills[0].name", "single hyphens"},
		{"ACT-034 description required", func(d *action.Definition) { d.Skills = []action.SkillRef{{Name: "empty-description"}} }, "BAD_REQUEST", "skills[0].name", "needs a description"},
		{"ACT-035 description at most 1,024", func(d *action.Definition) { d.Skills = []action.SkillRef{{Name: "long-description"}} }, "BAD_REQUEST", "skills[0].name", "1025 characters"},
		{"duplicate skills", func(d *action.Definition) {
			d.Skills = []action.SkillRef{{Name: "fraud-review-2"}, {Name: "fraud-review-2", Version: ptr(1)}}
		}, "BAD_REQUEST", "skills[1].name", "already references"},
		{"ACT-041 responseTimeout at most 10 minutes", func(d *action.Definition) {
			d.Execution = &action.Execution{ResponseTimeout: "11m"}
		}, "BAD_REQUEST", "execution.responseTimeout", "at most 10 minutes"},
		{"ACT-041 ISO 8601 over 10 minutes", func(d *action.Definition) {
			d.Execution = &action.Execution{ResponseTimeout: "PT10M1S"}
		}, "BAD_REQUEST", "execution.responseTimeout", "at most 10 minutes"},
		{"responseTimeout must parse", func(d *action.Definition) {
			d.Execution = &action.Execution{ResponseTimeout: "soon"}
		}, "BAD_REQUEST", "execution.responseTimeout", "not a duration"},
		{"responseTimeout must be positive", func(d *action.Definition) {
			d.Execution = &action.Execution{ResponseTimeout: "0s"}
		}, "BAD_REQUEST", "execution.responseTimeout", "positive"},
		{"ACT-542 mcp block without name", func(d *action.Definition) {
			d.MCP = &action.MCP{Mode: action.ModeLive}
		}, "BAD_REQUEST", "mcp.name", "needs name"},
		{"ACT-542 mcp block without session", func(d *action.Definition) {
			d.MCP.Session = nil
		}, "BAD_REQUEST", "mcp.session", "session.start.input"},
		{"mode must be known", func(d *action.Definition) { d.MCP.Mode = "DRAFT" }, "BAD_REQUEST", "mcp.mode", "PREVIEW or LIVE"},
		{"intent must be known", func(d *action.Definition) { d.MCP.Intent = "MAYBE" }, "BAD_REQUEST", "mcp.intent", "REQUIRED, OPTIONAL or NONE"},
		{"callsPerMinute at least 1", func(d *action.Definition) { d.MCP.Limits = &action.Limits{} }, "BAD_REQUEST", "mcp.limits.callsPerMinute", "at least 1"},
		// Found tried as a new user would: an id reading a field start.input
		// does not map refused every request of every user as mismatched.
		{"session id reads only what start.input maps", func(d *action.Definition) {
			d.Session.ID = d.Session.ID + " + ':' + session.input.tenant"
		}, "BAD_REQUEST", "session.id", "session.input.tenant, which mcp.session.start.input does not map"},
		{"session id must compile", func(d *action.Definition) { d.Session.ID = "session.input.principal +" }, "BAD_REQUEST", "session.id", "Syntax error"},
		{"session id reads only session", func(d *action.Definition) {
			d.Session.ID = "execution.input.subject"
		}, "BAD_REQUEST", "session.id", "undeclared reference to 'execution'"},
		{"session id is a string", func(d *action.Definition) { d.Session.ID = "size(session.input.principal)" }, "BAD_REQUEST", "session.id", "produces int"},
		{"start.input reads only the request", func(d *action.Definition) {
			d.MCP.Session.Start.Input["subject"] = "session.id"
		}, "BAD_REQUEST", "mcp.session.start.input.subject", "undeclared reference to 'session'"},
		{"session schema requires what start.input produces", func(d *action.Definition) {
			d.Session.InputSchema["required"] = []any{"principal", "subject", "client"}
		}, "BAD_REQUEST", "mcp.session.start.input", `requires "client"`},
		{"session schema must be an object schema", func(d *action.Definition) {
			d.Session.InputSchema = map[string]any{"type": "string"}
		}, "BAD_REQUEST", "session.inputSchema", `"type": "object"`},
		{"session schema must be a schema", func(d *action.Definition) {
			d.Session.InputSchema["properties"] = "nope"
		}, "BAD_REQUEST", "session.inputSchema", "not a valid JSON Schema"},
		{"session schema may not load files", func(d *action.Definition) {
			d.Session.InputSchema["properties"] = map[string]any{"p": map[string]any{"$ref": "file:///etc/passwd"}}
		}, "BAD_REQUEST", "session.inputSchema", "may not reference"},
		{"ACT-295 intent clash under REQUIRED", func(d *action.Definition) {
			d.Tools = append(d.Tools, action.ToolRef{Name: "with_intent"})
		}, "BAD_REQUEST", "tools[2].name", "own intent property"},
		{"ACT-295 intent clash under OPTIONAL", func(d *action.Definition) {
			d.MCP.Intent = action.IntentOptional
			d.Tools = append(d.Tools, action.ToolRef{Name: "with_intent"})
		}, "BAD_REQUEST", "tools[2].name", "own intent property"},
		{"ACT-258 resource tool must be listed", func(d *action.Definition) {
			d.MCP.Resources = []action.ResourceTemplate{{URITemplate: "twisp://accounts/{account_id}", Name: "account", Tool: "get_account"}}
		}, "BAD_REQUEST", "mcp.resources[0].tool", "not one of this server's tools"},
		{"ACT-276 resource tool must be read-only", func(d *action.Definition) {
			d.Policies = everything
			d.MCP.Resources = []action.ResourceTemplate{{URITemplate: "twisp://ops/{x}", Name: "ops", Tool: "notify_human_ops"}}
		}, "BAD_REQUEST", "mcp.resources[0].tool", "must be read-only"},
		{"resource template must parse", func(d *action.Definition) {
			d.MCP.Resources = []action.ResourceTemplate{{URITemplate: "twisp://accounts/{+id}", Name: "a", Tool: "get_account_context"}}
		}, "BAD_REQUEST", "mcp.resources[0].uriTemplate", "simple variables"},
		{"resource template needs a name", func(d *action.Definition) {
			d.MCP.Resources = []action.ResourceTemplate{{URITemplate: "twisp://a/{id}", Tool: "get_account_context"}}
		}, "BAD_REQUEST", "mcp.resources[0].name", "needs a name"},
		{"unknown tool", func(d *action.Definition) { d.Tools = []action.ToolRef{{Name: "nothing"}} }, "NOT_FOUND", "tools[0].name", `no tool named "nothing"`},
		{"unknown version", func(d *action.Definition) {
			d.Tools = []action.ToolRef{{Name: "get_account", Version: ptr(7)}}
		}, "NOT_FOUND", "tools[0].name", "at version 7"},
		{"deleted tool", func(d *action.Definition) { d.Tools = []action.ToolRef{{Name: "gone"}} }, "NOT_FOUND", "tools[0].name", "no tool"},
		{"version from 1", func(d *action.Definition) { d.Tools[0].Version = ptr(0) }, "BAD_REQUEST", "tools[0].version", "from 1"},
		{"natives have no versions", func(d *action.Definition) { d.Tools = []action.ToolRef{{Name: "cel", Version: ptr(1)}} }, "BAD_REQUEST", "tools[0].version", "no versions"},
		{"agent without tool block", func(d *action.Definition) { d.Tools = []action.ToolRef{{Name: "planner"}} }, "BAD_REQUEST", "tools[0].name", "agent without a tool block"},
		{"a skill is not a tool", func(d *action.Definition) { d.Tools = []action.ToolRef{{Name: "fraud-review-2"}} }, "BAD_REQUEST", "tools[0].name", "of kind skill"},
		{"a server is not a tool", func(d *action.Definition) { d.Tools = []action.ToolRef{{Name: "other-server"}} }, "BAD_REQUEST", "tools[0].name", "of kind mcp"},
		{"unknown skill", func(d *action.Definition) { d.Skills = []action.SkillRef{{Name: "nothing"}} }, "NOT_FOUND", "skills[0].name", "no skill"},
		{"policies are validated", func(d *action.Definition) { d.Policies[0].Effect = "PERMIT" }, "BAD_REQUEST", "policies[0].effect", "ALLOW or DENY"},
		{"policy assertions compile", func(d *action.Definition) {
			d.Policies[0].Assertions = map[string]string{"own": "context.document.owner =="}
		}, "BAD_REQUEST", "policies[0].assertions.own", "Syntax error"},
		{"name required", func(d *action.Definition) { d.Name = "" }, "BAD_REQUEST", "name", "required"},
		{"name characters", func(d *action.Definition) { d.Name = "fraud ops/1" }, "BAD_REQUEST", "name", "letters, digits"},
		{"kind required", func(d *action.Definition) { d.Kind = "" }, "BAD_REQUEST", "kind", "required"},
		{"kind known", func(d *action.Definition) { d.Kind = "server" }, "BAD_REQUEST", "kind", "unknown kind"},
	}
	for _, c := range cases {
		if c.mutate == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			def := clone(fraudOps())
			c.mutate(&def)
			expectRejection(t, validate(t, def), c.code, c.path, c.says)
		})
	}
}

// ACT-491: the seed's own example of a later version, a field added to
// start.input that session.id does not include, is a write the platform
// accepts: the sessions it changes are refused until they are closed.
func TestSessionIDMayLeaveOutAStartField(t *testing.T) {
	def := clone(fraudOps())
	def.MCP.Session.Start.Input["tenant"] = "execution.input.tenant"
	if err := validate(t, def); err != nil {
		t.Fatalf("adding a start.input field the id does not read: %v", err)
	}
}

func expectRejection(t *testing.T, err error, code, path, says string) {
	t.Helper()
	var rejected *action.Error
	if !errors.As(err, &rejected) {
		t.Fatalf("want an *action.Error, got %v", err)
	}
	if rejected.Code != code || rejected.Path != path || !strings.Contains(rejected.Error(), says) {
		t.Fatalf("got %s %q: %s\nwant %s %q containing %q", rejected.Code, rejected.Path, rejected.Message, code, path, says)
	}
}

// ACT-027: a CEL failure keeps its expr.Error, with code and position, under
// the action.Error.
func TestCELRejectionKeepsPosition_ACT027(t *testing.T) {
	def := fraudOps()
	def.Tools[1].Input["requested_by"] = "execution.input.subject + event.data"
	err := validate(t, def)
	var celErr *expr.Error
	if !errors.As(err, &celErr) || celErr.Line != 1 || celErr.Column != 27 {
		t.Fatalf("want the expr.Error at 1:27, got %v", err)
	}
}

// ACT-296: with intent NONE a tool with its own intent property is offered.
func TestIntentNoneAllowsOwnIntent_ACT296(t *testing.T) {
	def := fraudOps()
	def.MCP.Intent = action.IntentNone
	def.Tools = append(def.Tools, action.ToolRef{Name: "with_intent"})
	if err := validate(t, def); err != nil {
		t.Fatal(err)
	}
}

// ACT-018, ACT-019: program, invoke, get_task and cancel_task are listable
// only by an MCP server; graphql and cel by anything.
func TestNativeToolsOnlyOnServers_ACT019(t *testing.T) {
	agent := action.Definition{Name: "helper", Kind: action.KindAgent, Agent: map[string]any{"model": "m"}}
	tool := starlarkTool("helper_tool", selectOnly, map[string]any{})
	for _, base := range []action.Definition{agent, tool} {
		for _, name := range []string{"program", "invoke", "get_task", "cancel_task"} {
			def := clone(base)
			def.Tools = []action.ToolRef{{Name: name}}
			expectRejection(t, validate(t, def), "BAD_REQUEST", "tools[0].name", "only an MCP server can list the native tool "+name)
		}
		def := clone(base)
		def.Tools = []action.ToolRef{{Name: "graphql"}, {Name: "cel"}}
		if err := validate(t, def); err != nil {
			t.Fatalf("ACT-017: %s may list graphql and cel: %v", base.Kind, err)
		}
	}
}

// ACT-021: at most 128 tools.
func TestToolLimit_ACT021(t *testing.T) {
	r := fixtures()
	def := fraudOps()
	def.Tools = nil
	for i := range 129 {
		name := fmt.Sprintf("tool_%03d", i)
		r.add(starlarkTool(name, selectOnly, map[string]any{}))
		def.Tools = append(def.Tools, action.ToolRef{Name: name})
	}
	if err := action.Validate(context.Background(), def, r, root); err == nil || !strings.Contains(err.Error(), "at most 128") {
		t.Fatalf("129 tools: %v", err)
	}
	def.Tools = def.Tools[:128]
	if err := action.Validate(context.Background(), def, r, root); err != nil {
		t.Fatalf("128 tools: %v", err)
	}
}

// ACT-030, ACT-033: at most 64 skills; a skill name of 64 characters, not 65.
func TestSkillLimits_ACT030_ACT033(t *testing.T) {
	r := fixtures()
	def := fraudOps()
	for i := range 65 {
		name := fmt.Sprintf("skill-%d", i)
		r.add(skill(name, "A skill."))
		def.Skills = append(def.Skills, action.SkillRef{Name: name})
	}
	if err := action.Validate(context.Background(), def, r, root); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Fatalf("65 skills: %v", err)
	}
	def.Skills = def.Skills[:64]
	if err := action.Validate(context.Background(), def, r, root); err != nil {
		t.Fatalf("64 skills: %v", err)
	}
	long64, long65 := strings.Repeat("a", 64), strings.Repeat("a", 65)
	r.add(skill(long64, "ok"))
	r.add(skill(long65, "too long"))
	r.add(skill("max-description", strings.Repeat("d", 1024)))
	def.Skills = []action.SkillRef{{Name: long64}, {Name: "max-description"}}
	if err := action.Validate(context.Background(), def, r, root); err != nil {
		t.Fatalf("ACT-033/035: a 64-character name and a 1,024-character description: %v", err)
	}
	def.Skills = []action.SkillRef{{Name: long65}}
	expectRejection(t, action.Validate(context.Background(), def, r, root), "BAD_REQUEST", "skills[0].name", "at most 64 characters")
}

// ACT-043, ACT-044: the writer must be allowed to read and INVOKE every
// referenced tool and skill; what it may not read is reported as missing.
func TestWriterPermissions_ACT043_ACT044(t *testing.T) {
	writer := func(policies ...policy.Policy) action.Writer {
		return action.PolicyWriter{Claims: map[string]any{"sub": "alice"}, Layers: []policy.Layer{{Name: policy.LayerPrincipal, Policies: policies, PrincipalID: "p-1"}}}
	}
	readAll := policy.Policy{Effect: policy.Allow, Actions: []string{"SELECT"}, Resources: []string{"actions.*"}}
	invokeAll := policy.Policy{Effect: policy.Allow, Actions: []string{"INVOKE"}, Resources: []string{"actions.Action"}}
	noNotify := policy.Policy{Effect: policy.Deny, Actions: []string{"INVOKE"}, Resources: []string{"actions.Action"},
		Assertions: map[string]string{"notify": `context.document.name == "notify_human_ops"`}}
	noSkills := policy.Policy{Effect: policy.Deny, Actions: []string{"SELECT"}, Resources: []string{"actions.Action"},
		Assertions: map[string]string{"skills": `context.document.kind == "skill"`}}

	withSkill := fraudOps()
	withSkill.Skills = []action.SkillRef{{Name: "fraud-review-2"}}
	cases := []struct {
		name       string
		writer     action.Writer
		code, path string
	}{
		{"ACT-043 read and invoke everything", writer(readAll, invokeAll), "", ""},
		{"ACT-043 no INVOKE at all", writer(readAll), "ACCESS_DENIED", "tools[0].name"},
		{"ACT-043 no INVOKE on one tool", writer(readAll, invokeAll, noNotify), "ACCESS_DENIED", "tools[1].name"},
		{"ACT-043 no SELECT: reported as missing", writer(invokeAll), "NOT_FOUND", "tools[0].name"},
		{"ACT-044 no SELECT on skills", writer(readAll, invokeAll, noSkills), "NOT_FOUND", "skills[0].name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := action.Validate(context.Background(), withSkill, fixtures(), c.writer)
			if c.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var rejected *action.Error
			if !errors.As(err, &rejected) || rejected.Code != c.code || rejected.Path != c.path {
				t.Fatalf("want %s at %s, got %v", c.code, c.path, err)
			}
			var denied *policy.Denied
			if !errors.As(err, &denied) {
				t.Fatalf("the policy denial must be kept for the record: %v", err)
			}
			if strings.Contains(rejected.Error(), "p-1") {
				t.Fatalf("the message leaks the principal: %s", rejected.Error())
			}
		})
	}
}

// Rules of the other kinds, checked structurally. A skill is its
// instructions and examples, and may name any tool, natives an MCP server
// alone may list included, since it grants none.
func TestOtherKinds(t *testing.T) {
	planner := action.Definition{Name: "planner", Kind: action.KindSkill, Description: "Plans.",
		Config: map[string]any{"instructions": "Plan first.", "examples": []any{map[string]any{"situation": "s", "resolution": "r", "reason": "why"}}},
		Tools:  []action.ToolRef{{Name: action.NativeProgram}, {Name: action.NativeGraphQL}}}
	celTool := action.Definition{Name: "ratio", Kind: action.KindCEL,
		Config: map[string]any{"expression": `decimal(event.data.a) / decimal(event.data.b)`},
		Tool:   &action.ToolBlock{InputSchema: object(map[string]any{"a": map[string]any{"type": "string"}})}}
	graphqlTool := action.Definition{Name: "accounts", Kind: action.KindGraphQL,
		Config: map[string]any{"document": `query Accounts { accounts { edges { node { id } } } }`},
		Tool:   &action.ToolBlock{InputSchema: object(map[string]any{})}}
	valid := []action.Definition{
		celTool, graphqlTool,
		starlarkTool("echo", selectOnly, map[string]any{}),
		{Name: "reviewer2", Kind: action.KindAgent, Agent: map[string]any{"model": "m"}, Tools: []action.ToolRef{{Name: "get_account", Input: map[string]string{"account_id": "event.data.account"}}}},
		{Name: "planner-skill", Kind: action.KindSkill, Description: "Plans.", Config: map[string]any{"instructions": "Plan first."}, Skills: []action.SkillRef{{Name: "fraud-review-2", Preload: ptr(true)}}},
		planner,
		{Name: "gpt-5", Kind: action.KindModel, Config: map[string]any{"provider": "x"}},
		{Name: "slow", Kind: action.KindAgent, Execution: &action.Execution{ResponseTimeout: "PT30M"}},
	}
	for _, def := range valid {
		if err := validate(t, def); err != nil {
			t.Errorf("%s: %v", def.Name, err)
		}
	}
	type bad struct {
		def        action.Definition
		path, says string
	}
	withConfig := func(def action.Definition, config map[string]any) action.Definition {
		def = clone(def)
		def.Config = config
		return def
	}
	rejected := []bad{
		{withConfig(planner, map[string]any{}), "config.instructions", "needs config.instructions"},
		{withConfig(planner, map[string]any{"instructions": "x", "tools": []any{}}), "config.tools", "unknown config field"},
		{withConfig(planner, map[string]any{"instructions": "x", "examples": "many"}), "config.examples", "a list of"},
		{withConfig(planner, map[string]any{"instructions": "x", "examples": []any{map[string]any{"situation": "s", "resolution": "r"}}}), "config.examples[0].reason", "needs its reason"},
		{withConfig(celTool, map[string]any{}), "config.expression", "needs config.expression"},
		{withConfig(celTool, map[string]any{"expression": "event.data +"}), "config.expression", "Syntax error"},
		{withConfig(celTool, map[string]any{"expression": "input.a"}), "config.expression", "undeclared reference to 'input'"},
		{withConfig(celTool, map[string]any{"expression": "uuid.New()"}), "config.expression", "only available through the cel tool"},
		{withConfig(celTool, map[string]any{"expression": "1", "extra": 1}), "config.extra", "unknown config field"},
		{withConfig(graphqlTool, map[string]any{"document": "query {"}), "config.document", "does not parse"},
		{withConfig(graphqlTool, map[string]any{"document": "query A { a } query B { b }"}), "config.operationName", "2 operations"},
		{withConfig(graphqlTool, map[string]any{"document": "query A { a }", "operationName": "B"}), "config.operationName", "no operation named B"},
		{withConfig(graphqlTool, map[string]any{"document": "query A { a }", "variables": "x"}), "config.variables", "object"},
		{withConfig(starlarkTool("s", nil, map[string]any{}), map[string]any{"source": "def run(event:\n"}), "config.source", "does not parse"},
		{withConfig(starlarkTool("s", nil, map[string]any{}), map[string]any{"source": "def main(event):\n    return 1\n"}), "config.source", "must define run(event)"},
		{action.Definition{Name: "no-block", Kind: action.KindTool, Config: map[string]any{"source": "def run(e):\n    pass\n"}}, "tool", "needs a tool block"},
		{action.Definition{Name: "bad-schema", Kind: action.KindTool, Config: map[string]any{"source": "def run(e):\n    pass\n"}, Tool: &action.ToolBlock{InputSchema: map[string]any{"type": "array"}}}, "tool.inputSchema", `"type": "object"`},
		{action.Definition{Name: "no-schema", Kind: action.KindTool, Config: map[string]any{"source": "def run(e):\n    pass\n"}, Tool: &action.ToolBlock{}}, "tool.inputSchema", "needs an inputSchema"},
		{action.Definition{Name: "bad-output", Kind: action.KindTool, Config: map[string]any{"source": "def run(e):\n    pass\n"}, Tool: &action.ToolBlock{InputSchema: object(nil), OutputSchema: map[string]any{"type": 7}}}, "tool.outputSchema", "not a valid JSON Schema"},
		{action.Definition{Name: "cel", Kind: action.KindTool, Config: map[string]any{"source": "def run(e):\n    pass\n"}, Tool: &action.ToolBlock{InputSchema: object(nil)}}, "name", "native tool"},
		{action.Definition{Name: "Skill_Bad", Kind: action.KindSkill, Description: "x"}, "name", "lowercase"},
		{action.Definition{Name: "skill-no-description", Kind: action.KindSkill}, "description", "needs a description"},
		{action.Definition{Name: "skill-tool", Kind: action.KindSkill, Description: "x", Tool: &action.ToolBlock{InputSchema: object(nil)}}, "tool", "no tool block"},
		{action.Definition{Name: "agentblock", Kind: action.KindModel, Agent: map[string]any{}}, "agent", "only an action of kind agent"},
		{action.Definition{Name: "mcpblock", Kind: action.KindAgent, MCP: &action.MCP{Name: "x"}}, "mcp", "only an action of kind mcp"},
		{action.Definition{Name: "fixed-event", Kind: action.KindAgent, Tools: []action.ToolRef{{Name: "get_account", Input: map[string]string{"account_id": "request.x"}}}}, "tools[0].input.account_id", "undeclared reference"},
		{action.Definition{Name: "approver", Kind: action.KindAgent, Tools: []action.ToolRef{{Name: "nothing"}}}, "tools[0].name", "no tool"},
	}
	for _, c := range rejected {
		t.Run(c.def.Name+" "+c.path, func(t *testing.T) {
			var rejection *action.Error
			err := validate(t, c.def)
			if !errors.As(err, &rejection) || rejection.Path != c.path || !strings.Contains(rejection.Error(), c.says) {
				t.Fatalf("want a rejection at %s containing %q, got %v", c.path, c.says, err)
			}
		})
	}
	// An agent may require approval of a call (only servers may not).
	approving := action.Definition{Name: "approver", Kind: action.KindAgent, Tools: []action.ToolRef{{Name: "writer", Approval: &action.Approval{Required: true}}}}
	if err := validate(t, approving); err != nil {
		t.Fatal(err)
	}
}

// ACT-541, ACT-542: updateAction replaces each supplied top-level field
// whole; an mcp block with only mode is rejected.
func TestUpdate_ACT541_ACT542(t *testing.T) {
	stored := fraudOps()
	stored.MCP.Instructions = "old"
	promoted, err := action.Update(stored, []byte(`{"mcp": {"name": "fraud-ops", "session": {"start": {"input": {"principal": "execution.input.principal", "subject": "execution.input.subject"}}}, "mode": "LIVE"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if promoted.ServerMode() != action.ModeLive || promoted.MCP.Instructions != "" || len(promoted.Tools) != 2 || promoted.Session == nil {
		t.Fatalf("ACT-541: the mcp block is replaced whole, the rest kept: %+v", promoted.MCP)
	}
	if err := validate(t, promoted); err != nil {
		t.Fatal(err)
	}
	modeOnly, err := action.Update(stored, []byte(`{"mcp": {"mode": "LIVE"}}`))
	if err != nil {
		t.Fatal(err)
	}
	expectRejection(t, validate(t, modeOnly), "BAD_REQUEST", "mcp.name", "needs name")

	disabled, err := action.Update(stored, []byte(`{"enabled": false, "tools": null}`))
	if err != nil || disabled.IsEnabled() || disabled.Tools != nil || disabled.MCP.Instructions != "old" {
		t.Fatalf("enabled false and a cleared field: %+v, %v", disabled, err)
	}
	if _, err := action.Update(stored, []byte(`{"mcp": {"nmae": "x"}}`)); err == nil {
		t.Fatal("an unknown field must be refused")
	}
}

func TestDecode(t *testing.T) {
	if _, err := action.Decode([]byte(`{"name": "x", "kind": "tool", "colour": "red"}`)); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("unknown fields are refused: %v", err)
	}
	var rejected *action.Error
	_, err := action.Decode([]byte(`{"name": "x", "kind": "mcp", "tools": [{"name": "a", "input": {"p": 1}}]}`))
	if !errors.As(err, &rejected) || rejected.Code != "BAD_REQUEST" || !strings.Contains(rejected.Path, "tools") {
		t.Fatalf("a fixed input that is not a CEL string: %v", err)
	}
	def := mustDecode(`{"name": "x", "kind": "mcp"}`)
	if !def.IsEnabled() || def.ServerMode() != action.ModePreview || def.ServerIntent() != action.IntentRequired || def.ResponseTimeout().Minutes() != 1 {
		t.Fatalf("defaults: enabled, PREVIEW (ACT-529), REQUIRED (ACT-286), 1 minute (ACT-040)")
	}
}

func TestParseDuration(t *testing.T) {
	valid := map[string]string{"90s": "1m30s", "10m": "10m0s", "PT1M": "1m0s", "PT1H30M": "1h30m0s", "P1D": "24h0m0s", "PT0.5S": "500ms", "PT90S": "1m30s", "1h": "1h0m0s"}
	for in, want := range valid {
		got, err := action.ParseDuration(in)
		if err != nil || got.String() != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "P", "PT", "P1DT", "1 minute", "PT-1M", "PT1.5M", "10"} {
		if got, err := action.ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
		}
	}
}
