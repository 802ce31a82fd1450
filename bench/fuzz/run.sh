#!/usr/bin/env bash
# Runs every fuzz target of the parsers that take outside input, one after
# another, each for the same time, and says which found a failure:
#
#   bench/fuzz/run.sh [-t DURATION] [-p PARALLEL] [TARGET...]
#
# -t 2m and -p 1 (fuzzing workers per target) by default. DURATION may
# be a count of inputs instead (-t 500x): then minimizing a new input is
# bounded by the same count, and no wall-clock deadline is involved, which
# is what a smoke run on a loaded machine wants (Go's coordinator can fail
# a target with "context deadline exceeded" when its deadline lands while
# a starved worker still holds an input). TARGET is a
# target's name (FuzzCheck); without one every target runs. A failing input
# is written by go test into the package's testdata/fuzz/TARGET/, where it
# stays a regression test that plain go test runs; the corpus the fuzzer
# grows stays in the Go build cache.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
duration=2m
parallel=1
while (($# > 0)); do
	case "$1" in
	-t) duration=$2 && shift 2 ;;
	-p) parallel=$2 && shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' && exit 0 ;;
	-*) echo "run.sh: unknown argument $1" >&2 && exit 2 ;;
	*) break ;;
	esac
done

# package target: every parser an agent, an instance, a page or a file
# the user edits can feed.
targets=(
	"./internal/actiond/gateway FuzzDecodeRequest"
	"./internal/actiond/graph FuzzVariables"
	"./internal/actiond/skill FuzzRender"
	"./internal/actiond/starlark FuzzCheck"
	"./internal/isx/template FuzzParseTemplate"
	"./internal/isx/config FuzzLoadMCP"
	"./internal/isx/config FuzzLoadConfig"
	"./internal/isx/proxy FuzzInstanceRequest"
	"./internal/isx/mcpserver FuzzMCPYAML"
	"./internal/isx/mcpserver FuzzToolArguments"
	"./internal/mcpkit/anyschema FuzzToolChecker"
)

failed=()
ran=0
cd "$root"
for entry in "${targets[@]}"; do
	read -r package target <<<"$entry"
	if (($# > 0)) && ! printf '%s\n' "$@" | grep -qxF "$target"; then
		continue
	fi
	ran=$((ran + 1))
	echo "== $target ($package), $duration"
	minimize=()
	[[ $duration == *x ]] && minimize=(-fuzzminimizetime "$duration")
	if ! go test -count=1 -run '^$' -fuzz "^$target\$" -fuzztime "$duration" "${minimize[@]}" -parallel "$parallel" "$package"; then
		failed+=("$target")
	fi
done
((ran > 0)) || { echo "run.sh: no target named $*" >&2 && exit 2; }
if ((${#failed[@]} > 0)); then
	echo "failed: ${failed[*]} (the inputs are in each package's testdata/fuzz/)" >&2
	exit 1
fi
echo "all $ran targets ran $duration without a failure"
