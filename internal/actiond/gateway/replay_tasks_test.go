package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// deskServer lists the ledger's post tool, the summarize agent, program,
// invoke and the task tools, with no intent: the requests a replay reruns
// that call program or invoke, or start a task.
func deskServer(env *at.Env) string {
	id := at.NewID()
	env.CreateAction(id, at.ServerSpec{Name: "desk", Mode: "LIVE", Intent: "NONE", Policies: at.Everything(),
		Tools: []map[string]any{at.Ref("post"), at.Ref("summarize"), at.Ref("graphql"), at.Ref("program"), at.Ref("invoke"),
			at.Ref("get_task"), at.Ref("cancel_task")}}.Input())
	return id
}

func deskEnv(t *testing.T, d store.Dialect, g *gates) (env *at.Env, serverID, toolID, agentID string) {
	env, _ = taskEnv(t, d, at.Options{}, summarizer(g))
	toolID, agentID = at.NewID(), at.NewID()
	env.CreateAction(toolID, postTool(1))
	env.CreateAction(agentID, at.AgentSpec{Name: "summarize", Model: "summary-model", OutputSchema: summaryOutput,
		InputSchema: at.Object(map[string]any{"topic": at.String(), "requested_by": at.String()}, "topic")}.Input())
	return env, deskServer(env), toolID, agentID
}

// replayAgainstV2 replays a recorded request against a draft of the desk
// that pins post's version 2 (factor 3).
func replayAgainstV2(t *testing.T, env *at.Env, original map[string]any) map[string]any {
	t.Helper()
	draft := map[string]any{"tools": []map[string]any{at.RefPinned("post", 2), at.Ref("summarize"), at.Ref("graphql"), at.Ref("program"),
		at.Ref("invoke"), at.Ref("get_task"), at.Ref("cancel_task")}}
	return mustReplay(t, env, original["id"].(string), map[string]any{"draft": draft})
}

// ACT-481, ACT-562: a replay of a request that invoked a tool, or ran a
// program calling it, reruns it with its recorded arguments against the
// draft's version of the tool, rolled back: the replay answers what the
// new version answers and the ledger keeps what the original committed.
func TestReplayRerunsInvokeAndProgram(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		env, serverID, toolID, _ := deskEnv(t, d, newGates(t))
		s := env.Connect("desk", env.Token(principal, "alice"), at.Revision2026)
		if res := callTool(t, s, "invoke", map[string]any{"action_id": toolID, "input": map[string]any{"key": "inv", "amount": 2}, "commit": true}); res.IsError {
			t.Fatalf("invoke: %s", text(res))
		}
		source := "def run(event):\n    return tools.post({\"key\": \"prog\", \"amount\": 4})\n"
		if res := callTool(t, s, "program", map[string]any{"source": source, "commit": true}); res.IsError {
			t.Fatalf("program: %s", text(res))
		}
		recorded := requests(env, serverID, "tools/call")
		env.UpdateAction(toolID, postTool(3))

		invoked := replayAgainstV2(t, env, recorded[0])
		replayed := invoked["replay"].(map[string]any)
		calls := replayed["calls"].([]any)
		if invoked["outputChanged"] != true || invoked["writeSetChanged"] != true || replayed["status"] != "SUCCEEDED" ||
			!strings.Contains(outputOf(replayed), `"posted":6`) || len(calls) != 1 ||
			at.Dig(calls[0], "rolledBackByExecutionId") != replayed["id"] || at.Dig(calls[0], "preview") != true {
			t.Errorf("the replay of invoke: %s", asJSON(invoked))
		}
		if got := env.KV("ledger", "inv"); !jsonEqual(got, map[string]any{"amount": 2.0}) {
			t.Errorf("the ledger after the invoke's replay: %s", asJSON(got))
		}
		// The tool beneath the replayed invoke ran the draft's version,
		// rolled back.
		stored := env.Execution(replayed["id"].(string))
		beneath := at.Dig(index(stored["calls"], 0), "calls").([]any)
		if len(beneath) != 1 || at.Dig(beneath[0], "preview") != true || !strings.Contains(asJSON(at.Dig(beneath[0], "writeSet")), `"amount":6`) {
			t.Errorf("the tool beneath the replayed invoke: %s", asJSON(stored["calls"]))
		}

		programmed := replayAgainstV2(t, env, recorded[1])
		if programmed["outputChanged"] != true || !strings.Contains(outputOf(programmed["replay"]), `"posted":12`) {
			t.Errorf("the replay of program: %s", asJSON(programmed))
		}
		if got := env.KV("ledger", "prog"); !jsonEqual(got, map[string]any{"amount": 4.0}) {
			t.Errorf("the ledger after the program's replay: %s", asJSON(got))
		}
	})
}

