package gateway_test

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/modeltest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// summarizer answers with the summary its outputSchema asks for, once the
// gate named after the topic opens.
func summarizer(g *gates) modeltest.Script {
	return func(x modeltest.Exchange) modeltest.Reply {
		input := x.Input()
		topic, _ := input["topic"].(string)
		by, _ := input["requested_by"].(string)
		answer, _ := json.Marshal(map[string]any{"summary": "About " + topic + ".", "by": by})
		return modeltest.Reply{Text: string(answer), Release: g.gate(topic)}
	}
}

var summaryOutput = at.Object(map[string]any{"summary": at.String(), "by": at.String()}, "summary", "by")

// ACT-016, ACT-110, ACT-135, ACT-136, ACT-139, ACT-141, ACT-142, ACT-143, ACT-144, ACT-145, ACT-146, ACT-147, ACT-148, ACT-149, ACT-150, ACT-151, ACT-152, ACT-158,
// ACT-159, ACT-161, ACT-172, ACT-173, ACT-224, ACT-225, ACT-227: a tools/call
// of a callable agent, from a client declaring the Tasks extension, answers
// with the task once it is recorded and queued (a flat CreateTaskResult:
// taskId, working, createdAt and lastUpdatedAt, ttlMs 24 h, pollIntervalMs
// 5 s); the task is the started execution, whose startedBy names the request
// and whose input is the arguments with the reference's fixed input; the
// request records no call and no use. tasks/get answers working until the
// agent's output is committed, then completed with the output rendered as a
// tools/call result; that poll records a TOOL use of the task; every
// tasks/get is an execution of its own in the session, recording the status
// it returned.
func TestAgentCallAnswersWithATask(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, model := taskEnv(t, d, at.Options{}, summarizer(g))
		agentID := at.NewID()
		env.CreateAction(agentID, at.AgentSpec{Name: "summarize", Model: "summary-model", OutputSchema: summaryOutput,
			InputSchema: at.Object(map[string]any{"topic": at.String(), "requested_by": at.String()}, "topic")}.Input())
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "agent-tasks", Intent: "NONE", Policies: at.Everything(),
			Tools: []map[string]any{at.RefFixed("summarize", map[string]any{"requested_by": "execution.input.subject"})}}.Input())
		s := env.ConnectTasks("agent-tasks", env.Token(principal, "alice"), at.Revision2026, true)
		if _, ok := s.InitializeResult().Capabilities.Extensions[mcpkit.TasksExtension]; !ok {
			t.Errorf("server/discover lacks the Tasks extension")
		}

		before := time.Now().Add(-time.Second)
		task, res := s.CallForTask(t, "summarize", map[string]any{"topic": "ledgers", "requested_by": "mallory"})
		if task == nil {
			t.Fatalf("the agent answered without a task: %s", at.AsJSON(res))
		}
		created, err := time.Parse(time.RFC3339Nano, task.CreatedAt)
		if task.ResultType != "task" || task.TaskID == "" || task.Status != mcpkit.TaskWorking || err != nil || created.Before(before) ||
			task.LastUpdatedAt == "" || task.TTLMs == nil || *task.TTLMs != 86_400_000 || task.PollIntervalMs != 5_000 {
			t.Errorf("task answer %s", at.AsJSON(task))
		}
		for _, key := range []string{"result", "error", "content", "ttl", "pollInterval", "task", "requestState"} {
			if rawKeys(s.LastRaw())[key] {
				t.Errorf("the task answer carries %q: %s", key, s.LastRaw())
			}
		}
		// ACT-150: readable at once.
		working, err := s.GetTask(task.TaskID)
		if err != nil || working.Status != mcpkit.TaskWorking || working.Result != nil || working.ResultType != "complete" {
			t.Fatalf("tasks/get right after the answer: %v %s", err, at.AsJSON(working))
		}

		call := last(t, requests(env, serverID, "tools/call"))
		if len(call["calls"].([]any)) != 0 || len(call["uses"].([]any)) != 0 || call["status"] != "SUCCEEDED" || at.Dig(call, "invocation", "output", "task") != task.TaskID {
			t.Errorf("the request that started the task: %s", at.AsJSON(call))
		}
		execution := env.Execution(task.TaskID)
		if execution == nil || execution["role"] != "task" || at.Dig(execution, "startedBy", "executionId") != call["id"] || execution["actionId"] != agentID ||
			execution["caller"] != principal || execution["subject"] != "alice" ||
			!jsonEqual(execution["input"], map[string]any{"topic": "ledgers", "requested_by": "alice"}) {
			t.Fatalf("the task's execution: %s", at.AsJSON(execution))
		}
		if got := tasksOf(env, agentID); len(got) != 1 {
			t.Errorf("%d task executions, want 1", len(got))
		}

		g.open("ledgers")
		done := s.WaitTask(t, task.TaskID, taskWait, mcpkit.TaskCompleted, mcpkit.TaskFailed, mcpkit.TaskCancelled)
		want := map[string]any{"summary": "About ledgers.", "by": "alice"}
		var result struct {
			Content           []map[string]any `json:"content"`
			StructuredContent any              `json:"structuredContent"`
			IsError           bool             `json:"isError"`
		}
		json.Unmarshal(done.Result, &result)
		if done.Status != mcpkit.TaskCompleted || result.IsError || !jsonEqual(result.StructuredContent, want) ||
			len(result.Content) != 1 || !jsonEqual(at.Decode(result.Content[0]["text"]), want) || done.Error != nil {
			t.Fatalf("completed task %s", at.AsJSON(done))
		}
		// ACT-159: lastUpdatedAt is when the execution last changed.
		if done.LastUpdatedAt <= working.LastUpdatedAt {
			t.Errorf("lastUpdatedAt %s after completing, %s while working", done.LastUpdatedAt, working.LastUpdatedAt)
		}
		// ACT-172: completed only once the output is committed.
		if e := env.Execution(task.TaskID); e["status"] != "SUCCEEDED" || !jsonEqual(e["output"], want) || e["endedAt"] == nil {
			t.Errorf("the execution after tasks/get said completed: %s", at.AsJSON(e))
		}
		// Each exchange is recorded beneath the task.
		exchanges := env.Execution(task.TaskID)["calls"].([]any)
		if len(exchanges) != 1 || at.Dig(exchanges[0], "actionName") != "summary-model" || at.Dig(exchanges[0], "status") != "SUCCEEDED" {
			t.Errorf("the task's calls %s", at.AsJSON(exchanges))
		}
		if got := model.Exchanges(); len(got) != 1 || got[0].Key != modelKey || !strings.Contains(got[0].System, "JSON Schema") {
			t.Errorf("the provider saw %d exchanges: %+v", len(got), got)
		}

		polls := requests(env, serverID, "tasks/get")
		if len(polls) < 2 {
			t.Fatalf("%d tasks/get recorded", len(polls))
		}
		session := at.SessionIDFor(principal, "alice")
		inputs := env.Session(serverID, session)["inputs"].([]any)
		for i, poll := range polls {
			status := at.Dig(poll, "invocation", "output", "status")
			if poll["sessionId"] != session || poll["status"] != "SUCCEEDED" || status == nil {
				t.Errorf("poll %d: session %v status %v output %v", i, poll["sessionId"], poll["status"], status)
			}
			found := false
			for _, in := range inputs {
				found = found || at.Dig(in, "executionId") == poll["id"]
			}
			if !found {
				t.Errorf("poll %d is not in the session's inputs", i)
			}
			uses := poll["uses"].([]any)
			if status == "completed" {
				if len(uses) != 1 || at.Dig(uses[0], "kind") != "TOOL" || at.Dig(uses[0], "executionId") != task.TaskID {
					t.Errorf("the poll that returned the output records uses %s", at.AsJSON(uses))
				}
			} else if len(uses) != 0 {
				t.Errorf("a working poll records uses %s", at.AsJSON(uses))
			}
		}
		if at.Dig(polls[0], "invocation", "output", "status") != "working" || at.Dig(last(t, polls), "invocation", "output", "status") != "completed" {
			t.Errorf("first poll %v, last %v", at.Dig(polls[0], "invocation", "output"), at.Dig(last(t, polls), "invocation", "output"))
		}
	})
}

