#!/usr/bin/env bash
# Benchmarks actiond's recorded tools/call against the bare go-sdk stateless
# server, side by side in one run on this machine:
#
#   actiond  tools/call of a cel tool on a LIVE server: token checked, the
#            request admitted into its session and recorded, the call run
#            and recorded, everything committed before the answer leaves;
#   bare     bench/baremcp answering the same CEL expression with the go-sdk
#            stateless handler, no record and no auth.
#
# Both get the same load from bench/mcpload (revision 2026-07-28, N clients),
# one after the other, each after its own warm-up; actiond runs with
# --cpuprofile, and the profile's top entries are printed at the end. Every
# measurement of actiond also samples its resident memory once a second and
# reports the largest sample.
#
#   bench/actiond/run.sh [-c CLIENTS] [-d DURATION] [-r ROUNDS] [--warmup DURATION]
#                        [--postgres DSN] [--processes 1|2] [--only actiond]
#                        [--sessions N] [--rss-every DURATION] [--keep DIR]
#                        [--traced OTLP_URL]
#
# -c 16, -d 20s, --warmup 3s and -r 1 by default. With -r N the measurements
# are made N times (alternating) and every round is printed, so the spread
# shows. --postgres runs actiond on Postgres (a schema of its own, dropped
# afterwards) instead of SQLite. --processes 2 (Postgres only) adds, to each
# round, two actiond processes serving one database, the same clients split
# between them, measured beside one. --only actiond leaves the bare server
# out (for a soak). --sessions N gives the clients N tokens of distinct
# subjects, so N sessions (1 by default: every client in one session,
# admitted one after another). --rss-every D prints actiond's resident memory every D
# through each measurement (the soak's curve). --keep DIR keeps the
# binaries, logs and profiles in DIR. --traced OTLP_URL adds, to each round,
# an actiond of its own (its own database, set up the same way) that
# exports every span to the OTLP/HTTP receiver at OTLP_URL, measured beside
# the untraced one: the cost of tracing.
set -euo pipefail
shopt -s inherit_errexit

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
clients=16
duration=20s
warmup=3s
rounds=1
postgres=""
processes=1
only=""
sessions=1
rss_every=""
keep=""
traced=""
while (($# > 0)); do
	case "$1" in
	-c) clients=$2 && shift 2 ;;
	-d) duration=$2 && shift 2 ;;
	-r) rounds=$2 && shift 2 ;;
	--warmup) warmup=$2 && shift 2 ;;
	--postgres) postgres=$2 && shift 2 ;;
	--processes) processes=$2 && shift 2 ;;
	--only) only=$2 && shift 2 ;;
	--sessions) sessions=$2 && shift 2 ;;
	--rss-every) rss_every=$2 && shift 2 ;;
	--keep) keep=$2 && shift 2 ;;
	--traced) traced=$2 && shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' && exit 0 ;;
	*) echo "run.sh: unknown argument $1" >&2 && exit 2 ;;
	esac
done
[[ $processes == 1 || $processes == 2 ]] || { echo "run.sh: --processes is 1 or 2" >&2 && exit 2; }
[[ $processes == 1 || -n $postgres ]] || { echo "run.sh: --processes 2 needs --postgres: SQLite has one process" >&2 && exit 2; }
[[ -z $only || $only == actiond ]] || { echo "run.sh: --only takes actiond" >&2 && exit 2; }

work=${keep:-$(mktemp -d)}
mkdir -p "$work"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
seconds() { python3 -c 'import sys, re; m = re.fullmatch(r"([0-9.]+)(ms|s|m)", sys.argv[1]); print(float(m[1]) * {"ms": 0.001, "s": 1, "m": 60}[m[2]])' "$1"; }

(cd "$root" && go build -o "$work/actiond" ./cmd/actiond && go build -o "$work/baremcp" ./bench/baremcp && go build -o "$work/mcpload" ./bench/mcpload)

bare_port=$(free_port)
ports=("$(free_port)" "$(free_port)")
url="http://127.0.0.1:${ports[0]}"
schema=""
if [[ -n $postgres ]]; then
	schema="bench_$$"
	sep='?'
	[[ $postgres == *\?* ]] && sep='&'
	store=(--postgres "$postgres${sep}search_path=$schema")
	traced_store=(--postgres "$postgres${sep}search_path=${schema}_traced")
	psql -q "$postgres" -c "CREATE SCHEMA $schema" >/dev/null
	[[ -z $traced ]] || psql -q "$postgres" -c "CREATE SCHEMA ${schema}_traced" >/dev/null
else
	store=(--data "$work/data-$$")
	traced_store=(--data "$work/data-traced-$$")
fi

pids=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	[[ -z $schema ]] || psql -q "$postgres" -c "DROP SCHEMA IF EXISTS $schema CASCADE; DROP SCHEMA IF EXISTS ${schema}_traced CASCADE" >/dev/null 2>&1 || true
	[[ -n $keep ]] || rm -rf "$work"
}
trap cleanup EXIT

