// Package tasks runs started executions — callable agents' tasks — on
// workers of every actiond process sharing a database, and keeps nothing
// RUNNING that nobody runs. A start records the task QUEUED (Start, through
// engine.Tasks); any process's worker claims it (SQLite: the one process;
// Postgres: FOR UPDATE SKIP LOCKED, so each is claimed once), runs an
// attempt through package agent, and ends it SUCCEEDED, FAILED, CANCELLED,
// RETRY_SCHEDULED (another attempt follows) or EXHAUSTED (its retries ran
// out), every write fenced by the attempt's claim so a worker that lost its
// task can record nothing more.
//
// Each process records itself and keeps a heartbeat (liveness.go). When a
// process stops beating, whichever process notices first — or the next to
// start — settles what it left: its tasks are retried or exhausted, and the
// requests it was serving are FAILED with a code of their own.
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/actiond/agent"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
)

// Runner runs one attempt of a task; *agent.Runner is one.
type Runner interface {
	Run(ctx context.Context, a agent.Attempt) agent.Result
}

// Options configure a Service.
type Options struct {
	Store  *store.Store
	Runner Runner
	IDs    engine.IDs
	Clock  clock.Clock
	Logger *slog.Logger
	// Process names this process in the store: the owner of what it runs.
	Process string
	// Workers bounds the attempts this process runs at once (default 4).
	Workers int
	// Liveness is how long a process may go without a heartbeat before
	// others settle what it left (default 15 s). It beats three times as
	// often.
	Liveness time.Duration
	// Poll is how often the process looks for tasks other processes
	// queued, and for cancellations of its own (default 1 s).
	Poll time.Duration
	// Limits bound the unfinished tasks of a session and of a user
	// (default 32 each).
	Limits store.TaskLimits
	// Backoff is the wait before retry n (1, 2, …): default 1 s doubled
	// each time, at most a minute.
	Backoff func(retry int) time.Duration
	// Sole says the process is its database's only one (SQLite): at start,
	// whatever others left RUNNING is settled at once.
	Sole bool
}

// Service is one process's workers.
type Service struct {
	opts Options

	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}
	closed chan struct{}

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
}

// Why an attempt's context ended, besides its own deadline.
var (
	errCancelled = errors.New("the task was cancelled")
	errShutdown  = errors.New("the process is shutting down")
	errLeaseLost = errors.New("the task was recovered by another process")
)

// New makes a service; Open starts it.
func New(opts Options) *Service {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Liveness <= 0 {
		opts.Liveness = 15 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Limits.PerSession == 0 {
		opts.Limits.PerSession = 32
	}
	if opts.Limits.PerUser == 0 {
		opts.Limits.PerUser = 32
	}
	if opts.Backoff == nil {
		opts.Backoff = func(retry int) time.Duration {
			return min(time.Second<<min(retry-1, 6), time.Minute)
		}
	}
	return &Service{opts: opts, wake: make(chan struct{}, 1), closed: make(chan struct{}), running: map[string]context.CancelCauseFunc{}}
}

// Open records the process, settles what dead processes left, and starts
// the workers.
func (s *Service) Open(ctx context.Context) error {
	err := s.opts.Store.Write(ctx, func(tx *store.Tx) error { return tx.RegisterProcess(ctx, s.opts.Process) })
	if err != nil {
		return fmt.Errorf("tasks: register this process: %w", err)
	}
	before := s.opts.Clock.Now().Add(-s.opts.Liveness)
	if s.opts.Sole {
		before = s.opts.Clock.Now().Add(time.Second)
	}
	if err := s.sweep(ctx, before); err != nil {
		return fmt.Errorf("tasks: settle what stopped processes left: %w", err)
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.loop()
	return nil
}

// Close stops the workers: running attempts are given back to be claimed
// again, and the process forgets itself.
func (s *Service) Close() {
	if s.stop == nil {
		return
	}
	select {
	case <-s.closed:
		return
	default:
		close(s.closed)
	}
	s.mu.Lock()
	for _, cancel := range s.running {
		cancel(errShutdown)
	}
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	ctx := context.Background()
	if err := s.opts.Store.Write(ctx, func(tx *store.Tx) error { return tx.ForgetProcess(ctx, s.opts.Process) }); err != nil {
		s.opts.Logger.Warn("tasks: forget this process", "err", err)
	}
}

func (s *Service) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop claims tasks when woken and on every poll, and keeps the process's
// heartbeat, cancellations and sweeps, all on one goroutine: a claim and
// the check for the process's own forgotten tasks never overlap.
func (s *Service) loop() {
	defer s.wg.Done()
	ticker := s.opts.Clock.NewTicker(s.opts.Poll)
	defer ticker.Stop()
	beat := s.opts.Liveness / 3
	lastBeat := s.opts.Clock.Now()
	for {
		s.claim()
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		case <-ticker.C():
			s.pollCancellations()
			if now := s.opts.Clock.Now(); now.Sub(lastBeat) >= beat {
				lastBeat = now
				s.heartbeat()
			}
		}
	}
}

// claim claims as many tasks as there are free workers, and starts them.
func (s *Service) claim() {
	for s.ctx.Err() == nil {
		s.mu.Lock()
		free := s.opts.Workers - len(s.running)
		s.mu.Unlock()
		if free <= 0 {
			return
		}
		var claimed []*store.Task
		err := s.opts.Store.Write(s.ctx, func(tx *store.Tx) error {
			var err error
			claimed, err = tx.ClaimTasks(s.ctx, s.opts.Process, free)
			return err
		})
		if err != nil {
			if s.ctx.Err() == nil {
				s.opts.Logger.Warn("tasks: claim", "err", err)
			}
			return
		}
		for _, t := range claimed {
			s.begin(t)
		}
		if len(claimed) < free {
			return
		}
	}
}

func (s *Service) begin(t *store.Task) {
	ctx, cancel := context.WithCancelCause(s.ctx)
	s.mu.Lock()
	s.running[t.ExecutionID] = cancel
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel(nil)
		s.execute(ctx, t)
		s.mu.Lock()
		delete(s.running, t.ExecutionID)
		s.mu.Unlock()
		s.notify()
	}()
}

