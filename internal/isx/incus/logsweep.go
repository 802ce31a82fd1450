package incus

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Exec output logs are deleted once the client has no exec in flight for a
// moment, or once many are waiting: deleting each right after its exec made
// Incus do that work while the next exec was starting, which slowed a
// string of execs more than the deletes themselves cost.
const (
	logSweepIdle = 200 * time.Millisecond
	logSweepMax  = 64
)

type logSweeper struct {
	mu sync.Mutex
	// paths keep the client that queued them: clients made with InProject
	// share the sweeper, and a log is deleted in its own project.
	paths    []queuedLog
	inFlight int
	timer    *time.Timer
}

type queuedLog struct {
	client *Client
	path   string
}

// execStarted and execEnded bracket an exec, so deletes wait for a pause.
func (c *Client) execStarted() {
	s := c.logs
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight++
	if s.timer != nil {
		s.timer.Stop()
	}
}

func (c *Client) execEnded() {
	s := c.logs
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	c.scheduleSweepLocked()
}

// deleteLogLater queues a log for deletion.
func (c *Client) deleteLogLater(path string) {
	s := c.logs
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paths = append(s.paths, queuedLog{client: c, path: path})
	if len(s.paths) >= logSweepMax {
		c.sweepLocked()
		return
	}
	c.scheduleSweepLocked()
}

func (c *Client) scheduleSweepLocked() {
	s := c.logs
	if s.inFlight > 0 || len(s.paths) == 0 {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = time.AfterFunc(logSweepIdle, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.inFlight == 0 {
			c.sweepLocked()
		}
	})
}

// sweepLocked deletes the queued logs in the background; Settle waits for
// them.
func (c *Client) sweepLocked() {
	paths := c.logs.paths
	c.logs.paths = nil
	if len(paths) == 0 {
		return
	}
	c.background(func() error {
		var first error
		for _, log := range paths {
			if err := log.delete(); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
}

// delete removes the log, asking once more when the first request ran out
// of time: a daemon busy deleting instances can leave one request waiting
// past its deadline and answer the next at once.
func (log queuedLog) delete() error {
	var err error
	for range 2 {
		err = withBackgroundTimeout(func(ctx context.Context) error { return log.client.deleteLog(ctx, log.path) })
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return err
}

// flushLogs starts deleting every queued log now.
func (c *Client) flushLogs() {
	s := c.logs
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	c.sweepLocked()
}
