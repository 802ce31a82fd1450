package mcpserver

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

func taskStates(list ListInstancesResult, instance string) map[string]InstanceTask {
	out := map[string]InstanceTask{}
	for _, i := range list.Instances {
		if i.Instance == instance {
			for _, t := range i.Tasks {
				out[t.TaskID] = t
			}
		}
	}
	return out
}

var taskWords = []TaskState{TaskRunning, TaskFinished, TaskAttached, TaskLost, TaskUnknown}

// Background exec tasks on a systemd instance, end to end: start, wait,
// result, cancel, lost, wait_any, and what list_instances says of them.
//
// ISX-062, ISX-063, ISX-064, ISX-065, ISX-120, ISX-121, ISX-122, ISX-124, ISX-125, ISX-126, ISX-127, ISX-128, ISX-129, ISX-154, ISX-158, ISX-159, ISX-160.
func TestBackgroundTasks(t *testing.T) {
	e := newEnv(t, buildtest.Debian)
	e.writeMCP("templates: [tpl-test-debian]\n")
	s := e.start(sessionOptions{})
	var inst, other CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": "tpl-test-debian", "name_hint": "tasks"}, &inst)
	s.ok("create_instance", map[string]any{"template": "tpl-test-debian", "name_hint": "other"}, &other)
	name := inst.Instance
	seen := map[TaskState]bool{}

	// ISX-062, ISX-121: a background command returns at once, running.
	began := time.Now()
	var bg ExecResult
	s.ok("exec", map[string]any{"instance": name, "command": "sleep 2; echo done; echo warn >&2; exit 3", "background": true}, &bg)
	if time.Since(began) > 10*time.Second || !bg.Background || bg.Kind != KindCommand || bg.State != TaskRunning || *bg.Replayed || *bg.Run != 1 {
		t.Fatalf("background exec = %+v after %s", bg, time.Since(began))
	}
	if unit := e.execIn(name, "systemctl list-units --no-legend 'isx-task-*'"); !strings.Contains(unit, bg.TaskID) {
		t.Errorf("no transient unit for %s: %s", bg.TaskID, unit)
	}
	var status TaskStatusResult
	s.ok("task_status", map[string]any{"instance": name, "task_id": bg.TaskID}, &status)
	seen[status.State] = true
	if status.State != TaskRunning || status.ExitCode != nil || status.Command != "sleep 2; echo done; echo warn >&2; exit 3" {
		t.Errorf("status while running = %+v", status)
	}
	// ISX-129: join_command.
	if status.JoinCommand != "isx shell --task "+bg.TaskID+" "+name {
		t.Errorf("join_command = %q", status.JoinCommand)
	}
	// task_result is refused while it runs.
	s.refused("task_result", map[string]any{"instance": name, "task_id": bg.TaskID}, CodeWrongState)
	// ISX-063, ISX-122: finished with the command's exit code.
	s.ok("task_status", map[string]any{"instance": name, "task_id": bg.TaskID, "wait_seconds": 60}, &status)
	seen[status.State] = true
	if status.State != TaskFinished || status.ExitCode == nil || *status.ExitCode != 3 || status.FinishedAt == "" {
		t.Fatalf("status after the end = %+v", status)
	}
	// ISX-064: its output.
	var result TaskResultResult
	s.ok("task_result", map[string]any{"instance": name, "task_id": bg.TaskID}, &result)
	if result.Stdout != "done\n" || result.Stderr != "warn\n" || result.ExitCode != 3 || result.Truncated {
		t.Errorf("task_result = %+v", result)
	}

	// ISX-126: list_instances reports what this session last saw, and does
	// not look: a task that ends unread is still running there.
	s.ok("exec", map[string]any{"instance": name, "command": "sleep 1", "background": true}, &bg)
	short := bg.TaskID
	e.waitForTask(name, short, task.StateFinished)
	var list ListInstancesResult
	s.ok("list_instances", map[string]any{}, &list)
	if got := taskStates(list, name)[short].State; got != TaskRunning {
		t.Errorf("an unread ended task is listed as %s", got)
	}

	// ISX-065, ISX-125, ISX-127, ISX-128: cancel.
	s.ok("exec", map[string]any{"instance": name, "command": "sleep 600", "background": true}, &bg)
	long := bg.TaskID
	var cancelled CancelTaskResult
	s.ok("cancel_task", map[string]any{"instance": name, "task_id": long}, &cancelled)
	if !cancelled.Cancelled || cancelled.State != TaskUnknown {
		t.Errorf("cancel_task = %+v", cancelled)
	}
	if ps := e.execIn(name, "ps -eo args"); strings.Contains(ps, "sleep 600") {
		t.Errorf("the cancelled command still runs:\n%s", ps)
	}
	s.ok("list_instances", map[string]any{}, &list)
	if got := taskStates(list, name)[long].State; got != TaskUnknown {
		t.Errorf("after cancel_task list_instances says %s", got)
	}
	seen[TaskUnknown] = true
	s.ok("task_status", map[string]any{"instance": name, "task_id": long}, &status)
	if status.State != TaskFinished || *status.ExitCode != 143 {
		t.Errorf("a cancelled task reads %+v", status)
	}
	s.ok("list_instances", map[string]any{}, &list)
	if got := taskStates(list, name)[long]; got.State != TaskFinished || *got.ExitCode != 143 {
		t.Errorf("after task_status list_instances says %+v", got)
	}
	// Cancelling what ended does nothing.
	s.ok("cancel_task", map[string]any{"instance": name, "task_id": long}, &cancelled)
	if cancelled.Cancelled || cancelled.State != TaskFinished {
		t.Errorf("second cancel = %+v", cancelled)
	}

	// ISX-124: a task whose record is gone is lost.
	e.execIn(name, "rm -rf /home/agent/.isx-mcp/tasks/"+short)
	s.ok("task_status", map[string]any{"instance": name, "task_id": short}, &status)
	seen[status.State] = true
	if status.State != TaskLost || status.JoinCommand != "" || status.Kind != "" {
		t.Errorf("lost task = %+v", status)
	}
	s.refused("task_result", map[string]any{"instance": name, "task_id": short}, CodeNotFound)

	// wait_any returns the first task to end, across instances.
	var slow, fast ExecResult
	s.ok("exec", map[string]any{"instance": name, "command": "sleep 30", "background": true}, &slow)
	s.ok("exec", map[string]any{"instance": other.Instance, "command": "sleep 1; exit 7", "background": true}, &fast)
	var waited WaitAnyResult
	began = time.Now()
	s.ok("wait_any", map[string]any{"tasks": []map[string]any{
		{"instance": name, "task_id": slow.TaskID}, {"instance": other.Instance, "task_id": fast.TaskID},
	}, "wait_seconds": 60}, &waited)
	if waited.TimedOut || waited.Changed == nil || waited.Changed.TaskID != fast.TaskID || *waited.Changed.ExitCode != 7 || len(waited.Tasks) != 2 {
		t.Fatalf("wait_any = %+v", waited)
	}
	if time.Since(began) > 20*time.Second {
		t.Errorf("wait_any took %s for a 1 s task", time.Since(began))
	}
	s.ok("wait_any", map[string]any{"tasks": []map[string]any{{"instance": name, "task_id": slow.TaskID}}, "wait_seconds": 1}, &waited)
	if !waited.TimedOut || waited.Changed != nil || waited.Tasks[0].State != TaskRunning {
		t.Errorf("timed-out wait_any = %+v", waited)
	}

	// stop_instance refuses while tasks run; force cancels them first.
	s.refused("stop_instance", map[string]any{"instance": name}, CodeWrongState)
	var stopped StopInstanceResult
	s.ok("stop_instance", map[string]any{"instance": name, "force": true}, &stopped)
	if !slices.Contains(stopped.CancelledTasks, slow.TaskID) || stopped.Status != "stopped" {
		t.Errorf("forced stop = %+v", stopped)
	}

	// ISX-120: only the five words, everywhere.
	s.ok("list_instances", map[string]any{}, &list)
	for _, i := range list.Instances {
		for _, task := range i.Tasks {
			seen[task.State] = true
		}
	}
	for state := range seen {
		if !slices.Contains(taskWords, state) {
			t.Errorf("state %q is not one of the task words", state)
		}
	}
}

