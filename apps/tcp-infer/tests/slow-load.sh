#!/usr/bin/env bash
# tcp-infer-slow-load: 1 000 slow or idle connections (tcp-infer-slow: a third idle, a third
# trickling a request head, a third a body) held open while the verifying client runs; every
# request the client sends must get its correct answer (the client fails otherwise), and the
# slow connections are answered 408 or closed by the server's timeouts as they expire (the client
# runs 4 s, past them). Run by tcp-infer-run, which starts the server (with short timeouts, so
# that they do expire).
#
#   slow-load.sh --port N --slow PATH/tcp-infer-slow --client PATH/tcp-infer-client [--slow-connections 1000]
#
# Exit status: the client's (0: every answer right), 1 when the slow connections did not open,
# 2 on a usage error. The p99 against the same load without the slow connections is the bench's
# (bench/tcp-infer-slowloris.sh): a timed figure, not a test's.
set -uo pipefail

usage() {
  echo "usage: slow-load.sh --port N --slow PATH --client PATH [--slow-connections N]"
  echo "       (run by tcp-infer-run, which starts the server)"
}
port='' slow='' client='' n=1000
while [ $# -gt 0 ]; do
  case $1 in
  --port) port=${2:-}; shift 2 || true ;;
  --slow) slow=${2:-}; shift 2 || true ;;
  --client) client=${2:-}; shift 2 || true ;;
  --slow-connections) n=${2:-}; shift 2 || true ;;
  --help) usage; exit 0 ;;
  --version) echo "slow-load.sh (tcp-infer's tests)"; exit 0 ;;
  *) echo "slow-load.sh: '$1': no such option" >&2; usage >&2; exit 2 ;;
  esac
done
[[ $port =~ ^[0-9]+$ && $n =~ ^[0-9]+$ && -x $slow && -x $client ]] || { usage >&2; exit 2; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$slow" --port "$port" --connections "$n" --mode mix --interval-ms 200 >"$out" &
slow_pid=$!
until grep -q 'connections open' "$out"; do
  kill -0 "$slow_pid" 2>/dev/null || { echo "slow-load: tcp-infer-slow ended: $(cat "$out")" >&2; exit 1; }
  sleep 0.05
done
grep 'connections open' "$out"
"$client" --port "$port" --connections 16 --depth 4 --batch 1-16 --duration 4 --threads 2
rc=$?
kill -INT "$slow_pid"
wait "$slow_pid"
grep '^RESULT slow' "$out"
opened=$(sed -n 's/^RESULT slow .*opened=\([0-9]*\).*/\1/p' "$out")
[ "${opened:-0}" = "$n" ] || { echo "slow-load: $opened of $n slow connections opened" >&2; rc=1; }
exit $rc