// ACT-138: every other tool answers its call at once, also to a client
// with the extension.
func TestOtherToolsAnswerAtOnce(t *testing.T) {
	env, _ := taskEnv(t, store.SQLite, at.Options{}, func(modeltest.Exchange) modeltest.Reply { return modeltest.Reply{Text: "x"} })
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "sync", Intent: "NONE", Mode: "LIVE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("stamp")}}.Input())
	s := env.ConnectTasks("sync", env.Token(principal, "alice"), at.Revision2026, true)
	task, res := s.CallForTask(t, "stamp", map[string]any{"k": "sync"})
	if task != nil || res.IsError || !jsonEqual(res.StructuredContent, map[string]any{"k": "sync"}) || !rawKeys(s.LastRaw())["content"] {
		t.Errorf("a plain tool answered %s", s.LastRaw())
	}
}

// ACT-153, ACT-160, ACT-162, ACT-163, ACT-164, ACT-165, ACT-166, ACT-167, ACT-168, ACT-171, ACT-177: the execution's status reads as
// the task's: QUEUED, RUNNING and RETRY_SCHEDULED are working; SUCCEEDED is
// completed (above); FAILED is completed with a tool error carrying the
// execution's code, the message "The task's agent failed" and its hint;
// EXHAUSTED (retries ran out) is failed, with a statusMessage and a -32603
// error whose data holds the code and hint; CANCELLED is cancelled. A task
// whose attempt failed for a reason that can pass goes RETRY_SCHEDULED and
// runs again. No task is ever input_required.
func TestTaskStatusMapping(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		var attemptsMu sync.Mutex
		attempts := 0
		script := func(x modeltest.Exchange) modeltest.Reply {
			switch x.Model {
			case "invalid":
				return modeltest.Reply{Text: "not the JSON asked for"}
			case "overloaded":
				return modeltest.Reply{Status: 529, ErrorType: "overloaded_error"}
			case "flaky":
				attemptsMu.Lock()
				attempts++
				n := attempts
				attemptsMu.Unlock()
				if n == 1 {
					return modeltest.Reply{Status: 500, ErrorType: "api_error"}
				}
				return modeltest.Reply{Text: "fine now", Release: g.gate("flaky")}
			}
			return modeltest.Reply{Text: "held", Release: g.gate(x.Input()["name"].(string))}
		}
		env, model := taskEnv(t, d, at.Options{Tasks: server.TaskOptions{Workers: 1}}, script)
		zero, one := 0, 1
		named := at.Object(map[string]any{"name": at.String()})
		for _, a := range []at.AgentSpec{
			{Name: "failing", Model: "invalid", OutputSchema: at.Object(map[string]any{"ok": map[string]any{"type": "boolean"}}, "ok")},
			{Name: "exhausting", Model: "overloaded", Retries: &zero},
			{Name: "flaky", Model: "flaky", Retries: &one},
			{Name: "holding", Model: "hold", InputSchema: named},
		} {
			env.CreateAction(at.NewID(), a.Input())
		}
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "mapping", Intent: "NONE", Policies: at.Everything(),
			Tools: []map[string]any{at.Ref("failing"), at.Ref("exhausting"), at.Ref("flaky"), at.Ref("holding")}}.Input())
		s := env.ConnectTasks("mapping", env.Token(principal, "alice"), at.Revision2026, true)
		start := func(name string, args map[string]any) string {
			t.Helper()
			task, res := s.CallForTask(t, name, args)
			if task == nil {
				t.Fatalf("%s: %s", name, at.AsJSON(res))
			}
			return task.TaskID
		}
		seen := map[mcpkit.TaskStatus]bool{}
		read := func(id string) *mcpkit.GetTaskResult {
			t.Helper()
			got, err := s.GetTask(id)
			if err != nil {
				t.Fatalf("tasks/get: %v", err)
			}
			seen[got.Status] = true
			return got
		}

		// One worker: the first task holds it RUNNING, the second waits QUEUED.
		running := start("holding", map[string]any{"name": "first"})
		waitExecution(t, env, running, "RUNNING")
		queued := start("holding", map[string]any{"name": "second"})
		if e := env.Execution(queued); e["status"] != "QUEUED" || read(queued).Status != mcpkit.TaskWorking || read(running).Status != mcpkit.TaskWorking {
			t.Fatalf("queued %v", e["status"])
		}
		// CANCELLED (ACT-168), and the worker freed for the rest.
		if _, err := s.CancelTask(queued); err != nil {
			t.Fatal(err)
		}
		if got := read(queued); got.Status != mcpkit.TaskCancelled {
			t.Errorf("cancelled queued task reads %s", got.Status)
		}
		g.open("first")
		s.WaitTask(t, running, taskWait, mcpkit.TaskCompleted)

		// FAILED → completed with a tool error.
		failedID := start("failing", nil)
		failed := s.WaitTask(t, failedID, taskWait, mcpkit.TaskCompleted, mcpkit.TaskFailed)
		seen[failed.Status] = true
		var failure mcpkitResult
		json.Unmarshal(failed.Result, &failure)
		meta := failure.Meta["com.twisp/error"]
		if failed.Status != mcpkit.TaskCompleted || !failure.IsError || at.Dig(meta, "code") != "action_output_invalid" ||
			at.Dig(meta, "message") != "The task's agent failed" || at.Dig(meta, "hint") == "" ||
			len(failure.Content) != 1 || !strings.HasPrefix(at.Dig(failure.Content[0], "text").(string), "The task's agent failed\nHint: ") || failed.Error != nil {
			t.Errorf("a FAILED task reads %s", at.AsJSON(failed))
		}
		// ACT-171: the execution keeps the full error the task does not
		// return: its own message and the validator's detail.
		if e := env.Execution(failedID); at.Dig(e, "error", "message") != "The agent's answer does not match its outputSchema." ||
			at.Dig(e, "error", "hint") == "" || at.Dig(e, "error", "detail") == nil {
			t.Errorf("the FAILED task's execution error %s", at.AsJSON(e["error"]))
		}

		// EXHAUSTED → failed with -32603.
		exhaustedID := start("exhausting", nil)
		exhausted := s.WaitTask(t, exhaustedID, taskWait, mcpkit.TaskCompleted, mcpkit.TaskFailed)
		seen[exhausted.Status] = true
		data, _ := exhausted.Error.Data.(map[string]any)
		if exhausted.Status != mcpkit.TaskFailed || exhausted.StatusMessage == "" || exhausted.Error.Code != -32603 ||
			data["code"] != "model_unavailable" || data["hint"] == "" || exhausted.Result != nil {
			t.Errorf("an EXHAUSTED task reads %s", at.AsJSON(exhausted))
		}
		if e := env.Execution(exhaustedID); e["status"] != "EXHAUSTED" {
			t.Errorf("execution %v", e["status"])
		}

		// RETRY_SCHEDULED → working, then a second attempt.
		flaky := start("flaky", nil)
		waitExecution(t, env, flaky, "RETRY_SCHEDULED")
		if got := read(flaky); got.Status != mcpkit.TaskWorking {
			t.Errorf("RETRY_SCHEDULED reads %s", got.Status)
		}
		waitExecution(t, env, flaky, "RUNNING")
		g.open("flaky")
		retried := s.WaitTask(t, flaky, taskWait, mcpkit.TaskCompleted, mcpkit.TaskFailed)
		if retried.Status != mcpkit.TaskCompleted || exchangesWithModel(model, "flaky") != 2 {
			t.Errorf("the retried task reads %s after %d exchanges", at.AsJSON(retried), exchangesWithModel(model, "flaky"))
		}
		calls := env.Execution(flaky)["calls"].([]any)
		if len(calls) != 2 || at.Dig(calls[0], "status") != "FAILED" || at.Dig(calls[0], "error", "code") != "model_unavailable" || at.Dig(calls[1], "status") != "SUCCEEDED" {
			t.Errorf("the retried task's exchanges %s", at.AsJSON(calls))
		}
		if seen[mcpkit.TaskInputRequired] {
			t.Error("a task read input_required")
		}
	})
}