// Idempotency keys on background exec: a repeat replays the task; a key
// for another instance, a foreground key and malformed keys are refused.
//
// ISX-154, ISX-155, ISX-156, ISX-157, ISX-158, ISX-159, ISX-160, ISX-166, ISX-168.
func TestBackgroundKeysISX159(t *testing.T) {
	e := newEnv(t, buildtest.Debian)
	e.writeMCP("templates: [tpl-test-debian]\n")
	s := e.start(sessionOptions{})
	var one, two CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": "tpl-test-debian"}, &one)
	s.ok("create_instance", map[string]any{"template": "tpl-test-debian"}, &two)
	key := strings.Repeat("aZ9._:-", 10)[:64]
	var first, again ExecResult
	s.ok("exec", map[string]any{"instance": one.Instance, "command": "sleep 60", "background": true, "idempotency_key": key}, &first)
	s.ok("exec", map[string]any{"instance": one.Instance, "command": "sleep 60", "background": true, "idempotency_key": key}, &again)
	if again.TaskID != first.TaskID || !*again.Replayed || *first.Replayed {
		t.Fatalf("repeat = %+v, first = %+v", again, first)
	}
	if n := strings.Count(e.execIn(one.Instance, "ls /home/agent/.isx-mcp/tasks"), "t-"); n != 1 {
		t.Errorf("%d task records after a repeat, want 1", n)
	}
	meta := s.refused("exec", map[string]any{"instance": two.Instance, "command": "sleep 60", "background": true, "idempotency_key": key}, CodeInvalidArgument)
	if !strings.Contains(meta["message"].(string), one.Instance) {
		t.Errorf("the refusal does not name the key's instance: %v", meta["message"])
	}
	if out := e.execIn(two.Instance, "ls /home/agent/.isx-mcp/tasks 2>/dev/null || true"); strings.Contains(out, "t-") {
		t.Errorf("the refused repeat made a task in %s: %s", two.Instance, out)
	}
	s.refused("exec", map[string]any{"instance": one.Instance, "command": "true", "idempotency_key": "fg"}, CodeInvalidArgument)
	for _, bad := range []string{"", strings.Repeat("a", 65), "a/b", "a b", "ключ"} {
		s.refused("exec", map[string]any{"instance": one.Instance, "command": "true", "background": true, "idempotency_key": bad}, CodeInvalidArgument)
	}
	s.ok("exec", map[string]any{"instance": one.Instance, "command": "true", "background": true}, nil)
}

