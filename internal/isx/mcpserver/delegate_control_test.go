package mcpserver

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/task"
)

// running waits until a process whose command line holds what runs in
// the instance.
func (w *agentWorld) running(t *testing.T, name, what string) {
	t.Helper()
	incustest.WaitFor(t, what+" to run in "+name, 2*time.Minute, func() bool {
		return strings.Contains(w.execIn(name, "ps -eo args"), what)
	})
}

// cancel_task kills the agent's whole process group: the agent, the shell
// it started and that shell's sleep; no model call comes after. A kill -9
// of isx mcp mid-run leaves the agent working; a new session adopts the
// instance, and the task's finished notification reaches it.
//
// ISX-138, ISX-202, ISX-208, ISX-148.
func TestDelegateCancelAndCrashISX138(t *testing.T) {
	w := newAgentWorld(t, "templates: ["+agentsTemplate+"]\n")
	s := w.start(sessionOptions{notify: true})
	var d DelegateResult
	s.ok("delegate", map[string]any{"template": agentsTemplate, "instruction": "sleep 300: then add a line"}, &d)
	w.running(t, d.Instance, "sleep 300")
	if ps := w.execIn(d.Instance, "ps -eo args"); !strings.Contains(ps, "claude -p") {
		t.Fatalf("no claude process while its command sleeps:\n%s", ps)
	}
	// ISX-132 while running: send_message is refused, and so is a second
	// agent in the same instance.
	s.refused("send_message", map[string]any{"instance": d.Instance, "task_id": d.TaskID, "message": "more"}, CodeWrongState)
	s.refused("delegate", map[string]any{"instance": d.Instance, "instruction": "another"}, CodeBusy)
	calls := len(w.anthropic.Calls())
	var cancelled CancelTaskResult
	s.ok("cancel_task", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &cancelled)
	if !cancelled.Cancelled {
		t.Fatalf("cancel_task = %+v", cancelled)
	}
	if ps := w.execIn(d.Instance, "ps -eo args"); strings.Contains(ps, "sleep 300") || strings.Contains(ps, "claude") {
		t.Errorf("after cancel_task the agent's processes remain:\n%s", ps)
	}
	if n := waitFinished(t, s, d.TaskID, 1, time.Minute); n.ExitCode == nil || *n.ExitCode == 0 {
		t.Errorf("the cancelled task finished with %v", n.ExitCode)
	}
	if after := len(w.anthropic.Calls()); after != calls {
		t.Errorf("%d model calls after the cancel", after-calls)
	}

	// kill -9 of the server mid-run. (The cancelled run was killed before
	// Claude saved its session, so a new task, not a follow-up.)
	s.ok("delegate", map[string]any{"instance": d.Instance, "instruction": "sleep 6: then add another"}, &d)
	w.running(t, d.Instance, "sleep 6")
	s.kill()
	b := w.start(sessionOptions{notify: true})
	var adopted AdoptInstanceResult
	b.ok("adopt_instance", map[string]any{"instance": d.Instance}, &adopted)
	if len(adopted.Tasks) != 2 || !slices.ContainsFunc(adopted.Tasks, func(it InstanceTask) bool { return it.TaskID == d.TaskID && it.State == TaskRunning }) {
		t.Fatalf("adopted tasks %+v, want the second delegate running", adopted.Tasks)
	}
	n := waitFinished(t, b, d.TaskID, 1, 2*time.Minute)
	if n.ExitCode == nil || *n.ExitCode != 0 {
		t.Errorf("the adopted run ended with %v", n.ExitCode)
	}
	var res TaskResultResult
	b.ok("task_result", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &res)
	if res.Report == nil || !strings.Contains(*res.Report, "sleep 6") {
		t.Errorf("the adopted task's report: %+v", res)
	}
}

