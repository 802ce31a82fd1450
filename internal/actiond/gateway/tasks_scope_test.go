package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/modeltest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// holder holds every answer at the gate named after its input's name.
func holder(g *gates) modeltest.Script {
	return func(x modeltest.Exchange) modeltest.Reply {
		name, _ := x.Input()["name"].(string)
		return modeltest.Reply{Text: `{"done":"` + name + `"}`, Release: g.gate(name)}
	}
}

func defineHolder(env *at.Env) string {
	id := at.NewID()
	env.CreateAction(id, at.AgentSpec{Name: "holder", Model: "hold", InputSchema: at.Object(map[string]any{"name": at.String()}),
		OutputSchema: at.Object(map[string]any{"done": at.String()}, "done")}.Input())
	return id
}

// ACT-188, ACT-189, ACT-190, ACT-209, ACT-210, ACT-214, ACT-217: a task is reached only
// from the session, server, principal and user that started it. Another
// user's session, another server offering the same agent, and an id that
// names no task all get -32602 mcp_task_not_found, the same error whatever
// the id; get_task and cancel_task answer the same tool error, and a
// cancellation from elsewhere leaves the task running.
func TestTasksAreReachedOnlyFromTheirSession(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, _ := taskEnv(t, d, at.Options{}, holder(g))
		defineHolder(env)
		refs := []map[string]any{at.Ref("holder"), at.Ref("get_task"), at.Ref("cancel_task")}
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "home", Intent: "NONE", Policies: at.Everything(), Tools: refs}.Input())
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "elsewhere", Intent: "NONE", Policies: at.Everything(), Tools: refs}.Input())
		alice := env.ConnectTasks("home", env.Token(principal, "alice"), at.Revision2026, true)
		task, _ := alice.CallForTask(t, "holder", map[string]any{"name": "alices"})
		if got, err := alice.GetTask(task.TaskID); err != nil || got.Status != mcpkit.TaskWorking {
			t.Fatalf("alice reads her task: %v", err)
		}

		probes := map[string]*at.TaskSession{
			"another user's session": env.ConnectTasks("home", env.Token(principal, "bob"), at.Revision2026, true),
			"another server":         env.ConnectTasks("elsewhere", env.Token(principal, "alice"), at.Revision2026, true),
		}
		bodies := map[string]bool{}
		for what, s := range probes {
			for _, id := range []string{task.TaskID, "7d2a9e04-5b1c-4f3e-8a6d-0c9b2e7f4a18"} {
				_, err := s.GetTask(id)
				werr := rpcError(t, err)
				data := errorData(t, werr)
				if werr.Code != -32602 || data["code"] != "mcp_task_not_found" || data["hint"] == "" {
					t.Errorf("%s, task %s: %v %v", what, id, werr.Code, data)
				}
				body, _ := json.Marshal(werr)
				bodies[string(body)] = true
				res := callTool(t, s.ClientSession, "get_task", map[string]any{"task_id": id})
				cancelled := callTool(t, s.ClientSession, "cancel_task", map[string]any{"task_id": id})
				for _, r := range []*mcp.CallToolResult{res, cancelled} {
					if !r.IsError || toolErrorCode(r) != "mcp_task_not_found" {
						t.Errorf("%s, task %s: %s", what, id, text(r))
					}
					bodies["tool "+text(r)] = true
				}
			}
			if _, err := s.CancelTask(task.TaskID); err == nil {
				t.Errorf("%s cancelled alice's task", what)
			}
		}
		if len(bodies) != 2 {
			t.Errorf("the refusals differ by what they name: %v", bodies)
		}
		if got, _ := alice.GetTask(task.TaskID); got.Status != mcpkit.TaskWorking {
			t.Errorf("after the probes, alice's task reads %s", got.Status)
		}
	})
}

