#!/usr/bin/env bash
# Makes sure a Go toolchain that can build this module is on PATH. A machine
# of this kind has Go at /usr/local/go; elsewhere Debian's golang (from
# bookworm-backports) is installed, and the go command fetches the exact
# version go.mod names from the Go module proxy (GOTOOLCHAIN=auto).
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH
if command -v go >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-go: no go on PATH; run as root to install it" >&2
  exit 1
fi
src=/etc/apt/sources.list.d/bookworm-backports.sources
if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' >"$src"
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports --no-install-recommends golang-go ca-certificates git >/dev/null
go version
