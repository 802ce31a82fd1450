#!/usr/bin/env bash
# Installs Debian's Chromium, the real browser actiond's sign-in page is
# tested in (headless, through chromedp). Idempotent: safe to run again.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-chromium: run as root (it installs a package), or install Debian's chromium yourself" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
