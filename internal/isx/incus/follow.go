package incus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// FollowInterval is how often Exec reads the output logs of a command
// whose ExecRequest asks for its output as it runs. Incus writes the logs
// as the command prints, so reading them again from where the last read
// ended costs one small request per stream.
const FollowInterval = 250 * time.Millisecond

// follower copies an exec's output to ExecRequest.Stdout and Stderr while
// the command runs. A read that fails is tried again at the next tick: the
// output stays in the logs, and finish writes whatever the reads missed
// from the collected result.
type follower struct {
	run     *execRun
	opID    string
	streams []*followed
	halt    chan struct{}
	done    chan struct{}
}

// followed is one stream being copied.
type followed struct {
	name string // "stdout" or "stderr"
	w    io.Writer
	sent int64
	err  error
}

// follow starts copying the output of the exec opID, when the request
// asked for it; it returns nil when it did not (and a nil follower's
// methods do nothing).
func (r *execRun) follow(ctx context.Context, opID string) *follower {
	f := &follower{run: r, opID: opID, halt: make(chan struct{}), done: make(chan struct{})}
	for _, s := range []followed{{name: "stdout", w: r.req.Stdout}, {name: "stderr", w: r.req.Stderr}} {
		if s.w != nil {
			f.streams = append(f.streams, &s)
		}
	}
	if len(f.streams) == 0 {
		return nil
	}
	go f.loop(ctx)
	return f
}

func (f *follower) loop(ctx context.Context) {
	defer close(f.done)
	ticker := f.run.client.clock.NewTicker(FollowInterval)
	defer ticker.Stop()
	for {
		select {
		case <-f.halt:
			return
		case <-ctx.Done():
			return
		case <-ticker.C():
			f.poll(ctx)
		}
	}
}

// poll copies what each stream's log gained since the last poll.
func (f *follower) poll(ctx context.Context) {
	limit := f.run.outputLimit()
	for _, s := range f.streams {
		if s.err != nil || s.sent >= limit {
			continue
		}
		data, _, err := f.run.client.readLog(ctx, f.run.logPath(f.opID, s.name), s.sent, limit-s.sent)
		if err != nil || len(data) == 0 {
			continue // tried again at the next tick; finish writes what is missed
		}
		s.write(data)
	}
}

func (s *followed) write(data []byte) {
	n, err := s.w.Write(data)
	s.sent += int64(n)
	if err != nil {
		s.err = fmt.Errorf("copying the command's %s: %w", s.name, err)
	}
}

// stop ends the copying while the command's logs are still there, and
// waits for the goroutine.
func (f *follower) stop() {
	if f == nil {
		return
	}
	close(f.halt)
	<-f.done
}

// finish writes the output the polls did not get to, from the collected
// result, and says whether any write failed.
func (f *follower) finish(result *ExecResult) error {
	if f == nil {
		return nil
	}
	var errs []error
	for _, s := range f.streams {
		collected := result.Stdout
		if s.name == "stderr" {
			collected = result.Stderr
		}
		if s.err == nil && s.sent < int64(len(collected)) {
			s.write(collected[s.sent:])
		}
		if s.err != nil {
			errs = append(errs, s.err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("exec in %q: %w", f.run.instance, errors.Join(errs...))
	}
	return nil
}
