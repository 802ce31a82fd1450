package gateway

import (
	"context"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// countingTasks is a unit-test seam beside TestReplayCancelsNothing: it
// counts what is asked of the endpoint's tasks.
type countingTasks struct{ starts, cancels int }

func (c *countingTasks) Start(context.Context, engine.TaskStart) (engine.Task, error) {
	c.starts++
	return engine.Task{ID: "started", Status: store.Queued}, nil
}

func (c *countingTasks) Get(_ context.Context, _ engine.TaskScope, id string) (engine.Task, error) {
	return engine.Task{ID: id, Status: store.Running}, nil
}

func (c *countingTasks) Cancel(_ context.Context, _ engine.TaskScope, id string, _ engine.CancelledBy) (engine.Task, error) {
	c.cancels++
	return engine.Task{ID: id, Status: store.Cancelled}, nil
}

// ACT-560: a replay's cancel reads the task as it is and never asks the
// endpoint's tasks to cancel it; a working task stays working.
func TestReplayTasksCancelNothing(t *testing.T) {
	inner := &countingTasks{}
	tasks := replayTasks{inner: inner, reader: ReplayPrincipal{Root: true}}
	task, err := tasks.Cancel(context.Background(), engine.TaskScope{}, "t1", engine.CancelledBy{ExecutionID: "replay"})
	if err != nil || task.Status != store.Running || inner.cancels != 0 || inner.starts != 0 {
		t.Errorf("a replay's cancel: %+v %v, %d cancels asked", task, err, inner.cancels)
	}
}
