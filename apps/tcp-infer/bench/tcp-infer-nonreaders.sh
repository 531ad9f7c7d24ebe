#!/usr/bin/env bash
# tcp-infer under clients that pipeline and never read: the verifying client's requests/s and
# p99 latency alone, then with tcp-infer-slow holding 100 connections that each sent 1 900 GET
# /metrics at once and read nothing, against one server with its default limits (flow control:
# README, Limits). The server's RSS after the quiet point, once the server stopped reading every
# non-reader (cuv_infer_connections_paused), and its peak (VmHWM); the bytes it holds
# (cuv_infer_buffered_bytes) against its bound. Issue 32's bar: RSS within the documented bound,
# the client's p99 within 2x of the quiet run, and no request lost (the client checks every
# answer and counts the errors).
#
#   apps/tcp-infer/bench/tcp-infer-nonreaders.sh [BUILD_DIR]   from the source tree
#   apps/tcp-infer/tcp-infer-nonreaders-bench                  from the build tree
#   ... --help | --version
#
#   CUV_DRIVER                     sim: run on the simulator
#   TCP_INFER_NONREADERS           non-reading connections (default 100)
#   TCP_INFER_NONREADER_REQUESTS   the GET /metrics each pipelines (default 1900)
#   TCP_INFER_NONREADER_CLIENT     the client's connections (default 64, one request in flight each)
#   TCP_INFER_NONREADER_SECONDS    seconds per point (default 5)
#   TCP_INFER_NONREADER_ARGS       server options (e.g. "--max-buffered 16777216")
# Exit status: 0 when every answer was right (the bar is reported, not enforced), 77 without a
# CUDA driver, 1 otherwise, 2 on a usage error.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/tcp-infer-bin.sh"
tcp_infer_bench_options tcp-infer-nonreaders-bench "${1:-}"
tcp_infer_bin "tcp-infer nonreaders bench" "${1:-}"
nonreaders=${TCP_INFER_NONREADERS:-100}
requests=${TCP_INFER_NONREADER_REQUESTS:-1900}
conns=${TCP_INFER_NONREADER_CLIENT:-64}
secs=${TCP_INFER_NONREADER_SECONDS:-5}
read -r -a extra <<<"${TCP_INFER_NONREADER_ARGS:-}"
tcp_infer_plain_unless_asked extra # (its figures: without graphs' pinned staging)
for n in "$nonreaders" "$requests" "$conns" "$secs"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "tcp-infer-nonreaders-bench: '$n' is not a whole number" >&2; exit 2; }
done
threads=$((conns < 4 ? conns : 4))

# The loaded point: the server's memory after the quiet point, the non-readers until the server
# stopped reading them all, its memory then, the client while they are held, the peak after.
loaded='port=$1; shift
  metric() { # one sample of the server'"'"'s /metrics (bash'"'"'s /dev/tcp)
    exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
    printf "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" >&3
    awk -v m="$1" '"'"'$1 == m { print $2 }'"'"' <&3
    exec 3<&-
  }
  kib() { awk -v k="$1:" '"'"'$1 == k { print $2 }'"'"' "/proc/$TCP_INFER_SERVER_PID/status"; }
  rss0=$(kib VmRSS)
  "$BIN/tcp-infer-slow" --port "$port" --connections "$NONREADERS" --mode noread \
    --requests "$REQUESTS" >"$SLOW_OUT" &
  pid=$!
  until grep -q "connections open" "$SLOW_OUT"; do kill -0 $pid || exit 1; sleep 0.05; done
  for _ in $(seq 600); do # 30 s at most
    [ "$(metric cuv_infer_connections_paused)" -ge "$NONREADERS" ] && break
    sleep 0.05
  done
  paused=$(metric cuv_infer_connections_paused)
  held=$(metric cuv_infer_buffered_bytes)
  rss1=$(kib VmRSS)
  "$BIN/tcp-infer-client" --port "$port" "$@"
  rc=$?
  echo "RESULT memory rss_quiet_kib=$rss0 rss_paused_kib=$rss1 hwm_kib=$(kib VmHWM)" \
    "paused=$paused buffered=$held buffered_after=$(metric cuv_infer_buffered_bytes)" \
    "limit=$(metric cuv_infer_buffered_limit_bytes)"
  kill -INT $pid; wait $pid
  exit $rc'
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
client=(--connections "$conns" --depth 1 --batch 8 --threads "$threads" --duration "$secs")
BIN=$bin NONREADERS=$nonreaders REQUESTS=$requests SLOW_OUT=$log/slow.txt \
  "$bin/tcp-infer-run" "$bin/tcp-infer" "${extra[@]}" \
  -- "$bin/tcp-infer-client" "${client[@]}" \
  -- bash -c "$loaded" loaded '{port}' "${client[@]}" >"$log/out.txt" 2>"$log/err.txt"
rc=$?
if [ $rc -eq 77 ]; then
  echo "tcp-infer-nonreaders-bench: no CUDA driver (CUV_DRIVER=sim runs it on the simulator)"
  exit 77
fi
tcp_infer_points "$log/out.txt"
echo "tcp-infer nonreaders bench: $(grep -m 1 -o 'on the [a-zA-Z]* ([^)]*)' "$log/err.txt")," \
  "$conns client connections, 1 request of 8 rows in flight each, $secs s per point"
echo "  alone:                    ${rps0:-?} req/s, p99 ${p990:-?} ms, ${bad0:-?} errors"
echo "  with $nonreaders non-readers: ${rps1:-?} req/s, p99 ${p991:-?} ms, ${bad1:-?} errors"
# The bound (README, Limits): the cap, and per connection one read kept (64 KiB) and one answer
# (a page of metrics, about 13 KB: 16 KiB counted).
awk -v n="$nonreaders" -v c="$conns" '/^RESULT memory/ {
    for (i = 3; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] }
    bound = r["limit"] + (n + c + 1) * (65536 + 16384)
    printf "  RSS %.1f MiB quiet, %.1f MiB with the non-readers paused (%d of %d), peak %.1f MiB\n",
      r["rss_quiet_kib"] / 1024, r["rss_paused_kib"] / 1024, r["paused"], n, r["hwm_kib"] / 1024
    printf "  held %.1f MiB (bound %.1f MiB: %s), %.1f MiB after the client ran; growth %.1f MiB\n",
      r["buffered"] / 1048576, bound / 1048576, r["buffered"] <= bound ? "within" : "OVER",
      r["buffered_after"] / 1048576, (r["hwm_kib"] - r["rss_quiet_kib"]) / 1024 }' "$log/out.txt"
grep -h '^RESULT slow' "$log/slow.txt" 2>/dev/null | sed 's/^/  /'
tcp_infer_p99_ratio 2
[ $rc -eq 0 ] || { echo "tcp-infer-nonreaders-bench: FAILED (status $rc)"; tail -n 20 "$log/err.txt"; }
exit $((rc == 0 ? 0 : 1))