// max-concurrent-tasks counts running background tasks across sessions.
//
// ISX-059, ISX-060.
func TestMaxConcurrentTasksISX059(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\nmax-concurrent-tasks: 2\n")
	a := e.start(sessionOptions{})
	b := e.start(sessionOptions{})
	var ia, ib CreateInstanceResult
	a.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &ia)
	b.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &ib)
	var ta ExecResult
	a.ok("exec", map[string]any{"instance": ia.Instance, "command": "sleep 5", "background": true}, &ta)
	b.ok("exec", map[string]any{"instance": ib.Instance, "command": "sleep 600", "background": true}, nil)
	meta := a.refused("exec", map[string]any{"instance": ia.Instance, "command": "sleep 600", "background": true}, CodeLimit)
	if !strings.Contains(meta["message"].(string), "max-concurrent-tasks") {
		t.Errorf("limit refusal: %v", meta["message"])
	}
	b.refused("exec", map[string]any{"instance": ib.Instance, "command": "sleep 600", "background": true}, CodeLimit)
	// Foreground commands are not tasks.
	a.ok("exec", map[string]any{"instance": ia.Instance, "command": "true"}, nil)
	// Once a task has ended a new one may start, though nobody read it.
	e.waitForTask(ia.Instance, ta.TaskID, task.StateFinished)
	b.ok("exec", map[string]any{"instance": ib.Instance, "command": "sleep 600", "background": true}, nil)
}

// ISX-051, ISX-201, ISX-203: a session that ends leaves its instance and its
// running task behind; the session that adopts the orphan reads the task's
// status and, once it ends, its result, under the same task_id.
func TestAdoptionBringsTasksAlong(t *testing.T) {
	e := newEnv(t, buildtest.Debian)
	e.writeMCP("templates: [tpl-test-debian]\n")
	a := e.start(sessionOptions{})
	var inst CreateInstanceResult
	a.ok("create_instance", map[string]any{"template": "tpl-test-debian", "name_hint": "carry"}, &inst)
	var bg ExecResult
	a.ok("exec", map[string]any{"instance": inst.Instance, "command": "sleep 2; echo carried", "background": true}, &bg)
	a.close()
	if orphaned := e.instanceConfig(inst.Instance)[instance.KeyMCPOrphaned]; orphaned == "" {
		t.Fatalf("the ended session's instance is not stamped orphaned")
	}

	b := e.start(sessionOptions{})
	b.ok("adopt_instance", map[string]any{"instance": inst.Instance}, nil)
	var status TaskStatusResult
	b.ok("task_status", map[string]any{"instance": inst.Instance, "task_id": bg.TaskID, "wait_seconds": 60}, &status)
	if status.State != TaskFinished || status.ExitCode == nil || *status.ExitCode != 0 {
		t.Fatalf("the adopted task reads %+v, want finished with exit code 0", status)
	}
	var result TaskResultResult
	b.ok("task_result", map[string]any{"instance": inst.Instance, "task_id": bg.TaskID}, &result)
	if result.Stdout != "carried\n" {
		t.Fatalf("the adopted task's output is %q", result.Stdout)
	}
	var list ListInstancesResult
	b.ok("list_instances", map[string]any{}, &list)
	found := false
	for _, i := range list.Instances {
		for _, task := range i.Tasks {
			found = found || task.TaskID == bg.TaskID
		}
	}
	if !found {
		t.Fatalf("list_instances of the adopting session does not show task %s", bg.TaskID)
	}
}

// waitForTask waits until a task is in state as read from its instance
// directly, behind the back of every session.
func (e *env) waitForTask(instance, taskID string, state task.State) {
	e.t.Helper()
	incustest.WaitFor(e.t, "task "+taskID+" to be "+string(state), time.Minute, func() bool {
		info, err := task.Status(e.ctx(), e.client, instance, taskID)
		return err == nil && info.State == state
	})
}
