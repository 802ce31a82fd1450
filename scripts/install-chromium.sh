#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests of the explorer and the
# sign-in page (headless, driven over the DevTools protocol) and prints its
# path. Idempotent.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  command -v chromium
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-chromium: run as root (it installs Debian's chromium package)" >&2
  exit 1
fi
apt-get update -qq
# fonts-dejavu-core: screenshots render text the same on every machine.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium
