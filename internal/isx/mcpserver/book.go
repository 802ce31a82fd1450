package mcpserver

import (
	"crypto/rand"
	"slices"
	"sync"

	"github.com/incusspawn/isx/internal/isx/task"
)

// taskBook is what this session last saw of the tasks in the instances it
// holds: list_instances answers from it without running anything in the
// instances (seed 000: "as the session last saw it").
type taskBook struct {
	mu         sync.Mutex
	byInstance map[string]map[string]*InstanceTask
}

func newTaskBook() *taskBook {
	return &taskBook{byInstance: map[string]map[string]*InstanceTask{}}
}

// viewOfInfo is a task as read from its instance.
func viewOfInfo(info task.Info) InstanceTask {
	view := InstanceTask{TaskID: info.ID, Kind: TaskKind(info.Kind()), Run: info.Run, State: TaskState(info.State)}
	if view.Kind == "" {
		view.Kind = KindCommand
	}
	if info.State == task.StateFinished || info.State == task.StateAttached {
		view.ExitCode = ptr(info.ExitCode)
	}
	return view
}

// record stores what was read of a task and returns the state it had
// before ("" when the book did not know it) with the view as stored: a
// lost task, which the instance can no longer give a run, keeps the run
// the book knew.
func (b *taskBook) record(instance string, view InstanceTask) (TaskState, InstanceTask) {
	b.mu.Lock()
	defer b.mu.Unlock()
	tasks := b.byInstance[instance]
	if tasks == nil {
		tasks = map[string]*InstanceTask{}
		b.byInstance[instance] = tasks
	}
	var before TaskState
	if old := tasks[view.TaskID]; old != nil {
		before = old.State
		if view.Kind == "" || view.State == TaskLost {
			view.Kind = old.Kind
		}
		if view.Run == 0 {
			view.Run = old.Run
		}
	}
	tasks[view.TaskID] = &view
	return before, view
}

// forget marks a task's end as not read yet (after cancel_task).
func (b *taskBook) forget(instance, taskID string, run int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if tasks := b.byInstance[instance]; tasks != nil {
		if t := tasks[taskID]; t != nil {
			t.State, t.ExitCode = TaskUnknown, nil
			if run > 0 {
				t.Run = run
			}
			return
		}
	}
	if b.byInstance[instance] == nil {
		b.byInstance[instance] = map[string]*InstanceTask{}
	}
	b.byInstance[instance][taskID] = &InstanceTask{TaskID: taskID, Kind: KindCommand, Run: max(run, 1), State: TaskUnknown}
}

// tasks lists an instance's tasks, sorted by id.
func (b *taskBook) tasks(instance string) []InstanceTask {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]InstanceTask, 0, len(b.byInstance[instance]))
	for _, t := range b.byInstance[instance] {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b InstanceTask) int {
		switch {
		case a.TaskID < b.TaskID:
			return -1
		case a.TaskID > b.TaskID:
			return 1
		}
		return 0
	})
	return out
}

// drop forgets an instance and returns what it knew of its tasks.
func (b *taskBook) drop(instance string) []InstanceTask {
	out := b.tasks(instance)
	b.mu.Lock()
	delete(b.byInstance, instance)
	b.mu.Unlock()
	return out
}

// instances lists the instances the book knows tasks of.
func (b *taskBook) instances() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.byInstance))
	for name := range b.byInstance {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// keyLocks serialise calls of this process that use the same idempotency
// key, so that a repeat arriving while the first call still runs waits
// for it and then replays it.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	mu    sync.Mutex
	users int
}

// lock takes the lock of key ("" locks nothing) and returns its release.
func (k *keyLocks) lock(key string) func() {
	if key == "" {
		return func() {}
	}
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		l.users--
		if l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

type cryptoRandom struct{}

func (cryptoRandom) Read(p []byte) (int, error) { return rand.Read(p) }
