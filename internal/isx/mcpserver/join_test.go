package mcpserver

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// A person runs a finished Claude or Codex task's join_command on the
// host, in a terminal (tmux): the real `isx shell --task` resumes the agent's
// conversation inside the instance, which shows the task's earlier
// exchange; meanwhile the task is attached and send_message is refused;
// once the person leaves, the task is finished again and takes follow-ups.
//
// ISX-130, ISX-131, ISX-123, ISX-132.
func TestJoinCommandResumesTheConversationISX130(t *testing.T) {
	w := newAgentWorld(t, "templates: ["+agentsTemplate+"]\n")
	s := w.start(sessionOptions{notify: true})
	for _, agent := range []string{"claude", "codex"} {
		t.Run(agent, func(t *testing.T) { w.join(t, s, agentsTemplate, agent) })
	}
}

// The same with Pi's and opencode's own forms of resuming.
//
// ISX-130.
func TestJoinPiAndOpencodeISX130(t *testing.T) {
	w := newWorldOf(t, "templates: ["+buildtest.DebianOthers+"]\n", buildtest.DebianOthers)
	s := w.start(sessionOptions{notify: true})
	for _, agent := range []string{"pi", "opencode"} {
		t.Run(agent, func(t *testing.T) { w.join(t, s, buildtest.DebianOthers, agent) })
	}
}

func (w *agentWorld) join(t *testing.T, s *session, template, agent string) {
	var d DelegateResult
	s.ok("delegate", map[string]any{"template": template, "agent": agent, "instruction": "quince: add a line to notes.txt"}, &d)
	waitFinished(t, s, d.TaskID, 1, 3*time.Minute)

	args := strings.Fields(d.JoinCommand)
	if len(args) != 5 || args[0] != "isx" {
		t.Fatalf("join_command %q", d.JoinCommand)
	}
	socket := fmt.Sprintf("isxjoin-%d", time.Now().UnixNano())
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", append([]string{"-L", socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
		return string(out), err
	}
	command := append([]string{"new-session", "-d", "-s", "join", "-x", "160", "-y", "48", "--", "env"}, w.environ()...)
	command = append(command, append([]string{isxBinary(t)}, args[1:]...)...)
	if out, err := tmux(command...); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	t.Cleanup(func() { tmux("kill-server") }) //nolint:errcheck // gone already when the test ended it
	screen := func() string {
		out, _ := tmux("capture-pane", "-p", "-t", "join")
		return out
	}

	incustest.WaitFor(t, "the task to be attached", 2*time.Minute, func() bool {
		var st TaskStatusResult
		s.ok("task_status", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &st)
		return st.State == TaskAttached
	})
	s.refused("send_message", map[string]any{"instance": d.Instance, "task_id": d.TaskID, "message": "more"}, CodeWrongState)
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("the terminal showed:\n%s", last)
		}
	}()
	incustest.WaitFor(t, "the joined conversation to show the task's exchange", 2*time.Minute, func() bool {
		last = screen()
		return strings.Contains(last, "quince")
	})

	if out, err := tmux("kill-session", "-t", "join"); err != nil {
		t.Fatalf("tmux kill-session: %v: %s", err, out)
	}
	incustest.WaitFor(t, "the task to be finished again", 2*time.Minute, func() bool {
		var st TaskStatusResult
		s.ok("task_status", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &st)
		return st.State == TaskFinished
	})
	s.ok("send_message", map[string]any{"instance": d.Instance, "task_id": d.TaskID, "message": "raisin: one more"}, nil)
	waitFinished(t, s, d.TaskID, 2, 3*time.Minute)
}
