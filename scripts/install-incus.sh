#!/usr/bin/env bash
# Installs Incus from Debian bookworm-backports (plus the tools isx's images
# need) and makes sure the daemon runs. Idempotent: safe to run again.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  echo "install-incus: run as root (it installs packages and starts incusd)" >&2
  exit 1
fi

if ! command -v incusd >/dev/null 2>&1 && [ ! -x /usr/libexec/incus/incusd ]; then
  src=/etc/apt/sources.list.d/bookworm-backports.sources
  if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
    cat >"$src" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports --no-install-recommends incus
fi

need=()
for pkg in btrfs-progs debootstrap busybox-static xz-utils; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
