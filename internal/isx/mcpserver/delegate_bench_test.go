package mcpserver

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/testkit"
)

// BenchmarkExitToNotification: from a task's process exiting in the
// instance to its finished notification arriving at the client, side by
// side with the older release's way, a client polling task_status every
// 2 s. The process prints the time it ends (the instance shares the
// host's clock) and exits. A delegate's agent ends through the same runner
// and the same wait. Target: median under 100 ms.
func BenchmarkExitToNotification(b *testing.B) {
	e := newEnv(b, buildtest.Debian)
	e.writeMCP("templates: [" + buildtest.Debian + "]\n")
	s := e.start(sessionOptions{notify: true})
	var inst CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": buildtest.Debian}, &inst)
	const command = "sleep 0.3; date +%s%N"
	ended := func(taskID string) time.Time {
		var res TaskResultResult
		s.ok("task_result", map[string]any{"instance": inst.Instance, "task_id": taskID}, &res)
		nanos, err := strconv.ParseInt(strings.TrimSpace(res.Stdout), 10, 64)
		if err != nil {
			b.Fatalf("the task printed %q", res.Stdout)
		}
		return time.Unix(0, nanos)
	}
	b.Run("notification", func(b *testing.B) {
		var times testkit.Durations
		for range b.N {
			var bg ExecResult
			s.ok("exec", map[string]any{"instance": inst.Instance, "command": command, "background": true}, &bg)
			for {
				n := nextNote(b, s, time.Minute)
				if n.TaskID == bg.TaskID && n.State == TaskFinished {
					break
				}
			}
			heard := time.Now()
			b.StopTimer()
			times = append(times, heard.Sub(ended(bg.TaskID)))
			b.StartTimer()
		}
		times.Report(b)
	})
	b.Run("baseline-poll-2s", func(b *testing.B) {
		var times testkit.Durations
		for range b.N {
			var bg ExecResult
			s.ok("exec", map[string]any{"instance": inst.Instance, "command": command, "background": true}, &bg)
			for {
				var st TaskStatusResult
				s.ok("task_status", map[string]any{"instance": inst.Instance, "task_id": bg.TaskID}, &st)
				if st.State == TaskFinished {
					break
				}
				time.Sleep(2 * time.Second) // the older release's poll interval, measured here
			}
			heard := time.Now()
			b.StopTimer()
			times = append(times, heard.Sub(ended(bg.TaskID)))
			b.StartTimer()
		}
		times.Report(b)
	})
}

// BenchmarkAgentExitToNotification: the same measure with the real Claude
// Code as the task's process: from the agent exiting (the mtime of the
// exit file its runner writes the moment the agent's process ends) to the
// finished notification at the client. Target: median under 100 ms.
func BenchmarkAgentExitToNotification(b *testing.B) {
	w := newAgentWorld(b, "templates: ["+agentsTemplate+"]\n")
	s := w.start(sessionOptions{notify: true})
	var inst CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": agentsTemplate}, &inst)
	var times testkit.Durations
	for range b.N {
		var d DelegateResult
		s.ok("delegate", map[string]any{"instance": inst.Instance, "instruction": "done: nothing"}, &d)
		waitFinished(b, s, d.TaskID, 1, 3*time.Minute)
		heard := time.Now()
		b.StopTimer()
		out := w.execIn(inst.Instance, "stat -c %.9Y /home/agent/.isx-mcp/tasks/"+d.TaskID+"/runs/1/exit")
		seconds, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
		if err != nil {
			b.Fatalf("the exit file's mtime %q: %v", out, err)
		}
		ended := time.Unix(0, int64(seconds*1e9))
		times = append(times, heard.Sub(ended))
		b.StartTimer()
	}
	times.Report(b)
}

// BenchmarkDelegateToAgentStarted: a delegate call, from the request to
// its answer, which comes once the agent's process runs in the instance
// (the runner has started it), side by side with a background exec of a
// command, the same task start without the agent's parts (its checkout's
// base commit, its session).
func BenchmarkDelegateToAgentStarted(b *testing.B) {
	w := newAgentWorld(b, "templates: ["+agentsTemplate+"]\n")
	s := w.start(sessionOptions{})
	var inst CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": agentsTemplate}, &inst)
	b.Run("delegate", func(b *testing.B) {
		var times testkit.Durations
		for range b.N {
			began := time.Now()
			var d DelegateResult
			s.ok("delegate", map[string]any{"instance": inst.Instance, "instruction": "sleep 60: wait"}, &d)
			times = append(times, time.Since(began))
			b.StopTimer()
			s.ok("cancel_task", map[string]any{"instance": inst.Instance, "task_id": d.TaskID}, nil)
			b.StartTimer()
		}
		times.Report(b)
	})
	b.Run("baseline-background-exec", func(b *testing.B) {
		var times testkit.Durations
		for range b.N {
			began := time.Now()
			var bg ExecResult
			s.ok("exec", map[string]any{"instance": inst.Instance, "command": "sleep 60", "background": true}, &bg)
			times = append(times, time.Since(began))
			b.StopTimer()
			s.ok("cancel_task", map[string]any{"instance": inst.Instance, "task_id": bg.TaskID}, nil)
			b.StartTimer()
		}
		times.Report(b)
	})
}

// BenchmarkGetDiffStat: get_diff stat of a task's changes in a checkout of
// 10,000 files (ten edited, five added), side by side with `git diff
// --stat` of the same checkout run directly with exec.
func BenchmarkGetDiffStat(b *testing.B) {
	w := newAgentWorld(b, "templates: ["+agentsTemplate+"]\n")
	s := w.start(sessionOptions{notify: true})
	var inst CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": agentsTemplate}, &inst)
	s.ok("exec", map[string]any{"instance": inst.Instance, "command": `mkdir -p big && cd big && git init -q &&
for d in $(seq 100); do mkdir d$d; for f in $(seq 100); do echo "file $d $f" > d$d/f$f; done; done &&
git add -A && git -c user.name=b -c user.email=b@b commit -q -m big`, "timeout_seconds": 600}, nil)
	var d DelegateResult
	s.ok("delegate", map[string]any{"instance": inst.Instance, "cwd": "/home/agent/big", "instruction": "done: nothing"}, &d)
	waitFinished(b, s, d.TaskID, 1, 3*time.Minute)
	s.ok("exec", map[string]any{"instance": inst.Instance, "command": `cd big && for f in $(seq 10); do echo more >> d1/f$f; done && for f in $(seq 5); do echo new > new$f; done`}, nil)
	b.Run("get_diff-stat", func(b *testing.B) {
		var times testkit.Durations
		for range b.N {
			began := time.Now()
			var stat GetDiffResult
			s.ok("get_diff", map[string]any{"instance": inst.Instance, "task_id": d.TaskID, "stat": true}, &stat)
			times = append(times, time.Since(began))
			if len(stat.Files) != 16 { // notes.txt of the agent, ten edits, five new files
				b.Fatalf("%d files changed, want 16", len(stat.Files))
			}
		}
		times.Report(b)
	})
	b.Run("baseline-exec-git-diff-stat", func(b *testing.B) {
		var times testkit.Durations
		for range b.N {
			began := time.Now()
			s.ok("exec", map[string]any{"instance": inst.Instance, "command": "cd big && git diff --stat HEAD"}, nil)
			times = append(times, time.Since(began))
		}
		times.Report(b)
	})
}
