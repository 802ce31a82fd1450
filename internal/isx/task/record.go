package task

import (
	"fmt"
	"strings"
	"time"
)

// The agent user every template has (see internal/build); tasks run as it
// and their records live in its home.
const (
	AgentUID  = 1000
	AgentGID  = 1000
	AgentHome = "/home/agent"
	// Dir holds one directory per task, named by its id.
	Dir = AgentHome + "/.isx-mcp/tasks"
	// keysDir holds one claim per idempotency key: a symlink k-<key> whose
	// target is the id of the task the key made.
	keysDir = AgentHome + "/.isx-mcp/keys"
)

// RecordVersion is the layout version written into new records. A reader
// keeps working with a newer record's fields it knows and ignores the rest.
const RecordVersion = 1

// Kind says what runs in a task.
type Kind string

const (
	// KindCommand is a background exec: a command line run to its end.
	KindCommand Kind = "command"
	// KindDelegate is a coding agent (Claude Code, Codex, Pi, opencode)
	// working on an instruction: its first run carries the instruction,
	// each later run (NextRun) a follow-up message in the same session.
	KindDelegate Kind = "delegate"
)

// Record is a task's description, written once when the task is made
// (task.json in its directory). It holds no secrets: the values of the
// task's environment live in a separate file that only the runs read.
type Record struct {
	Version int      `json:"version"`
	ID      string   `json:"id"`
	Kind    Kind     `json:"kind"`
	Command []string `json:"command"` // argv, run as the agent user
	Cwd     string   `json:"cwd"`
	// EnvNames lists the environment variables the runs set; their values
	// are never shown.
	EnvNames []string  `json:"env_names,omitempty"`
	Key      string    `json:"idempotency_key,omitempty"`
	Created  time.Time `json:"created"`
	Session  string    `json:"session,omitempty"` // the isx mcp session that made it
	Delegate *Delegate `json:"delegate,omitempty"`
}

// Delegate holds what a delegated agent's task records besides a command's.
// Only the fields known when the task is made are in the record; what the
// runs learn is kept in files of its own beside it (see the package
// documentation): session_id, and each run's event stream (its stdout).
type Delegate struct {
	Agent string `json:"agent"`           // claude, codex, pi or opencode
	Model string `json:"model,omitempty"` // the task's model override
	// Permission is Claude's permission mode or Codex's sandbox mode,
	// from mcp.yaml when the task was made.
	Permission string `json:"permission,omitempty"`
	// BaseCommit is HEAD of the working directory when the first run
	// started (get_diff diffs against it); empty outside a git checkout,
	// "-" in a checkout without commits.
	BaseCommit string `json:"base_commit,omitempty"`
	// Session is the agent's session when isx chose it (Claude).
	Session string `json:"session,omitempty"`
}

// Spec asks Start for a task.
type Spec struct {
	Kind    Kind     // KindCommand, or KindDelegate with Delegate set
	Command []string // argv; a shell line is []string{"/bin/sh", "-c", line}
	// Cwd is where the command starts, an absolute path inside the
	// instance (AgentHome when empty). It must exist when Start is called.
	Cwd string
	// Env is added to the agent user's environment. Values may be secrets:
	// they go to a file only the agent user can read and never into the
	// record.
	Env map[string]string
	// Key is the optional idempotency key: a Start whose key already made a
	// task returns that task instead of making another.
	Key     string
	Session string // recorded as the task's creating session
	// Delegate describes a delegated agent's task (KindDelegate).
	Delegate *Delegate
}

// Limits on what a Spec may carry. The command and the environment travel
// to the instance as arguments of one exec, which Linux caps at 128 KiB
// each.
const (
	MaxCommandBytes = 64 << 10
	MaxEnvBytes     = 64 << 10
	maxArgBytes     = 120 << 10
	maxSessionBytes = 256
)

// Shell wraps a shell command line as the argv Spec.Command takes.
func Shell(line string) []string { return []string{"/bin/sh", "-c", line} }

func (s *Spec) validate() error {
	switch {
	case s.Kind == KindDelegate && (s.Delegate == nil || s.Delegate.Agent == ""):
		return newError(CodeInvalidArgument, "", "", "a delegate task needs its agent")
	case s.Kind != KindCommand && s.Kind != KindDelegate:
		return newError(CodeInvalidArgument, "", "", "unknown task kind %q: use %q or %q", s.Kind, KindCommand, KindDelegate)
	}
	return s.validateFields()
}

// validateFields checks everything but the kind.
func (s *Spec) validateFields() error {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return newError(CodeInvalidArgument, "", "", "no command given")
	}
	size := 0
	for _, arg := range s.Command {
		if strings.ContainsRune(arg, 0) {
			return newError(CodeInvalidArgument, "", "", "the command contains a NUL byte, which no process argument can hold")
		}
		size += len(arg)
	}
	if size > MaxCommandBytes {
		return newError(CodeInvalidArgument, "", "", "the command is %d bytes, more than the %d allowed: write a long script to a file in the instance and run that", size, MaxCommandBytes)
	}
	if err := CheckCwd(s.Cwd); err != nil {
		return err
	}
	if err := CheckEnv(s.Env); err != nil {
		return err
	}
	size = 0
	for name, value := range s.Env {
		size += len(name) + len(value)
	}
	if size > MaxEnvBytes {
		return newError(CodeInvalidArgument, "", "", "the environment is %d bytes, more than the %d allowed", size, MaxEnvBytes)
	}
	if s.Key != "" {
		if err := ValidateKey(s.Key); err != nil {
			return err
		}
	}
	if len(s.Session) > maxSessionBytes {
		return newError(CodeInvalidArgument, "", "", "session name is longer than %d bytes", maxSessionBytes)
	}
	return nil
}

// runInfo is written when a run is launched (runs/<n>/run.json).
type runInfo struct {
	Run     int       `json:"run"`
	Unit    string    `json:"unit,omitempty"` // the systemd unit; empty for a process group
	Mode    string    `json:"mode"`           // modeSystemd or modeProcess
	Started time.Time `json:"started"`
}

// How a run was started.
const (
	modeSystemd = "systemd" // a transient unit: systemd-run --collect
	modeProcess = "process" // a detached process group (setsid), no init system
	modeNone    = "none"    // record only: used by tests to simulate a crash
)

// UnitName is the systemd unit of a task's run.
func UnitName(taskID string, run int) string {
	return fmt.Sprintf("isx-task-%s-%d.service", taskID, run)
}