type mcpkitResult struct {
	Content []map[string]any          `json:"content"`
	IsError bool                      `json:"isError"`
	Meta    map[string]map[string]any `json:"_meta"`
}

func exchangesWithModel(model *modeltest.Server, name string) int {
	n := 0
	for _, x := range model.Exchanges() {
		if x.Model == name {
			n++
		}
	}
	return n
}

// writer asks for stamp {k} on its first turn, then waits at the gate named
// k before answering "done".
func writer(g *gates) modeltest.Script {
	return func(x modeltest.Exchange) modeltest.Reply {
		k, _ := x.Input()["k"].(string)
		if x.Turn() == 1 {
			return modeltest.Reply{ToolUses: []modeltest.ToolUse{{Name: "stamp", Input: map[string]any{"k": k}}}}
		}
		return modeltest.Reply{Text: "done " + k, Release: g.gate(k)}
	}
}

func defineWriter(env *at.Env, mode string) (agentID, serverID string) {
	agentID, serverID = at.NewID(), at.NewID()
	env.CreateAction(agentID, at.AgentSpec{Name: "writer", Model: "writer", InputSchema: at.Object(map[string]any{"k": at.String()}, "k"),
		Tools: []map[string]any{at.Ref("stamp")}, Policies: at.Everything()}.Input())
	env.CreateAction(serverID, at.ServerSpec{Name: "writing", Intent: "NONE", Mode: mode, Policies: at.Everything(),
		Tools: []map[string]any{at.Ref("writer")}}.Input())
	return agentID, serverID
}

