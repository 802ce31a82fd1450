package mcpserver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/task"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// TaskChangedMethod is the notification a client that asked for it gets
// for every change of a task's state (seed 000, "Being told when a task
// changes").
const TaskChangedMethod = "notifications/isx/task_changed"

// TaskReleased is the notification state meaning another session took the
// task's instance with adopt_instance. It never appears in a tool result.
const TaskReleased TaskState = "released"

// TaskChanged is the notification's params.
type TaskChanged struct {
	TaskID   string    `json:"task_id"`
	Instance string    `json:"instance"`
	Run      int       `json:"run"`
	State    TaskState `json:"state"`
	ExitCode *int      `json:"exit_code,omitempty"`
}

// notifier sends task changes to a client that listed TaskChangedCapability
// under capabilities.experimental, and does nothing for one that did not:
// then no instance is watched and nothing is polled. For a client that
// asked, each instance with running tasks of this session is watched by
// one exec waiting inside it (task.Wait), and the Incus event stream tells
// when another session takes an instance or it is deleted.
type notifier struct {
	s *Server

	mu        sync.Mutex
	enabled   bool
	transport *mcpkit.Notifier
	sent      map[string]TaskState // last state sent, by instance/task
	watching  map[string]*watcher
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func newNotifier(s *Server) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{s: s, sent: map[string]TaskState{}, watching: map[string]*watcher{}, ctx: ctx, cancel: cancel}
}

func (n *notifier) attach(t *mcpkit.Notifier) {
	n.mu.Lock()
	n.transport = t
	n.mu.Unlock()
}

// initialized turns notifications on when the client asked for them.
func (n *notifier) initialized(session *mcp.ServerSession) {
	params := session.InitializeParams()
	if params == nil || params.Capabilities == nil {
		return
	}
	if _, asked := params.Capabilities.Experimental[TaskChangedCapability]; !asked {
		return
	}
	n.mu.Lock()
	if n.enabled {
		n.mu.Unlock()
		return
	}
	n.enabled = true
	n.mu.Unlock()
	n.wg.Go(n.followEvents)
	for _, name := range n.s.seen.Instances() {
		n.watch(name, "")
	}
}

func (n *notifier) on() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.enabled && n.ctx.Err() == nil
}

// changed is told of every task state this session reads. It sends the
// change unless it was sent already; unknown is never sent.
func (n *notifier) changed(instance string, view InstanceTask, _ TaskState) {
	if !n.on() || view.State == TaskUnknown {
		return
	}
	n.send(TaskChanged{TaskID: view.TaskID, Instance: instance, Run: view.Run, State: view.State, ExitCode: view.ExitCode})
	if view.State == TaskRunning {
		n.watch(instance, view.TaskID)
	}
}

func (n *notifier) send(change TaskChanged) {
	if change.State != TaskFinished && change.State != TaskAttached {
		change.ExitCode = nil
	}
	key := change.Instance + "/" + change.TaskID
	n.mu.Lock()
	if n.sent[key] == change.State || n.transport == nil {
		n.mu.Unlock()
		return
	}
	n.sent[key] = change.State
	transport := n.transport
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	err := transport.Notify(ctx, TaskChangedMethod, change)
	if err != nil && !errors.Is(err, mcpkit.ErrNotConnected) && n.ctx.Err() == nil {
		n.s.warnf("sending a task notification: %v", err)
	}
}

// watcher is the one wait running inside an instance for its running
// tasks. A task that starts while the wait runs is not among those it
// waits for, so the wait is begun again with it: otherwise its end would
// be told only once the wait for the others gives up.
type watcher struct {
	waiting    map[string]bool // the tasks the current wait is for
	generation int             // bumped by every task the wait lacks
	cancel     context.CancelFunc
}

// watch waits inside the instance for its running tasks, starting the
// watcher once, and makes it wait again when taskID (if any) is a running
// task its current wait does not cover.
func (n *notifier) watch(instance, taskID string) {
	n.mu.Lock()
	if !n.enabled || n.ctx.Err() != nil {
		n.mu.Unlock()
		return
	}
	if w := n.watching[instance]; w != nil {
		if taskID != "" && !w.waiting[taskID] {
			w.generation++
			if w.cancel != nil {
				w.cancel()
			}
		}
		n.mu.Unlock()
		return
	}
	w := &watcher{}
	n.watching[instance] = w
	n.mu.Unlock()
	n.wg.Go(func() {
		defer func() {
			n.mu.Lock()
			if n.watching[instance] == w {
				delete(n.watching, instance)
			}
			n.mu.Unlock()
		}()
		n.waitLoop(instance, w)
	})
}

