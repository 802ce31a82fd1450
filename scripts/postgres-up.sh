#!/usr/bin/env bash
# Starts a private PostgreSQL server for actiond's tests on loopback and prints
# its DSN. Installs Debian's postgresql package when it is missing.
set -euo pipefail

port=${ACTIOND_PG_PORT:-55432}
data=${ACTIOND_PG_DATA:-/var/tmp/actiond-pg}

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$bindir" ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi

as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if [ ! -s "$data/PG_VERSION" ]; then
  mkdir -p "$data"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$data"
  as_pg "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >/dev/null
fi
if ! as_pg "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  as_pg "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w \
    -o "-p $port -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=on" start >/dev/null
fi
echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