// ACT-176, ACT-178, ACT-179, ACT-180, ACT-181, ACT-182, ACT-183, ACT-184, ACT-185: tasks/cancel is acknowledged with an empty
// result. A running agent stops at its next step — here while it waits for
// the model — its writes roll back (its stamp call is kept, rolled back by
// the task), and it becomes cancelled; its execution's cancelledBy names the
// principal and the tasks/cancel request. A queued task is cancelled at
// once and never runs. Cancelling a finished task is acknowledged and
// changes nothing; tasks/update is acknowledged and changes nothing.
func TestCancelTask(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, model := taskEnv(t, d, at.Options{Tasks: server.TaskOptions{Workers: 1}}, writer(g))
		_, serverID := defineWriter(env, "LIVE")
		s := env.ConnectTasks("writing", env.Token(principal, "alice"), at.Revision2026, true)

		running, _ := s.CallForTask(t, "writer", map[string]any{"k": "cancelled-while-running"})
		at.WaitFor(t, "the agent's second exchange", taskWait, func() bool { return exchangesWith(model, "k", "cancelled-while-running") == 2 })
		queued, _ := s.CallForTask(t, "writer", map[string]any{"k": "cancelled-while-queued"})
		if e := env.Execution(queued.TaskID); e["status"] != "QUEUED" {
			t.Fatalf("the second task is %v, want QUEUED behind the only worker", e["status"])
		}
		ack, err := s.CancelTask(queued.TaskID)
		if err != nil || ack.ResultType != "complete" {
			t.Fatalf("cancel queued: %v %s", err, at.AsJSON(ack))
		}
		if e := env.Execution(queued.TaskID); e["status"] != "CANCELLED" || e["endedAt"] == nil {
			t.Errorf("a cancelled queued task is %v", e["status"])
		}
		if _, err := s.CancelTask(running.TaskID); err != nil {
			t.Fatal(err)
		}
		cancelRequest := last(t, requests(env, serverID, "tasks/cancel"))
		if got := s.WaitTask(t, running.TaskID, taskWait, mcpkit.TaskCancelled, mcpkit.TaskCompleted, mcpkit.TaskFailed); got.Status != mcpkit.TaskCancelled {
			t.Fatalf("a cancelled running task reads %s", got.Status)
		}
		e := env.Execution(running.TaskID)
		calls := e["calls"].([]any)
		var stamp map[string]any
		for _, c := range calls {
			if at.Dig(c, "actionName") == "stamp" {
				stamp = c.(map[string]any)
			}
		}
		if e["status"] != "CANCELLED" || at.Dig(e, "cancelledBy", "principal") != principal || at.Dig(e, "cancelledBy", "subject") != "alice" ||
			at.Dig(e, "cancelledBy", "executionId") != cancelRequest["id"] {
			t.Errorf("cancelled execution %s, cancel request %v", at.AsJSON(e), cancelRequest["id"])
		}
		if stamp == nil || stamp["status"] != "SUCCEEDED" || stamp["rolledBackByExecutionId"] != running.TaskID || len(stamp["writeSet"].([]any)) != 1 {
			t.Errorf("the stamp call beneath the cancelled task: %s", at.AsJSON(stamp))
		}
		if env.KV("tasks", "cancelled-while-running") != nil {
			t.Error("a cancelled agent's write was committed")
		}
		if exchangesWith(model, "k", "cancelled-while-queued") != 0 {
			t.Error("a task cancelled while queued ran")
		}
		g.open("cancelled-while-running")
		if exchangesWith(model, "k", "cancelled-while-running") != 2 {
			t.Error("the cancelled agent went on to another exchange")
		}

		// A finished task: acknowledged, unchanged.
		finished, _ := s.CallForTask(t, "writer", map[string]any{"k": "finished"})
		g.open("finished")
		s.WaitTask(t, finished.TaskID, taskWait, mcpkit.TaskCompleted)
		for _, send := range []func(string) (*mcpkit.AckResult, error){s.CancelTask, s.UpdateTask} {
			ack, err := send(finished.TaskID)
			if err != nil || ack.ResultType != "complete" {
				t.Errorf("ack for a finished task: %v %s", err, at.AsJSON(ack))
			}
		}
		if got, _ := s.GetTask(finished.TaskID); got.Status != mcpkit.TaskCompleted || env.KV("tasks", "finished") == nil {
			t.Errorf("after cancel and update, the finished task reads %s", got.Status)
		}
		if e := env.Execution(finished.TaskID); e["cancelledBy"] != nil || e["status"] != "SUCCEEDED" {
			t.Errorf("a finished task's execution after cancel: %s", at.AsJSON(e))
		}
	})
}

