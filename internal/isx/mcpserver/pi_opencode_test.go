package mcpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// The same flow with the real Pi and opencode, also reaching the fake only
// through the host proxy: their report with turns, tokens and cost_usd,
// the diff, a follow-up in the same session. Pi's session counts once Pi
// saved it, and no longer once it is gone; opencode keeps the session its
// first event named, runs with --auto, and a resume of a session it no
// longer has fails the run and opens no new one.
//
// ISX-084, ISX-078, ISX-079, ISX-107, ISX-108, ISX-109, ISX-110, ISX-111,
// ISX-112, ISX-113, ISX-133, ISX-134.
func TestPiAndOpencodeISX084(t *testing.T) {
	w := newWorldOf(t, "templates: ["+buildtest.DebianOthers+"]\n", buildtest.DebianOthers)
	s := w.start(sessionOptions{notify: true})
	var templates ListTemplatesResult
	s.ok("list_templates", map[string]any{}, &templates)
	tpl := templates.Templates[0]
	// Neither Claude nor Codex: no default agent, no ask.
	if tpl.DefaultDelegateAgent != "" || tpl.SupportsAsk || tpl.SummaryAgent != "" || len(tpl.DelegateAgents) != 2 {
		t.Errorf("descriptors %+v", tpl)
	}
	for _, d := range tpl.DelegateAgents {
		if d.PermissionMode != "full-access" || d.SupportsModelPreflight || d.Model != "anthropic/claude-sonnet-4-5" {
			t.Errorf("descriptor %+v", d)
		}
	}
	// Neither Claude nor Codex: the agent must be named.
	s.refused("delegate", map[string]any{"template": buildtest.DebianOthers, "instruction": "x"}, CodeWrongState)

	for _, agent := range []string{"pi", "opencode"} {
		t.Run(agent, func(t *testing.T) {
			var d DelegateResult
			s.ok("delegate", map[string]any{"template": buildtest.DebianOthers, "agent": agent, "instruction": "apple: add a line"}, &d)
			if agent == "opencode" && !strings.Contains(w.launched(d.Instance, d.TaskID), `"--auto"`) {
				t.Errorf("opencode launched as %s", w.launched(d.Instance, d.TaskID))
			}
			if n := waitFinished(t, s, d.TaskID, 1, 3*time.Minute); n.ExitCode == nil || *n.ExitCode != 0 {
				var res TaskResultResult
				s.ok("task_result", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &res)
				t.Fatalf("%s ended with %v: %+v", agent, n.ExitCode, res)
			}
			var res TaskResultResult
			s.ok("task_result", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &res)
			if res.Report == nil || !strings.Contains(*res.Report, "apple") || res.Turns == nil || *res.Turns < 1 ||
				res.InputTokens == nil || *res.InputTokens == 0 || res.OutputTokens == nil || res.CostUSD == nil || *res.CostUSD <= 0 {
				t.Fatalf("task_result = %+v", res)
			}
			var status TaskStatusResult
			s.ok("task_status", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &status)
			if status.SessionID == "" {
				t.Fatalf("no session after the run: %+v", status)
			}
			var diff GetDiffResult
			s.ok("get_diff", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &diff)
			if diff.Patch == nil || !strings.Contains(*diff.Patch, "+edit for apple") {
				t.Fatalf("get_diff = %+v", diff)
			}
			s.ok("send_message", map[string]any{"instance": d.Instance, "task_id": d.TaskID, "message": "banana: and again"}, nil)
			waitFinished(t, s, d.TaskID, 2, 3*time.Minute)
			s.ok("get_diff", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &diff)
			if diff.Patch == nil || !strings.Contains(*diff.Patch, "+edit for banana") {
				t.Errorf("the second diff = %+v", diff)
			}
			if !w.sawConversation("claude", "apple", "banana") {
				t.Errorf("no model call of %s carried the first run with the follow-up", agent)
			}
			switch agent {
			case "pi":
				// ISX-110: the saved session is gone.
				w.execIn(d.Instance, "rm -f /home/agent/.pi/agent/sessions/*/*_"+status.SessionID+".jsonl")
				s.refused("send_message", map[string]any{"instance": d.Instance, "task_id": d.TaskID, "message": "x"}, CodeWrongState)
				// ISX-108, ISX-109: while Pi waits on its first answer it
				// has saved no session, so the task has no session_id;
				// stopped then, it has nothing to continue.
				var early DelegateResult
				s.ok("delegate", map[string]any{"instance": d.Instance, "agent": "pi", "instruction": "hold: wait for the model"}, &early)
				incustest.WaitFor(t, "Pi's first model call", 2*time.Minute, func() bool {
					for _, c := range w.anthropic.Calls() {
						if strings.Contains(string(c.Body), "hold: wait for the model") {
							return true
						}
					}
					return false
				})
				var unsaved TaskStatusResult
				s.ok("task_status", map[string]any{"instance": d.Instance, "task_id": early.TaskID}, &unsaved)
				if unsaved.SessionID != "" || unsaved.State != TaskRunning {
					t.Errorf("Pi waiting on its model: %+v", unsaved)
				}
				if out := w.execIn(d.Instance, "cat /home/agent/.isx-mcp/tasks/"+early.TaskID+"/runs/1/stdout"); !strings.Contains(out, `"type":"session"`) {
					t.Errorf("Pi named no session in its stream yet, so the check above proves nothing: %s", out)
				}
				s.ok("cancel_task", map[string]any{"instance": d.Instance, "task_id": early.TaskID}, nil)
				waitFinished(t, s, early.TaskID, 1, time.Minute)
				s.ok("task_status", map[string]any{"instance": d.Instance, "task_id": early.TaskID}, &unsaved)
				if unsaved.SessionID != "" {
					t.Errorf("a Pi run stopped before it saved has session %q", unsaved.SessionID)
				}
				s.refused("send_message", map[string]any{"instance": d.Instance, "task_id": early.TaskID, "message": "x"}, CodeWrongState)
			case "opencode":
				// ISX-112, ISX-113.
				if out, code := w.asAgent(t, d.Instance, "opencode session delete "+status.SessionID); code != 0 {
					t.Fatalf("opencode session delete: exit %d: %s", code, out)
				}
				s.ok("send_message", map[string]any{"instance": d.Instance, "task_id": d.TaskID, "message": "cherry: once more"}, nil)
				if n := waitFinished(t, s, d.TaskID, 3, 3*time.Minute); n.ExitCode == nil || *n.ExitCode == 0 {
					t.Errorf("resuming a session opencode no longer has ended with %v", n.ExitCode)
				}
				var after TaskStatusResult
				s.ok("task_status", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &after)
				if after.SessionID != status.SessionID {
					t.Errorf("session %q after the failed resume, was %q", after.SessionID, status.SessionID)
				}
				if list, _ := w.asAgent(t, d.Instance, "opencode session list"); strings.Contains(list, "ses_") {
					t.Errorf("opencode has a session after the failed resume:\n%s", list)
				}
			}
		})
	}
}

// asAgent runs a shell command as the agent user, as its tasks run.
func (w *agentWorld) asAgent(t testing.TB, name, command string) (string, int) {
	t.Helper()
	res, err := w.client.Exec(w.ctx(), name, incus.ExecRequest{
		Command: []string{"sh", "-c", command}, UID: 1000, GID: 1000, Cwd: "/home/agent",
		Env: map[string]string{"HOME": "/home/agent", "USER": "agent", "LOGNAME": "agent"}, Timeout: time.Minute,
	})
	if err != nil {
		t.Fatalf("exec as the agent in %s: %v", name, err)
	}
	return string(res.Stdout) + string(res.Stderr), res.ExitCode
}
