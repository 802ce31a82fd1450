package incus

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxStdinBytes is the most stdin Exec accepts.
const MaxStdinBytes = 1 << 20

// DefaultMaxOutputBytes caps each of stdout and stderr when
// ExecRequest.MaxOutputBytes is zero.
const DefaultMaxOutputBytes = 8 << 20

// killGrace bounds the clean-up after a timeout or cancellation: killing the
// process group and waiting for the exec to end.
const killGrace = 10 * time.Second

// collectTimeout bounds reading an ended exec's output logs. It is longer
// than killGrace: the command has run to its end, and losing what it said
// because a busy daemon took more than a few seconds to serve two small
// files (seen on a loaded 2-core CI host) would throw its work away.
const collectTimeout = 30 * time.Second

// ExecRequest is a command to run inside an instance.
type ExecRequest struct {
	Command []string // argv; Command[0] is looked up in PATH
	// Env is added to (and overrides) Incus's default environment: PATH,
	// LANG, and for root HOME and USER; other users get no HOME unless set.
	Env   map[string]string
	Cwd   string // working directory; empty: / (or /root for root)
	UID   uint32 // user to run as (0: root)
	GID   uint32 // group to run as (0: root)
	Stdin []byte // at most MaxStdinBytes; empty: /dev/null
	// Timeout kills the command and everything it started after this long;
	// zero means no timeout.
	Timeout time.Duration
	// MaxOutputBytes caps how much of each of stdout and stderr is kept in
	// memory (DefaultMaxOutputBytes when zero); the rest is counted and
	// dropped.
	MaxOutputBytes int64
	// Stdout and Stderr, when set, are given the command's output while it
	// runs, as Incus records it (read every FollowInterval), and the rest
	// once it ended; the result holds the output all the same. They are
	// written from one goroutine at a time, never concurrently.
	Stdout, Stderr io.Writer
}

// ExecResult is how a command ended and what it printed.
type ExecResult struct {
	// ExitCode is the command's exit status; 128+n when a signal n ended it
	// (137 after a timeout or cancellation killed it); -1 when it was
	// cancelled before it started.
	ExitCode    int
	Stdout      []byte
	Stderr      []byte
	StdoutBytes int64 // bytes the command wrote to stdout, kept or not
	StderrBytes int64
	Truncated   bool // a stream was longer than MaxOutputBytes
	TimedOut    bool // Timeout passed and the command was killed
	Cancelled   bool // the context ended and the command was killed
	Duration    time.Duration
}

// The command runs under two small sh scripts, so that a timeout or a
// cancellation can kill it and everything it started with a second exec.
// Both carry "isx-exec <id>" as their third and fourth arguments, which is
// how execKiller finds them in /proc; nothing is written on the way in, so
// an exec costs no more than the processes it starts. (The id is hex, a
// fixed regular expression: busybox grep -F does not match across the NULs
// of a cmdline.)

// execLauncher makes the wrapper a session leader when setsid exists, so its
// pid names a process group that holds the command and every child that
// outlives its parent.
const execLauncher = `id=$1; s=$2; shift 2
if command -v setsid >/dev/null 2>&1; then exec setsid sh -c "$s" isx-exec "$id" "$@"; fi
exec sh -c "$s" isx-exec "$id" "$@"`

// execWrapper refuses to start once a kill was requested (the killer marks
// first and looks for the wrapper second, so one of the two always sees the
// other), takes stdin from a pushed file, changes directory and runs the
// command as its child (not exec: the wrapper must stay findable).
const execWrapper = `f=/var/tmp/.isx-exec-$1; in=$2; dir=$3; shift 3
if [ -e "$f.kill" ]; then rm -f "$f.kill" "$f.in"; exit 137; fi
if [ "$in" = 1 ]; then exec <"$f.in"; rm -f "$f.in"; fi
if [ -n "$dir" ]; then cd "$dir" || exit 1; fi
"$@"
exit $?`

// execKiller kills the wrapper's process group or, when the wrapper could
// not become a session leader, the wrapper and its descendants. When the
// wrapper is not running (yet) the mark stays, owned by the exec's user so
// that a wrapper starting later removes it and stops.
const execKiller = `f=/var/tmp/.isx-exec-$1
: >"$f.kill"
pid=
for c in $(grep -l -- "$1" /proc/[0-9]*/cmdline 2>/dev/null); do
  if [ "$(tr '\n\0' ' \n' <"$c" 2>/dev/null | sed -n 4,5p | tr '\n' ' ')" = "isx-exec $1 " ]; then
    pid=${c#/proc/}; pid=${pid%/cmdline}; break
  fi
done
if [ -z "$pid" ]; then chown "$2" "$f.kill" 2>/dev/null; exit 3; fi
kids() { for s in /proc/[0-9]*/stat; do read -r l <"$s" 2>/dev/null || continue; r=${l##*) }; pp=${r#* }; pp=${pp%% *}; if [ "$pp" = "$1" ]; then p=${s#/proc/}; echo "${p%/stat}"; fi; done; }
tree() { kill -STOP "$1" 2>/dev/null; echo "$1"; for k in $(kids "$1"); do tree "$k"; done; }
if ! kill -9 -"$pid" 2>/dev/null; then for p in $(tree "$pid"); do kill -9 "$p" 2>/dev/null; done; fi
rm -f "$f.kill" "$f.in"`

