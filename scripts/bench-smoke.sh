#!/usr/bin/env bash
# Runs every benchmark once, briefly, so that none can break unseen: each
# bench command under bench/ for a second or two, and every Go benchmark of
# the module with -benchtime 1x. Nothing is timed or asserted beyond each
# run succeeding; a bench command under bench/ that this script does not
# run fails it, so a new one cannot be left out.
#
#   scripts/bench-smoke.sh [--postgres DSN] [--go-only | --commands-only]
#
# Needs what the benchmarks need: Postgres (--postgres, or
# ACTIOND_TEST_POSTGRES) and the Incus daemon with its images, as
# scripts/test starts them.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

postgres=${ACTIOND_TEST_POSTGRES:-}
commands=1
gobench=1
while (($# > 0)); do
	case "$1" in
	--postgres) postgres=$2 && shift 2 ;;
	--go-only) commands=0 && shift ;;
	--commands-only) gobench=0 && shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' && exit 0 ;;
	*) echo "bench-smoke.sh: unknown argument $1" >&2 && exit 2 ;;
	esac
done
[[ -n $postgres ]] || { echo "bench-smoke.sh: pass --postgres DSN or set ACTIOND_TEST_POSTGRES" >&2 && exit 2; }

step() { echo "bench smoke: $*" >&2; }

if ((commands)); then
	# bench/mcpload and bench/baremcp run inside bench/actiond/run.sh;
	# scripts/test smoke-runs bench/fuzz itself (bench/fuzz/run.sh -t 300x).
	covered=(actiond mcpload baremcp proxy fuzz)
	for dir in bench/*/; do
		name=$(basename "$dir")
		[[ " ${covered[*]} " == *" $name "* ]] || { echo "bench-smoke.sh: bench/$name is not smoke-run here; add it" >&2 && exit 1; }
	done
	step "bench/actiond/run.sh (SQLite)"
	bench/actiond/run.sh -d 1s --warmup 1s -c 4 >/dev/null
	step "bench/actiond/run.sh (Postgres, two processes, and traced)"
	otlp=$(scripts/jaeger-up.sh | head -1)
	bench/actiond/run.sh -d 1s --warmup 1s -c 4 --postgres "$postgres" --processes 2 --traced "$otlp" >/dev/null
	step "bench/proxy"
	go run ./bench/proxy -n 20 -streams 4 -c 4 -d 1s >/dev/null
fi

if ((gobench)); then
	# Every package with a benchmark, each benchmark once. The Incus-backed
	# ones (as scripts/test tells them) run one package at a time.
	mapfile -t dirs < <(grep -rl --include='*_test.go' '^func Benchmark' . | xargs -n1 dirname | sort -u)
	packages=$(go list "${dirs[@]}")
	incus=$(go list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' "${dirs[@]}" |
		awk '/isx\/incustest|isx\/build\/buildtest|isx\/proxy\/proxytest/ {print $1}')
	others=$(grep -vxF -f <(printf '%s\n' $incus) <<<"$packages" || true)
	step "Go benchmarks, once each"
	ACTIOND_TEST_POSTGRES=$postgres go test -count=1 -p 1 -timeout 30m -run '^$' -bench . -benchtime 1x $others $incus
fi
