package holding

import (
	"slices"
	"strings"
	"sync"

	"github.com/incusspawn/isx/internal/isx/task"
)

// Seen is a task as a session last saw it. State is task.StateUnknown
// when nothing has read how it ended yet (right after a cancel).
type Seen struct {
	TaskID   string
	Kind     task.Kind
	Run      int
	State    task.State
	ExitCode *int // set when finished or attached
}

// SeenOf is a task as read from its instance.
func SeenOf(info task.Info) Seen {
	seen := Seen{TaskID: info.ID, Kind: info.Kind(), Run: info.Run, State: info.State}
	if seen.Kind == "" {
		seen.Kind = task.KindCommand
	}
	if info.State == task.StateFinished || info.State == task.StateAttached {
		code := info.ExitCode
		seen.ExitCode = &code
	}
	return seen
}

// LastSeen is what a session last saw of the tasks in the instances it
// holds: list_instances answers from it without running anything in the
// instances (seed 000: "as the session last saw it").
type LastSeen struct {
	mu         sync.Mutex
	byInstance map[string]map[string]*Seen
}

// NewLastSeen is an empty record.
func NewLastSeen() *LastSeen {
	return &LastSeen{byInstance: map[string]map[string]*Seen{}}
}

// Record stores what was read of a task and returns the state it had
// before ("" when it was not known) with the task as stored: a lost task,
// which the instance can no longer give a run or kind, keeps those known.
func (l *LastSeen) Record(instance string, seen Seen) (task.State, Seen) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tasks := l.byInstance[instance]
	if tasks == nil {
		tasks = map[string]*Seen{}
		l.byInstance[instance] = tasks
	}
	var before task.State
	if old := tasks[seen.TaskID]; old != nil {
		before = old.State
		if seen.Kind == "" || seen.State == task.StateLost {
			seen.Kind = old.Kind
		}
		if seen.Run == 0 {
			seen.Run = old.Run
		}
	}
	tasks[seen.TaskID] = &seen
	return before, seen
}

// Forget marks a task's end as not read yet (after a cancel).
func (l *LastSeen) Forget(instance, taskID string, run int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tasks := l.byInstance[instance]; tasks != nil {
		if t := tasks[taskID]; t != nil {
			t.State, t.ExitCode = task.StateUnknown, nil
			if run > 0 {
				t.Run = run
			}
			return
		}
	}
	if l.byInstance[instance] == nil {
		l.byInstance[instance] = map[string]*Seen{}
	}
	l.byInstance[instance][taskID] = &Seen{TaskID: taskID, Kind: task.KindCommand, Run: max(run, 1), State: task.StateUnknown}
}

// Tasks lists an instance's tasks, sorted by id.
func (l *LastSeen) Tasks(instance string) []Seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Seen, 0, len(l.byInstance[instance]))
	for _, t := range l.byInstance[instance] {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b Seen) int { return strings.Compare(a.TaskID, b.TaskID) })
	return out
}

// Drop forgets an instance and returns what was known of its tasks.
func (l *LastSeen) Drop(instance string) []Seen {
	out := l.Tasks(instance)
	l.mu.Lock()
	delete(l.byInstance, instance)
	l.mu.Unlock()
	return out
}

// Instances lists the instances whose tasks are known.
func (l *LastSeen) Instances() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.byInstance))
	for name := range l.byInstance {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
