package task

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A delegated agent's task has one run per conversation turn the host
// asks for: the first carries the instruction, each later one (NextRun)
// a follow-up in the agent's same session, with a command of its own
// (runs/<n>/command). Each run's stdout is the agent's event stream.

// nextRunScript prepares run n+1 of a finished task and starts it as
// prepareScript starts a first run. Arguments: id - launcher command
// started (RFC 3339); the "-" stands where prepareScript has its key.
const nextRunScript = `
id=$1 launcher=$3 cmd=$4 started=$5
valid_id "$id" || fail invalid_argument "bad task id"
probe "$id"
case $p_state in
lost) fail not_found "task $id has no record in this instance" ;;
bad) fail internal "the record of task $id is damaged: its run number cannot be read" ;;
running|pending) fail wrong_state "task $id is still running: wait for it to finish first" ;;
esac
[ "$p_att" = 1 ] && fail wrong_state "a person is in the conversation of task $id (isx shell --task); wait until they leave it"
n=$((p_run + 1))
r=$tasks/$id/runs/$n
mkdir "$r" 2>/dev/null || fail busy "another follow-up of task $id is starting; retry shortly"
unit=
[ "$launcher" = systemd ] && unit="isx-task-$id-$n.service"
if ! { printf '%s' "$cmd" >"$r/command" && : >"$r/stdout" && : >"$r/stderr" &&
    printf '%s\n' "$launcher" >"$r/mode" &&
    printf '{"run":%s,"unit":"%s","mode":"%s","started":"%s"}\n' "$n" "$unit" "$launcher" "$started" >"$r/run.json" &&
    put "$tasks/$id/run" "$n"; }; then
  rm -rf "$r"; fail internal "cannot write run $n of task $id"
fi
printf 'created %s\n' "$id"
if [ "$launcher" = systemd ]; then
  facts "$id" 0
  printf 'launch %s %s\n' "$id" "$n"; exit 3
fi
mkdir "$r/launched" 2>/dev/null
setsid /bin/sh "$tasks/$id/runner" "$n" </dev/null >/dev/null 2>&1 &
await_start "$r" || fail internal "run $n of task $id did not start within 5 seconds"
facts "$id" 1
`

// nextRunUndoScript takes back a run whose unit could not be started.
// Arguments: id -.
const nextRunUndoScript = `
valid_id "$1" || exit 0
n=
{ read -r n <"$tasks/$1/run"; } 2>/dev/null
digits "$n" && [ "$n" -gt 1 ] || exit 0
rm -rf "$tasks/$1/runs/$n"
put "$tasks/$1/run" "$((n - 1))"
`

// NextRun starts a further run of a finished delegate task with its own
// command (send_message), in the task's working directory cwd, returning
// once it runs. It is refused with
// CodeWrongState while the task runs or a person is in its conversation,
// and with CodeNotFound when the task is lost.
func (s *Starter) NextRun(ctx context.Context, ex Executor, instance, taskID, cwd string, command []string) (*Info, error) {
	if err := ValidateID(taskID); err != nil {
		return nil, withInstance(err, instance)
	}
	spec := Spec{Kind: KindDelegate, Command: command, Cwd: cwd}
	if err := spec.validateFields(); err != nil {
		return nil, withInstance(err, instance)
	}
	if cwd == "" {
		cwd = AgentHome
	}
	cmd := commandFile(cwd, command)
	if len(cmd) > maxArgBytes {
		return nil, newError(CodeInvalidArgument, instance, taskID, "the follow-up's command is %d bytes once encoded, more than the %d one exec can carry", len(cmd), maxArgBytes)
	}
	started := s.clock.Now().UTC().Format(time.RFC3339Nano)
	out, err := run(ctx, ex, instance, taskID, script{
		text: rootStartScript,
		args: []string{libScript + nextRunScript, libScript + nextRunUndoScript, taskID, "-", modeSystemd, cmd, started},
		root: true,
	})
	if err != nil {
		return nil, err
	}
	if out.exitCode == exitNoUnits {
		out, err = run(ctx, ex, instance, taskID, script{text: libScript + nextRunScript, args: []string{taskID, "-", modeProcess, cmd, started}})
		if err != nil {
			return nil, err
		}
	}
	return out.only(instance, taskID)
}

// DelegateRun is what a delegate task's latest run shows of itself.
type DelegateRun struct {
	Status Info
	// Head and Tail are the first and last bytes of the run's event
	// stream (its stdout), at most what was asked of each; they are the
	// same text when the stream is short.
	Head, Tail []byte
	// StderrTail is the end of the run's stderr.
	StderrTail []byte
	// Session is the agent session recorded for the task, "" if none.
	Session string
}

// Stream puts the head and tail of the run's event stream back together:
// whole when they overlap, else with the middle left out (the tail's
// first, cut line is then not JSON and is skipped).
func (r *DelegateRun) Stream() []byte {
	head, tail, size := r.Head, r.Tail, r.Status.StdoutBytes
	switch {
	case size <= int64(len(head)):
		return head
	case size <= int64(len(head)+len(tail)):
		overlap := int64(len(head)+len(tail)) - size
		return append(append([]byte{}, head...), tail[overlap:]...)
	}
	return append(append(append([]byte{}, head...), '\n'), tail...)
}