// killerFoundNothing is execKiller's exit code when no wrapper was running.
const killerFoundNothing = 3

// Exec runs a command in a running instance and returns its exit code and
// output. Incus records the output to log files, which Exec reads (up to
// MaxOutputBytes each) and has deleted in the background (see Settle). On
// Timeout the command and its process group are killed and the result says
// TimedOut (err is nil). When ctx ends they are killed too, and Exec returns
// promptly with a result that says Cancelled and an error wrapping ctx's
// error. Stdin is pushed to a file in /var/tmp and redirected.
func (c *Client) Exec(ctx context.Context, instance string, req ExecRequest) (*ExecResult, error) {
	if err := req.validate(); err != nil {
		return nil, fmt.Errorf("exec in %q: %w", instance, err)
	}
	id, err := c.newID()
	if err != nil {
		return nil, err
	}
	begin := c.clock.Now()
	c.execStarted()
	defer c.execEnded()
	run := &execRun{client: c, instance: instance, id: id, req: req}
	result, err := run.do(ctx)
	if result != nil {
		result.Duration = c.clock.Now().Sub(begin)
	}
	return result, err
}

func (r ExecRequest) validate() error {
	if len(r.Command) == 0 || r.Command[0] == "" {
		return errors.New("no command given")
	}
	if len(r.Stdin) > MaxStdinBytes {
		return fmt.Errorf("%w: %d bytes given, at most %d (1 MiB) accepted; push larger input as a file",
			ErrStdinTooLarge, len(r.Stdin), MaxStdinBytes)
	}
	if r.Timeout < 0 {
		return fmt.Errorf("negative timeout %s", r.Timeout)
	}
	if r.MaxOutputBytes < 0 {
		return fmt.Errorf("negative MaxOutputBytes %d", r.MaxOutputBytes)
	}
	for _, arg := range r.Command {
		if strings.ContainsRune(arg, 0) {
			return errors.New("command arguments must not contain NUL bytes")
		}
	}
	return nil
}

func (c *Client) newID() (string, error) {
	raw := make([]byte, 8)
	if _, err := io.ReadFull(c.random, raw); err != nil {
		return "", fmt.Errorf("incus: reading random id: %w", err)
	}
	return hex.EncodeToString(raw), nil
}

// execRun is one Exec call in progress.
type execRun struct {
	client   *Client
	instance string
	id       string
	req      ExecRequest
}

// The helper files live in /var/tmp: systemd empties /tmp while an
// instance boots, which can be while the first exec already runs.
func (r *execRun) stdinPath() string { return "/var/tmp/.isx-exec-" + r.id + ".in" }
func (r *execRun) killPath() string  { return "/var/tmp/.isx-exec-" + r.id + ".kill" }

type execMetadata struct {
	Return int `json:"return"`
}

type waitOutcome struct {
	op  *Operation
	err error
}

func (r *execRun) do(ctx context.Context) (*ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return &ExecResult{Cancelled: true, ExitCode: -1}, fmt.Errorf("exec in %q cancelled before it started: %w", r.instance, context.Cause(ctx))
	}
	// The clean-up after a kill must still run when ctx has ended.
	detached := context.WithoutCancel(ctx)
	opID, maybeStarted, err := r.launch(ctx)
	if err != nil {
		return r.failedToStart(ctx, detached, err, maybeStarted)
	}
	result := &ExecResult{}
	follow := r.follow(ctx, opID)
	outcome := r.await(ctx, detached, opID, result)
	follow.stop()
	collectCtx, cancel := context.WithTimeout(detached, collectTimeout)
	defer cancel()
	collectErr := errors.Join(r.collect(collectCtx, opID, result), follow.finish(result))
	exitCode, err := execExitCode(outcome)
	if err != nil {
		return nil, fmt.Errorf("exec in %q: %w", r.instance, err)
	}
	result.ExitCode = exitCode
	if collectErr != nil {
		return nil, collectErr
	}
	if result.Cancelled {
		return result, fmt.Errorf("exec in %q cancelled: %w", r.instance, context.Cause(ctx))
	}
	return result, nil
}

