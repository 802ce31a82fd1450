package mcpserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// callAsync starts a call whose answer the test does not wait for: the
// server is killed under it.
func (s *session) callAsync(tool string, args any) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		done <- err
	}()
	return done
}

// The crash test: kill -9 the server in the middle of a keyed
// create_instance and of a keyed background exec; a new session repeating
// the same calls gets replayed: true, adopts the orphan, and never a
// second instance or task.
//
// ISX-161, ISX-162, ISX-204, ISX-159, ISX-160.
func TestCrashReplay(t *testing.T) {
	e := newEnv(t, buildtest.Debian)
	e.writeMCP("templates: [tpl-test-debian]\n")
	create := map[string]any{"template": "tpl-test-debian", "name_hint": "crash", "idempotency_key": "job-17:create"}

	// A keyed create_instance, killed once Incus has the reserved instance.
	a := e.start(sessionOptions{})
	reserved := ""
	pending := a.callAsync("create_instance", create)
	incustest.WaitFor(t, "the keyed instance to be reserved", time.Minute, func() bool {
		for _, name := range e.mcpInstances() {
			if e.instanceConfig(name)[instance.KeyMCPIdempotencyKey] == "job-17:create" {
				reserved = name
				return true
			}
		}
		return false
	})
	a.kill()
	<-pending
	if state := e.instanceConfig(reserved)[instance.KeyMCPState]; state != holding.StateCreating {
		t.Logf("the kill came after the instance was ready (state %q); the repeat must replay all the same", state)
	}

	b := e.start(sessionOptions{})
	var replayed CreateInstanceResult
	b.ok("create_instance", create, &replayed)
	if replayed.Instance != reserved || !replayed.Replayed || !replayed.Adopted || replayed.State != InstanceReady || replayed.Status != "running" {
		t.Fatalf("repeat after the crash = %+v (reserved %s)", replayed, reserved)
	}
	if names := e.mcpInstances(); len(names) != 1 {
		t.Fatalf("instances after the repeat: %v", names)
	}
	cfg := e.instanceConfig(reserved)
	if cfg[instance.KeyMCPState] != "" || cfg[instance.KeyMCPSession] != b.sessionID() || cfg[instance.KeyMCPOrphaned] != "" {
		t.Errorf("after the repeat the stamps are %v", cfg)
	}
	b.ok("exec", map[string]any{"instance": reserved, "command": "true"}, nil)
	b.ok("create_instance", create, &replayed)
	if !replayed.Replayed || replayed.Adopted || replayed.Instance != reserved {
		t.Errorf("a repeat in the holding session = %+v", replayed)
	}
	// A repeat asking for something else is refused, not redirected
	// (ISX-165, ISX-168).
	b.refused("create_instance", map[string]any{"from_instance": reserved, "idempotency_key": "job-17:create"}, CodeInvalidArgument)

	// A keyed background exec, killed once its record exists.
	run := map[string]any{"instance": reserved, "command": "sleep 20; echo finished", "background": true, "idempotency_key": "job-17:run"}
	pending = b.callAsync("exec", run)
	taskID := ""
	incustest.WaitFor(t, "the task record", time.Minute, func() bool {
		res, err := e.client.Exec(e.ctx(), reserved, execAsRoot("ls /home/agent/.isx-mcp/tasks 2>/dev/null"))
		if err != nil {
			return false
		}
		taskID = strings.TrimSpace(string(res.Stdout))
		return strings.HasPrefix(taskID, "t-")
	})
	b.kill()
	<-pending

	c := e.start(sessionOptions{})
	var again ExecResult
	c.ok("exec", run, &again)
	if again.TaskID != taskID || !*again.Replayed {
		t.Fatalf("repeat of the exec = %+v, the record is %s", again, taskID)
	}
	if records := strings.Fields(e.execIn(reserved, "ls /home/agent/.isx-mcp/tasks")); len(records) != 1 {
		t.Errorf("task records after the repeat: %v", records)
	}
	if units := e.execIn(reserved, "systemctl list-units --all --no-legend 'isx-task-*' | wc -l"); strings.TrimSpace(units) != "1" {
		t.Errorf("%s transient units, want 1", strings.TrimSpace(units))
	}
	if holder := e.instanceConfig(reserved)[instance.KeyMCPSession]; holder != c.sessionID() {
		t.Errorf("the repeat did not adopt the orphan: held by %s", holder)
	}
	var status TaskStatusResult
	c.ok("task_status", map[string]any{"instance": reserved, "task_id": taskID}, &status)
	if status.State != TaskRunning && status.State != TaskFinished {
		t.Errorf("the replayed task is %s", status.State)
	}
}