// execute runs one attempt and records how it ended.
func (s *Service) execute(ctx context.Context, t *store.Task) {
	lease := t.Lease()
	var spec agent.Spec
	if err := json.Unmarshal(t.Spec, &spec); err != nil {
		s.end(t, ending{status: store.Failed, failure: engine.NewFailure(engine.CodeNotRunnable,
			"The task's start record cannot be read.", "Start the task again.").WithDetail(err.Error())})
		return
	}
	record := func(ctx context.Context, executions []*store.Execution) error {
		if len(executions) == 0 {
			return nil
		}
		return s.opts.Store.Write(ctx, func(tx *store.Tx) error {
			if _, err := tx.HoldLease(ctx, lease); err != nil {
				return err
			}
			return tx.InsertExecutions(ctx, executions)
		})
	}
	res := s.opts.Runner.Run(ctx, agent.Attempt{TaskID: t.ExecutionID, Spec: spec, Record: record})
	how := s.verdict(t, spec, res, context.Cause(ctx))
	how.recorded = res.Recorded
	s.end(t, how)
}

// ending is how an attempt ends.
type ending struct {
	status   string
	output   any
	failure  *engine.Failure
	work     *store.Work
	apply    bool
	release  bool
	lost     bool
	runAfter time.Time
	// recorded are executions of the attempt to record with its end: the
	// exchange that gave the final answer.
	recorded []*store.Execution
}

func (s *Service) verdict(t *store.Task, spec agent.Spec, res agent.Result, cause error) ending {
	switch {
	case errors.Is(cause, errLeaseLost) || errors.Is(res.Err, store.ErrLeaseLost):
		return ending{lost: true}
	case errors.Is(cause, errCancelled):
		return ending{status: store.Cancelled}
	case errors.Is(cause, errShutdown) || s.ctx.Err() != nil:
		return ending{release: true}
	case res.Interrupted:
		failure := engine.NewFailure(agent.CodeRecordFailed, "The agent could not record what it did.", "The task retries when its execution settings allow.")
		if res.Err != nil {
			failure.WithDetail(res.Err.Error())
		}
		return s.failed(t, failure, true)
	case res.Failure != nil:
		return s.failed(t, res.Failure, res.Retryable)
	}
	return ending{status: store.Succeeded, output: res.Output, work: res.Work, apply: !spec.Preview}
}