// An agent whose provider is an OpenAI-compatible chat API runs the same
// loop: its tool call goes through the engine, its answer is the task's
// result. A callable agent reached from a tool's own code is not run there
// (it runs only as a task): action_not_runnable, with a hint (found tried as
// a new user would: its hint was empty).
func TestAgentOverAChatAPI(t *testing.T) {
	env, model := taskEnv(t, store.SQLite, at.Options{}, func(x modeltest.Exchange) modeltest.Reply {
		if x.Turn() == 1 {
			return modeltest.Reply{ToolUses: []modeltest.ToolUse{{Name: "stamp", Input: map[string]any{"k": "chat"}}}}
		}
		return modeltest.Reply{Text: "stamped: " + x.LastResults()[0].Content}
	})
	env.CreateAction(at.NewID(), at.AgentSpec{Name: "chatty", Provider: "openai", Model: "chat-model", Tools: []map[string]any{at.Ref("stamp")}, Policies: at.Everything()}.Input())
	env.CreateAction(at.NewID(), at.StarlarkTool("nested", "def run(event):\n    return tools.chatty({})\n", nil, []map[string]any{at.Ref("chatty")}))
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "chat", Intent: "NONE", Mode: "LIVE", Policies: at.Everything(),
		Tools: []map[string]any{at.Ref("chatty"), at.Ref("nested")}}.Input())
	s := env.ConnectTasks("chat", env.Token(principal, "alice"), at.Revision2026, true)
	task, _ := s.CallForTask(t, "chatty", nil)
	done := s.WaitTask(t, task.TaskID, taskWait, mcpkit.TaskCompleted, mcpkit.TaskFailed)
	var result mcpkitResult
	json.Unmarshal(done.Result, &result)
	if done.Status != mcpkit.TaskCompleted || at.Dig(result.Content[0], "text") != `stamped: {"k":"chat"}` || env.KV("tasks", "chat") == nil {
		t.Errorf("the chat agent's task: %s", at.AsJSON(done))
	}
	if x := model.Exchanges(); len(x) != 2 || x[0].API != "openai" || x[0].Key != modelKey {
		t.Errorf("exchanges %+v", x)
	}
	res := callTool(t, s.ClientSession, "nested", map[string]any{})
	meta, _ := res.Meta["com.twisp/error"].(map[string]any)
	if !res.IsError || meta["code"] != "action_not_runnable" || meta["hint"] == "" {
		t.Errorf("a callable agent called from a tool: %s %s", text(res), asJSON(meta))
	}
}

