#!/usr/bin/env bash
# Installs promtool, with which the metrics tests lint both programs'
# /metrics (`promtool check metrics`); it comes with Debian's prometheus
# package. Idempotent.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-promtool: promtool is missing; run as root to install it, or apt-get install prometheus" >&2
  exit 1
fi
apt-get update -qq
# Only its promtool is used; nothing here starts the Prometheus server.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
command -v promtool >/dev/null
