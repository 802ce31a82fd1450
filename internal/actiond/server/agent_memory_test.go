package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/modeltest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// boundedModel answers as the task's input asks: a block started millions
// of places ahead, an answer streamed past 40 MiB, a tool that answers 3
// MiB, or sixteen of those calls a turn until the conversation is past
// what it may hold.
func boundedModel(x modeltest.Exchange) modeltest.Reply {
	switch x.Input()["mode"] {
	case "ahead":
		return modeltest.Reply{Events: []map[string]any{{"type": "content_block_start", "index": 1 << 22,
			"content_block": map[string]any{"type": "text", "text": ""}}}}
	case "long":
		return modeltest.Reply{Text: strings.Repeat("z", 40<<20), Chunk: 1 << 20}
	case "grow":
		uses := make([]modeltest.ToolUse, 16)
		for i := range uses {
			uses[i] = modeltest.ToolUse{Name: "bulky", Input: map[string]any{}}
		}
		return modeltest.Reply{ToolUses: uses}
	}
	if x.Turn() == 1 {
		return modeltest.Reply{ToolUses: []modeltest.ToolUse{{Name: "bulky", Input: map[string]any{}}}}
	}
	results := x.LastResults()
	if len(results) != 1 {
		return modeltest.Reply{Text: "no result"}
	}
	return modeltest.Reply{Text: fmt.Sprintf("%d %v", len(results[0].Content), strings.Contains(results[0].Content, "(cut: the result is"))}
}

// The agent loop of the real actiond serve, its model the local provider
// speaking the Messages API: a provider that starts a block 2^22 places
// ahead, or streams a 40 MiB answer, fails the task with
// model_answer_invalid (before, the block index alone took the process
// past a gigabyte); a conversation that grows past 48 MiB fails it with
// agent_transcript_too_large; a tool's 3 MiB result reaches the model cut
// to 1 MiB, saying so, while the call's record keeps it whole. actiond
// stays under 300 MB resident through the first two and goes on serving.
func TestAgentLoopIsBoundedInTheProcess(t *testing.T) {
	model := at.FakeModel(t, modelKey, boundedModel)
	opts := storetest.Options(t, store.SQLite)
	p := at.StartProcess(t, binary, opts, "", "--config", modelConfig(t, model))
	env := p.Env(store.SQLite)
	env.PutPrincipal(server.LocalPrincipal, at.Everything())
	env.CreateAction(at.NewID(), at.StarlarkTool("bulky", "def run(event):\n    return {\"pad\": \"b\" * (3 << 20)}\n", at.Object(map[string]any{}), nil))
	env.CreateAction(at.NewID(), at.AgentSpec{Name: "reader", Model: "reader-model", InputSchema: at.Object(map[string]any{"mode": at.String()}),
		Tools: []map[string]any{at.Ref("bulky")}, Policies: at.Everything(), Retries: new(0), MaxTurns: 32}.Input())
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "desk", Mode: "LIVE", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("reader")}}.Input())
	ts := env.ConnectTasks("desk", p.Token(server.LocalPrincipal, "alice"), at.Revision2026, true)
	run := func(mode string) map[string]any {
		t.Helper()
		task, _ := ts.CallForTask(t, "reader", map[string]any{"mode": mode})
		if task == nil {
			t.Fatalf("%s: no task", mode)
		}
		ts.WaitTask(t, task.TaskID, 2*time.Minute, mcpkit.TaskCompleted, mcpkit.TaskFailed)
		return env.Execution(task.TaskID)
	}

	for _, c := range []struct{ mode, code string }{{"ahead", "model_answer_invalid"}, {"long", "model_answer_invalid"}} {
		e := run(c.mode)
		if code := at.Dig(at.Decode(e["error"]), "code"); e["status"] != "FAILED" || code != c.code {
			t.Errorf("%s: the task is %v with %v: %s", c.mode, e["status"], code, at.AsJSON(e["error"]))
		}
		peak := peakRSS(t, p.PID())
		t.Logf("%s: peak resident memory %d MB", c.mode, peak>>20)
		if peak > memoryLimit {
			t.Fatalf("%s: actiond's peak resident memory is %d MB", c.mode, peak>>20)
		}
	}

	e := run("grow")
	if code := at.Dig(at.Decode(e["error"]), "code"); e["status"] != "FAILED" || code != "agent_transcript_too_large" {
		t.Errorf("a growing conversation: the task is %v with %v: %s", e["status"], code, at.AsJSON(e["error"]))
	}
	t.Logf("after the growing conversation: peak resident memory %d MB", peakRSS(t, p.PID())>>20)

	e = run("tools")
	var told int
	var cut bool
	output, _ := at.Decode(e["output"]).(string)
	fmt.Sscanf(output, "%d %t", &told, &cut)
	if !cut || told < 1<<20 || told > 1<<20+200 {
		t.Errorf("what the model was told of the 3 MiB result: %q %s", output, at.AsJSON(e["error"]))
	}
	kept := false
	for _, c := range e["calls"].([]any) {
		if at.Dig(c, "actionName") == "bulky" && len(at.AsJSON(at.Dig(c, "output"))) > 3<<20 {
			kept = true
		}
	}
	if !kept {
		t.Error("the tool's call does not keep its whole output")
	}
	if isError, _, text := program(t, p, p.Token(server.LocalPrincipal, "memory"), "def run(event):\n    return 41 + 1\n", false); isError || !strings.Contains(text, "42") {
		t.Errorf("actiond does not go on serving: %s", text)
	}
}
