// Package task runs background tasks inside an isx instance and reads their
// state back: the ground isx mcp's background exec, task_status, wait_any,
// task_result and cancel_task stand on, and later its delegated agents.
//
// # Records
//
// A task's record lives inside its instance, in the agent user's home, so
// that it travels with the instance (adopt_instance) and needs no side
// database:
//
//	~/.isx-mcp/tasks/<id>/        0700, the task's directory
//	  task.json    the Record: kind, argv, cwd, env names, key, created, session
//	  kind         the kind again, one word, for the scripts
//	  command      the argv as a sourceable line (cd <cwd>; exec <argv>)
//	  env          the environment as sourceable exports: values, which may be
//	               secrets, are only here (0600), never in task.json
//	  runner       the script every run executes (/bin/sh runner <n>)
//	  run          the number of the latest run
//	  attached     "<pid> <starttime>" of a person's conversation (isx shell
//	               --task); counts only while that process lives
//	  runs/<n>/
//	    run.json   when the run was launched (host clock), its unit and mode
//	    mode       systemd or process
//	    pid        "<pid> <starttime>" of the runner, written by the runner
//	    launched   a process run's start claim (mkdir)
//	    stdout, stderr  the command's logs
//	    exit       "<code> <epoch seconds>", written as exit.tmp and renamed,
//	               so that "finished" is atomic
//	~/.isx-mcp/keys/k-<key>       symlink to the task id the key made
//
// A delegated agent's task adds session_id (the agent's session, once its
// stream names it), and a command per follow-up run (runs/<n>/command,
// which the runner prefers to the task's); each run's stdout is the agent's
// event stream, and the record carries the agent, the model override, the
// permission and the base commit get_diff diffs against.
//
// Everything is owned by the agent user (uid 1000) and every script that
// reads or writes records runs as that user. The agent can therefore
// tamper with its own tasks' records, which it could do anyway with the
// same effect (it runs them); it gains nothing, because root never reads or
// writes a file there on its behalf, the host validates every value it
// reads back, and nothing read from a record is used as shell text. Root
// runs only systemd-run and systemctl stop, with unit names made of
// validated ids and numbers.
//
// # Runs
//
// On an instance with systemd, a run is a transient unit
// isx-task-<id>-<n>.service (systemd-run --collect, Type=exec,
// KillMode=control-group, TimeoutStopSec=2, as uid/gid 1000), so it outlives
// the exec that started it and a cancel stops its whole cgroup. Without
// systemd (or without setpriv to drop to the agent) it is a detached process
// group (setsid), which a cancel signals as a group; a process that leaves
// the group with a setsid of its own escapes that cancel.
//
// A runner records "<pid> <starttime>" before it runs the command, so a
// run is running while that very process lives (a reused pid does not
// count), finished once its exit file exists, and finished with NoExitCode
// when the runner is gone without one (killed, or the instance restarted).
// Exit codes: the command's status; 143 when a cancel's TERM ended it; 137
// when it ignored TERM for 2 s and was killed; NoExitCode (-1) for a run
// cancelled before it started.
//
// # Crashes and repeats
//
// Start writes the record, with its key's claim, before it starts the run.
// A Start cut short between the two leaves a record whose run has not
// started: it reads running with Pending set, a Start with the same key
// starts it, and a Cancel closes it for good. A run starts once: a process
// run is claimed with mkdir; a unit is refused by systemd while its name is
// active and by the runner's pid file after. Two Starts racing with one key
// make one task. Not covered: two repeats that both find the key's claim
// stale (its task removed) at the same moment may each make a task.
//
// # Scripts
//
// Each operation is one exec of a small sh script (two when an instance has
// no systemd, for Start, Cancel and Clear). Data reaches the scripts as
// arguments, never as script text; the only shell text made from data is
// the command and env files, quoted by shellQuote.
package task
