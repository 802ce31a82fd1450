#!/usr/bin/env bash
# Starts Jaeger on loopback as the tests' tracing receiver (OTLP/HTTP in,
# its query API out, traces in memory) and prints two lines: the OTLP
# endpoint and the query URL. Builds it from the Go module proxy the first
# time (tools/jaeger pins the release), into a cache kept between runs.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
otlp_port=${ACTIOND_JAEGER_OTLP_PORT:-54318}
query_port=${ACTIOND_JAEGER_QUERY_PORT:-56686}
grpc_port=${ACTIOND_JAEGER_GRPC_PORT:-56685}
cache=${ISX_TOOLS_CACHE:-/var/cache/isx/tools}
version=$(awk '$1 == "github.com/jaegertracing/jaeger" {print $2}' "$here/tools/jaeger/go.mod")
bin=$cache/jaeger-$version
log=${ACTIOND_JAEGER_LOG:-/var/tmp/actiond-jaeger.log}

answers() { curl -sf "http://127.0.0.1:$query_port/api/services" >/dev/null 2>&1; }

if ! answers; then
  if [ ! -x "$bin" ]; then
    mkdir -p "$cache"
    (cd "$here/tools/jaeger" && go build -o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
    mv "$bin.tmp" "$bin"
  fi
  JAEGER_OTLP_PORT=$otlp_port JAEGER_QUERY_PORT=$query_port JAEGER_QUERY_GRPC_PORT=$grpc_port \
    setsid nohup "$bin" --config "file:$here/tools/jaeger/config.yaml" >>"$log" 2>&1 </dev/null &
  for _ in $(seq 1 150); do answers && break; sleep 0.2; done
  answers || { echo "jaeger-up: Jaeger did not answer on 127.0.0.1:$query_port; see $log" >&2; exit 1; }
fi
echo "http://127.0.0.1:$otlp_port"
echo "http://127.0.0.1:$query_port"
