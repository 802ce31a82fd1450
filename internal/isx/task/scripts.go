package task

// The scripts below run inside the instance under /bin/sh (dash, busybox
// ash). Nothing from a caller is ever spliced into their text: data arrives
// as positional parameters or, for the environment's values, as the
// ISX_TASK_ENV variable of the exec, and every id is checked again with
// valid_id before it is used in a path. The only shell text built from data
// is the command and env files, quoted with shellQuote.
//
// Agent scripts run as the agent user: everything that reads or writes the
// records does, so a record the agent tampered with can mislead only about
// its own tasks and never makes root read or write anything for it. Root
// scripts do only what needs root (systemd-run, systemctl stop) and call
// back into agent scripts through setpriv for the rest.

// sharedScript is what agent and root scripts both use.
const sharedScript = `valid_id() {
  case $1 in
  t-[a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7]) return 0 ;;
  esac
  return 1
}
digits() {
  case $1 in ''|*[!0-9]*) return 1 ;; esac
  [ ${#1} -le 18 ]
}
# centis sets cs to the time since boot in hundredths of a second, read
# from /proc/uptime without starting a process.
centis() {
  u=
  { read -r u _ </proc/uptime; } 2>/dev/null
  s=${u%%.*} f=${u#*.}00
  f=${f%"${f#??}"}
  cs=$((s*100 + 1$f - 100))
}
`

// libScript is the common part of every agent script.
const libScript = `set -f
umask 077
home=/home/agent
tasks=$home/.isx-mcp/tasks
keys=$home/.isx-mcp/keys
fail() { printf 'error %s %s\n' "$1" "$2"; exit 1; }
` + sharedScript + `
# starttime PID sets st to when PID started (clock ticks since boot), which
# tells a live process from a later one that reuses its pid.
# A zombie counts as gone.
starttime() {
  st= l=
  { IFS= read -r l <"/proc/$1/stat"; } 2>/dev/null
  [ -n "$l" ] || return 1
  set -- ${l##*) }
  [ $# -ge 20 ] && [ "$1" != Z ] || return 1
  shift 19
  st=$1
}
# alive FILE: FILE holds "pid starttime" of a process that still runs.
alive() {
  a_pid= a_st=
  { read -r a_pid a_st _ <"$1"; } 2>/dev/null
  digits "$a_pid" && digits "$a_st" || return 1
  starttime "$a_pid" || return 1
  [ "$st" = "$a_st" ]
}
# group_alive PGID: a process of the group runs (zombies, which only wait
# for init to reap them, do not count).
group_alive() {
  g_id=$1
  set +f
  for g_stat in /proc/[0-9]*/stat; do
    l=
    { IFS= read -r l <"$g_stat"; } 2>/dev/null
    set -- ${l##*) }
    if [ $# -ge 3 ] && [ "$3" = "$g_id" ] && [ "$1" != Z ]; then set -f; return 0; fi
  done
  set -f
  return 1
}
read_exit() {
  [ -e "$p_rdir/exit" ] || return 1
  e_code= e_at=
  { read -r e_code e_at _ <"$p_rdir/exit"; } 2>/dev/null
  case $e_code in -1) ;; *) digits "$e_code" || e_code=x ;; esac
  digits "$e_at" || e_at=-
  p_exit=$e_code p_ended=$e_at
}
# probe ID sets p_state to lost (no record), bad (unreadable run number),
# pending (not started yet), running, finished, or vanished (the runner is
# gone without an exit file), with p_run, p_exit, p_ended, p_att, p_mode.
probe() {
  p_dir=$tasks/$1 p_rdir= p_run=- p_exit=- p_ended=- p_att=0 p_mode=-
  if [ ! -f "$p_dir/task.json" ]; then p_state=lost; return 0; fi
  n=
  { read -r n <"$p_dir/run"; } 2>/dev/null
  if ! digits "$n"; then p_state=bad; return 0; fi
  p_run=$n p_rdir=$p_dir/runs/$n
  { read -r p_mode <"$p_rdir/mode"; } 2>/dev/null
  case $p_mode in systemd|process) ;; *) p_mode=- ;; esac
  if read_exit; then p_state=finished
  elif [ -e "$p_rdir/pid" ]; then
    if alive "$p_rdir/pid"; then p_state=running
    elif read_exit; then p_state=finished
    else p_state=vanished
    fi
  else p_state=pending
  fi
  case $p_state in
  finished|vanished) if [ -e "$p_dir/attached" ] && alive "$p_dir/attached"; then p_att=1; fi ;;
  esac
  return 0
}
# facts ID SIZES prints what the host reads of a task.
facts() {
  probe "$1"
  f_out=- f_err=-
  if [ "$2" = 1 ] && [ -n "$p_rdir" ]; then
    f_sizes=$(stat -c %s "$p_rdir/stdout" "$p_rdir/stderr" 2>/dev/null)
    set -- "$1" $f_sizes
    if [ $# = 3 ]; then f_out=$2 f_err=$3; fi
  fi
  printf 'task %s state=%s run=%s exit=%s ended=%s attached=%s mode=%s out=%s err=%s\n' \
    "$1" "$p_state" "$p_run" "$p_exit" "$p_ended" "$p_att" "$p_mode" "$f_out" "$f_err"
  [ "$p_state" = lost ] && return 0
  f_rec=
  { IFS= read -r f_rec <"$p_dir/task.json"; } 2>/dev/null
  printf 'record %s %s\n' "$1" "$f_rec"
  if [ -n "$p_rdir" ] && [ -f "$p_rdir/run.json" ]; then
    f_info=
    { IFS= read -r f_info <"$p_rdir/run.json"; } 2>/dev/null
    printf 'runinfo %s %s\n' "$1" "$f_info"
  fi
}
# put FILE TEXT writes FILE aside and renames it into place; the name
# aside is this shell's own, so that two writers never share it.
put() { printf '%s\n' "$2" >"$1.tmp$$" && mv -f "$1.tmp$$" "$1"; }
now() { date +%s; }
# await_start RUNDIR waits up to 5 s for the runner to announce itself.
await_start() {
  centis; w_end=$((cs + 500))
  while [ ! -e "$1/pid" ] && [ ! -e "$1/exit" ]; do
    centis; [ $cs -ge $w_end ] && return 1
    sleep 0.002
  done
}
# kill_group RUNDIR ends a process-group run: TERM, then KILL after 2 s.
kill_group() {
  alive "$1/pid" || return 0
  g=$a_pid
  kill -TERM -"$g" 2>/dev/null || kill -TERM "$g" 2>/dev/null
  centis; k_kill=$((cs + 200)) k_end=$((cs + 300)) k_sent=0
  while group_alive "$g"; do
    centis
    if [ $k_sent = 0 ] && [ $cs -ge $k_kill ]; then kill -KILL -"$g" 2>/dev/null; k_sent=1; fi
    [ $cs -ge $k_end ] && break
    sleep 0.01
  done
}
# lookup sets found to the task the key's claim names, when it has a record.
# A claim whose task is gone frees the key.
lookup() {
  found= w=0
  while [ -L "$claim" ]; do
    t=$(readlink "$claim" 2>/dev/null) || t=
    if valid_id "$t"; then
      # .new- first: a record is renamed from there into place.
      if [ -d "$tasks/.new-$t" ]; then
        if [ $w -lt 300 ]; then sleep 0.01; w=$((w+1)); continue; fi
        rm -rf "$tasks/.new-$t"
      elif [ -d "$tasks/$t" ]; then
        found=$t; return 0
      fi
    fi
    rm -f "$claim"
  done
  return 1
}
`