// notStarted is the one task the replay records as started by it: checked
// as not started, CANCELLED, preview, with the agent's input.
func notStarted(t *testing.T, env *at.Env, replay map[string]any, agentID, topic string) map[string]any {
	t.Helper()
	started := env.ExecutionsWhere(map[string]any{"startedBy": at.Dig(replay, "replay", "id")})
	if len(started) != 1 {
		t.Fatalf("the replay started %d executions: %s", len(started), asJSON(started))
	}
	task := started[0]
	if task["role"] != "task" || task["status"] != "CANCELLED" || task["preview"] != true || at.Dig(task, "startedBy", "notStarted") != true ||
		task["actionId"] != agentID || at.Dig(at.Decode(task["input"]), "topic") != topic {
		t.Errorf("the not-started task: %s", asJSON(task))
	}
	return task
}

// ACT-482, ACT-559, ACT-561, ACT-562: a replayed tools/call of a callable
// agent, and a replayed invoke of one, start nothing: the task each would
// have started is recorded as not started (CANCELLED, preview,
// notStarted, the agent's input), never queued, so no worker runs it and
// the model is asked nothing more.
func TestReplayStartsNothing(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, model := taskEnv(t, d, at.Options{}, summarizer(g))
		toolID := at.NewID()
		env.CreateAction(toolID, postTool(1))
		agentID := at.NewID()
		env.CreateAction(agentID, at.AgentSpec{Name: "summarize", Model: "summary-model", OutputSchema: summaryOutput,
			InputSchema: at.Object(map[string]any{"topic": at.String(), "requested_by": at.String()}, "topic")}.Input())
		serverID := deskServer(env)
		env.UpdateAction(toolID, postTool(3)) // post v2, which replayAgainstV2's draft pins
		token := env.Token(principal, "alice")
		ts := env.ConnectTasks("desk", token, at.Revision2026, true)
		task, res := ts.CallForTask(t, "summarize", map[string]any{"topic": "ledgers"})
		if task == nil {
			t.Fatalf("the agent answered without a task: %s", at.AsJSON(res))
		}
		g.open("ledgers")
		ts.WaitTask(t, task.TaskID, taskWait, mcpkit.TaskCompleted)

		replayed := replayAgainstV2(t, env, last(t, requests(env, serverID, "tools/call")))
		if at.Dig(replayed, "replay", "status") != "SUCCEEDED" || !strings.Contains(outputOf(replayed["replay"]), `"cancelled"`) {
			t.Errorf("the replay of the agent's call: %s", asJSON(replayed))
		}
		agentTask := notStarted(t, env, replayed, agentID, "ledgers")

		s := env.Connect("desk", token, at.Revision2026)
		if res := callTool(t, s, "invoke", map[string]any{"action_id": agentID, "input": map[string]any{"topic": "invoked"}}); res.IsError {
			t.Fatalf("invoke of the agent: %s", text(res))
		}
		g.open("invoked")
		invoked := replayAgainstV2(t, env, last(t, requests(env, serverID, "tools/call")))
		invokeTask := notStarted(t, env, invoked, agentID, "invoked")
		if !strings.Contains(outputOf(invoked["replay"]), invokeTask["id"].(string)) {
			t.Errorf("the replayed invoke's answer does not name its not-started task: %s", asJSON(invoked))
		}
		// Nothing queued: both stay CANCELLED, and the model saw each topic once.
		for _, id := range []string{agentTask["id"].(string), invokeTask["id"].(string)} {
			if e := env.Execution(id); e["status"] != "CANCELLED" || len(e["calls"].([]any)) != 0 {
				t.Errorf("the not-started task %s: %s", id, asJSON(e))
			}
		}
		for _, topic := range []string{"ledgers", "invoked"} {
			at.WaitFor(t, "the "+topic+" agent to finish", taskWait, func() bool { return exchangesWith(model, "topic", topic) >= 1 })
			if n := exchangesWith(model, "topic", topic); n != 1 {
				t.Errorf("the model was asked about %s %d times", topic, n)
			}
		}
	})
}