// failed is a failed attempt: retried while retries remain when the cause
// may pass, EXHAUSTED when they ran out, FAILED otherwise.
func (s *Service) failed(t *store.Task, failure *engine.Failure, retryable bool) ending {
	switch {
	case !retryable:
		return ending{status: store.Failed, failure: failure}
	case t.Attempt < t.MaxAttempts:
		return ending{status: store.RetryScheduled, failure: failure, runAfter: s.opts.Clock.Now().Add(s.opts.Backoff(t.Attempt))}
	}
	return ending{status: store.Exhausted, failure: failure}
}

// end records how the attempt ended, retrying while the database does not
// answer, until it does, the claim is lost, or the process stops.
func (s *Service) end(t *store.Task, how ending) {
	lease := t.Lease()
	if how.lost {
		return
	}
	for try := 1; ; try++ {
		err := s.opts.Store.Write(context.Background(), func(tx *store.Tx) error { return s.endIn(tx, lease, how) })
		if how.status == store.Succeeded && (errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrContention)) {
			// Its writes conflicted with someone else's: they were not
			// applied, and another attempt may succeed.
			recorded := how.recorded
			how = s.failed(t, engine.NewFailure("mcp_transaction_error", "The agent's writes conflicted with another request's, so none was applied.",
				"The task retries when its execution settings allow; otherwise start it again.").WithDetail(err.Error()), true)
			how.recorded = recorded
			continue
		}
		if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrSettled) || errors.Is(err, store.ErrNotFound) {
			if err != nil {
				s.opts.Logger.Info("tasks: attempt ended elsewhere", "task", lease.ExecutionID, "err", err)
			}
			return
		}
		s.opts.Logger.Warn("tasks: record the end of an attempt", "task", lease.ExecutionID, "try", try, "err", err)
		select {
		case <-s.closed:
			return // the next process to notice settles it
		case <-s.opts.Clock.After(min(time.Duration(try)*200*time.Millisecond, 2*time.Second)):
		}
	}
}

func (s *Service) endIn(tx *store.Tx, lease store.Lease, how ending) error {
	ctx := context.Background()
	t, err := tx.HoldLease(ctx, lease)
	if err != nil {
		return err
	}
	if err := tx.InsertExecutions(ctx, how.recorded); err != nil {
		return err
	}
	if len(t.Cancel) > 0 && how.status != store.Succeeded {
		how = ending{status: store.Cancelled}
	}
	if how.release {
		return tx.ReleaseTask(ctx, lease)
	}
	e := &store.Execution{ID: t.ExecutionID, Status: how.status}
	switch how.status {
	case store.Succeeded:
		if how.work != nil {
			if how.apply {
				if err := tx.Apply(ctx, how.work); err != nil {
					return err
				}
			}
			e.WriteSet = how.work.Writes()
		}
		if e.Output, err = json.Marshal(how.output); err != nil {
			return fmt.Errorf("tasks: encode the agent's output: %w", err)
		}
	case store.Cancelled:
		e.CancelledBy = t.Cancel
	default:
		e.Error = errorJSON(how.failure)
	}
	if how.status != store.Succeeded {
		if err := tx.MarkRolledBack(ctx, t.ExecutionID, t.ExecutionID); err != nil {
			return err
		}
	}
	return tx.EndTask(ctx, lease, e, how.runAfter)
}

func errorJSON(f *engine.Failure) json.RawMessage {
	if f == nil {
		return nil
	}
	out, _ := json.Marshal(map[string]any{"code": f.Code, "message": f.Message, "hint": f.Hint, "detail": f.Detail})
	return out
}

// pollCancellations stops the attempts this process runs whose task was
// cancelled through another process.
func (s *Service) pollCancellations() {
	s.mu.Lock()
	busy := len(s.running) > 0
	s.mu.Unlock()
	if !busy {
		return
	}
	var asked []*store.Task
	err := s.opts.Store.Read(s.ctx, func(tx *store.Tx) error {
		var err error
		asked, err = tx.CancelRequests(s.ctx, s.opts.Process)
		return err
	})
	if err != nil {
		return
	}
	for _, t := range asked {
		s.interrupt(t.ExecutionID, errCancelled)
	}
}

func (s *Service) interrupt(id string, cause error) {
	s.mu.Lock()
	cancel, ok := s.running[id]
	s.mu.Unlock()
	if ok {
		cancel(cause)
	}
}
