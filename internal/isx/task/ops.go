package task

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/coded"
)

// Status reads a task's state from its instance in one exec (ISX-127). A
// task the instance has no record of is StateLost, not an error (ISX-124).
func Status(ctx context.Context, ex Executor, instance, taskID string) (*Info, error) {
	if err := ValidateID(taskID); err != nil {
		return nil, withInstance(err, instance)
	}
	out, err := run(ctx, ex, instance, taskID, script{text: libScript + factsScript, args: []string{"1", taskID}})
	if err != nil {
		return nil, err
	}
	return out.only(instance, taskID)
}

// only is the status of the one task a script reported on.
func (r *scriptRun) only(instance, taskID string) (*Info, error) {
	f := r.byID[taskID]
	if f == nil {
		return nil, newError(CodeInternal, instance, taskID, "instance %q did not report on task %s", instance, taskID)
	}
	st := f.status()
	return &st, nil
}

// WaitResult is the outcome of Wait.
type WaitResult struct {
	// Changed is the first task found no longer running; nil when the
	// time ran out first.
	Changed *Info
	// Statuses holds every task asked about, in the order asked, as read
	// at the end of the wait.
	Statuses []Info
}

// MaxWaitTasks bounds how many tasks one Wait watches.
const MaxWaitTasks = 64

// waitInterval is how often the waiting script looks at the tasks. A look
// starts no process, so the cost of looking this often is the sleep.
const waitInterval = "0.05"

// Wait returns as soon as one of the tasks is no longer running, or when
// timeout has passed, whichever is first. It waits inside the instance, in
// one exec that looks every 50 ms, so it adds no host polling and notices a
// change within about 50 ms plus the exec's own cost. It returns at once
// when a task has already ended or is lost. Cancelling ctx ends the wait
// (and the exec).
func Wait(ctx context.Context, ex Executor, instance string, taskIDs []string, timeout time.Duration) (*WaitResult, error) {
	if len(taskIDs) == 0 || len(taskIDs) > MaxWaitTasks {
		return nil, newError(CodeInvalidArgument, instance, "", "wait for 1 to %d tasks, not %d", MaxWaitTasks, len(taskIDs))
	}
	for _, id := range taskIDs {
		if err := ValidateID(id); err != nil {
			return nil, withInstance(err, instance)
		}
	}
	if timeout < 0 {
		timeout = 0
	}
	centis := int64(timeout / (10 * time.Millisecond))
	args := append([]string{waitInterval, strconv.FormatInt(centis, 10)}, taskIDs...)
	out, err := run(ctx, ex, instance, soleID(taskIDs), script{
		text:    libScript + waitScript,
		args:    args,
		timeout: timeout + scriptTimeout,
	})
	if err != nil {
		return nil, err
	}
	result := &WaitResult{}
	for _, id := range taskIDs {
		st, err := out.only(instance, id)
		if err != nil {
			return nil, err
		}
		result.Statuses = append(result.Statuses, *st)
	}
	changed := out.words["changed"]
	if len(changed) == 1 && changed[0] != "-" {
		for i := range result.Statuses {
			if result.Statuses[i].ID == changed[0] {
				st := result.Statuses[i]
				result.Changed = &st
				break
			}
		}
	}
	return result, nil
}

// soleID names the task an error concerns, when there is only one.
func soleID(ids []string) string {
	if len(ids) == 1 {
		return ids[0]
	}
	return ""
}

// DefaultMaxOutputBytes is what Result keeps of each log when maxBytes is
// not positive.
const DefaultMaxOutputBytes = 32 << 10

// maxResultBytes bounds maxBytes: more would not fit an MCP answer anyway.
const maxResultBytes = 16 << 20

// Output is a finished task's result.
type Output struct {
	Status Info
	// Stdout and Stderr are the last bytes of the latest run's logs, at
	// most maxBytes of each.
	Stdout, Stderr []byte
	// StdoutBytes and StderrBytes are the logs' whole sizes.
	StdoutBytes, StderrBytes int64
	// Truncated: a log was longer than maxBytes and only its tail is here.
	Truncated bool
}

// Result returns the latest run's output and exit code (ISX-064), the tail
// of each log up to maxBytes. It is refused with CodeWrongState while the
// task runs and with CodeNotFound when the task is lost.
func Result(ctx context.Context, ex Executor, instance, taskID string, maxBytes int64) (*Output, error) {
	if err := ValidateID(taskID); err != nil {
		return nil, withInstance(err, instance)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxOutputBytes
	}
	maxBytes = min(maxBytes, maxResultBytes)
	out, err := run(ctx, ex, instance, taskID, script{
		text:      libScript + resultScript,
		args:      []string{taskID, strconv.FormatInt(maxBytes, 10)},
		maxOutput: maxBytes + 64<<10,
	})
	if err != nil {
		return nil, err
	}
	st, err := out.only(instance, taskID)
	if err != nil {
		return nil, err
	}
	switch st.State {
	case StateLost:
		return nil, lostError(instance, taskID)
	case StateRunning:
		return nil, newError(CodeWrongState, instance, taskID, "task %s is still running: wait for it (task_status with wait_seconds) or cancel it first", taskID)
	}
	_, stdout, ok := splitOutput(out.stdout)
	if !ok {
		return nil, newError(CodeInternal, instance, taskID, "instance %q sent no output for finished task %s", instance, taskID)
	}
	o := &Output{
		Status:      *st,
		Stdout:      []byte(stdout),
		Stderr:      out.stderr,
		StdoutBytes: max(st.StdoutBytes, int64(len(stdout))),
		StderrBytes: max(st.StderrBytes, int64(len(out.stderr))),
	}
	o.Truncated = o.StdoutBytes > int64(len(o.Stdout)) || o.StderrBytes > int64(len(o.Stderr))
	return o, nil
}