// ACT-560: a replayed tasks/cancel cancels nothing and starts nothing: the
// task's cancelledBy still names the original request (the seam test
// replayTasks' beside it shows the replay never asks for a cancellation).
// A tasks/update, which updates nothing live, replays as the same
// acknowledgement.
func TestReplayCancelsNothing(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, serverID, _, _ := deskEnv(t, d, g)
		ts := env.ConnectTasks("desk", env.Token(principal, "alice"), at.Revision2026, true)
		first, _ := ts.CallForTask(t, "summarize", map[string]any{"topic": "first"})
		if first == nil {
			t.Fatal("no first task")
		}
		token := env.Token(principal, "alice")
		if reply := env.Post("desk", token, at.Request{Method: mcpkit.MethodUpdateTask, Capabilities: withTasks, Params: map[string]any{"taskId": first.TaskID}}); reply.Status != 200 {
			t.Fatalf("tasks/update: %s", reply)
		}
		update := last(t, requests(env, serverID, mcpkit.MethodUpdateTask))
		if replayed := mustReplay(t, env, update["id"].(string), nil); at.Dig(replayed, "replay", "status") != "SUCCEEDED" || replayed["outputChanged"] != false {
			t.Errorf("the replay of tasks/update: %s", asJSON(replayed))
		}
		if _, err := ts.CancelTask(first.TaskID); err != nil {
			t.Fatalf("tasks/cancel: %v", err)
		}
		cancel := last(t, requests(env, serverID, mcpkit.MethodCancelTask))
		waitExecution(t, env, first.TaskID, "CANCELLED")

		replayed := mustReplay(t, env, cancel["id"].(string), nil)
		if at.Dig(replayed, "replay", "status") != "SUCCEEDED" || replayed["outputChanged"] != false {
			t.Errorf("the replay of tasks/cancel: %s", asJSON(replayed))
		}
		if e := env.Execution(first.TaskID); at.Dig(e, "cancelledBy", "executionId") != cancel["id"] {
			t.Errorf("the cancelled task after the replay: %s", asJSON(e))
		}
		if started := env.ExecutionsWhere(map[string]any{"startedBy": at.Dig(replayed, "replay", "id")}); len(started) != 0 {
			t.Errorf("the replayed cancel started %s", asJSON(started))
		}
	})
}

// outputOf is a record's output as JSON text.
func outputOf(record any) string { return asJSON(at.Decode(at.Dig(record, "output"))) }

func rerun(env *at.Env, token, id string) (map[string]any, []at.GraphQLError) {
	res := env.GraphQLAs(token, `mutation($id: ID!) { actions { rerunExecution(executionId: $id) { `+at.ExecutionFields+` } } }`, map[string]any{"id": id})
	var data any
	json.Unmarshal(res.Data, &data)
	out, _ := at.Dig(data, "actions", "rerunExecution").(map[string]any)
	return out, res.Errors
}

