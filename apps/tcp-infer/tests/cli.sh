#!/usr/bin/env bash
# tcp-infer-cli: every program of the app and its benches answers --help (exit 0, a usage on
# stdout) and --version (exit 0, a line naming it), and an unknown option, or a bad value, with
# exit 2 and a message that names it (stderr). Arguments: the programs (paths); then, after --,
# usage errors of the server to check, each "OPTION VALUE..." as one argument whose first word the
# message must name.
#
#   cli.sh PROGRAM... [-- "ARGS..."...]
#
# Exit status 0 when every check passed; 1 after listing the failures.
set -uo pipefail

case ${1:-} in
--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
--version) echo "cli.sh (tcp-infer's tests)"; exit 0 ;;
-*) [ "$1" = -- ] || { echo "cli.sh: '$1': no such option (--help)" >&2; exit 2; } ;;
esac
programs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do programs+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
server=${programs[0]}
failed=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
check() { # check WHAT WANT_STATUS PATTERN STREAM PROGRAM ARGS...
  local what=$1 want=$2 pattern=$3 stream=$4
  shift 4
  "$@" >"$out" 2>"$err" </dev/null
  local rc=$?
  local text
  text=$(cat "$stream")
  if [ $rc -ne "$want" ] || ! grep -qe "$pattern" <<<"$text"; then
    echo "FAILED: $(basename "$1") $what: status $rc (want $want), $(basename "$stream"): $(head -c 300 "$stream")"
    failed=$((failed + 1))
  fi
}
for p in "${programs[@]}"; do
  check --help 0 'usage\|^  *[A-Za-z]' "$out" "$p" --help
  check --version 0 . "$out" "$p" --version
  check 'an unknown option' 2 '--no-such-option' "$err" "$p" --no-such-option
done
for bad in "$@"; do
  read -r -a words <<<"$bad"
  check "$bad" 2 "${words[0]}" "$err" "$server" "${words[@]}"
done
n=$((${#programs[@]} * 3 + $#))
echo "cli: $((n - failed)) of $n checks passed"
[ $failed -eq 0 ]
