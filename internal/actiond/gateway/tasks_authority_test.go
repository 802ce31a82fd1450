package gateway_test

import (
	"strings"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/modeltest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// stamper asks for stamp {k: <name>-1}, then, once the gate <name> opens,
// for stamp {k: <name>-2}, then answers with what the tools said.
func stamper(g *gates) modeltest.Script {
	return func(x modeltest.Exchange) modeltest.Reply {
		name, _ := x.Input()["name"].(string)
		switch x.Turn() {
		case 1:
			return modeltest.Reply{ToolUses: []modeltest.ToolUse{{Name: "stamp", Input: map[string]any{"k": name + "-1"}}}}
		case 2:
			return modeltest.Reply{ToolUses: []modeltest.ToolUse{{Name: "stamp", Input: map[string]any{"k": name + "-2"}}}, Release: g.gate(name)}
		}
		var said []string
		for _, m := range x.Messages {
			for _, r := range m.ToolResults {
				said = append(said, r.Content)
			}
		}
		return modeltest.Reply{Text: strings.Join(said, "\n---\n")}
	}
}

func defineStamper(env *at.Env, serverPolicies []map[string]any) (serverID string) {
	env.CreateAction(at.NewID(), at.AgentSpec{Name: "stamper", Model: "stamper", InputSchema: at.Object(map[string]any{"name": at.String()}, "name"),
		Tools: []map[string]any{at.Ref("stamp")}, Policies: at.Everything()}.Input())
	serverID = at.NewID()
	env.CreateAction(serverID, at.ServerSpec{Name: "stamping", Intent: "NONE", Mode: "LIVE", Policies: serverPolicies,
		Tools: []map[string]any{at.Ref("stamper")}}.Input())
	return serverID
}

func stampCalls(env *at.Env, taskID string) []map[string]any {
	var out []map[string]any
	for _, c := range env.Execution(taskID)["calls"].([]any) {
		if at.Dig(c, "actionName") == "stamp" {
			out = append(out, c.(map[string]any))
		}
	}
	return out
}

// ACT-154, ACT-155: a task's calls run under the principal's policies, then
// the server's, then the agent's, read again before each call: a write the
// agent allows but the server does not is a denial naming the server, told
// to the model as the tool's error; once the server's policies allow it,
// the agent's next call of the same run succeeds, and its write commits with
// the task on a LIVE server.
func TestTaskAuthorityIsReadAtEachCall(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, model := taskEnv(t, d, at.Options{}, stamper(g))
		readOnly := []map[string]any{at.Allow([]string{"SELECT", "INVOKE"}, "*")}
		serverID := defineStamper(env, readOnly)
		s := env.ConnectTasks("stamping", env.Token(principal, "alice"), at.Revision2026, true)
		task, _ := s.CallForTask(t, "stamper", map[string]any{"name": "policy"})
		at.WaitFor(t, "the second exchange", taskWait, func() bool { return exchangesWith(model, "name", "policy") == 2 })
		calls := stampCalls(env, task.TaskID)
		if len(calls) != 1 || calls[0]["status"] != "FAILED" || at.Dig(calls[0], "error", "code") != "ACCESS_DENIED" ||
			!strings.Contains(asJSON(calls[0]["error"]), "server") {
			t.Fatalf("the first stamp under read-only server policies: %s", asJSON(calls))
		}
		env.UpdateAction(serverID, map[string]any{"policies": at.Everything()})
		g.open("policy")
		done := s.WaitTask(t, task.TaskID, taskWait, mcpkit.TaskCompleted, mcpkit.TaskFailed)
		var result mcpkitResult
		jsonUnmarshal(done.Result, &result)
		said := at.Dig(result.Content[0], "text").(string)
		if done.Status != mcpkit.TaskCompleted || !strings.Contains(said, "the server's policies") || !strings.Contains(said, `{"k":"policy-2"}`) {
			t.Errorf("the agent was told %q", said)
		}
		if env.KV("tasks", "policy-1") != nil || env.KV("tasks", "policy-2") == nil {
			t.Errorf("rows: policy-1 %v, policy-2 %v", env.KV("tasks", "policy-1"), env.KV("tasks", "policy-2"))
		}
	})
}

// ACT-156: revoking the principal stops what has not run: the agent's next
// step finds the principal gone and the task ends FAILED principal_revoked,
// its call not made, its earlier write rolled back.
func TestRevokedPrincipalStopsTheAgent(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, model := taskEnv(t, d, at.Options{}, stamper(g))
		env.PutPrincipal("revocable", at.Everything())
		defineStamper(env, at.Everything())
		s := env.ConnectTasks("stamping", env.Token("revocable", "alice"), at.Revision2026, true)
		task, _ := s.CallForTask(t, "stamper", map[string]any{"name": "revoked"})
		at.WaitFor(t, "the second exchange", taskWait, func() bool { return exchangesWith(model, "name", "revoked") == 2 })
		env.MustGraphQL(`mutation { auth { deletePrincipal(name: "revocable") { name } } }`, nil)
		g.open("revoked")
		e := waitExecution(t, env, task.TaskID, "FAILED")
		if at.Dig(e, "error", "code") != "principal_revoked" {
			t.Errorf("the revoked task's error %s", asJSON(e["error"]))
		}
		calls := stampCalls(env, task.TaskID)
		if len(calls) != 1 || calls[0]["rolledBackByExecutionId"] != task.TaskID {
			t.Errorf("stamp calls after the revocation: %s", asJSON(calls))
		}
		if env.KV("tasks", "revoked-1") != nil || env.KV("tasks", "revoked-2") != nil {
			t.Error("a revoked task's writes committed")
		}
		if n := exchangesWith(model, "name", "revoked"); n != 2 {
			t.Errorf("%d exchanges, want 2: the revoked agent went on", n)
		}
	})
}