// ACT-451: a call an agent makes of a tool its reference says needs
// approval runs, in a preview, as if approved, its writes discarded, and its
// execution is marked grantedInPreview. Live, actiond has no one to ask, so
// the call is refused to the model as action_approval_required and does not
// run: nothing is recorded for it and nothing is written.
func TestApprovalRequiredCalls(t *testing.T) {
	env, model := taskEnv(t, store.SQLite, at.Options{}, func(x modeltest.Exchange) modeltest.Reply {
		if x.Turn() == 1 {
			return modeltest.Reply{ToolUses: []modeltest.ToolUse{{Name: "stamp", Input: map[string]any{"k": x.Input()["k"]}}}}
		}
		return modeltest.Reply{Text: "stamp said: " + x.LastResults()[0].Content}
	})
	env.CreateAction(at.NewID(), at.AgentSpec{Name: "careful", Model: "careful-model", InputSchema: at.Object(map[string]any{"k": at.String()}, "k"),
		Tools: []map[string]any{{"name": "stamp", "approval": map[string]any{"required": true}}}, Policies: at.Everything()}.Input())
	for _, mode := range []string{"PREVIEW", "LIVE"} {
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "careful-" + strings.ToLower(mode), Intent: "NONE", Mode: mode, Policies: at.Everything(),
			Tools: []map[string]any{at.Ref("careful")}}.Input())
	}
	token := env.Token(principal, "alice")
	run := func(server, k string) (string, []any) {
		t.Helper()
		s := env.ConnectTasks(server, token, at.Revision2026, true)
		task, _ := s.CallForTask(t, "careful", map[string]any{"k": k})
		done := s.WaitTask(t, task.TaskID, taskWait, mcpkit.TaskCompleted, mcpkit.TaskFailed)
		var result mcpkitResult
		json.Unmarshal(done.Result, &result)
		if done.Status != mcpkit.TaskCompleted || len(result.Content) != 1 {
			t.Fatalf("the task on %s: %s", server, at.AsJSON(done))
		}
		var stamps []any
		for _, call := range env.Execution(task.TaskID)["calls"].([]any) {
			if at.Dig(call, "actionName") == "stamp" {
				stamps = append(stamps, call)
			}
		}
		text, _ := result.Content[0]["text"].(string)
		return text, stamps
	}

	answer, stamps := run("careful-preview", "previewed")
	if len(stamps) != 1 || at.Dig(stamps[0], "status") != "SUCCEEDED" || at.Dig(stamps[0], "preview") != true || at.Dig(stamps[0], "grantedInPreview") != true {
		t.Errorf("the preview's stamp call: %s", at.AsJSON(stamps))
	}
	if !strings.Contains(answer, `"k":"previewed"`) || env.KV("tasks", "previewed") != nil {
		t.Errorf("in a preview the call ran (answer %q) and wrote nothing (%v)", answer, env.KV("tasks", "previewed"))
	}

	answer, stamps = run("careful-live", "live")
	if len(stamps) != 0 || !strings.Contains(answer, "action_approval_required") || env.KV("tasks", "live") != nil {
		t.Errorf("live, the call needing approval: answer %q, calls %s, written %v", answer, at.AsJSON(stamps), env.KV("tasks", "live"))
	}
	if n := exchangesWithModel(model, "careful-model"); n != 4 {
		t.Errorf("%d exchanges with the model, want 2 per task", n)
	}
}