// ACT-191, ACT-192, ACT-194, ACT-195, ACT-196: a session has at most 32 unfinished
// tasks, and so does a user across a server's sessions: a start beyond
// either is a tool error start_limit and starts nothing; a finished task
// frees its place.
func TestTaskLimits(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, _ := taskEnv(t, d, at.Options{}, holder(g))
		agentID := defineHolder(env)
		// Sessions by principal, subject and host: one user, many sessions.
		spec := at.ServerSpec{Name: "limited", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("holder")},
			StartInput: map[string]string{"principal": "execution.input.principal", "subject": "execution.input.subject",
				"host": "execution.input.params._meta['com.example/host']"},
			SessionID:     at.ByPrincipalAndSubject + " + ':' + session.input.host",
			SessionSchema: at.Object(map[string]any{"principal": at.String(), "subject": at.String(), "host": at.String()}, "principal", "subject", "host")}
		env.CreateAction(at.NewID(), spec.Input())
		token := env.Token(principal, "alice")
		call := func(host, name string) at.Reply {
			t.Helper()
			return env.Post("limited", token, at.Request{Method: "tools/call", Capabilities: withTasks, Params: map[string]any{
				"name": "holder", "arguments": map[string]any{"name": name}, "_meta": map[string]any{"com.example/host": host}}})
		}
		started := func(r at.Reply) string {
			id, _ := r.Result()["taskId"].(string)
			return id
		}
		limited := func(r at.Reply) bool {
			return r.Result()["isError"] == true && at.Dig(r.Result(), "_meta", "com.twisp/error", "code") == engine.CodeStartLimit
		}
		var first string
		for i := range 32 {
			r := call("laptop", fmt.Sprintf("laptop-%d", i))
			if started(r) == "" {
				t.Fatalf("start %d in one session: %s", i, r)
			}
			if i == 0 {
				first = started(r)
			}
		}
		if r := call("laptop", "one-too-many"); !limited(r) || started(r) != "" {
			t.Fatalf("the 33rd task of a session: %s", r)
		}
		if n := len(tasksOf(env, agentID)); n != 32 {
			t.Fatalf("%d tasks recorded, want 32: the refused start started something", n)
		}
		// The user is at 32 too: another session of theirs starts nothing.
		if r := call("phone", "phone-0"); !limited(r) {
			t.Fatalf("alice's first task on another host, with 32 unfinished: %s", r)
		}
		// Another user is not.
		if r := env.Post("limited", env.Token(principal, "bob"), at.Request{Method: "tools/call", Capabilities: withTasks, Params: map[string]any{
			"name": "holder", "arguments": map[string]any{"name": "bob-0"}, "_meta": map[string]any{"com.example/host": "laptop"}}}); started(r) == "" {
			t.Errorf("bob's first task: %s", r)
		}
		// A finished task frees its place.
		g.open("laptop-0")
		waitExecution(t, env, first, "SUCCEEDED")
		if r := call("phone", "phone-1"); started(r) == "" {
			t.Errorf("after a task finished: %s", r)
		}
		if r := call("laptop", "laptop-again"); !limited(r) {
			t.Errorf("the user's 33rd unfinished task: %s", r)
		}
	})
}

// ACT-140, ACT-197, ACT-198, ACT-203, ACT-206, ACT-207, ACT-211, ACT-212, ACT-213, ACT-215, ACT-216,
// ACT-218, ACT-219: a client without the extension, on a server listing
// get_task and cancel_task, is answered with a tool result whose text names
// task_id, status working, poll_interval_ms and a hint; get_task reads the
// task (poll_interval_ms while working; the agent's output once, as
// structuredContent, when completed, recorded as a TOOL use of the agent's
// execution), and cancel_task cancels it as tasks/cancel does, answering
// task_id and a hint, also for a finished task, with cancelledBy naming the
// cancel_task request. get_task is read-only, cancel_task never.
func TestTasksWithoutTheExtension(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		for _, rev := range at.Revisions {
			t.Run(rev, func(t *testing.T) { withoutTheExtension(t, d, rev) })
		}
	})
}