// prepareScript makes a task's record, or finds the one its key made, and
// starts its run unless it started already. Arguments: id key kind cwd
// launcher record command runner runinfo; ISX_TASK_ENV holds the env file.
// The launcher is systemd (exit 3 and a "launch" line ask the root script to
// run systemd-run), process (started here, detached with setsid), or none
// (record only).
const prepareScript = `
id=$1 key=$2 kind=$3 cwd=$4 launcher=$5 rec=$6 cmd=$7 runner=$8 info=$9
valid_id "$id" || fail invalid_argument "bad task id"
case $key in *[!A-Za-z0-9._:-]*) fail invalid_argument "bad idempotency key" ;; esac
[ -d "$home" ] && [ -w "$home" ] || fail unavailable "the instance has no writable home $home for the agent user (uid 1000); build the instance from an isx template, which creates it"
if [ "$launcher" = process ] && ! command -v setsid >/dev/null 2>&1; then
  fail unavailable "the instance has neither systemd nor setsid to run a background task"
fi
if [ ! -d "$tasks" ] || [ ! -d "$keys" ]; then
  mkdir -p "$tasks" "$keys" 2>/dev/null || fail internal "cannot create $tasks as the agent user"
  chmod 700 "$home/.isx-mcp" 2>/dev/null
fi
envtext=${ISX_TASK_ENV-}
unset ISX_TASK_ENV
# launch ID RUN [written] starts the run unless it started already;
# "written" says its mode and run.json are in place.
launch() {
  r=$tasks/$1/runs/$2
  [ -e "$r/pid" ] || [ -e "$r/exit" ] && return 0
  [ "$launcher" = none ] && return 0
  if [ -z "${3-}" ]; then
    put "$r/mode" "$launcher" && put "$r/run.json" "$info" || fail internal "cannot write $r"
  fi
  if [ "$launcher" = systemd ]; then
    facts "$1" 0
    printf 'launch %s %s\n' "$1" "$2"; exit 3
  fi
  # A process run claims its start with mkdir, so that two replays never
  # start it twice.
  if mkdir "$r/launched" 2>/dev/null; then
    setsid /bin/sh "$tasks/$1/runner" "$2" </dev/null >/dev/null 2>&1 &
  fi
  await_start "$r" || fail internal "the command of task $1 did not start within 5 seconds"
}
claim=
[ -n "$key" ] && claim=$keys/k-$key
while :; do
  if [ -n "$claim" ] && lookup; then
    printf 'replayed %s\n' "$found"
    k=
    { read -r k <"$tasks/$found/kind"; } 2>/dev/null
    if [ "$k" = "$kind" ]; then
      probe "$found"
      [ "$p_state" = pending ] && launch "$found" "$p_run"
    fi
    facts "$found" 1
    exit 0
  fi
  [ -d "$cwd" ] && [ -x "$cwd" ] || fail invalid_argument "the working directory $cwd does not exist in the instance, or the agent user cannot enter it"
  [ -e "$tasks/$id" ] && fail internal "task id $id is taken"
  new=$tasks/.new-$id
  mkdir "$new" "$new/runs" "$new/runs/1" 2>/dev/null || fail internal "cannot create $new"
  if ! { printf '%s\n' "$rec" >"$new/task.json" && printf '%s\n' "$kind" >"$new/kind" &&
      printf '%s' "$cmd" >"$new/command" && printf '%s' "$envtext" >"$new/env" &&
      printf '%s' "$runner" >"$new/runner" && printf '1\n' >"$new/run" &&
      : >"$new/runs/1/stdout" && : >"$new/runs/1/stderr" &&
      { [ "$launcher" = none ] || { printf '%s\n' "$launcher" >"$new/runs/1/mode" &&
        printf '%s\n' "$info" >"$new/runs/1/run.json"; }; }; }; then
    rm -rf "$new"; fail internal "cannot write the record of task $id in $tasks"
  fi
  if [ -n "$claim" ] && ! ln -s "$id" "$claim" 2>/dev/null; then
    rm -rf "$new"; continue
  fi
  if ! mv "$new" "$tasks/$id"; then
    rm -rf "$new"; [ -n "$claim" ] && rm -f "$claim"
    fail internal "cannot move the record of task $id into place"
  fi
  break
done
printf 'created %s\n' "$id"
launch "$id" 1 written
facts "$id" 1
`