// An agent's skills: a preloaded one's instructions join the model's system
// prompt, its load of that exact version recorded beneath the task; one not
// preloaded is named with its description alone, and the model loads it
// with load_skill, which answers with its instructions and records that
// load too.
func TestAgentSkills(t *testing.T) {
	env, model := taskEnv(t, store.SQLite, at.Options{}, func(x modeltest.Exchange) modeltest.Reply {
		switch x.Turn() {
		case 1:
			return modeltest.Reply{ToolUses: []modeltest.ToolUse{{Name: "load_skill", Input: map[string]any{"name": "nowhere"}}}}
		case 2:
			return modeltest.Reply{ToolUses: []modeltest.ToolUse{{Name: "load_skill", Input: map[string]any{"name": "escalate"}}}}
		}
		return modeltest.Reply{Text: "loaded: " + x.LastResults()[0].Content}
	})
	skill := func(name, instructions string) map[string]any {
		return map[string]any{"name": name, "description": "How to " + name + ".", "kind": "skill", "config": map[string]any{"instructions": instructions}}
	}
	reviewID, escalateID := at.NewID(), at.NewID()
	env.CreateAction(reviewID, skill("review-accounts", "Check every balance twice."))
	env.CreateAction(escalateID, skill("escalate", "Call the on-call human."))
	input := at.AgentSpec{Name: "skilled", Model: "skilled"}.Input()
	input["skills"] = []map[string]any{{"name": "review-accounts", "preload": true}, {"name": "escalate"}}
	env.CreateAction(at.NewID(), input)
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "skills", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("skilled")}}.Input())
	s := env.ConnectTasks("skills", env.Token(principal, "alice"), at.Revision2026, true)
	task, _ := s.CallForTask(t, "skilled", nil)
	done := s.WaitTask(t, task.TaskID, taskWait, mcpkit.TaskCompleted)
	exchanges := model.Exchanges()
	system := exchanges[0].System
	if !strings.Contains(system, "How to review-accounts.") || !strings.Contains(system, "Check every balance twice.") ||
		!strings.Contains(system, "How to escalate.") || strings.Contains(system, "on-call human") || !strings.Contains(system, "load_skill") {
		t.Errorf("the system prompt: %q", system)
	}
	if !slices.Contains(exchanges[0].Tools, "load_skill") {
		t.Errorf("the model was offered %v", exchanges[0].Tools)
	}
	if len(exchanges) != 3 || !exchanges[1].LastResults()[0].IsError || !strings.Contains(exchanges[1].LastResults()[0].Content, `"nowhere"`) {
		t.Fatalf("loading a skill the agent does not have: %+v", exchanges)
	}
	var result mcpkitResult
	json.Unmarshal(done.Result, &result)
	if len(result.Content) != 1 || !strings.Contains(at.Dig(result.Content[0], "text").(string), "loaded: ## Skill escalate\n\nCall the on-call human.") {
		t.Errorf("the answer after loading escalate: %s", at.AsJSON(done))
	}
	loads := map[string]map[string]any{}
	for _, c := range env.Execution(task.TaskID)["calls"].([]any) {
		if id, _ := at.Dig(c, "actionId").(string); id == reviewID || id == escalateID {
			loads[id] = c.(map[string]any)
		}
	}
	for _, id := range []string{reviewID, escalateID} {
		if load := loads[id]; load == nil || load["actionVersion"] != 1.0 || load["status"] != "SUCCEEDED" || at.Dig(load, "output", "version") != 1.0 {
			t.Errorf("the load of skill %s: %s", id, asJSON(env.Execution(task.TaskID)["calls"]))
		}
	}
}
