package mcpserver

import (
	"strings"
	"testing"
	"time"
)

// codexOnlyTemplate installs Codex and no Claude Code.
const codexOnlyTemplate = "tpl-test-debian-codex"

// ISX-086: with agent omitted, delegate on a template that installs Codex
// alone runs Codex: the real Codex CLI in the instance makes the model
// calls, through the proxy to the OpenAI fake, and none reaches
// Anthropic's.
func TestDelegateCodexOnlyISX086(t *testing.T) {
	w := newWorldOf(t, "templates: ["+codexOnlyTemplate+"]\n", codexOnlyTemplate)
	s := w.start(sessionOptions{notify: true})
	var d DelegateResult
	s.ok("delegate", map[string]any{"template": codexOnlyTemplate, "instruction": "quince: add a line"}, &d)
	if d.Agent != "codex" {
		t.Errorf("delegate with no agent on a Codex-only template chose %q", d.Agent)
	}
	waitFinished(t, s, d.TaskID, 1, 3*time.Minute)
	var res TaskResultResult
	s.ok("task_result", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &res)
	if res.ExitCode != 0 || res.AgentFailed {
		t.Errorf("the Codex run: %+v", res)
	}
	if argv := w.launched(d.Instance, d.TaskID); !strings.Contains(argv, `"codex","exec"`) {
		t.Errorf("the task launched %s", argv)
	}
	saw := false
	for _, c := range w.calls("codex") {
		saw = saw || strings.Contains(string(c.Body), "quince")
	}
	if !saw {
		t.Errorf("the OpenAI fake never saw the instruction: %d calls", len(w.calls("codex")))
	}
	for _, c := range w.calls("claude") {
		if strings.Contains(string(c.Body), "quince") {
			t.Error("the instruction reached Anthropic's fake")
		}
	}
}
