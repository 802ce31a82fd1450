package mcpserver

import (
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
)

// How a session tells of tasks that change, as found by trying isx mcp
// as a new user would: each test here failed before its fix.

// A task started while another task of the same instance runs gets its
// finished notification within the latency target, not when the wait for
// the first gives up (ISX-140).
func TestSecondTaskNotifiedPromptlyISX140(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\n")
	s := e.start(sessionOptions{notify: true})
	var inst CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &inst)
	var long, short ExecResult
	s.ok("exec", map[string]any{"instance": inst.Instance, "command": "sleep 600", "background": true}, &long)
	if n := nextNote(t, s, 10*time.Second); n.TaskID != long.TaskID || n.State != TaskRunning {
		t.Fatalf("first notification %+v", n)
	}
	s.ok("exec", map[string]any{"instance": inst.Instance, "command": "sleep 1; exit 4", "background": true}, &short)
	if n := nextNote(t, s, 10*time.Second); n.TaskID != short.TaskID || n.State != TaskRunning {
		t.Fatalf("second notification %+v", n)
	}
	began := time.Now()
	n := nextNote(t, s, 10*time.Second)
	if n.TaskID != short.TaskID || n.State != TaskFinished || n.ExitCode == nil || *n.ExitCode != 4 {
		t.Fatalf("notification %+v, want the second task finished with 4", n)
	}
	// The task sleeps one second; its end is told within five (held up
	// by the wait for the 600 s task, it would not come within the ten
	// nextNote allows).
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("finished told %s after running: the wait for the first task held it up", took)
	}
	s.ok("cancel_task", map[string]any{"instance": inst.Instance, "task_id": long.TaskID}, nil)
}

// A lost task is reported with its run, in task_status and in its
// notification, not with run 0 (ISX-124, ISX-141).
func TestLostTaskKeepsItsRunISX124(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\n")
	s := e.start(sessionOptions{notify: true})
	var inst CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &inst)
	var bg ExecResult
	s.ok("exec", map[string]any{"instance": inst.Instance, "command": "sleep 600", "background": true}, &bg)
	if n := nextNote(t, s, 10*time.Second); n.State != TaskRunning || n.Run != 1 {
		t.Fatalf("notification %+v", n)
	}
	e.execIn(inst.Instance, "pkill sleep; rm -rf /home/agent/.isx-mcp/tasks/"+bg.TaskID)
	var status TaskStatusResult
	s.ok("task_status", map[string]any{"instance": inst.Instance, "task_id": bg.TaskID}, &status)
	if status.State != TaskLost || status.Run != 1 {
		t.Errorf("task_status = %+v, want lost with run 1", status)
	}
	for {
		n := nextNote(t, s, 10*time.Second)
		if n.State == TaskLost {
			if n.Run != 1 {
				t.Errorf("lost notification %+v, want run 1", n)
			}
			break
		}
	}
}
