package mcpserver

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

func nextNote(t testing.TB, s *session, within time.Duration) TaskChanged {
	t.Helper()
	select {
	case n := <-s.notes:
		return n
	case <-time.After(within):
		t.Fatalf("no task notification within %s\nserver stderr:\n%s", within, s.stderr.String())
	}
	return TaskChanged{}
}

// A client that lists isx/task_changed gets a notification for every
// change of its tasks' states, never unknown; one that does not gets none;
// a session whose instance another session takes gets released.
//
// ISX-139, ISX-140, ISX-141, ISX-142, ISX-143, ISX-144, ISX-145,
// ISX-146, ISX-147, ISX-148, ISX-149, ISX-151.
func TestTaskNotificationsISX139(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\n")
	a := e.start(sessionOptions{notify: true})
	quiet := e.start(sessionOptions{})
	var inst, other CreateInstanceResult
	a.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &inst)
	quiet.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &other)

	var bg ExecResult
	a.ok("exec", map[string]any{"instance": inst.Instance, "command": "sleep 1; exit 3", "background": true}, &bg)
	n := nextNote(t, a, 10*time.Second)
	if n.TaskID != bg.TaskID || n.Instance != inst.Instance || n.Run != 1 || n.State != TaskRunning || n.ExitCode != nil {
		t.Errorf("first notification = %+v", n)
	}
	began := time.Now()
	n = nextNote(t, a, 30*time.Second)
	if n.TaskID != bg.TaskID || n.State != TaskFinished || n.ExitCode == nil || *n.ExitCode != 3 {
		t.Errorf("second notification = %+v", n)
	}
	t.Logf("finished told %s after the running notification", time.Since(began))
	// The state matches what task_status reads, and nothing repeats it.
	var status TaskStatusResult
	a.ok("task_status", map[string]any{"instance": inst.Instance, "task_id": bg.TaskID}, &status)
	if status.State != n.State {
		t.Errorf("task_status %s, notification %s", status.State, n.State)
	}
	// Cancel: the notification says how it ended, never unknown.
	a.ok("exec", map[string]any{"instance": inst.Instance, "command": "sleep 600", "background": true}, &bg)
	if n := nextNote(t, a, 10*time.Second); n.State != TaskRunning {
		t.Errorf("notification %+v", n)
	}
	a.ok("cancel_task", map[string]any{"instance": inst.Instance, "task_id": bg.TaskID}, nil)
	if n := nextNote(t, a, 30*time.Second); n.State != TaskFinished || n.ExitCode == nil {
		t.Errorf("after cancel: %+v", n)
	}
	// released: another session takes the instance.
	a.ok("exec", map[string]any{"instance": inst.Instance, "command": "sleep 600", "background": true}, &bg)
	if n := nextNote(t, a, 10*time.Second); n.State != TaskRunning {
		t.Errorf("notification %+v", n)
	}
	quiet.ok("adopt_instance", map[string]any{"instance": inst.Instance, "force": true}, nil)
	// Every task of the instance this session knew is released.
	released := map[string]bool{}
	for len(released) < 3 {
		n = nextNote(t, a, 30*time.Second)
		if n.State != TaskReleased || n.ExitCode != nil || n.Instance != inst.Instance {
			t.Fatalf("after the adoption: %+v", n)
		}
		released[n.TaskID] = true
	}
	if !released[bg.TaskID] {
		t.Errorf("released %v, not %s", released, bg.TaskID)
	}
	// ISX-147: released is only ever told, never a state a tool gives.
	// The released tasks are the new holder's now: its list_instances
	// lists every one of them, and task_status reads each, with a state
	// of its own. The session that lost them lists none.
	var list ListInstancesResult
	quiet.ok("list_instances", map[string]any{}, &list)
	listed := 0
	for _, i := range list.Instances {
		for _, task := range i.Tasks {
			if released[task.TaskID] {
				listed++
			}
			if task.State == TaskReleased {
				t.Errorf("list_instances of the new holder gave %s as released", task.TaskID)
			}
		}
	}
	if listed != len(released) {
		t.Errorf("the new holder lists %d of the %d released tasks: %+v", listed, len(released), list.Instances)
	}
	for id := range released {
		var st TaskStatusResult
		quiet.ok("task_status", map[string]any{"instance": inst.Instance, "task_id": id}, &st)
		if st.State != TaskRunning && st.State != TaskFinished {
			t.Errorf("task_status of released %s: %q, want running or finished", id, st.State)
		}
	}
	list = ListInstancesResult{}
	a.ok("list_instances", map[string]any{}, &list)
	for _, i := range list.Instances {
		for _, task := range i.Tasks {
			if task.State == TaskReleased || released[task.TaskID] {
				t.Errorf("the session that lost %s still lists it: %+v", task.TaskID, task)
			}
		}
	}
	// ISX-149, ISX-150: the session that did not ask hears nothing. A
	// server sends a change before the result of the call that read it, so
	// once task_status has read the task finished, any notification of its
	// start or end has been heard.
	var quietTask ExecResult
	quiet.ok("exec", map[string]any{"instance": other.Instance, "command": "sleep 1", "background": true}, &quietTask)
	quiet.ok("task_status", map[string]any{"instance": other.Instance, "task_id": quietTask.TaskID, "wait_seconds": 60}, &status)
	if status.State != TaskFinished {
		t.Errorf("the quiet session's task is %s, want finished", status.State)
	}
	select {
	case n := <-quiet.notes:
		t.Errorf("a client that did not ask got %+v", n)
	default:
	}
	for {
		select {
		case n := <-a.notes:
			if n.State == TaskUnknown {
				t.Errorf("unknown was sent: %+v", n)
			}
			continue
		default:
		}
		break
	}
}

// A client's cancel (notifications/cancelled) kills a foreground exec in
// the instance; calls of one session run concurrently.
func TestExecCancelAndConcurrency(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\n")
	s := e.start(sessionOptions{})
	var inst CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &inst)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"instance": inst.Instance, "command": "sleep 300"}})
		done <- err
	}()
	incustest.WaitFor(t, "the command to run", 30*time.Second, func() bool {
		return strings.Contains(e.execIn(inst.Instance, "ps -o args"), "sleep 300")
	})
	cancel()
	if err := <-done; err == nil {
		t.Error("the cancelled call returned a result")
	}
	incustest.WaitFor(t, "the cancelled command to be killed", 15*time.Second, func() bool {
		return !strings.Contains(e.execIn(inst.Instance, "ps -o args"), "sleep 300")
	})

	began := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			s.ok("exec", map[string]any{"instance": inst.Instance, "command": "sleep 2"}, nil)
		})
	}
	wg.Wait()
	// One after another they take 6 s at the least.
	if elapsed := time.Since(began); elapsed >= 6*time.Second {
		t.Errorf("three 2 s commands took %s: calls do not run concurrently", elapsed)
	}
}
