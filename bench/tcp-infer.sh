#!/usr/bin/env bash
# tcp-infer: the server with cuv (cuv_uv_submit) against its --baseline (the same GPU work in
# libuv's thread pool with a blocking cuv_sync), in one run, at 1, 16 and 64 connections, driven
# by the verifying client and by wrk (when installed); prints requests/s and p99 latency of each
# point, and whether the target holds: at 64 connections cuv >= 2x the baseline's requests/s with
# a lower p99. Each connection keeps one request in flight (as wrk does), batch 8 rows.
#
#   bench/tcp-infer.sh [BUILD_DIR]     from the source tree (default build dir: build)
#   samples/tcp-infer/tcp-infer-bench  from the build tree (its copy; scripts/gpu runs this one)
#
# Runs on whatever driver cuv loads; without a GPU, set CUV_DRIVER=sim (it then runs in seconds).
#   TCP_INFER_BENCH_SECONDS   seconds per point (default 3, 1 with CUV_DRIVER=sim)
#   TCP_INFER_BENCH_CONNS     connection counts (default "1 16 64")
#   TCP_INFER_BENCH_BATCH     rows per request (default 8)
#   TCP_INFER_BENCH_THREADS   client and wrk threads, at most one per connection (default 4)
#   TCP_INFER_BENCH_CUV_ARGS, TCP_INFER_BENCH_BASELINE_ARGS   more server options for each mode
# Exit status: 0 when every reply was right (the target is reported, not enforced), 77 without a
# CUDA driver, 1 otherwise.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -x "$here/tcp-infer" ]; then
  bin=$here
else
  bin=$(cd "$here/.." && pwd)/${1:-build}/samples/tcp-infer
  [ -x "$bin/tcp-infer" ] || { echo "tcp-infer bench: $bin/tcp-infer not built" >&2; exit 1; }
fi
default_secs=3
[ "${CUV_DRIVER:-}" = sim ] && default_secs=1
secs=${TCP_INFER_BENCH_SECONDS:-$default_secs}
[[ $secs =~ ^[1-9][0-9]*$ ]] || { echo "tcp-infer bench: seconds must be a whole number" >&2; exit 1; }
read -r -a conns <<<"${TCP_INFER_BENCH_CONNS:-1 16 64}"
batch=${TCP_INFER_BENCH_BATCH:-8}
max_threads=${TCP_INFER_BENCH_THREADS:-4}
have_wrk=0
command -v wrk >/dev/null 2>&1 && have_wrk=1

# One server per mode; every load point runs against it in turn (tcp-infer-run stops it after).
run_mode() {
  local mode=$1 c t
  local -a loads=()
  for c in "${conns[@]}"; do
    t=$((c < max_threads ? c : max_threads))
    loads+=(-- "$bin/tcp-infer-client" --connections "$c" --depth 1 --batch "$batch"
      --threads "$t" --duration "$secs")
  done
  if [ $have_wrk = 1 ]; then
    for c in "${conns[@]}"; do
      t=$((c < max_threads ? c : max_threads))
      loads+=(-- wrk -t"$t" -c"$c" -d"${secs}s" --latency -s "$bin/wrk.lua"
        "http://127.0.0.1:{port}/infer")
    done
  fi
  local -a flags=()
  if [ "$mode" = baseline ]; then
    read -r -a flags <<<"--baseline ${TCP_INFER_BENCH_BASELINE_ARGS:-}"
  else
    read -r -a flags <<<"${TCP_INFER_BENCH_CUV_ARGS:-}"
  fi
  TCP_INFER_BATCH=$batch "$bin/tcp-infer-run" "$bin/tcp-infer" "${flags[@]}" "${loads[@]}"
}

# "rps p99_ms" per load point, in order: the client's RESULT lines, then wrk's blocks.
parse() {
  awk '
    function ms(v) {
      if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0
      if (v ~ /m$/) return v * 60000; if (v ~ /s$/) return v * 1000; return v
    }
    /^RESULT / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] }
      printf "client %.1f %.3f %d\n", r["rps"], r["p99_us"] / 1000, r["errors"] + r["mismatches"]
    }
    /^ +99% / { p99 = ms($2) }
    /Non-2xx or 3xx responses:/ { bad = $NF }
    /^Requests\/sec:/ { printf "wrk %.1f %.3f %d\n", $2, p99, bad + 0; bad = 0 }
  ' "$1"
}

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
status=0
for mode in cuv baseline; do
  run_mode $mode >"$log/$mode.txt" 2>"$log/$mode.err"
  rc=$?
  if [ $rc -eq 77 ]; then
    echo "tcp-infer bench: no CUDA driver (set CUV_DRIVER=sim to run it on the simulator)"
    exit 77
  fi
  if [ $rc -ne 0 ]; then
    echo "tcp-infer bench: the $mode run failed (status $rc):"
    tail -n 20 "$log/$mode.err" "$log/$mode.txt"
    status=1
  fi
  parse "$log/$mode.txt" >"$log/$mode.points"
done

driver=$(grep -m 1 -o 'on the [a-zA-Z]* ([^)]*)' "$log/cuv.err")
echo "tcp-infer bench: $driver, batch $batch, $secs s per point, 1 request in flight per connection"
for mode in cuv baseline; do
  echo "  $mode: $(grep -m 1 -o 'mode on .*' "$log/$mode.err" | sed 's/^mode on [^,]*, //')"
done
printf '%-7s %6s %12s %10s %12s %10s %7s\n' load conns "cuv req/s" "cuv p99" "base req/s" \
  "base p99" ratio
loads=(client)
[ $have_wrk = 1 ] && loads+=(wrk)
verdict=""
i=0
for load in "${loads[@]}"; do
  for c in "${conns[@]}"; do
    i=$((i + 1))
    read -r _ crps cp99 cbad <<<"$(sed -n "${i}p" "$log/cuv.points")"
    read -r _ brps bp99 bbad <<<"$(sed -n "${i}p" "$log/baseline.points")"
    if [ -z "${crps:-}" ] || [ -z "${brps:-}" ]; then
      printf '%-7s %6s %s\n' "$load" "$c" "(no result)"
      status=1
      continue
    fi
    ratio=$(awk -v a="$crps" -v b="$brps" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    printf '%-7s %6s %12s %8s ms %12s %8s ms %6sx\n' "$load" "$c" "$crps" "$cp99" "$brps" "$bp99" \
      "$ratio"
    [ "${cbad:-0}" -ne 0 ] || [ "${bbad:-0}" -ne 0 ] && status=1
    if [ "$c" = 64 ]; then
      met=$(awk -v r="$ratio" -v a="$cp99" -v b="$bp99" 'BEGIN { print (r >= 2 && a < b) ? "MET" : "NOT MET" }')
      verdict="$verdict $load: $met (${ratio}x, p99 $cp99 vs $bp99 ms);"
    fi
  done
done
[ -n "$verdict" ] && echo "target at 64 connections (cuv >= 2x baseline req/s, lower p99):$verdict"
[ $have_wrk = 1 ] || echo "(wrk not installed: client points only)"
[ $status -eq 0 ] || echo "tcp-infer bench: errors or wrong replies (see above)"
exit $status