// undoScript removes a task that was just made when its unit could not be
// started, freeing its key for a retry. Arguments: id key.
const undoScript = `
valid_id "$1" || exit 0
rm -rf "$tasks/$1"
if [ -n "$2" ] && [ "$(readlink "$keys/k-$2" 2>/dev/null)" = "$1" ]; then rm -f "$keys/k-$2"; fi
`

// factsScript prints the facts of the tasks named. Arguments: sizes ids...
const factsScript = `
sizes=$1; shift
for id; do
  valid_id "$id" || fail invalid_argument "bad task id"
  facts "$id" "$sizes"
done
`

// rootPrelude starts every root script: it leaves the work to the agent
// path (exit 10) where there is no systemd to run units.
const rootPrelude = `set -f
[ -d /run/systemd/system ] && command -v systemd-run >/dev/null 2>&1 &&
  command -v systemctl >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1 || exit 10
as_agent() { setpriv --reuid=1000 --regid=1000 --clear-groups -- "$@"; }
` + sharedScript + `
oneline() { printf '%s' "$1" | tr '\n' ' '; }
# await_systemd waits up to 10 s for systemd to take requests: in an
# instance that just booted, /run/systemd/system exists before its socket.
await_systemd() {
  [ -S /run/systemd/private ] && return 0
  centis; y_end=$((cs + 1000))
  while [ ! -S /run/systemd/private ]; do
    centis; [ $cs -ge $y_end ] && return 1
    sleep 0.05
  done
}
`

