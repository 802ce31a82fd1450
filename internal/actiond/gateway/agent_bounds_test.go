package gateway_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/modeltest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// An agent's loop holds what its provider and its tools answer within
// bounds: a provider that starts a block millions of places ahead, or
// streams an answer of 40 MiB, fails the task with model_answer_invalid
// rather than filling memory (before, the block index alone allocated a
// block for every place); a tool's result of 3 MiB reaches the model cut
// to 1 MiB, saying so, while the call's record keeps it whole.
func TestAgentLoopIsBounded(t *testing.T) {
	const big = 40 << 20
	eachTaskDialect(t, func(t *testing.T, d store.Dialect) {
		env, _ := taskEnv(t, d, at.Options{}, func(x modeltest.Exchange) modeltest.Reply {
			switch x.Input()["mode"] {
			case "ahead":
				return modeltest.Reply{Events: []map[string]any{{"type": "content_block_start", "index": 1 << 22,
					"content_block": map[string]any{"type": "text", "text": ""}}}}
			case "long":
				return modeltest.Reply{Text: strings.Repeat("z", big), Chunk: 1 << 20}
			}
			if x.Turn() == 1 {
				return modeltest.Reply{ToolUses: []modeltest.ToolUse{{Name: "bulky", Input: map[string]any{}}}}
			}
			results := x.LastResults()
			if len(results) != 1 {
				return modeltest.Reply{Text: "no result"}
			}
			return modeltest.Reply{Text: fmt.Sprintf("%d %v", len(results[0].Content), strings.Contains(results[0].Content, "(cut: the result is"))}
		})
		env.CreateAction(at.NewID(), at.StarlarkTool("bulky", "def run(event):\n    return {\"pad\": \"b\" * (3 << 20)}\n", at.Object(map[string]any{}), nil))
		agentID := at.NewID()
		env.CreateAction(agentID, at.AgentSpec{Name: "reader", Model: "reader-model", InputSchema: at.Object(map[string]any{"mode": at.String()}),
			Tools: []map[string]any{at.Ref("bulky")}, Policies: at.Everything(), Retries: new(0)}.Input())
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "desk", Mode: "LIVE", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("reader")}}.Input())
		ts := env.ConnectTasks("desk", env.Token(principal, "alice"), at.Revision2026, true)

		for _, mode := range []string{"ahead", "long"} {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			task, _ := ts.CallForTask(t, "reader", map[string]any{"mode": mode})
			if task == nil {
				t.Fatalf("%s: no task", mode)
			}
			done := ts.WaitTask(t, task.TaskID, taskWait, mcpkit.TaskCompleted, mcpkit.TaskFailed)
			runtime.ReadMemStats(&after)
			e := env.Execution(task.TaskID)
			if code := at.Dig(at.Decode(e["error"]), "code"); code != "model_answer_invalid" {
				t.Errorf("%s: the task %s ended with %s: %s", mode, done.Status, code, asJSON(e["error"]))
			}
			if mode == "ahead" && after.TotalAlloc-before.TotalAlloc > 256<<20 {
				t.Errorf("%s: reading the answer allocated %d MiB", mode, (after.TotalAlloc-before.TotalAlloc)>>20)
			}
		}

		task, _ := ts.CallForTask(t, "reader", map[string]any{"mode": "tools"})
		if task == nil {
			t.Fatal("no task")
		}
		ts.WaitTask(t, task.TaskID, taskWait, mcpkit.TaskCompleted, mcpkit.TaskFailed)
		e := env.Execution(task.TaskID)
		var told int
		var cut bool
		fmt.Sscanf(asString(at.Decode(e["output"])), "%d %t", &told, &cut)
		if out := asJSON(e["output"]); !cut || told < 1<<20 || told > 1<<20+200 {
			t.Errorf("what the model was told of the 3 MiB result: %s %s", out, asJSON(e["error"]))
		}
		kept := false
		for _, c := range e["calls"].([]any) {
			if at.Dig(c, "actionName") == "bulky" && len(asJSON(at.Dig(c, "output"))) > 3<<20 {
				kept = true
			}
		}
		if !kept {
			t.Error("the tool's call does not keep its whole output")
		}
	})
}