// ACT-157: the credential a task was started with expiring stops it too.
func TestExpiredCredentialStopsTheAgent(t *testing.T) {
	fake := clock.NewFake(at.Start)
	g := newGates(t)
	env, model := taskEnv(t, store.SQLite, at.Options{Clock: fake}, stamper(g))
	defineStamper(env, at.Everything())
	token := env.MintToken(auth.MintOptions{Principal: principal, Subject: "alice", Client: "c", TTL: 10 * time.Minute})
	s := env.ConnectTasks("stamping", token, at.Revision2026, true)
	task, _ := s.CallForTask(t, "stamper", map[string]any{"name": "expiring"})
	at.WaitFor(t, "the second exchange", taskWait, func() bool { return exchangesWith(model, "name", "expiring") == 2 })
	fake.Advance(11 * time.Minute)
	g.open("expiring")
	e := waitExecution(t, env, task.TaskID, "FAILED")
	if at.Dig(e, "error", "code") != "credential_expired" || len(stampCalls(env, task.TaskID)) != 1 || env.KV("tasks", "expiring-1") != nil {
		t.Errorf("after the credential expired: %s", asJSON(e))
	}
}

// ACT-538, ACT-186, ACT-187: a task a preview request creates is preview:
// the agent runs as it would live, none of its writes commit, and each call
// records what it would have written. A cancellation is not a business
// write: on a preview server it takes effect, and its request is marked
// preview.
func TestPreviewTasks(t *testing.T) {
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		g := newGates(t)
		env, _ := taskEnv(t, d, at.Options{}, writer(g))
		_, serverID := defineWriter(env, "")
		s := env.ConnectTasks("writing", env.Token(principal, "alice"), at.Revision2026, true)
		task, _ := s.CallForTask(t, "writer", map[string]any{"k": "previewed"})
		g.open("previewed")
		if got := s.WaitTask(t, task.TaskID, taskWait, mcpkit.TaskCompleted, mcpkit.TaskFailed); got.Status != mcpkit.TaskCompleted || got.Meta["com.twisp/preview"] != true {
			t.Fatalf("the preview task reads %s", at.AsJSON(got))
		}
		e := env.Execution(task.TaskID)
		calls := stampCalls(env, task.TaskID)
		if e["preview"] != true || len(calls) != 1 || calls[0]["preview"] != true || len(calls[0]["writeSet"].([]any)) != 1 ||
			at.Dig(calls[0]["writeSet"].([]any)[0], "key") != "tasks/previewed" || len(e["writeSet"].([]any)) != 1 {
			t.Errorf("the preview task's record: %s", asJSON(e))
		}
		if env.KV("tasks", "previewed") != nil {
			t.Error("a preview task's write committed")
		}

		cancelled, _ := s.CallForTask(t, "writer", map[string]any{"k": "cancelled-in-preview"})
		ack, err := s.CancelTask(cancelled.TaskID)
		if err != nil || ack.Meta["com.twisp/preview"] != true {
			t.Fatalf("cancel on a preview server: %v %s", err, at.AsJSON(ack))
		}
		if got := s.WaitTask(t, cancelled.TaskID, taskWait, mcpkit.TaskCancelled, mcpkit.TaskCompleted); got.Status != mcpkit.TaskCancelled {
			t.Errorf("on a preview server the cancelled task reads %s", got.Status)
		}
		if r := last(t, requests(env, serverID, "tasks/cancel")); r["preview"] != true {
			t.Errorf("the tasks/cancel request is not marked preview")
		}
	})
}

// ACT-174, ACT-175: a task stays readable after its ttlMs, and the poll
// that returns its agent's output records the TOOL use even after the
// server stopped referencing the agent.
func TestTaskOutlivesItsTTLAndItsReference(t *testing.T) {
	fake := clock.NewFake(at.Start)
	g := newGates(t)
	env, _ := taskEnv(t, store.SQLite, at.Options{Clock: fake}, holder(g))
	defineHolder(env)
	serverID := at.NewID()
	spec := at.ServerSpec{Name: "lasting", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("holder")}}
	env.CreateAction(serverID, spec.Input())
	token := env.MintToken(auth.MintOptions{Principal: principal, Subject: "alice", Client: "c", TTL: 72 * time.Hour})
	s := env.ConnectTasks("lasting", token, at.Revision2026, true)
	task, _ := s.CallForTask(t, "holder", map[string]any{"name": "lasting"})
	g.open("lasting")
	waitExecution(t, env, task.TaskID, "SUCCEEDED")
	spec.Tools = []map[string]any{}
	env.UpdateAction(serverID, map[string]any{"tools": spec.Tools})
	fake.Advance(25 * time.Hour)
	got, err := s.GetTask(task.TaskID)
	if err != nil || got.Status != mcpkit.TaskCompleted || got.Result == nil {
		t.Fatalf("25 hours on, after the server dropped the agent: %v %s", err, at.AsJSON(got))
	}
	poll := last(t, requests(env, serverID, "tasks/get"))
	if uses := poll["uses"].([]any); len(uses) != 1 || at.Dig(uses[0], "executionId") != task.TaskID {
		t.Errorf("the poll's uses %s", asJSON(poll["uses"]))
	}
}
