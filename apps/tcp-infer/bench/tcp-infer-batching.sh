#!/usr/bin/env bash
# tcp-infer's dynamic batching: requests/s and p99 latency against Triton's max_queue_delay_us
# (--max-queue-delay-us), at 64 and 256 connections, one request in flight per connection, batch 8
# rows per request, driven by the verifying client (every answer checked). Delay 0 is today's
# coalescing (a batch per loop iteration); each delay runs its own server (--coalesce ROWS
# --max-queue-delay-us D [--preferred-batch LIST]). Prints one table per connection count and a
# text plot of each curve, for bench/RESULTS.md; with CUV_BENCH_CSV_DIR also
# tcp-infer-batching-CONNS.csv (delay_us, rps, p99_ms), which bench/plot.sh draws.
#
#   apps/tcp-infer/bench/tcp-infer-batching.sh [BUILD_DIR]   from the source tree (default build)
#   apps/tcp-infer/tcp-infer-batching-bench                   from the build tree (scripts/gpu)
#   ... --help | --version
#
#   CUV_DRIVER                  sim: run on the simulator (its figures say little about a GPU)
#   TCP_INFER_BATCHING_DELAYS   delays in us (default "0 50 100 200 500 1000 2000 5000")
#   TCP_INFER_BATCHING_CONNS    connection counts (default "64 256")
#   TCP_INFER_BATCHING_SECONDS  seconds per point, a whole number (default 3, 1 on the simulator)
#   TCP_INFER_BATCHING_BATCH    rows per request (default 8)
#   TCP_INFER_BATCHING_ROWS     rows per batch at most, --coalesce's (default 1024)
#   TCP_INFER_BATCHING_PREFERRED  --preferred-batch's list (default: none)
#   TCP_INFER_BATCHING_ARGS     more server options (e.g. "--loops 4" or "--graph"; without
#                               --graph the plain path, --no-graph, as measured in
#                               bench/RESULTS.md)
#   TCP_INFER_BATCHING_THREADS  client threads, at most one per connection (default 4)
# Exit status: 0 when every answer was right, 77 without a CUDA driver, 1 otherwise, 2 on a
# usage error.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/tcp-infer-bin.sh"
tcp_infer_bench_options tcp-infer-batching-bench "${1:-}"
tcp_infer_bin "tcp-infer batching bench" "${1:-}"
sim=0
[ "${CUV_DRIVER:-}" = sim ] && sim=1
read -r -a delays <<<"${TCP_INFER_BATCHING_DELAYS:-0 50 100 200 500 1000 2000 5000}"
read -r -a conns <<<"${TCP_INFER_BATCHING_CONNS:-64 256}"
secs=${TCP_INFER_BATCHING_SECONDS:-$((sim ? 1 : 3))}
batch=${TCP_INFER_BATCHING_BATCH:-8}
rows=${TCP_INFER_BATCHING_ROWS:-1024}
preferred=${TCP_INFER_BATCHING_PREFERRED:-}
read -r -a extra <<<"${TCP_INFER_BATCHING_ARGS:-}"
tcp_infer_plain_unless_asked extra
max_threads=${TCP_INFER_BATCHING_THREADS:-4}
for n in "$secs" "$batch" "$rows" "$max_threads" "${delays[@]}" "${conns[@]}"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "tcp-infer-batching-bench: '$n' is not a whole number" >&2; exit 2; }
done

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
status=0
# One server per delay; each connection count's load runs against it in turn. Points: "delay
# conns rps p99_ms bad" in $log/points.
for d in "${delays[@]}"; do
  flags=(--coalesce "$rows" --max-queue-delay-us "$d" "${extra[@]}")
  [ -n "$preferred" ] && flags+=(--preferred-batch "$preferred")
  loads=()
  tcp_infer_client_loads "$secs" "$batch" "$max_threads" "${conns[@]}"
  "$bin/tcp-infer-run" "$bin/tcp-infer" "${flags[@]}" "${loads[@]}" >"$log/$d.txt" 2>"$log/$d.err"
  tcp_infer_run_status tcp-infer-batching-bench $? "delay $d us" "$log/$d.err" "$log/$d.txt" ||
    status=1
  awk -v d="$d" -v list="${conns[*]}" '
    BEGIN { n = split(list, c, " ") }
    /^RESULT / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] }
      k++
      printf "%s %s %.1f %.3f %d\n", d, c[k], r["rps"], r["p99_us"] / 1000, r["errors"] + r["mismatches"]
    }' "$log/$d.txt" >>"$log/points"
done

device=$(grep -m 1 -o 'on the [a-zA-Z]* ([^)]*)' "$log/${delays[0]}.err")
echo "tcp-infer batching bench: $device, batch $batch rows per request, batches of up to $rows" \
  "rows${preferred:+, preferred $preferred}${extra[*]:+, ${extra[*]}}, $secs s per point, 1" \
  "request in flight per connection"
for c in "${conns[@]}"; do
  echo
  echo "$c connections:"
  printf '  %9s %11s %9s\n' delay_us req/s p99_ms
  awk -v c="$c" '$2 == c { printf "  %9s %11s %9s\n", $1, $3, $4; if ($5 != 0) bad = 1 }
                 END { exit bad }' "$log/points" || status=1
  # The text plot: a bar per delay for req/s and for p99, scaled to the largest.
  awk -v c="$c" '
    $2 == c { n++; d[n] = $1; r[n] = $3; p[n] = $4; if ($3 > mr) mr = $3; if ($4 > mp) mp = $4 }
    function bar(v, m,   s, i) { s = ""; for (i = 0; i < (m > 0 ? int(40 * v / m + 0.5) : 0); i++) s = s "#"; return s }
    END {
      print "  req/s by delay (us)"
      for (i = 1; i <= n; i++) printf "  %7s |%-40s %s\n", d[i], bar(r[i], mr), r[i]
      print "  p99 ms by delay (us)"
      for (i = 1; i <= n; i++) printf "  %7s |%-40s %s\n", d[i], bar(p[i], mp), p[i]
    }' "$log/points"
  if [ -n "${CUV_BENCH_CSV_DIR:-}" ]; then
    { echo "delay_us,rps,p99_ms"
      awk -v c="$c" '$2 == c { printf "%s,%s,%s\n", $1, $3, $4 }' "$log/points"; } \
      >"$CUV_BENCH_CSV_DIR/tcp-infer-batching-$c.csv" || status=1
  fi
done
[ -n "${CUV_BENCH_CSV_DIR:-}" ] && echo "CSV: $CUV_BENCH_CSV_DIR/tcp-infer-batching-{$(IFS=,; echo "${conns[*]}")}.csv"
[ $status -eq 0 ] || echo "tcp-infer-batching-bench: errors or wrong replies (see above)"
exit $status