// A chosen model: checked first for Claude (an inaccessible one is refused
// before anything runs), kept for follow-ups and across adoption; Codex
// reports a model it may not use in the task result. max_turns is refused
// on send_message too.
//
// ISX-090, ISX-091, ISX-092, ISX-093, ISX-094, ISX-097, ISX-088, ISX-087, ISX-068.
func TestDelegateModelsISX090(t *testing.T) {
	w := newAgentWorld(t, "templates: ["+agentsTemplate+"]\n")
	w.anthropic.Deny("claude-denied-1")
	w.openai.Deny("gpt-denied")
	s := w.start(sessionOptions{notify: true})
	var inst CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": agentsTemplate}, &inst)

	// ISX-093: refused, and no task, no claude process.
	s.refused("delegate", map[string]any{"instance": inst.Instance, "instruction": "x", "model": "claude-denied-1"}, CodeInvalidArgument)
	if out := w.execIn(inst.Instance, "ls /home/agent/.isx-mcp/tasks 2>/dev/null; ps -eo args | grep -c '[c]laude' || true"); strings.TrimSpace(out) != "0" {
		t.Errorf("after the refused model: %q", out)
	}
	// ISX-090, ISX-091, ISX-092: the override is the model of every run.
	var d DelegateResult
	s.ok("delegate", map[string]any{"instance": inst.Instance, "instruction": "kiwi: add a line", "model": "claude-sonnet-4-5-20250929"}, &d)
	// ISX-068: the agent works in the instance the session holds.
	if d.Instance != inst.Instance {
		t.Errorf("delegate to %s ran in %s", inst.Instance, d.Instance)
	}
	waitFinished(t, s, d.TaskID, 1, 3*time.Minute)
	if got := w.modelsOf("kiwi"); len(got) == 0 || !allAre(got, "claude-sonnet-4-5-20250929") {
		t.Errorf("the first run's model calls named %v", got)
	}
	s.refused("send_message", map[string]any{"instance": inst.Instance, "task_id": d.TaskID, "message": "x", "max_turns": 3}, CodeInvalidArgument)
	s.close()
	b := w.start(sessionOptions{notify: true})
	b.ok("adopt_instance", map[string]any{"instance": inst.Instance}, nil)
	b.ok("send_message", map[string]any{"instance": inst.Instance, "task_id": d.TaskID, "message": "lime: one more"}, nil)
	waitFinished(t, b, d.TaskID, 2, 3*time.Minute)
	if got := w.modelsOf("lime"); len(got) == 0 || !allAre(got, "claude-sonnet-4-5-20250929") {
		t.Errorf("after adoption the follow-up's model calls named %v", got)
	}
	var status TaskStatusResult
	b.ok("task_status", map[string]any{"instance": inst.Instance, "task_id": d.TaskID}, &status)
	if status.Model != "claude-sonnet-4-5-20250929" || status.Run != 2 {
		t.Errorf("task_status = %+v", status)
	}

	// ISX-094: Codex starts, and its task result says the model failed.
	var cx DelegateResult
	b.ok("delegate", map[string]any{"instance": inst.Instance, "instruction": "plum: add a line", "agent": "codex", "model": "gpt-denied"}, &cx)
	waitFinished(t, b, cx.TaskID, 1, 3*time.Minute)
	var res TaskResultResult
	b.ok("task_result", map[string]any{"instance": inst.Instance, "task_id": cx.TaskID}, &res)
	if !res.AgentFailed && res.ExitCode == 0 {
		t.Errorf("codex with a denied model: %+v", res)
	}
	if !strings.Contains(res.AgentError+res.Stderr, "gpt-denied") {
		t.Errorf("the result does not name the model: error %q stderr %q", res.AgentError, res.Stderr)
	}
}

// launched is the command line a task's record says its run started.
func (w *agentWorld) launched(name, taskID string) string {
	return w.execIn(name, "cat "+task.Dir+"/"+taskID+"/task.json")
}

// modelsOf lists the models of the Claude calls whose conversation
// mentions word.
func (w *agentWorld) modelsOf(word string) []string {
	var out []string
	for _, c := range w.calls("claude") {
		if strings.Contains(string(c.Body), word) {
			out = append(out, c.Model)
		}
	}
	return out
}

func allAre(values []string, want string) bool {
	for _, v := range values {
		if v != want {
			return false
		}
	}
	return true
}

// Permissions from mcp.yaml: a template restricted for Claude runs Claude
// in that mode, and refuses Codex until it has a sandbox mode of its own,
// which Codex then runs in, with approval policy never.
//
// ISX-099, ISX-101, ISX-103, ISX-104.
func TestDelegatePermissionsISX104(t *testing.T) {
	w := newAgentWorld(t, "templates: ["+agentsTemplate+"]\ndelegate-permission-modes:\n  "+agentsTemplate+": plan\ncodex:\n  sandbox-mode: danger-full-access\n")
	s := w.start(sessionOptions{})
	var inst CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": agentsTemplate}, &inst)
	s.refused("delegate", map[string]any{"instance": inst.Instance, "instruction": "x", "agent": "codex"}, CodeRefused)
	var d DelegateResult
	s.ok("delegate", map[string]any{"instance": inst.Instance, "instruction": "sleep 30: plan it"}, &d)
	if argv := w.launched(inst.Instance, d.TaskID); !strings.Contains(argv, `"--permission-mode","plan"`) {
		t.Errorf("claude launched as %s", argv)
	}
	s.ok("cancel_task", map[string]any{"instance": inst.Instance, "task_id": d.TaskID}, nil)

	w.writeMCP("templates: [" + agentsTemplate + "]\ndelegate-permission-modes:\n  " + agentsTemplate + ": plan\ncodex:\n  sandbox-mode: danger-full-access\n  sandbox-modes:\n    " + agentsTemplate + ": read-only\n")
	var templates ListTemplatesResult
	s.ok("list_templates", map[string]any{}, &templates)
	for _, a := range templates.Templates[0].DelegateAgents {
		if (a.Agent == "claude" && a.PermissionMode != "plan") || (a.Agent == "codex" && (a.PermissionMode != "read-only" || a.ApprovalPolicy != "never")) {
			t.Errorf("descriptor %+v", a)
		}
	}
	s.ok("delegate", map[string]any{"instance": inst.Instance, "instruction": "sleep 30: look only", "agent": "codex"}, &d)
	if argv := w.launched(inst.Instance, d.TaskID); !strings.Contains(argv, `sandbox_mode=\"read-only\"`) || !strings.Contains(argv, `approval_policy=\"never\"`) || strings.Contains(argv, "danger-full-access") {
		t.Errorf("codex launched as %s", argv)
	}
	s.ok("cancel_task", map[string]any{"instance": inst.Instance, "task_id": d.TaskID}, nil)
}