// ACT-479, ACT-480, ACT-558, ACT-563, ACT-564, ACT-565: rerunExecution starts a task its
// request did start again, by the rerunning principal and user, in preview
// when the task was a preview; a request, a draft's preview and a task a
// replay recorded as not started are never rerun, and a draft's preview is
// never replayed either.
func TestRerunExecution(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, model := taskEnv(t, d, at.Options{}, summarizer(g))
		toolID, agentID := at.NewID(), at.NewID()
		env.CreateAction(toolID, postTool(1))
		env.CreateAction(agentID, at.AgentSpec{Name: "summarize", Model: "summary-model", OutputSchema: summaryOutput,
			InputSchema: at.Object(map[string]any{"topic": at.String(), "requested_by": at.String()}, "topic")}.Input())
		serverID := deskServer(env)
		env.UpdateAction(toolID, postTool(3))
		token := env.Token(principal, "alice")
		ts := env.ConnectTasks("desk", token, at.Revision2026, true)
		live, _ := ts.CallForTask(t, "summarize", map[string]any{"topic": "ledgers"})
		if live == nil {
			t.Fatal("no task")
		}
		g.open("ledgers")
		ts.WaitTask(t, live.TaskID, taskWait, mcpkit.TaskCompleted)
		request := last(t, requests(env, serverID, "tools/call"))
		replayed := replayAgainstV2(t, env, request)
		skipped := notStarted(t, env, replayed, agentID, "ledgers")

		s := env.Connect("desk", token, at.Revision2026)
		res := callTool(t, s, "invoke", map[string]any{"action_id": agentID, "input": map[string]any{"topic": "previewed"}})
		if res.IsError {
			t.Fatalf("invoke of the agent: %s", text(res))
		}
		previewID := structured(res)["task_id"].(string)
		g.open("previewed")
		waitExecution(t, env, previewID, "SUCCEEDED")

		refuse := func(what string, errs []at.GraphQLError, says string) {
			t.Helper()
			if len(errs) == 0 || errs[0].Extensions["code"] != "BAD_REQUEST" || !strings.Contains(errs[0].Message, says) {
				t.Errorf("%s: %+v", what, errs)
			}
		}
		bob := env.GraphQLToken(principal, "bob")
		_, errs := rerun(env, bob, request["id"].(string))
		refuse("a request", errs, "never rerun")
		_, errs = rerun(env, bob, skipped["id"].(string))
		refuse("a not-started task", errs, "not started")
		_, errs = rerun(env, "", live.TaskID)
		refuse("the local root", errs, "no principal")

		again, errs := rerun(env, bob, live.TaskID)
		if len(errs) > 0 || again["role"] != "task" || again["id"] == live.TaskID || again["caller"] != principal || again["subject"] != "bob" ||
			at.Dig(again, "startedBy", "executionId") != live.TaskID || again["preview"] != false || at.Dig(again, "startedBy", "notStarted") != false || at.Dig(at.Decode(again["input"]), "topic") != "ledgers" {
			t.Fatalf("the rerun of a task: %+v %s", errs, asJSON(again))
		}
		waitExecution(t, env, again["id"].(string), "SUCCEEDED")
		if n := exchangesWith(model, "topic", "ledgers"); n != 2 {
			t.Errorf("the model was asked about ledgers %d times, want 2 (the task and its rerun)", n)
		}
		previewAgain, errs := rerun(env, bob, previewID)
		if len(errs) > 0 || previewAgain["preview"] != true || at.Dig(at.Decode(previewAgain["input"]), "topic") != "previewed" {
			t.Errorf("the rerun of a preview task: %+v %s", errs, asJSON(previewAgain))
		}
		waitExecution(t, env, previewAgain["id"].(string), "SUCCEEDED")

		// A draft's preview: the request that previewed it and the draft's
		// execution are never replayed, and never rerun.
		res = callTool(t, s, "invoke", map[string]any{"action_id": toolID, "draft": postTool(5), "input": map[string]any{"key": "d", "amount": 1}})
		if res.IsError {
			t.Fatalf("invoke of a draft: %s", text(res))
		}
		draftRun := structured(res)["execution_id"].(string)
		previewed := last(t, requests(env, serverID, "tools/call"))
		for what, id := range map[string]string{"the request that previewed a draft": previewed["id"].(string), "the draft's execution": draftRun} {
			if r := replay(env, "", id, nil); len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Message, "draft's preview") {
				t.Errorf("replayExecution of %s: %+v", what, r.Errors)
			}
		}
		_, errs = rerun(env, bob, draftRun)
		refuse("rerunExecution of a draft's preview", errs, "draft's preview")
	})
}

