#!/usr/bin/env bash
# Installs Debian's bash-completion, whose helpers (_get_comp_words_by_ref)
# the bash completion scripts cobra generates call: the completion tests
# run isx's generated script in a real bash with it. Idempotent.
set -euo pipefail

if [ -r /usr/share/bash-completion/bash_completion ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-bash-completion: bash-completion is missing; run as root to install it, or apt-get install bash-completion" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bash-completion >/dev/null
