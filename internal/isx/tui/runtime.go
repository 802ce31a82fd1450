package tui

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/task"
)

// runtime runs what the model asks for away from the event loop, and
// hands the outcome back as a message. Every goroutine it starts ends with
// its context, and Run waits for them all.
type runtime struct {
	ctx   context.Context
	wg    sync.WaitGroup
	send  func(tea.Msg)
	reads chan struct{} // bounds the task reads running at once
}

// maxTaskReads bounds the instances whose tasks are read at the same time:
// each read is an exec in that instance.
const maxTaskReads = 4

func newRuntime(ctx context.Context) *runtime {
	return &runtime{ctx: ctx, reads: make(chan struct{}, maxTaskReads)}
}

// spawn runs f in a goroutine and sends what it returns (nothing for nil).
func (rt *runtime) spawn(f func(ctx context.Context) tea.Msg) {
	rt.wg.Go(func() {
		if msg := f(rt.ctx); msg != nil {
			rt.send(msg)
		}
	})
}

// Messages from the runtime to the model.
type (
	listingMsg struct {
		listing *Listing
		err     error
	}
	// changedMsg: Incus says an instance changed.
	changedMsg struct{ instance string }
	// streamMsg: the event stream is up (err nil) or went down.
	streamMsg struct{ err error }
	tasksMsg  struct {
		instance, fingerprint string
		infos                 []task.Info
		err                   error
	}
	// taskChangedMsg: a task watched in its instance is no longer running
	// (or the watch ended): read the instance's tasks again.
	taskChangedMsg struct {
		instance string
		err      error
	}
	activityMsg struct {
		counts map[string]Activity
		at     time.Time
		err    error
	}
	tickMsg struct{}
)

// Backoff between attempts to reach Incus again.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// watchEvents follows the daemon's lifecycle events and says which
// instances changed. When the stream breaks it says so and subscribes
// again, waiting longer after each failure. It subscribes before the
// model reads anything, so that no change falls between a read and the
// subscription.
func (rt *runtime) watchEvents(client Incus, clk clock.Clock) {
	rt.wg.Go(func() {
		backoff := minBackoff
		for rt.ctx.Err() == nil {
			stream, err := client.Events(rt.ctx, incus.EventLifecycle)
			if err != nil {
				if rt.ctx.Err() != nil {
					return
				}
				rt.send(streamMsg{err: err})
				select {
				case <-rt.ctx.Done():
					return
				case <-clk.After(backoff):
				}
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			backoff = minBackoff
			rt.send(streamMsg{})
			for event := range stream.Events {
				if name, ok := listed(event); ok {
					rt.send(changedMsg{instance: name})
				}
			}
			if rt.ctx.Err() != nil {
				return
			}
			rt.send(streamMsg{err: stream.Err()})
		}
	})
}

// listedActions are the lifecycle events that change what the TUI shows.
// Execs, file and log transfers are left out: the TUI's own task reads
// make them, and they change nothing on screen.
var listedActions = map[string]bool{
	"instance-created": true, "instance-deleted": true, "instance-updated": true,
	"instance-renamed": true, "instance-started": true, "instance-stopped": true,
	"instance-shutdown": true, "instance-restarted": true, "instance-paused": true,
	"instance-resumed": true, "instance-restored": true,
}

func listed(event incus.Event) (string, bool) {
	life, err := event.Lifecycle()
	if err != nil || !listedActions[life.Action] {
		return "", false
	}
	name := life.Instance()
	return name, name != ""
}

// ticks sends a tick every second, for ages and idle times on screen.
func (rt *runtime) ticks(clk clock.Clock) {
	rt.wg.Go(func() {
		for {
			select {
			case <-rt.ctx.Done():
				return
			case <-clk.After(time.Second):
				rt.send(tickMsg{})
			}
		}
	})
}

// activityRetry is how long the TUI waits before it asks the host proxy
// again after it could not reach it or the proxy stopped.
const activityRetry = 2 * time.Second

// watchActivity relays the host proxy's counts, and reconnects when the
// proxy is not running yet or stops (isx branch or isx mcp may start it
// while the TUI is open).
func (rt *runtime) watchActivity(source Activities, clk clock.Clock) {
	rt.wg.Go(func() {
		for rt.ctx.Err() == nil {
			counts, err := source.Watch(rt.ctx)
			if err == nil {
				for snapshot := range counts {
					rt.send(activityMsg{counts: snapshot, at: clk.Now()})
				}
				err = errProxyGone
			}
			rt.send(activityMsg{err: err})
			select {
			case <-rt.ctx.Done():
			case <-clk.After(activityRetry):
			}
		}
	})
}

// errProxyGone is what the screens say once the proxy's stream ended.
var errProxyGone = errors.New("the host proxy stopped answering")

// readTasks lists an instance's task records (one exec in it).
func (rt *runtime) readTasks(client Incus, name, fingerprint string) {
	rt.spawn(func(ctx context.Context) tea.Msg {
		select {
		case rt.reads <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		defer func() { <-rt.reads }()
		infos, err := task.List(ctx, client, name)
		return tasksMsg{instance: name, fingerprint: fingerprint, infos: infos, err: err}
	})
}

// waitTimeout is how long one watch of running tasks lasts before it is
// renewed.
const waitTimeout = 5 * time.Minute

// waitTasks watches running tasks from inside their instance (task.Wait
// looks every 50 ms there, without a process on the host polling) and says
// when one of them stops running. It returns the watch's cancel.
func (rt *runtime) waitTasks(client Incus, name string, ids []string) context.CancelFunc {
	ctx, cancel := context.WithCancel(rt.ctx)
	rt.wg.Go(func() {
		_, err := task.Wait(ctx, client, name, ids, waitTimeout)
		if ctx.Err() != nil {
			return
		}
		rt.send(taskChangedMsg{instance: name, err: err})
	})
	return cancel
}

// idsKey names a set of task ids, to tell whether a watch covers them.
func idsKey(ids []string) string { return strings.Join(ids, " ") }
