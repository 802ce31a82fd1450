package task

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// State is a task's state, in the words every isx mcp tool uses (seed 000,
// "Task states"; ISX-120).
type State string

const (
	// StateRunning: the task is in progress.
	StateRunning State = "running"
	// StateFinished: it ended; the exit code says how.
	StateFinished State = "finished"
	// StateAttached: a delegate that finished, with a person in its
	// conversation (isx shell --task).
	StateAttached State = "attached"
	// StateLost: the instance no longer has a record of the task.
	StateLost State = "lost"
	// StateUnknown: nothing has read how the task ended yet. It is a
	// caller's cached view (as right after a cancel); this package never
	// reads it from an instance (ISX-127).
	StateUnknown State = "unknown"
)

// NoExitCode is the exit code of a run that ended without recording one:
// it was cancelled before it started, or its runner was killed or the
// instance restarted before the command ended.
const NoExitCode = -1

// Info is a task as read from its instance: its state and what its record says.
type Info struct {
	ID    string
	State State // never StateUnknown
	// Run is the number of the task's latest run (1 for a command task); 0
	// when lost.
	Run int
	// ExitCode is how the latest run ended, valid when State is finished or
	// attached: the command's status, 128+n when signal n ended it (143
	// after a cancel's TERM, 137 when it needed KILL), or NoExitCode.
	ExitCode int
	// Pending: running, but the run has not started yet (a Start is under
	// way, or was interrupted before it started the run: repeating it with
	// the same key starts it).
	Pending bool
	// Record is the task's description; nil when lost or unreadable.
	Record *Record
	// Started is when the latest run was launched (the host's clock);
	// Finished when it ended (the instance's clock, whole seconds). Zero
	// when not known.
	Started  time.Time
	Finished time.Time
	// StdoutBytes and StderrBytes are the sizes of the latest run's logs
	// (-1 when not read, as List does not).
	StdoutBytes int64
	StderrBytes int64
	// Mode is how the run was started: "systemd" (a transient unit) or
	// "process" (a detached process group); empty before it starts.
	Mode string
	// Problem explains a record that could not be read whole; empty
	// otherwise.
	Problem string
}

// Kind is the kind of the task, empty when its record cannot be read.
func (s *Info) Kind() Kind {
	if s.Record == nil {
		return ""
	}
	return s.Record.Kind
}

// facts is one task as a facts line (and the record lines after it)
// describe it.
type facts struct {
	id       string
	state    string // lost bad pending running finished vanished
	run      string
	exit     string
	ended    string
	attached bool
	mode     string
	out, err string
	record   string
	hasRec   bool
	runinfo  string
}

// answer is what a script printed, split into its parts.
type answer struct {
	tasks   []*facts
	byID    map[string]*facts
	words   map[string][]string // other lines by their first word
	errCode string
	errText string
}

// parseAnswer reads the lines a script printed. Lines it does not know are
// an error: the output comes from inside the instance.
func parseAnswer(out string) (*answer, error) {
	a := &answer{byID: map[string]*facts{}, words: map[string][]string{}}
	for line := range strings.Lines(out) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		tag, rest, _ := strings.Cut(line, " ")
		switch tag {
		case "task":
			f, err := parseFactsLine(rest)
			if err != nil {
				return nil, err
			}
			if prev := a.byID[f.id]; prev != nil {
				// A later account of the same task updates its state; the
				// record lines came with the first.
				f.record, f.hasRec, f.runinfo = prev.record, prev.hasRec, prev.runinfo
				*prev = *f
				continue
			}
			a.tasks = append(a.tasks, f)
			a.byID[f.id] = f
		case "record", "runinfo":
			id, text, _ := strings.Cut(rest, " ")
			f := a.byID[id]
			if f == nil {
				return nil, fmt.Errorf("a %s line for task %q before its facts", tag, Clip(id, 20))
			}
			if tag == "record" {
				f.record, f.hasRec = text, true
			} else {
				f.runinfo = text
			}
		case "error":
			code, text, _ := strings.Cut(rest, " ")
			a.errCode, a.errText = code, text
		case "created", "replayed", "launch", "ended", "cancelled", "changed", "cleared", "none", "stop":
			a.words[tag] = strings.Fields(rest)
		default:
			return nil, fmt.Errorf("unexpected line %q", Clip(line, 80))
		}
	}
	return a, nil
}

func parseFactsLine(rest string) (*facts, error) {
	fields := strings.Fields(rest)
	if len(fields) == 0 || ValidateID(fields[0]) != nil {
		return nil, fmt.Errorf("a facts line without a task id: %q", Clip(rest, 80))
	}
	f := &facts{id: fields[0]}
	for _, field := range fields[1:] {
		name, value, ok := strings.Cut(field, "=")
		if !ok {
			return nil, fmt.Errorf("malformed field %q in the facts of %s", Clip(field, 40), f.id)
		}
		switch name {
		case "state":
			f.state = value
		case "run":
			f.run = value
		case "exit":
			f.exit = value
		case "ended":
			f.ended = value
		case "attached":
			f.attached = value == "1"
		case "mode":
			f.mode = value
		case "out":
			f.out = value
		case "err":
			f.err = value
		}
	}
	return f, nil
}

// status turns a task's facts into its Status.
func (f *facts) status() Info {
	st := Info{ID: f.id, StdoutBytes: size(f.out), StderrBytes: size(f.err)}
	if f.mode == modeSystemd || f.mode == modeProcess {
		st.Mode = f.mode
	}
	if f.state == "lost" {
		st.State = StateLost
		return st
	}
	var problems []string
	if f.hasRec {
		var rec Record
		if err := json.Unmarshal([]byte(f.record), &rec); err != nil || rec.ID != f.id {
			problems = append(problems, "its task.json cannot be read")
		} else {
			st.Record = &rec
		}
	}
	if f.runinfo != "" {
		var info runInfo
		if err := json.Unmarshal([]byte(f.runinfo), &info); err == nil {
			st.Started = info.Started
		}
	}
	run, err := strconv.Atoi(f.run)
	if f.state == "bad" || err != nil || run < 1 {
		// Without a run number nothing can be said of how it went: to a
		// caller it is as good as gone.
		st.State = StateLost
		st.Problem = "the record of the task is damaged: its run number cannot be read"
		return st
	}
	st.Run = run
	switch f.state {
	case "pending":
		st.State, st.Pending = StateRunning, true
	case "running":
		st.State = StateRunning
	case "finished", "vanished":
		st.State = StateFinished
		st.ExitCode = NoExitCode
		if f.state == "vanished" {
			problems = append(problems, "the run ended without recording its exit code (its runner was killed, or the instance restarted)")
		} else if code, err := strconv.Atoi(f.exit); err == nil {
			st.ExitCode = code
		} else {
			problems = append(problems, "its exit file cannot be read")
		}
		if secs, err := strconv.ParseInt(f.ended, 10, 64); err == nil {
			st.Finished = time.Unix(secs, 0).UTC()
		}
		if f.attached && st.Kind() == KindDelegate {
			st.State = StateAttached
		}
	default:
		st.State = StateLost
		problems = append(problems, fmt.Sprintf("unknown run state %q", Clip(f.state, 20)))
	}
	st.Problem = strings.Join(problems, "; ")
	return st
}

func size(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}