// rootStartScript runs prepareScript as the agent, then the unit it asks
// for. Arguments: prepare undo, then prepareScript's.
const rootStartScript = rootPrelude + `
prepare=$1 undo=$2; shift 2
key=$2
out=$(as_agent sh -c "$prepare" isx-task "$@"); rc=$?
printf '%s\n' "$out"
[ $rc = 3 ] || exit $rc
last=${out##*
}
set -- $last
[ "$1" = launch ] && valid_id "$2" && digits "$3" || { printf 'error internal %s\n' "unexpected answer from the prepare step"; exit 1; }
id=$2 n=$3
created=0
case $out in "created $id"*|*"
created $id"*) created=1 ;; esac
r=/home/agent/.isx-mcp/tasks/$id/runs/$n
unit=isx-task-$id-$n.service
undo() {
  systemctl stop "$unit" >/dev/null 2>&1
  [ $created = 1 ] && as_agent sh -c "$undo" isx-task "$id" "$key"
  printf 'error %s %s\n' "$1" "$2"; exit 1
}
# Type=exec: systemd-run returns once the runner was executed, and fails
# when it could not be. Nothing in the unit's command line may hold a $ or
# %: systemd expands them. A concurrent replay may have started the run
# since the prepare step looked; a unit still active refuses a second start.
if [ -e "$r/pid" ] || [ -e "$r/exit" ]; then :
elif ! await_systemd; then
  undo unavailable "systemd in the instance is still starting (no /run/systemd/private after 10 s); retry"
elif ! msg=$(systemd-run --quiet --collect --unit="$unit" --uid=1000 --gid=1000 \
    --property=Type=exec --property=KillMode=control-group --property=TimeoutStopSec=2 \
    -- /bin/sh "/home/agent/.isx-mcp/tasks/$id/runner" "$n" 2>&1); then
  case $msg in
  *"already loaded"*|*"already exists"*|*"already active"*) ;;
  *) undo unavailable "systemd-run could not start $unit: $(oneline "$msg")" ;;
  esac
fi
centis; end=$((cs + 500))
while [ ! -e "$r/pid" ] && [ ! -e "$r/exit" ]; do
  centis; [ $cs -ge $end ] && undo internal "unit $unit did not start the command within 5 seconds; see journalctl -u $unit"
  sleep 0.002
done
# The prepare step printed the record; the run now runs (or just ran).
printf 'task %s state=running run=%s exit=- ended=- attached=0 mode=systemd out=0 err=0\n' "$id" "$n"
`

// cancelScript stops a task's run as the agent where the run is a process
// group, and says "stop" where it is a unit only root can stop; its finish
// step then writes the exit file a killed runner could not. Arguments:
// begin|finish id.
const cancelScript = `
step=$1 id=$2
valid_id "$id" || fail invalid_argument "bad task id"
probe "$id"
case $p_state in
lost) fail not_found "task $id has no record in this instance" ;;
bad) fail internal "the record of task $id is damaged: its run number cannot be read" ;;
finished) [ "$step" = begin ] && printf 'ended\n'; facts "$id" 1; exit 0 ;;
vanished)
  # After the unit was stopped, a runner that had to be killed left no exit
  # file: the finish step writes it. Before, the run had already ended.
  if [ "$step" = begin ]; then printf 'ended\n'; facts "$id" 1; exit 0; fi ;;
esac
r=$p_rdir
if [ "$step" = begin ]; then
  if [ "$p_mode" = systemd ]; then printf 'stop %s\n' "$p_run"; exit 3; fi
  if [ "$p_state" = pending ] && mkdir "$r/launched" 2>/dev/null; then
    put "$r/exit" "-1 $(now)"
  else
    await_start "$r"
    kill_group "$r"
  fi
fi
if [ ! -e "$r/exit" ]; then
  if [ -e "$r/pid" ]; then put "$r/exit" "137 $(now)"; else put "$r/exit" "-1 $(now)"; fi
fi
printf 'cancelled\n'
facts "$id" 1
`

// rootCancelScript stops a run's unit. Arguments: cancel id.
const rootCancelScript = rootPrelude + `
cancel=$1 id=$2
valid_id "$id" || { printf 'error invalid_argument bad task id\n'; exit 1; }
out=$(as_agent sh -c "$cancel" isx-task begin "$id"); rc=$?
if [ $rc != 3 ]; then printf '%s\n' "$out"; exit $rc; fi
set -- $out
[ "$1" = stop ] && digits "$2" || { printf 'error internal %s\n' "unexpected answer from the cancel step"; exit 1; }
await_systemd || { printf 'error unavailable %s\n' "systemd in the instance is still starting; retry"; exit 1; }
systemctl stop "isx-task-$id-$2.service" >/dev/null 2>&1
as_agent sh -c "$cancel" isx-task finish "$id"
`