func withoutTheExtension(t *testing.T, d store.Dialect, rev string) {
	g := newGates(t)
	env, _ := taskEnv(t, d, at.Options{}, holder(g))
	defineHolder(env)
	serverID := at.NewID()
	env.CreateAction(serverID, at.ServerSpec{Name: "plain", Intent: "NONE", Policies: []map[string]any{at.Allow([]string{"SELECT"}, "*")},
		Tools: []map[string]any{at.Ref("holder"), at.Ref("get_task"), at.Ref("cancel_task")}}.Input())
	s := env.ConnectTasks("plain", env.Token(principal, "alice"), rev, false)
	for _, tool := range listTools(t, s.ClientSession).Tools {
		switch tool.Name {
		case "get_task":
			if !tool.Annotations.ReadOnlyHint {
				t.Errorf("get_task is not read-only")
			}
		case "cancel_task":
			if tool.Annotations.ReadOnlyHint || !strings.Contains(asJSON(tool.InputSchema), `"required":["task_id"]`) {
				t.Errorf("cancel_task: %s %s", asJSON(tool.Annotations), asJSON(tool.InputSchema))
			}
		}
	}
	get, _ := engine.Native("get_task")
	cancel, _ := engine.Native("cancel_task")

	task, res := s.CallForTask(t, "holder", map[string]any{"name": "plain"})
	var told map[string]any
	if task != nil || res.IsError || res.StructuredContent != nil || json.Unmarshal([]byte(text(res)), &told) != nil {
		t.Fatalf("without the extension: %s", s.LastRaw())
	}
	id, _ := told["task_id"].(string)
	if id == "" || told["status"] != "working" || told["poll_interval_ms"] != 5000.0 || !strings.Contains(told["hint"].(string), "get_task") {
		t.Fatalf("the task's text %s", text(res))
	}
	working := callTool(t, s.ClientSession, "get_task", map[string]any{"task_id": id})
	if working.IsError || !jsonEqual(working.StructuredContent, map[string]any{"task_id": id, "status": "working", "poll_interval_ms": 5000}) {
		t.Errorf("get_task while working: %s", text(working))
	}
	if err := get.CheckResult(working.StructuredContent); err != nil {
		t.Error(err)
	}
	if r := callTool(t, s.ClientSession, "get_task", map[string]any{}); !r.IsError || toolErrorCode(r) != engine.CodeInputInvalid {
		t.Errorf("get_task without task_id: %s", text(r))
	}
	g.open("plain")
	waitExecution(t, env, id, "SUCCEEDED")
	completed := callTool(t, s.ClientSession, "get_task", map[string]any{"task_id": id})
	want := map[string]any{"task_id": id, "status": "completed", "result": map[string]any{"structuredContent": map[string]any{"done": "plain"}}}
	if completed.IsError || !jsonEqual(completed.StructuredContent, want) {
		t.Errorf("get_task when completed: %s", asJSON(completed.StructuredContent))
	}
	if err := get.CheckResult(completed.StructuredContent); err != nil {
		t.Error(err)
	}
	read := last(t, requests(env, serverID, "tools/call"))
	var uses []string
	for _, u := range read["uses"].([]any) {
		uses = append(uses, at.Dig(u, "kind").(string)+":"+at.Dig(u, "executionId").(string))
	}
	if !strings.Contains(strings.Join(uses, " "), "TOOL:"+id) {
		t.Errorf("the read that returned the output records uses %v, want a TOOL use of %s", uses, id)
	}

	// cancel_task of a finished task answers normally and changes nothing.
	after := callTool(t, s.ClientSession, "cancel_task", map[string]any{"task_id": id})
	if after.IsError || at.Dig(after.StructuredContent, "task_id") != id || at.Dig(after.StructuredContent, "hint") == "" {
		t.Errorf("cancel_task of a finished task: %s", text(after))
	}
	if err := cancel.CheckResult(after.StructuredContent); err != nil {
		t.Error(err)
	}
	// cancel_task of a working one cancels it; cancelledBy names that call.
	_, res = s.CallForTask(t, "holder", map[string]any{"name": "to-cancel"})
	json.Unmarshal([]byte(text(res)), &told)
	second := told["task_id"].(string)
	if r := callTool(t, s.ClientSession, "cancel_task", map[string]any{"task_id": second}); r.IsError {
		t.Fatalf("cancel_task: %s", text(r))
	}
	cancelCall := last(t, requests(env, serverID, "tools/call"))
	e := waitExecution(t, env, second, "CANCELLED")
	if at.Dig(e, "cancelledBy", "executionId") != cancelCall["id"] || at.Dig(e, "cancelledBy", "principal") != principal {
		t.Errorf("cancelledBy %s, the cancel_task request %v", asJSON(e["cancelledBy"]), cancelCall["id"])
	}
	if r := callTool(t, s.ClientSession, "get_task", map[string]any{"task_id": second}); at.Dig(r.StructuredContent, "status") != "cancelled" {
		t.Errorf("get_task of a cancelled task: %s", text(r))
	}
}