// readDelegateScript prints a task's facts, then its session and the head
// and tail of its latest run's logs, each as "section NAME LENGTH" and
// exactly LENGTH bytes. Arguments: id head-bytes tail-bytes.
const readDelegateScript = `
exec 3>&2 2>/dev/null
valid_id "$1" || fail invalid_argument "bad task id"
digits "$2" && digits "$3" || fail invalid_argument "bad byte limit"
facts "$1" 1
[ "$p_state" = lost ] && exit 0
printf '%s\n' --output--
section() {
  s_size=0
  [ -f "$2" ] && s_size=$(stat -c %s "$2" 2>/dev/null)
  digits "$s_size" || s_size=0
  [ "$s_size" -gt "$3" ] && s_size=$3
  printf 'section %s %s\n' "$1" "$s_size"
  [ "$s_size" -gt 0 ] || return 0
  if [ "$4" = head ]; then head -c "$s_size" "$2"; else tail -c "$s_size" "$2"; fi
}
section session "$tasks/$1/session_id" 256 head
if [ -n "$p_rdir" ]; then
  section head "$p_rdir/stdout" "$2" head
  section tail "$p_rdir/stdout" "$3" tail
  section stderr "$p_rdir/stderr" "$3" tail
fi
`

// ReadDelegate reads a delegate task's state and the head and tail of its
// latest run's event stream (at most headBytes and tailBytes).
func ReadDelegate(ctx context.Context, ex Executor, instance, taskID string, headBytes, tailBytes int64) (*DelegateRun, error) {
	if err := ValidateID(taskID); err != nil {
		return nil, withInstance(err, instance)
	}
	headBytes, tailBytes = min(max(headBytes, 0), maxResultBytes), min(max(tailBytes, 0), maxResultBytes)
	out, err := run(ctx, ex, instance, taskID, script{
		text:      libScript + readDelegateScript,
		args:      []string{taskID, strconv.FormatInt(headBytes, 10), strconv.FormatInt(tailBytes, 10)},
		maxOutput: headBytes + 2*tailBytes + 64<<10,
	})
	if err != nil {
		return nil, err
	}
	st, err := out.only(instance, taskID)
	if err != nil {
		return nil, err
	}
	d := &DelegateRun{Status: *st}
	if st.State == StateLost {
		return d, nil
	}
	_, raw, _ := splitOutput(out.stdout)
	sections, err := parseSections(raw)
	if err != nil {
		return nil, wrapError(CodeInternal, instance, taskID, err, "instance %q sent the logs of task %s in a form isx does not understand", instance, taskID)
	}
	d.Head, d.Tail, d.StderrTail = sections["head"], sections["tail"], sections["stderr"]
	if session := strings.TrimSpace(string(sections["session"])); sessionPattern.MatchString(session) {
		d.Session = session
	}
	if d.Session == "" && st.Record != nil && st.Record.Delegate != nil {
		d.Session = st.Record.Delegate.Session
	}
	return d, nil
}

// parseSections splits "section NAME LENGTH\n" + LENGTH bytes, repeated.
func parseSections(raw string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for raw != "" {
		header, rest, ok := strings.Cut(raw, "\n")
		fields := strings.Fields(header)
		if !ok || len(fields) != 3 || fields[0] != "section" {
			return nil, fmt.Errorf("a section header %q", Clip(header, 60))
		}
		n, err := strconv.Atoi(fields[2])
		if err != nil || n < 0 || n > len(rest) {
			return nil, fmt.Errorf("section %s of %s bytes, with %d left", Clip(fields[1], 20), Clip(fields[2], 20), len(rest))
		}
		out[fields[1]] = []byte(rest[:n])
		raw = rest[n:]
	}
	return out, nil
}

// sessionPattern is what an agent's session id may look like: UUIDs,
// thread names and opencode's ses_… ids fit.
var sessionPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// ValidSession reports whether a session id an agent printed is one isx
// records and passes on (no spaces, quotes or glob characters).
func ValidSession(session string) bool { return sessionPattern.MatchString(session) }

// setSessionScript records the agent session a task's stream named.
// Arguments: id session.
const setSessionScript = `
valid_id "$1" || fail invalid_argument "bad task id"
case $2 in ''|*[!A-Za-z0-9._:-]*) fail invalid_argument "bad session id" ;; esac
[ -f "$tasks/$1/task.json" ] || fail not_found "task $1 has no record in this instance"
put "$tasks/$1/session_id" "$2"
facts "$1" 0
`

// SetSession records the agent session of a task, once the agent named it
// in its stream, so that a follow-up resumes exactly that session.
func SetSession(ctx context.Context, ex Executor, instance, taskID, session string) error {
	if err := ValidateID(taskID); err != nil {
		return withInstance(err, instance)
	}
	if !sessionPattern.MatchString(session) {
		return newError(CodeInvalidArgument, instance, taskID, "session id %q is not one isx records: use 1 to 128 of A-Za-z0-9._:-", Clip(session, 60))
	}
	_, err := run(ctx, ex, instance, taskID, script{text: libScript + setSessionScript, args: []string{taskID, session}})
	return err
}