// waitScript returns once one of the tasks is no longer running, or the
// time is up, with the facts of all of them. Arguments: interval
// limit-in-centiseconds ids...
const waitScript = `
interval=$1 limit=$2; shift 2
digits "$limit" || fail invalid_argument "bad time limit"
for id; do valid_id "$id" || fail invalid_argument "bad task id"; done
centis
end=$((cs + limit))
changed=-
while :; do
  for id; do
    probe "$id"
    case $p_state in running|pending) ;; *) changed=$id; break 2 ;; esac
  done
  centis
  [ "$cs" -ge "$end" ] && break
  sleep "$interval"
done
printf 'changed %s\n' "$changed"
for id; do facts "$id" 1; done
`

// resultScript prints a finished task's facts, then the tail of its
// stdout; the tail of its stderr goes to stderr. Arguments: id max-bytes.
const resultScript = `
exec 3>&2 2>/dev/null
valid_id "$1" || fail invalid_argument "bad task id"
digits "$2" || fail invalid_argument "bad byte limit"
facts "$1" 1
case $p_state in
finished|vanished)
  printf '%s\n' --output--
  tail -c "$2" "$p_rdir/stdout"
  tail -c "$2" "$p_rdir/stderr" >&3 ;;
esac
`

// listScript prints the facts of every task record.
const listScript = `
set +f
for d in "$tasks"/t-*; do
  set -f
  id=${d##*/}
  valid_id "$id" && [ -d "$d" ] && facts "$id" 0
done
exit 0
`

// findScript prints the facts of the task a key made, or "none".
// Arguments: key.
const findScript = `
case $1 in ''|*[!A-Za-z0-9._:-]*) fail invalid_argument "bad idempotency key" ;; esac
claim=$keys/k-$1
if lookup; then facts "$found" 1; else printf 'none\n'; fi
`

// clearScript ends every process-group run and removes every record.
const clearScript = `
count=0
set +f
for d in "$tasks"/t-*; do
  set -f
  id=${d##*/}
  valid_id "$id" && [ -d "$d" ] || continue
  count=$((count+1))
  probe "$id"
  [ "$p_state" = running ] && [ "$p_mode" = process ] && kill_group "$p_rdir"
done
rm -rf "$tasks" "$keys" || fail internal "cannot remove $tasks"
printf 'cleared %s\n' "$count"
`

// rootClearScript stops every task unit first. Arguments: clear.
const rootClearScript = rootPrelude + `
await_systemd || { printf 'error unavailable %s\n' "systemd in the instance is still starting; retry"; exit 1; }
systemctl stop 'isx-task-*' >/dev/null 2>&1
as_agent sh -c "$1" isx-task
`

// runnerScript is copied into each task's directory and run as
// "/bin/sh <dir>/runner <run>" by the unit or the detached process group.
// A run with a command of its own (a delegate's follow-up) runs that one.
// It records its own pid and start time, runs the command with the task's
// environment, and writes the exit file aside and renames it into place.
// It survives the TERM of a cancel long enough to record the command's
// status (143 when TERM ended it); only the command itself sees the signal
// by default.
const runnerScript = `set -f
d=${0%/runner} n=$1
r=$d/runs/$n
export HOME=/home/agent USER=agent LOGNAME=agent
umask 022
cd "$r" || exit 1
{ IFS= read -r s </proc/$$/stat; } 2>/dev/null
set -- ${s##*) }
shift 19
trap 'stopping=1' TERM INT HUP
printf '%s %s\n' "$$" "$1" >pid.tmp && mv -f pid.tmp pid
c=$d/command
[ -f "$r/command" ] && c=$r/command
( cd /home/agent 2>/dev/null; [ -s "$d/env" ] && . "$d/env"; . "$c" ) </dev/null >>stdout 2>>stderr
code=$?
printf '%s %s\n' "$code" "$(date +%s)" >exit.tmp && mv -f exit.tmp exit
`

// attachScript marks a task as joined by a person and becomes the
// conversation's process, so that the mark lasts exactly as long as it.
// Arguments: id argv...
const attachScript = `set -f
case $1 in
t-[a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7]) ;;
*) echo "isx: bad task id" >&2; exit 2 ;;
esac
d=/home/agent/.isx-mcp/tasks/$1; shift
[ -f "$d/task.json" ] || { echo "isx: this instance has no record of the task" >&2; exit 1; }
startof() { set -- $1; shift 19; st=$1; }
{ IFS= read -r s </proc/$$/stat; } 2>/dev/null
startof "${s##*) }"
printf '%s %s\n' "$$" "$st" >"$d/attached.tmp" && mv -f "$d/attached.tmp" "$d/attached" || exit 1
exec "$@"
`