// ACT-054, ACT-199, ACT-200, ACT-202, ACT-220, ACT-221, ACT-222, ACT-223: where a client without the
// extension could neither read nor cancel a task (the server does not list
// both get_task and cancel_task), a call of a callable agent is refused with
// HTTP 400 and -32021 mcp_task_required naming the extension in
// data.requiredCapabilities, and starts nothing; tasks/* from such a client
// are refused with 400 -32021 naming the method, also for a task a request
// declaring the extension created. Hosts on the earlier revisions, which
// have no tasks, are refused the same way.
func TestTaskRequired(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, _ := taskEnv(t, d, at.Options{}, holder(g))
		agentID := defineHolder(env)
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "halfway", Intent: "NONE", Policies: at.Everything(),
			Tools: []map[string]any{at.Ref("holder"), at.Ref("get_task")}}.Input())
		token := env.Token(principal, "alice")
		for _, rev := range slices.Concat(at.Revisions, []string{"2025-06-18", "2025-03-26"}) {
			s := env.ConnectTasks("halfway", token, rev, false)
			if got := s.InitializeResult().ProtocolVersion; got != rev {
				t.Errorf("negotiated %s, want %s", got, rev)
			}
			_, err := s.CallTool(ctx(t), &mcp.CallToolParams{Name: "holder", Arguments: map[string]any{"name": "x"}})
			werr := rpcError(t, err)
			data := errorData(t, werr)
			required := at.Dig(data, "requiredCapabilities", "extensions", mcpkit.TasksExtension)
			if werr.Code != -32021 || data["code"] != "mcp_task_required" || required == nil || data["hint"] == "" {
				t.Errorf("%s: %d %s", rev, werr.Code, asJSON(data))
			}
		}
		raw := env.Post("halfway", token, at.Request{Method: "tools/call", Params: map[string]any{"name": "holder", "arguments": map[string]any{}}})
		if raw.Status != 400 || raw.ErrorCode() != -32021 {
			t.Errorf("raw: %s", raw)
		}
		if n := len(tasksOf(env, agentID)); n != 0 {
			t.Errorf("a refused call started %d tasks", n)
		}
		if failed := last(t, requests(env, serverID, "tools/call")); failed["status"] != "FAILED" || at.Dig(failed, "error", "code") != "mcp_task_required" {
			t.Errorf("the refused call's record: %s", asJSON(failed))
		}

		s := env.ConnectTasks("halfway", token, at.Revision2026, true)
		task, _ := s.CallForTask(t, "holder", map[string]any{"name": "created-with-the-extension"})
		for i, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			reply := env.Post("halfway", env.Token(principal, fmt.Sprintf("u%d", i)), at.Request{Method: method, Params: map[string]any{"taskId": task.TaskID}})
			if reply.Status != 400 || reply.ErrorCode() != -32021 || at.Dig(reply.RPC, "error", "data", "method") != method ||
				at.Dig(reply.RPC, "error", "data", "requiredCapabilities", "extensions", mcpkit.TasksExtension) == nil {
				t.Errorf("%s without the extension: %s", method, reply)
			}
		}
		// The same, by the user who created it.
		reply := env.Post("halfway", token, at.Request{Method: "tasks/get", Params: map[string]any{"taskId": task.TaskID}})
		if reply.Status != 400 || reply.ErrorCode() != -32021 || bytes.Contains(reply.Body, []byte("created-with")) {
			t.Errorf("tasks/get without the extension, by the task's creator: %s", reply)
		}
	})
}

// ACT-226: each tasks/* request counts against its session's rate limit.
func TestTaskRequestsCountAgainstTheRateLimit(t *testing.T) {
	g := newGates(t)
	env, _ := taskEnv(t, store.SQLite, at.Options{}, holder(g))
	defineHolder(env)
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "counted", Intent: "NONE", CallsPerMinute: 4, Policies: at.Everything(),
		Tools: []map[string]any{at.Ref("holder")}}.Input())
	token := env.Token(principal, "alice")
	start := env.Post("counted", token, at.Request{Method: "tools/call", Capabilities: withTasks, Params: map[string]any{"name": "holder", "arguments": map[string]any{}}})
	id, _ := start.Result()["taskId"].(string)
	if id == "" {
		t.Fatalf("start: %s", start)
	}
	for i := range 3 {
		if r := env.Post("counted", token, at.Request{Method: "tasks/get", ID: i + 2, Capabilities: withTasks, Params: map[string]any{"taskId": id}}); r.Status != 200 {
			t.Fatalf("poll %d: %s", i, r)
		}
	}
	if r := env.Post("counted", token, at.Request{Method: "tasks/get", ID: 9, Capabilities: withTasks, Params: map[string]any{"taskId": id}}); r.Status != 429 || r.Header.Get("Retry-After") == "" {
		t.Errorf("the fifth request in a minute, limit 4: %s", r)
	}
}

// ACT-139: hosts of the earlier revisions are never offered tasks: their
// handshake lists tools without the extension, which 2026-07-28's
// server/discover declares.
func TestOnlyDiscoveryOffersTasks(t *testing.T) {
	env := at.New(t, store.SQLite, at.Options{})
	env.PutPrincipal(principal, at.Everything())
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "offered", Intent: "NONE", Policies: at.Everything()}.Input())
	for _, rev := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
		reply := env.Post("offered", env.Token(principal, "alice"), at.Request{Method: "initialize", Revision: rev, Params: map[string]any{
			"protocolVersion": rev, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "old", "version": "1"}}})
		caps := at.Dig(reply.Result(), "capabilities")
		if reply.Status != 200 || at.Dig(caps, "tools") == nil || at.Dig(caps, "extensions", mcpkit.TasksExtension) != nil {
			t.Errorf("initialize at %s: %s", rev, reply)
		}
	}
	s := env.Connect("offered", env.Token(principal, "alice"), at.Revision2026)
	if _, ok := s.InitializeResult().Capabilities.Extensions[mcpkit.TasksExtension]; !ok {
		t.Errorf("server/discover lacks the extension")
	}
}
