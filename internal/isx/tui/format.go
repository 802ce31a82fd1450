package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

// age is instance.Age: the TUI shows ages as isx list does.
func age(d time.Duration) string { return instance.Age(d) }

// since is age from t to now, or "-" when t is not known.
func since(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return age(now.Sub(t))
}

// when is a stamp's time for a person: the time in UTC and how long ago.
func when(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC") + " (" + age(now.Sub(t)) + " ago)"
}

// count is a token count in few characters: 950, 12.3k, 4.5M.
func count(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d", n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprintf("%.1fM", float64(n)/1_000_000)
}

// taskState is a task's state in the words of task_status, with how a
// finished one ended.
func taskState(info task.Info) string {
	switch {
	case info.State == task.StateRunning && info.Pending:
		return "starting"
	case info.State == task.StateFinished && info.ExitCode == task.NoExitCode:
		return "finished (no exit code)"
	case info.State == task.StateFinished:
		return fmt.Sprintf("finished (exit %d)", info.ExitCode)
	}
	return string(info.State)
}

// agentOf names what works in a task: the delegate's agent, or "command".
func agentOf(info task.Info) string {
	if info.Record == nil {
		return "-"
	}
	if info.Record.Delegate != nil && info.Record.Delegate.Agent != "" {
		return info.Record.Delegate.Agent
	}
	return string(info.Record.Kind)
}

// modelOf is a delegate's model override, "-" for none.
func modelOf(info task.Info) string {
	if info.Record == nil || info.Record.Delegate == nil || info.Record.Delegate.Model == "" {
		return "-"
	}
	return info.Record.Delegate.Model
}

// commandOf is the command a task runs, as a person would type it.
func commandOf(info task.Info) string {
	if info.Record == nil {
		return "-"
	}
	argv := info.Record.Command
	if len(argv) == 3 && argv[0] == "/bin/sh" && argv[1] == "-c" {
		return argv[2]
	}
	return strings.Join(argv, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