func lostError(instance, taskID string) error {
	return newError(CodeNotFound, instance, taskID, "instance %q has no record of task %s (it is lost): it was removed, or the instance was replaced", instance, taskID)
}

// Cancellation is the outcome of Cancel.
type Cancellation struct {
	Status Info // as read after the cancel
	// AlreadyEnded: the task had ended before; nothing was done.
	AlreadyEnded bool
}

// Cancel stops a task's latest run with everything it started (ISX-065):
// TERM to the whole unit (or process group), then KILL after 2 s. The exit
// file then says 143 when TERM ended the command, 137 when KILL was needed
// (a runner killed too is recorded so by Cancel), the command's own status
// if it handled TERM and exited, or NoExitCode when the run had not started.
// Cancelling a task that already ended does nothing and says so; a lost
// task is CodeNotFound. Cancel returns after the processes are gone.
func Cancel(ctx context.Context, ex Executor, instance, taskID string) (*Cancellation, error) {
	if err := ValidateID(taskID); err != nil {
		return nil, withInstance(err, instance)
	}
	cancel := libScript + cancelScript
	out, err := run(ctx, ex, instance, taskID, script{text: rootCancelScript, args: []string{cancel, taskID}, root: true})
	if err != nil {
		return nil, wrapLost(err)
	}
	if out.exitCode == exitNoUnits {
		out, err = run(ctx, ex, instance, taskID, script{text: cancel, args: []string{"begin", taskID}})
		if err != nil {
			return nil, wrapLost(err)
		}
		if out.exitCode == exitLaunch {
			// A unit's run on an instance that now lacks systemd (or
			// setpriv): nothing can stop it but its record can be closed.
			out, err = run(ctx, ex, instance, taskID, script{text: cancel, args: []string{"finish", taskID}})
			if err != nil {
				return nil, err
			}
		}
	}
	st, err := out.only(instance, taskID)
	if err != nil {
		return nil, err
	}
	_, ended := out.words["ended"]
	return &Cancellation{Status: *st, AlreadyEnded: ended}, nil
}

func wrapLost(err error) error {
	if e, ok := err.(*coded.Error); ok && e.Code == CodeNotFound && e.About["task_id"] != "" && strings.Contains(e.Message, "has no record") {
		return lostError(e.About["instance"], e.About["task_id"])
	}
	return err
}

// List reads every task record in the instance in one exec: id, kind,
// state, key and creation time are in each Status (log sizes are not read:
// they are -1).
func List(ctx context.Context, ex Executor, instance string) ([]Info, error) {
	out, err := run(ctx, ex, instance, "", script{text: libScript + listScript})
	if err != nil {
		return nil, err
	}
	list := make([]Info, 0, len(out.tasks))
	for _, f := range out.tasks {
		list = append(list, f.status())
	}
	return list, nil
}

// FindByKey returns the task an idempotency key made, or CodeNotFound when
// it made none (or what it made is gone, which frees the key: ISX-164).
func FindByKey(ctx context.Context, ex Executor, instance, key string) (*Info, error) {
	if err := ValidateKey(key); err != nil {
		return nil, withInstance(err, instance)
	}
	out, err := run(ctx, ex, instance, "", script{text: libScript + findScript, args: []string{key}})
	if err != nil {
		return nil, err
	}
	if len(out.tasks) != 1 {
		return nil, newError(CodeNotFound, instance, "", "idempotency key %q made no task that instance %q still has", key, instance)
	}
	st := out.tasks[0].status()
	return &st, nil
}

// Clear stops every task of the instance and removes every record, with the
// keys they held; it returns how many records it removed. It is for an
// instance forked from another (create_instance from_instance), whose copied
// records are not its own.
func Clear(ctx context.Context, ex Executor, instance string) (int, error) {
	clear := libScript + clearScript
	out, err := run(ctx, ex, instance, "", script{text: rootClearScript, args: []string{clear}, root: true})
	if err != nil {
		return 0, err
	}
	if out.exitCode == exitNoUnits {
		if out, err = run(ctx, ex, instance, "", script{text: clear}); err != nil {
			return 0, err
		}
	}
	words := out.words["cleared"]
	if len(words) != 1 {
		return 0, newError(CodeInternal, instance, "", "instance %q did not say how many task records it removed", instance)
	}
	n, err := strconv.Atoi(words[0])
	if err != nil {
		return 0, newError(CodeInternal, instance, "", "instance %q gave a bad count of removed task records: %q", instance, Clip(words[0], 20))
	}
	return n, nil
}

// AttachCommand is the command, to run as the agent user with a terminal,
// that joins a person to a task's conversation: it marks the task attached
// for as long as argv (the agent's resume command) runs, as isx shell
// --task will. A finished delegate reads StateAttached meanwhile (ISX-123).
func AttachCommand(taskID string, argv []string) ([]string, error) {
	if err := ValidateID(taskID); err != nil {
		return nil, err
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("task: attach to %s: no command given", taskID)
	}
	return append([]string{"sh", "-c", attachScript, "isx-attach", taskID}, argv...), nil
}