if [[ -z $only ]]; then
	"$work/baremcp" -addr "127.0.0.1:$bare_port" -expr 'input.n * 2.0' 2>"$work/baremcp.log" &
	pids+=($!)
fi
# healthy PORT: waits until the actiond on PORT answers.
healthy() {
	for _ in $(seq 400); do
		curl -fsS "http://127.0.0.1:$1/healthcheck" >/dev/null 2>&1 && break
		sleep 0.05
	done
}

# Processes of one database serve one public URL: the first's.
actiond_pids=()
for i in $(seq 0 $((processes - 1))); do
	profile=()
	((i > 0)) || profile=(--cpuprofile "$work/actiond.pprof")
	"$work/actiond" serve --addr "127.0.0.1:${ports[$i]}" --public-url "$url" "${store[@]}" "${profile[@]}" 2>"$work/actiond-$i.log" &
	actiond_pids+=($!)
	pids+=($!)
	healthy "${ports[$i]}"
done
traced_port=""
if [[ -n $traced ]]; then
	traced_port=$(free_port)
	OTEL_EXPORTER_OTLP_ENDPOINT=$traced OTEL_SERVICE_NAME=actiond-bench \
		"$work/actiond" serve --addr "127.0.0.1:$traced_port" --public-url "http://127.0.0.1:$traced_port" "${traced_store[@]}" --cpuprofile "$work/actiond-traced.pprof" 2>"$work/actiond-traced.log" &
	traced_pid=$!
	pids+=($!)
	healthy "$traced_port"
fi

# graphql URL QUERY runs one GraphQL operation as the local root.
graphql() {
	local answer
	answer=$(curl -fsS -H 'Content-Type: application/json' -d "$(jq -n --arg q "$2" '{query: $q}')" "$1/financial/v1/graphql")
	[[ $(jq '.errors | length' <<<"$answer") == 0 ]] || { echo "run.sh: $answer" >&2 && exit 2; }
}
# setup URL STORE...: the same work on both sides, one multiplication:
# actiond reads n as the integer its schema declares, the bare server as
# the double JSON gives it. Prints the clients' tokens, comma-separated.
setup() {
	local base=$1
	shift
	graphql "$base" 'mutation { actions { createAction(id: "00000000-0000-4000-8000-0000000be001", input: {
	name: "double", description: "Doubles n.", kind: "cel", config: {expression: "event.data.n * 2"},
	tool: {inputSchema: {type: "object", properties: {n: {type: "integer"}}, required: ["n"]}}}) { version } } }'
	graphql "$base" 'mutation { actions { createAction(id: "00000000-0000-4000-8000-0000000be002", input: {
	name: "bench", description: "Benchmark server.", kind: "mcp", config: {},
	mcp: {name: "bench", mode: LIVE, session: {start: {input: {principal: "execution.input.principal", subject: "execution.input.subject"}}}},
	session: {inputSchema: {type: "object", properties: {principal: {type: "string"}, subject: {type: "string"}}, required: ["principal", "subject"]},
		id: "string(size(session.input.principal)) + \":\" + session.input.principal + \":\" + session.input.subject"},
	tools: [{name: "double"}], policies: [{effect: ALLOW, actions: ["*"], resources: ["*"]}]}) { version } } }'
	local tokens=() subject
	for i in $(seq "$sessions"); do
		subject=bench
		((i == 1)) || subject=bench-$i
		tokens+=("$("$work/actiond" token --principal local --subject "$subject" "$@")")
	done
	(
		IFS=,
		echo "${tokens[*]}"
	)
}
token=$(setup "$url" "${store[@]}")
[[ -z $traced ]] || traced_token=$(setup "http://127.0.0.1:$traced_port" "${traced_store[@]}")

# sample PID FILE: actiond's resident memory in MB, once a second, into FILE
# as "seconds MB" lines, until killed.
sample() {
	local began=$SECONDS
	while kill -0 "$1" 2>/dev/null; do
		awk -v t=$((SECONDS - began)) '/^VmRSS:/ {printf "%d %.1f\n", t, $2 / 1024}' "/proc/$1/status" >>"$2" 2>/dev/null || true
		sleep 1
	done
}

# measure LABEL URLS: one mcpload measurement, with actiond's memory sampled
# when URLS are actiond's; prints mcpload's JSON with rss_mb added. A
# measurement with any failed call fails the run: a benchmark that errs
# measures nothing.
measure() {
	local label=$1 urls=$2
	local auth=() samples="$work/rss-$label-$RANDOM" sampler=""
	: >"$samples"
	if [[ $label == traced ]]; then
		auth=(-token "$traced_token")
		sample "$traced_pid" "$samples" &
		sampler=$!
	elif [[ $label != bare ]]; then
		auth=(-token "$token")
		sample "${actiond_pids[0]}" "$samples" &
		sampler=$!
	fi
	local out
	out=$("$work/mcpload" -url "$urls" "${auth[@]}" -tool double -args "$args" -c "$clients" -d "$duration" -warmup "$warmup" -label "$label")
	if [[ $(jq .errors <<<"$out") != 0 ]]; then
		echo "run.sh: $label: $(jq .errors <<<"$out") calls failed" >&2
		return 1
	fi
	if [[ -n $sampler ]]; then
		kill "$sampler" 2>/dev/null || true
		wait "$sampler" 2>/dev/null || true
	fi
	if [[ -n $rss_every && $label != bare ]]; then
		local every
		every=$(seconds "$rss_every")
		echo "resident memory of actiond ($label), MB, every $rss_every:" >&2
		awk -v every="$every" 'int($1) % int(every) == 0 {printf "  %4ds %7.1f\n", $1, $2}' "$samples" >&2
	fi
	local peak
	peak=$(awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}' "$samples")
	jq -c --argjson rss "$peak" '. + {rss_mb: $rss}' <<<"$out"
}

