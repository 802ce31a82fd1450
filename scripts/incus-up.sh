#!/usr/bin/env bash
# Makes sure the Incus daemon answers and has a btrfs storage pool on the
# default profile. Starts incusd itself when no init system runs it.
set -euo pipefail

socket=${INCUS_SOCKET:-/var/lib/incus/unix.socket}
pool=${ISX_POOL:-isx}
pool_size=${ISX_POOL_SIZE:-30GiB}
log=${ISX_INCUSD_LOG:-/var/log/incusd.log}

answers() { curl -sf --unix-socket "$socket" http://incus/1.0 >/dev/null 2>&1; }

if ! answers; then
  if [ -d /run/systemd/system ] && systemctl list-unit-files incus.service >/dev/null 2>&1; then
    systemctl start incus.service
  else
    mkdir -p "$(dirname "$log")"
    nohup /usr/libexec/incus/incusd --group root >>"$log" 2>&1 &
  fi
  for _ in $(seq 1 100); do answers && break; sleep 0.2; done
  answers || { echo "incus-up: incusd did not answer on $socket; see $log" >&2; exit 1; }
fi

if ! incus storage show "$pool" >/dev/null 2>&1; then
  incus storage create "$pool" btrfs size="$pool_size" >/dev/null
fi
if ! incus profile device show default 2>/dev/null | grep -q '^root:'; then
  incus profile device add default root disk path=/ pool="$pool" >/dev/null
fi
