package incus_test

import (
	"context"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// The event stream is how later packages watch Incus (and how tests prove
// that nothing was exec'd, ISX-150, ISX-170): starting an instance shows up
// as a lifecycle event of the project.
func TestEventsSeeInstanceStart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)
	createStopped(t, c, "watched", nil)

	streamCtx, stop := context.WithCancel(ctx)
	stream, err := c.Events(streamCtx, incus.EventLifecycle, incus.EventOperation)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartInstance(ctx, "watched"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "watched", incus.ExecRequest{Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	var started, execd, operations bool
	timeout := time.After(10 * time.Second)
	for !started || !execd || !operations {
		select {
		case event, ok := <-stream.Events:
			if !ok {
				t.Fatalf("stream ended: %v", stream.Err())
			}
			if event.Project != c.ProjectName() {
				t.Errorf("event of project %q in a stream of %q", event.Project, c.ProjectName())
			}
			switch event.Type {
			case incus.EventOperation:
				operations = true
			case incus.EventLifecycle:
				life, err := event.Lifecycle()
				if err != nil {
					t.Fatal(err)
				}
				if life.Instance() != "watched" {
					continue
				}
				started = started || life.Action == "instance-started"
				execd = execd || life.Action == "instance-exec"
			default:
				t.Errorf("event of type %q, not subscribed", event.Type)
			}
		case <-timeout:
			t.Fatalf("events seen: started %v, exec %v, operations %v", started, execd, operations)
		}
	}

	stop()
	select {
	case _, ok := <-stream.Events:
		for ok {
			_, ok = <-stream.Events
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end after its context was cancelled")
	}
	if err := stream.Err(); err != nil {
		t.Errorf("Err() after cancellation = %v, want nil", err)
	}
}
