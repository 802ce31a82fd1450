#!/usr/bin/env bash
# Installs tmux, the terminal the TUI tests drive isx in (send-keys,
# capture-pane). Idempotent: safe to run again.
set -euo pipefail

if command -v tmux >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-tmux: tmux is missing; run as root to install it, or apt-get install tmux" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tmux >/dev/null