// watchSlice bounds one exec waiting in an instance.
const watchSlice = 60 * time.Second

func (n *notifier) waitLoop(instance string, w *watcher) {
	failures := 0
	for n.ctx.Err() == nil {
		n.mu.Lock()
		generation := w.generation
		n.mu.Unlock()
		var running []string
		for _, t := range n.s.seen.Tasks(instance) {
			if t.State == task.StateRunning {
				running = append(running, t.TaskID)
			}
		}
		if len(running) == 0 {
			n.mu.Lock()
			again := w.generation != generation
			if !again {
				delete(n.watching, instance)
			}
			n.mu.Unlock()
			if again {
				continue
			}
			return
		}
		ctx, cancel := context.WithCancel(n.ctx)
		n.mu.Lock()
		if w.generation != generation {
			// A task started while the list was read: read it again.
			n.mu.Unlock()
			cancel()
			continue
		}
		w.waiting, w.cancel = map[string]bool{}, cancel
		for _, id := range running {
			w.waiting[id] = true
		}
		n.mu.Unlock()
		res, err := task.Wait(ctx, n.s.opts.Client, instance, running, watchSlice)
		restarted := ctx.Err() != nil && n.ctx.Err() == nil
		cancel()
		// From here until the next wait begins, every task that starts
		// (a follow-up run of one just waited for, too) makes it read the
		// list again.
		n.mu.Lock()
		w.waiting, w.cancel = nil, nil
		n.mu.Unlock()
		if restarted {
			continue
		}
		if err != nil {
			if n.ctx.Err() != nil || n.instanceGone(instance) {
				return
			}
			failures++
			if failures > 5 {
				n.s.warnf("stopped watching the tasks of %s: %v", instance, err)
				return
			}
			select {
			case <-n.ctx.Done():
			case <-n.s.opts.Clock.After(time.Second):
			}
			continue
		}
		failures = 0
		for _, st := range res.Statuses {
			n.s.observe(instance, st)
		}
	}
}

// followEvents learns from Incus when an instance this session has tasks
// in is taken by another session or deleted.
func (n *notifier) followEvents() {
	for n.ctx.Err() == nil {
		stream, err := n.s.opts.Client.Events(n.ctx, incus.EventLifecycle)
		if err != nil {
			select {
			case <-n.ctx.Done():
				return
			case <-n.s.opts.Clock.After(2 * time.Second):
				continue
			}
		}
		for event := range stream.Events {
			life, err := event.Lifecycle()
			if err != nil {
				continue
			}
			name := life.Instance()
			if name == "" || len(n.s.seen.Tasks(name)) == 0 {
				continue
			}
			switch life.Action {
			case "instance-updated", "instance-deleted", "instance-stopped", "instance-renamed":
				n.instanceGone(name)
			}
		}
	}
}

// instanceGone checks whether this session lost the instance: taken by
// another session (released) or deleted (lost). It forgets the instance's
// tasks then and reports whether it did.
func (n *notifier) instanceGone(instance string) bool {
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	inst, _, err := n.s.opts.Client.GetInstance(ctx, instance)
	state := TaskState("")
	switch {
	case errors.Is(err, incus.ErrNotFound):
		state = TaskLost
	case err != nil:
		return false
	default:
		if holding.ViewOf(inst).HoldingFor(n.s.opts.Session) == holding.HeldElsewhere || holding.ViewOf(inst).Stamps.MCP.Session != n.s.opts.Session {
			state = TaskReleased
		}
	}
	if state == "" {
		return false
	}
	for _, t := range n.s.seen.Drop(instance) {
		n.send(TaskChanged{TaskID: t.TaskID, Instance: instance, Run: t.Run, State: state})
	}
	return true
}

// lost tells of the tasks of an instance this session destroyed.
func (n *notifier) lost(instance string, tasks []holding.Seen) {
	if !n.on() {
		return
	}
	for _, t := range tasks {
		n.send(TaskChanged{TaskID: t.TaskID, Instance: instance, Run: t.Run, State: TaskLost})
	}
}

func (n *notifier) stop() {
	n.cancel()
	n.wg.Wait()
}