endpoint() { echo "http://127.0.0.1:$1/mcp/v1/000000000000/bench"; }
args='{"n":21,"intent":"Benchmark the recorded tools/call."}'
results=()
for round in $(seq "$rounds"); do
	line="$round"
	[[ -n $only ]] || line+=" $(measure bare "http://127.0.0.1:$bare_port/mcp")"
	# The traced server goes first in even rounds: what one measurement
	# leaves behind (the kernel writing back its database) falls on the
	# next, and must not always fall on the same server.
	traced_result=""
	if [[ -n $traced ]] && ((round % 2 == 0)); then
		traced_result=$(measure traced "$(endpoint "$traced_port")")
	fi
	line+=" $(measure actiond "$(endpoint "${ports[0]}")")"
	((processes == 1)) || line+=" $(measure actiond-x2 "$(endpoint "${ports[0]}"),$(endpoint "${ports[1]}")")"
	if [[ -n $traced && -z $traced_result ]]; then
		traced_result=$(measure traced "$(endpoint "$traced_port")")
	fi
	[[ -z $traced ]] || line+=" $traced_result"
	results+=("$line $(cut -d' ' -f1 /proc/loadavg)")
done

for pid in "${actiond_pids[@]}"; do
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
done

kind=sqlite
[[ -z $postgres ]] || kind=postgres
echo "clients $clients, sessions $sessions, $duration per measurement, $(nproc) cores, store $kind"
printf '%-6s %-11s %10s %8s %8s %8s %8s\n' round server 'req/s' 'p50 ms' 'p99 ms' errors 'RSS MB'
ratios=()
doubled=()
costs=()
for line in "${results[@]}"; do
	read -r -a fields <<<"$line"
	round=${fields[0]}
	load=${fields[-1]}
	measured=("${fields[@]:1:${#fields[@]}-2}")
	for r in "${measured[@]}"; do
		jq -r --arg round "$round" '[$round, .label, (.rps | floor), .p50_ms, .p99_ms, .errors, .rss_mb] | @tsv' <<<"$r" |
			awk -F'\t' '{printf "%-6s %-11s %10s %8s %8s %8s %8s\n", $1, $2, $3, $4, $5, $6, $7}'
	done
	summary="round $round:"
	if [[ -z $only ]]; then
		bare=${measured[0]} recorded=${measured[1]}
		ratio=$(jq -rn --argjson b "$bare" --argjson a "$recorded" '($a.rps / $b.rps * 100 | floor) / 100')
		p99=$(jq -rn --argjson b "$bare" --argjson a "$recorded" '($a.p99_ms / $b.p99_ms * 100 | floor) / 100')
		ratios+=("$ratio")
		summary+=" actiond/bare = $ratio (p99 $p99 of bare's)"
	fi
	untraced=${measured[-1]}
	if [[ -n $traced ]]; then
		untraced=${measured[-2]}
		cost=$(jq -rn --argjson u "$untraced" --argjson t "${measured[-1]}" '((1 - $t.rps / $u.rps) * 1000 | floor) / 10')
		costs+=("$cost")
		summary+=" tracing costs $cost% of req/s"
		measured=("${measured[@]:0:${#measured[@]}-1}")
	fi
	if ((processes == 2)); then
		one=${measured[-2]} two=${measured[-1]}
		x2=$(jq -rn --argjson b "$one" --argjson a "$two" '($a.rps / $b.rps * 100 | floor) / 100')
		doubled+=("$x2")
		summary+=" two processes/one = $x2"
	fi
	echo "$summary (1-minute load average after the round: $load)"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
((${#ratios[@]} == 0)) || echo "actiond/bare ratios: ${ratios[*]}; median $(median "${ratios[@]}")"
((${#doubled[@]} == 0)) || echo "two processes/one ratios: ${doubled[*]}; median $(median "${doubled[@]}")"
((${#costs[@]} == 0)) || echo "cost of tracing, % of req/s: ${costs[*]}; median $(median "${costs[@]}")"
echo
echo "actiond CPU profile ($work/actiond.pprof), top by cumulative time:"
(cd "$root" && go tool pprof -top -cum -nodecount=45 "$work/actiond" "$work/actiond.pprof" 2>/dev/null | sed -n '1,55p')