// launch pushes stdin and starts the exec. On failure, maybeStarted says
// whether the command may be running anyway (the request was sent).
func (r *execRun) launch(ctx context.Context) (opID string, maybeStarted bool, err error) {
	if len(r.req.Stdin) > 0 {
		err := r.client.pushFile(ctx, r.instance, r.stdinPath(), bytes.NewReader(r.req.Stdin),
			FileOptions{Mode: 0o600, UID: r.req.UID, GID: r.req.GID})
		if err != nil {
			return "", false, err
		}
	}
	op, err := r.client.start(ctx, r.execRequest())
	if err != nil {
		return "", true, fmt.Errorf("exec in %q: %w", r.instance, err)
	}
	return op.ID, false, nil
}

// await waits for the exec to end; on timeout or cancellation it kills the
// command and waits for that, marking result TimedOut or Cancelled.
func (r *execRun) await(ctx, detached context.Context, opID string, result *ExecResult) waitOutcome {
	waitCtx, stopWaiting := context.WithCancel(detached)
	defer stopWaiting()
	finished := make(chan waitOutcome, 1)
	go func() {
		op, err := r.client.WaitOperation(waitCtx, opID)
		finished <- waitOutcome{op, err}
	}()
	var deadline <-chan time.Time
	if r.req.Timeout > 0 {
		deadline = r.client.clock.After(r.req.Timeout)
	}
	select {
	case outcome := <-finished:
		return outcome
	case <-deadline:
	case <-ctx.Done():
	}
	// A command that ended just as the deadline passed has not timed out.
	select {
	case outcome := <-finished:
		return outcome
	default:
	}
	if ctx.Err() != nil {
		result.Cancelled = true
	} else {
		result.TimedOut = true
	}
	return r.killAndWait(detached, finished)
}

func (r *execRun) killAndWait(detached context.Context, finished <-chan waitOutcome) waitOutcome {
	ctx, cancel := context.WithTimeout(detached, killGrace)
	defer cancel()
	found, killErr := r.kill(ctx)
	select {
	case outcome := <-finished:
		if !found && killErr == nil {
			// The command ended before the killer looked: the kill mark it
			// left has no wrapper to remove it.
			r.client.background(func() error {
				err := withBackgroundTimeout(func(ctx context.Context) error {
					return r.client.DeleteFile(ctx, r.instance, r.killPath())
				})
				if errors.Is(err, ErrNotFound) {
					return nil
				}
				return err
			})
		}
		return outcome
	case <-ctx.Done():
		return waitOutcome{err: fmt.Errorf("the command did not end after being killed: %w", errors.Join(killErr, ctx.Err()))}
	}
}

// execExitCode reads the exit code of a finished exec. Incus reports exit
// codes 126 and 127 as failed operations ("Command not executable", "Command
// not found") even when the command ran: since the wrapper shell always
// starts, they are the command's own exit codes here.
func execExitCode(outcome waitOutcome) (int, error) {
	var opErr *OperationError
	if errors.As(outcome.err, &opErr) {
		switch opErr.Message {
		case "Command not executable":
			return 126, nil
		case "Command not found":
			return 127, nil
		}
	}
	if outcome.err != nil {
		return 0, outcome.err
	}
	var meta execMetadata
	if err := json.Unmarshal(outcome.op.Metadata, &meta); err != nil {
		return 0, fmt.Errorf("decoding the result: %w", err)
	}
	return meta.Return, nil
}

func (r *execRun) execRequest() request {
	stdinFlag := "0"
	if len(r.req.Stdin) > 0 {
		stdinFlag = "1"
	}
	argv := append([]string{"sh", "-c", execLauncher, "isx-exec", r.id, execWrapper, stdinFlag, r.req.Cwd}, r.req.Command...)
	body := map[string]any{
		"command":            argv,
		"wait-for-websocket": false,
		"interactive":        false,
		"record-output":      true,
		"user":               r.req.UID,
		"group":              r.req.GID,
	}
	if len(r.req.Env) > 0 {
		body["environment"] = r.req.Env
	}
	return request{method: "POST", path: apiPath("instances", r.instance, "exec"), body: body}
}

// failedToStart cleans up after the exec could not be started: when ctx
// ended while the request was in flight the command may be running anyway,
// so it is killed.
func (r *execRun) failedToStart(ctx, detached context.Context, err error, maybeStarted bool) (*ExecResult, error) {
	cleanupCtx, cancel := context.WithTimeout(detached, killGrace)
	defer cancel()
	if ctx.Err() != nil && maybeStarted {
		// The exec may have started without us learning of it; if it did
		// not, the kill mark stays to stop a late start.
		if _, killErr := r.kill(cleanupCtx); killErr != nil {
			err = errors.Join(err, killErr)
		}
	}
	if len(r.req.Stdin) > 0 {
		if rmErr := r.client.DeleteFile(cleanupCtx, r.instance, r.stdinPath()); rmErr != nil && !errors.Is(rmErr, ErrNotFound) {
			err = errors.Join(err, rmErr)
		}
	}
	if ctx.Err() != nil {
		return &ExecResult{Cancelled: true, ExitCode: -1}, fmt.Errorf("exec in %q cancelled before it started: %w", r.instance, errors.Join(context.Cause(ctx), err))
	}
	return nil, err
}

