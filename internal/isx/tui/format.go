package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/task"
)

// age says how long ago, in the largest whole unit: 45s, 12m, 3h, 5d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

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
