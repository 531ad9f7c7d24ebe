#!/usr/bin/env bash
# tcp-infer under 1 000 slow or idle connections: the verifying client's requests/s and p99
# latency alone, then with tcp-infer-slow holding 1 000 connections open (a third idle, a third
# trickling request heads, a third bodies, one byte per 200 ms), against one server with its
# default limits. Issue 16's bar: p99 within 1.5x of the unloaded figure, and no request lost
# (the client checks every answer and counts the errors).
#
#   apps/tcp-infer/bench/tcp-infer-slowloris.sh [BUILD_DIR]   from the source tree (default build)
#   apps/tcp-infer/tcp-infer-slowloris-bench                  from the build tree
#   ... --help | --version
#
#   CUV_DRIVER                 sim: run on the simulator
#   TCP_INFER_SLOW_CONNS       slow connections (default 1000)
#   TCP_INFER_SLOW_CLIENT      the client's connections (default 64, one request in flight each)
#   TCP_INFER_SLOW_SECONDS     seconds per point (default 5)
#   TCP_INFER_SLOW_ARGS        server options (e.g. "--header-timeout-ms 2000")
# Exit status: 0 when every answer was right (the bar is reported, not enforced), 77 without a
# CUDA driver, 1 otherwise, 2 on a usage error.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/tcp-infer-bin.sh"
tcp_infer_bench_options tcp-infer-slowloris-bench "${1:-}"
tcp_infer_bin "tcp-infer slowloris bench" "${1:-}"
slow_conns=${TCP_INFER_SLOW_CONNS:-1000}
conns=${TCP_INFER_SLOW_CLIENT:-64}
secs=${TCP_INFER_SLOW_SECONDS:-5}
read -r -a extra <<<"${TCP_INFER_SLOW_ARGS:-}"
tcp_infer_plain_unless_asked extra # (its figures: the plain path's)
for n in "$slow_conns" "$conns" "$secs"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "tcp-infer-slowloris-bench: '$n' is not a whole number" >&2; exit 2; }
done
threads=$((conns < 4 ? conns : 4))

# The loaded point: the slow connections opened first, the client while they are held.
loaded='port=$1; shift
  "$BIN/tcp-infer-slow" --port "$port" --connections "$SLOW" --mode mix --interval-ms 200 >"$SLOW_OUT" &
  pid=$!
  until grep -q "connections open" "$SLOW_OUT"; do kill -0 $pid || exit 1; sleep 0.05; done
  "$BIN/tcp-infer-client" --port "$port" "$@"
  rc=$?
  kill -INT $pid; wait $pid
  exit $rc'
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
client=(--connections "$conns" --depth 1 --batch 8 --threads "$threads" --duration "$secs")
BIN=$bin SLOW=$slow_conns SLOW_OUT=$log/slow.txt "$bin/tcp-infer-run" "$bin/tcp-infer" "${extra[@]}" \
  -- "$bin/tcp-infer-client" "${client[@]}" \
  -- bash -c "$loaded" loaded '{port}' "${client[@]}" >"$log/out.txt" 2>"$log/err.txt"
rc=$?
if [ $rc -eq 77 ]; then
  echo "tcp-infer-slowloris-bench: no CUDA driver (CUV_DRIVER=sim runs it on the simulator)"
  exit 77
fi
tcp_infer_points "$log/out.txt"
echo "tcp-infer slowloris bench: $(grep -m 1 -o 'on the [a-zA-Z]* ([^)]*)' "$log/err.txt"), $conns" \
  "client connections, 1 request of 8 rows in flight each, $secs s per point"
echo "  alone:                          ${rps0:-?} req/s, p99 ${p990:-?} ms, ${bad0:-?} errors"
echo "  with $slow_conns slow connections: ${rps1:-?} req/s, p99 ${p991:-?} ms, ${bad1:-?} errors"
grep -h '^RESULT slow' "$log/slow.txt" 2>/dev/null | sed 's/^/  /'
tcp_infer_p99_ratio 1.5
[ $rc -eq 0 ] || { echo "tcp-infer-slowloris-bench: FAILED (status $rc)"; tail -n 20 "$log/err.txt"; }
exit $((rc == 0 ? 0 : 1))
