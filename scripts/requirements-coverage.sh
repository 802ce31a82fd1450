#!/usr/bin/env bash
# Counts which numbered requirements (ISX-nnn, ACT-nnn) the tests name, per
# topic of ../shared/requirements, and lists the ids no test names.
#   scripts/requirements-coverage.sh [REQUIREMENTS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-../shared/requirements}
named=$(grep -rhoE '(ISX|ACT)-[0-9]{3}' --include='*_test.go' . | sort -u)
# Ranges such as ACT-059..068 or ISX-001..023 in a test name cover each id between.
ranges=$(grep -rhoE '(ISX|ACT)-[0-9]{3}\.\.([0-9]{3})' --include='*_test.go' . | sort -u)
for r in $ranges; do
  prefix=${r%%-*}; from=${r#*-}; from=${from%%.*}; to=${r##*..}
  for n in $(seq "$((10#$from))" "$((10#$to))"); do named+=$'\n'$(printf '%s-%03d' "$prefix" "$n"); done
done
named=$(printf '%s\n' "$named" | sort -u)
for file in "$dir"/isx.md "$dir"/actiond.md; do
  [ -f "$file" ] || continue
  all=$(grep -oE '^\| (ISX|ACT)-[0-9]{3}' "$file" | tr -d '| ' | sort -u)
  total=$(printf '%s\n' "$all" | grep -c . || true)
  covered=$(comm -12 <(printf '%s\n' "$all") <(printf '%s\n' "$named") | grep -c . || true)
  echo "$(basename "$file"): $covered of $total requirements named by a test"
  if [ "${VERBOSE:-}" = 1 ]; then
    comm -23 <(printf '%s\n' "$all") <(printf '%s\n' "$named") | tr '\n' ' '; echo
  fi
done