// kill runs execKiller as root in the instance and waits for it. found
// says whether it found the command's wrapper running.
func (r *execRun) kill(ctx context.Context) (found bool, err error) {
	owner := strconv.FormatUint(uint64(r.req.UID), 10) + ":" + strconv.FormatUint(uint64(r.req.GID), 10)
	body := map[string]any{
		"command":            []string{"sh", "-c", execKiller, "isx-exec-kill", r.id, owner},
		"wait-for-websocket": false,
		"interactive":        false,
		"record-output":      false,
	}
	rq := request{method: "POST", path: apiPath("instances", r.instance, "exec"), body: body}
	op, err := r.client.run(ctx, rq)
	if err != nil {
		return false, fmt.Errorf("killing exec %s in %q: %w", r.id, r.instance, err)
	}
	exitCode, err := execExitCode(waitOutcome{op: op})
	if err != nil {
		return false, fmt.Errorf("killing exec %s in %q: %w", r.id, r.instance, err)
	}
	return exitCode != killerFoundNothing, nil
}

// collect reads the exec's two output logs and has them deleted.
func (r *execRun) collect(ctx context.Context, opID string, result *ExecResult) error {
	limit := r.outputLimit()
	streams := []struct {
		suffix string
		data   *[]byte
		total  *int64
	}{
		{"stdout", &result.Stdout, &result.StdoutBytes},
		{"stderr", &result.Stderr, &result.StderrBytes},
	}
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() {
			path := r.logPath(opID, s.suffix)
			data, total, err := r.client.readLog(ctx, path, 0, limit)
			*s.data, *s.total = data, total
			errs[i] = err
			// Deleting the log is off the caller's critical path; Settle
			// waits for it.
			r.client.deleteLogLater(path)
		})
	}
	wg.Wait()
	result.Truncated = result.StdoutBytes > int64(len(result.Stdout)) || result.StderrBytes > int64(len(result.Stderr))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("exec in %q: collecting output: %w", r.instance, err)
	}
	return nil
}

// outputLimit is how much of each stream is kept.
func (r *execRun) outputLimit() int64 {
	if r.req.MaxOutputBytes == 0 {
		return DefaultMaxOutputBytes
	}
	return r.req.MaxOutputBytes
}

// logPath is the exec's output log of one stream ("stdout" or "stderr").
func (r *execRun) logPath(opID, stream string) string {
	return apiPath("instances", r.instance, "logs", "exec-output", "exec_"+opID+"."+stream)
}

// readLog reads at most limit bytes of a log file from offset on, and
// reports the file's full size. A missing log, or one no longer than
// offset, reads as empty.
func (c *Client) readLog(ctx context.Context, path string, offset, limit int64) ([]byte, int64, error) {
	header := http.Header{"Range": {"bytes=" + strconv.FormatInt(offset, 10) + "-" + strconv.FormatInt(offset+limit-1, 10)}}
	resp, err := c.send(ctx, request{method: "GET", path: path, header: header})
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusPartialContent:
	case http.StatusRequestedRangeNotSatisfiable:
		return nil, 0, nil
	default:
		_, err := decodeEnvelope(resp)
		if errors.Is(err, ErrNotFound) {
			return nil, 0, nil
		}
		if err == nil {
			err = fmt.Errorf("unexpected HTTP %d", resp.StatusCode)
		}
		return nil, 0, fmt.Errorf("reading %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", path, err)
	}
	total := max(resp.ContentLength, int64(len(data)))
	if size, ok := rangeTotal(resp.Header.Get("Content-Range")); ok {
		total = size
	}
	return data, total, nil
}

// rangeTotal parses the size out of "bytes 0-99/1234".
func rangeTotal(contentRange string) (int64, bool) {
	_, size, ok := strings.Cut(contentRange, "/")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(size, 10, 64)
	return n, err == nil
}

func (c *Client) deleteLog(ctx context.Context, path string) error {
	_, err := c.get(ctx, request{method: "DELETE", path: path}, nil)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting %s: %w", path, err)
	}
	return nil
}

// ExecLogs lists the exec output logs Incus keeps for the instance. Exec
// deletes its own; leftovers come from callers that were killed mid-exec.
func (c *Client) ExecLogs(ctx context.Context, instance string) ([]string, error) {
	var logs []string
	if _, err := c.get(ctx, request{method: "GET", path: apiPath("instances", instance, "logs", "exec-output")}, &logs); err != nil {
		return nil, fmt.Errorf("listing exec logs of %q: %w", instance, err)
	}
	return logs, nil
}
