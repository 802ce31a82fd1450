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
# --cpuprofile, and the profile's top entries are printed at the end.
#
#   bench/actiond/run.sh [-c CLIENTS] [-d DURATION] [-r ROUNDS] [--postgres DSN] [--keep DIR]
#
# -c 16, -d 20s and -r 1 by default. With -r N the pair is measured N times
# (alternating) and every round is printed, so the spread shows. --postgres
# runs actiond on Postgres (a schema of its own, dropped afterwards) instead
# of SQLite. --keep DIR keeps the binaries, logs and profile in DIR.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
clients=16
duration=20s
rounds=1
postgres=""
keep=""
while (($# > 0)); do
	case "$1" in
	-c) clients=$2 && shift 2 ;;
	-d) duration=$2 && shift 2 ;;
	-r) rounds=$2 && shift 2 ;;
	--postgres) postgres=$2 && shift 2 ;;
	--keep) keep=$2 && shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' && exit 0 ;;
	*) echo "run.sh: unknown argument $1" >&2 && exit 2 ;;
	esac
done

work=${keep:-$(mktemp -d)}
mkdir -p "$work"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

(cd "$root" && go build -o "$work/actiond" ./cmd/actiond && go build -o "$work/baremcp" ./bench/baremcp && go build -o "$work/mcpload" ./bench/mcpload)

bare_port=$(free_port)
actiond_port=$(free_port)
url="http://127.0.0.1:$actiond_port"
schema=""
if [[ -n $postgres ]]; then
	schema="bench_$$"
	sep='?'
	[[ $postgres == *\?* ]] && sep='&'
	store=(--postgres "$postgres${sep}search_path=$schema")
	psql -q "$postgres" -c "CREATE SCHEMA $schema" >/dev/null
else
	store=(--data "$work/data-$$")
fi

pids=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	[[ -z $schema ]] || psql -q "$postgres" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
	[[ -n $keep ]] || rm -rf "$work"
}
trap cleanup EXIT

"$work/baremcp" -addr "127.0.0.1:$bare_port" -expr 'input.n * 2.0' 2>"$work/baremcp.log" &
pids+=($!)
"$work/actiond" serve --addr "127.0.0.1:$actiond_port" --public-url "$url" "${store[@]}" --cpuprofile "$work/actiond.pprof" 2>"$work/actiond.log" &
actiond_pid=$!
pids+=("$actiond_pid")
for _ in $(seq 200); do
	curl -fsS "$url/healthcheck" >/dev/null 2>&1 && break
	sleep 0.05
done

graphql() {
	local answer
	answer=$(curl -fsS -H 'Content-Type: application/json' -d "$(jq -n --arg q "$1" '{query: $q}')" "$url/financial/v1/graphql")
	[[ $(jq '.errors | length' <<<"$answer") == 0 ]] || { echo "run.sh: $answer" >&2 && exit 2; }
}
graphql 'mutation { actions { createAction(id: "00000000-0000-4000-8000-0000000be001", input: {
	name: "double", description: "Doubles n.", kind: "cel", config: {expression: "event.data.n * 2.0"},
	tool: {inputSchema: {type: "object", properties: {n: {type: "integer"}}, required: ["n"]}}}) { version } } }'
graphql 'mutation { actions { createAction(id: "00000000-0000-4000-8000-0000000be002", input: {
	name: "bench", description: "Benchmark server.", kind: "mcp", config: {},
	mcp: {name: "bench", mode: LIVE, session: {start: {input: {principal: "execution.input.principal", subject: "execution.input.subject"}}}},
	session: {inputSchema: {type: "object", properties: {principal: {type: "string"}, subject: {type: "string"}}, required: ["principal", "subject"]},
		id: "string(size(session.input.principal)) + \":\" + session.input.principal + \":\" + session.input.subject"},
	tools: [{name: "double"}], policies: [{effect: ALLOW, actions: ["*"], resources: ["*"]}]}) { version } } }'
token=$("$work/actiond" token --principal local --subject bench "${store[@]}")

args='{"n":21,"intent":"Benchmark the recorded tools/call."}'
results=()
for round in $(seq "$rounds"); do
	bare=$("$work/mcpload" -url "http://127.0.0.1:$bare_port/mcp" -tool double -args "$args" -c "$clients" -d "$duration" -label bare)
	recorded=$("$work/mcpload" -url "$url/mcp/v1/000000000000/bench" -token "$token" -tool double -args "$args" -c "$clients" -d "$duration" -label actiond)
	results+=("$round $(cut -d' ' -f1 /proc/loadavg) $bare $recorded")
done

kill -TERM "$actiond_pid"
wait "$actiond_pid" 2>/dev/null || true

kind=sqlite
[[ -z $postgres ]] || kind=postgres
echo "clients $clients, $duration per measurement, $(nproc) cores, store $kind"
printf '%-6s %-8s %10s %8s %8s %8s\n' round server 'req/s' 'p50 ms' 'p99 ms' errors
ratios=()
for line in "${results[@]}"; do
	read -r round load bare recorded <<<"$line"
	for r in "$bare" "$recorded"; do
		jq -r --arg round "$round" '[$round, .label, (.rps | floor), .p50_ms, .p99_ms, .errors] | @tsv' <<<"$r" |
			awk -F'\t' '{printf "%-6s %-8s %10s %8s %8s %8s\n", $1, $2, $3, $4, $5, $6}'
	done
	ratio=$(jq -rn --argjson b "$bare" --argjson a "$recorded" '($a.rps / $b.rps * 100 | floor) / 100')
	ratios+=("$ratio")
	echo "round $round: actiond/bare = $ratio (1-minute load average after the round: $load)"
done
echo "ratios: ${ratios[*]}; median $(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')"
echo
echo "actiond CPU profile ($work/actiond.pprof), top by cumulative time:"
(cd "$root" && go tool pprof -top -cum -nodecount=45 "$work/actiond" "$work/actiond.pprof" 2>/dev/null | sed -n '1,55p')
