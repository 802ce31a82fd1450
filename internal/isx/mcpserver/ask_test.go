package mcpserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/task"
)

// ask, on exec, task_result and get_diff: a one-shot Claude Code on
// summary-model, with no tools, inside the instance answers instead of the
// text; an instance without Claude refuses it before the command runs;
// without ask the text comes back.
//
// ISX-015, ISX-188, ISX-189, ISX-190, ISX-191, ISX-192, ISX-193, ISX-194,
// ISX-195, ISX-196, ISX-199, ISX-123, ISX-132.
func TestAskISX188(t *testing.T) {
	w := newAgentWorld(t, "templates: ["+agentsTemplate+", "+buildtest.BusyBox+"]\n")
	w.copyTemplate(buildtest.BusyBox)
	s := w.start(sessionOptions{notify: true})
	var inst CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": agentsTemplate}, &inst)
	before := len(w.anthropic.Calls())
	var ex ExecResult
	s.ok("exec", map[string]any{"instance": inst.Instance, "command": "for i in $(seq 2000); do echo test-$i ok; done; echo test-77 FAILED", "ask": "which tests fail?"}, &ex)
	if ex.Answer == nil || !strings.Contains(*ex.Answer, "which tests fail?") || *ex.Stdout != "" {
		t.Fatalf("exec with ask = %+v", ex)
	}
	summarizer := w.anthropic.Calls()[before:]
	if len(summarizer) == 0 {
		t.Fatal("no model call for ask")
	}
	for _, c := range summarizer {
		if c.Path == "/v1/messages" && (!strings.Contains(c.Model, "haiku") || len(c.Tools) != 0) {
			t.Errorf("the summarizer's call: model %s, tools %v", c.Model, c.Tools)
		}
		if c.Path == "/v1/messages" && !strings.Contains(string(c.Body), "test-77 FAILED") {
			t.Error("the summarizer did not read the output")
		}
	}

	var d DelegateResult
	s.ok("delegate", map[string]any{"instance": inst.Instance, "instruction": "fig: add a line"}, &d)
	waitFinished(t, s, d.TaskID, 1, 3*time.Minute)
	var res TaskResultResult
	s.ok("task_result", map[string]any{"instance": inst.Instance, "task_id": d.TaskID, "ask": "did it succeed?"}, &res)
	if res.Answer == nil || res.Report != nil {
		t.Errorf("task_result with ask = %+v", res)
	}
	var diff GetDiffResult
	s.ok("get_diff", map[string]any{"instance": inst.Instance, "task_id": d.TaskID, "ask": "what changed?"}, &diff)
	if diff.Answer == nil || diff.Patch != nil || len(diff.Files) != 1 {
		t.Errorf("get_diff with ask = %+v", diff)
	}

	// ISX-123, ISX-132: a person in the conversation makes the task
	// attached, and send_message waits for them.
	join, err := task.AttachCommand(d.TaskID, []string{"sleep", "60"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go w.client.Exec(ctx, inst.Instance, incus.ExecRequest{Command: join, UID: 1000, GID: 1000, Timeout: time.Minute}) //nolint:errcheck // ended by stop
	incustest.WaitFor(t, "the task to be attached", time.Minute, func() bool {
		var st TaskStatusResult
		s.ok("task_status", map[string]any{"instance": inst.Instance, "task_id": d.TaskID}, &st)
		return st.State == TaskAttached
	})
	s.refused("send_message", map[string]any{"instance": inst.Instance, "task_id": d.TaskID, "message": "more"}, CodeWrongState)
	stop()

	// ISX-195, ISX-196, ISX-199: no Claude, no ask, and the command never ran.
	var bare CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": buildtest.BusyBox}, &bare)
	s.refused("exec", map[string]any{"instance": bare.Instance, "command": "touch /tmp/ran", "ask": "anything?"}, CodeWrongState)
	if out := w.execIn(bare.Instance, "test -e /tmp/ran && echo ran || echo not"); out != "not\n" {
		t.Errorf("the command ran before ask was refused: %s", out)
	}
	s.ok("exec", map[string]any{"instance": bare.Instance, "command": "echo plain"}, &ex)
	if *ex.Stdout != "plain\n" {
		t.Errorf("exec without ask: %+v", ex)
	}
}