// A replayed tasks/get reads the original session's task, so it may answer
// what the task output since; that answer is the replayer's only if the
// replayer may read the task's execution. An auditor with INVOKE on the
// server and read on the requests, but not on tasks, replays a tasks/get
// made while the task worked: the task is not found for it, and nothing
// of the task's later output reaches it. A replayer that may read the task
// gets the completed result.
func TestReplayedTaskReadNeedsReadOnTheTask(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, serverID, _, _ := deskEnv(t, d, g)
		ts := env.ConnectTasks("desk", env.Token(principal, "alice"), at.Revision2026, true)
		task, _ := ts.CallForTask(t, "summarize", map[string]any{"topic": "secrets"})
		if task == nil {
			t.Fatal("no task")
		}
		if got, err := ts.GetTask(task.TaskID); err != nil || got.Status != mcpkit.TaskWorking {
			t.Fatalf("tasks/get while working: %+v %v", got, err)
		}
		read := last(t, requests(env, serverID, mcpkit.MethodGetTask))
		g.open("secrets")
		ts.WaitTask(t, task.TaskID, taskWait, mcpkit.TaskCompleted)

		env.PutPrincipal("auditor", []map[string]any{at.Allow([]string{"*"}, "*"),
			{"effect": "DENY", "actions": []any{"SELECT"}, "resources": []any{"actions.Execution"},
				"assertions": map[string]any{"task": "context.document.role == 'task'"}}})
		if e := env.GraphQLAs(env.GraphQLToken("auditor", "audrey"), `query($id: ID!) { execution(id: $id) { id } }`, map[string]any{"id": read["id"]}); len(e.Errors) > 0 || !strings.Contains(string(e.Data), read["id"].(string)) {
			t.Fatalf("the auditor cannot read the tasks/get request: %+v %s", e.Errors, e.Data)
		}
		res := replay(env, env.GraphQLToken("auditor", "audrey"), read["id"].(string), nil)
		var data any
		json.Unmarshal(res.Data, &data)
		denied := at.Dig(data, "actions", "replayExecution", "replay")
		if len(res.Errors) > 0 || at.Dig(denied, "status") != "FAILED" || strings.Contains(asJSON(denied), "About secrets") ||
			!strings.Contains(asJSON(at.Dig(denied, "error")), "mcp_task_not_found") {
			t.Errorf("the auditor's replay of tasks/get: %+v %s", res.Errors, asJSON(denied))
		}

		env.PutPrincipal("reader", []map[string]any{at.Allow([]string{"*"}, "*")})
		res = replay(env, env.GraphQLToken("reader", "rita"), read["id"].(string), nil)
		json.Unmarshal(res.Data, &data)
		allowed := at.Dig(data, "actions", "replayExecution", "replay")
		if len(res.Errors) > 0 || at.Dig(allowed, "status") != "SUCCEEDED" || !strings.Contains(asJSON(allowed), "About secrets") {
			t.Errorf("a replay by one who may read the task: %+v %s", res.Errors, asJSON(allowed))
		}
	})
}
