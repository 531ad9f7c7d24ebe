#!/usr/bin/env bash
# tcp-infer: the server with cuv (cuv_uv_submit) against its --baseline (the same GPU work in
# libuv's thread pool with a blocking cuv_sync), in one run, at 1, 16 and 64 connections, driven
# by the verifying client and by wrk (when installed); prints requests/s and p99 latency of each
# point and each configuration, the server's CPU per request (the whole process over each load,
# tools/cpu.sh) with its ratio to the first configuration's, and the CPU of its thread roles, and whether the target holds: at 64 connections cuv >= 2x the
# baseline's requests/s with a lower p99 (issue 13's bars for one loop: cuv >= 1.2x, cuv-graph
# >= 1.3x). Each connection keeps one request in flight (as wrk does), batch 8 rows.
#
#   apps/tcp-infer/bench/tcp-infer.sh [BUILD_DIR]  from the source tree (default build dir: build)
#   apps/tcp-infer/tcp-infer-bench     from the build tree (its copy; scripts/gpu runs this one)
#
# Configurations (server options), each against its own server, all in this one run. The
# server replays CUDA graphs by default where it can (README: CUDA graphs): each configuration
# says which path it measures, so that a name keeps the meaning of its figures in
# bench/RESULTS.md (cuv: the plain path, cuv-graph: the graphs):
#   baseline      --baseline        1 loop; GPU work in the thread pool, blocking in cuv_sync
#   cuv           --no-graph        1 loop; cuv_uv_submit on the loop thread
#   cuv-graph     --graph           1 loop; each request one replay of its workspace's CUDA graph
#   cuv-offload   --offload         1 loop; cuv_uv_submit from the thread pool, no waiting there
#   cuv-4loops    --loops 4 --no-graph  4 loops on 4 threads, one bridge each
#   cuv-coalesce  --coalesce --no-graph  1 loop; the requests of one loop iteration as one
#                                   submission
#   baseline-coalesce  --baseline --coalesce   the same batches through the thread pool
#   cuv-4loops-coalesce  --loops 4 --coalesce --no-graph  4 loops, each batching its own requests
#   baseline-4loops  --baseline --loops 4      4 loops sharing the thread pool
#   baseline-4loops-coalesce  --baseline --loops 4 --coalesce
#   cuv-4loops-coalesce-graph  --loops 4 --coalesce --graph  the batches as graph replays
# The simulator runs baseline, cuv, cuv-graph and cuv-coalesce only (a few seconds); its figures
# say little about a GPU. Issue 13's comparison alone (the thread pool, one loop, one loop with
# graphs; 64 connections, or more points for the plot):
#   TCP_INFER_BENCH_CONFIGS="baseline|--baseline;cuv|--no-graph;cuv-graph|--graph" \
#   TCP_INFER_BENCH_CONNS="1 4 16 64 128" apps/tcp-infer/bench/tcp-infer.sh
#
# Several GPUs (issue 15): TCP_INFER_BENCH_DEVICES=1 runs one device against two, each balance,
# at 64 and 256 connections, and reports the ratio of req/s to one device's (on the simulator
# CUV_SIM_DEVICES=2 is set for it when unset; its figures say little about two GPUs):
#   devices-1        --devices 1 OPTS
#   devices-2        --devices 2 --balance steal OPTS   (the default balance)
#   devices-2-hash   --devices 2 --balance hash OPTS    (the kernel's SO_REUSEPORT hash alone)
# OPTS: TCP_INFER_BENCH_DEVICE_OPTIONS (default "--loops 4 --coalesce --no-graph": per device,
# the plain path the figures were measured on; "--loops 4 --coalesce" runs the graphs).
#
#   CUV_DRIVER                 sim: run on the simulator
#   TCP_INFER_BENCH_SECONDS    seconds per point, a whole number (default 2, 1 on the simulator)
#   TCP_INFER_BENCH_CONNS      connection counts (default "1 16 64")
#   TCP_INFER_BENCH_BATCH      rows per request (default 8)
#   TCP_INFER_BENCH_THREADS    client and wrk threads, at most one per connection (default 4)
#   TCP_INFER_BENCH_CONFIGS    "name|options;name|options..." (the first is the reference)
#   TCP_INFER_BENCH_STAGE_SAMPLE  the stage timeline's sampling, one request in N (default
#                              1000, 10 on the simulator; 0: no timeline): for each configuration
#                              that submits one request at a time through cuv, at each of
#                              TCP_INFER_BENCH_STAGE_CONNS connections (default "16 64"), a
#                              server of its own with --stage-sample N under the verifying client
#                              prints each stage's median and p99
#   CUV_BENCH_CSV_DIR          an existing folder: each load's points also go to
#                              tcp-infer-LOAD.csv there (conns, then req/s and p99 ms per
#                              configuration), which bench/plot.sh draws
#   ... --help | --version
# Exit status: 0 when every reply was right (the target is reported, not enforced), 77 without a
# CUDA driver, 1 otherwise, 2 on a usage error.
set -uo pipefail


here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/tcp-infer-bin.sh"
tcp_infer_bench_options tcp-infer-bench "${1:-}"
tcp_infer_bin "tcp-infer bench" "${1:-}"
sim=0
[ "${CUV_DRIVER:-}" = sim ] && sim=1
secs=${TCP_INFER_BENCH_SECONDS:-$((sim ? 1 : 2))}
[[ $secs =~ ^[1-9][0-9]*$ ]] || { echo "tcp-infer bench: seconds must be a whole number" >&2; exit 1; }
devices=${TCP_INFER_BENCH_DEVICES:-}
default_conns="1 16 64"
[ -n "$devices" ] && default_conns="64 256"
read -r -a conns <<<"${TCP_INFER_BENCH_CONNS:-$default_conns}"
batch=${TCP_INFER_BENCH_BATCH:-8}
max_threads=${TCP_INFER_BENCH_THREADS:-4}
default_configs="baseline|--baseline;cuv|--no-graph;cuv-graph|--graph;cuv-offload|--offload"
default_configs+=";cuv-4loops|--loops 4 --no-graph"
default_configs+=";cuv-coalesce|--coalesce --no-graph;baseline-coalesce|--baseline --coalesce"
default_configs+=";cuv-4loops-coalesce|--loops 4 --coalesce --no-graph"
default_configs+=";baseline-4loops|--baseline --loops 4;baseline-4loops-coalesce|--baseline --loops 4 --coalesce"
default_configs+=";cuv-4loops-coalesce-graph|--loops 4 --coalesce --graph"
[ $sim = 1 ] && default_configs="baseline|--baseline;cuv|--no-graph;cuv-graph|--graph;cuv-coalesce|--coalesce --no-graph"
if [ -n "$devices" ]; then
  dev_opts=${TCP_INFER_BENCH_DEVICE_OPTIONS:---loops 4 --coalesce --no-graph}
  default_configs="devices-1|--devices 1 $dev_opts;devices-2|--devices 2 --balance steal $dev_opts"
  default_configs+=";devices-2-hash|--devices 2 --balance hash $dev_opts"
  [ $sim = 1 ] && export CUV_SIM_DEVICES=${CUV_SIM_DEVICES:-2}
fi
IFS=';' read -r -a configs <<<"${TCP_INFER_BENCH_CONFIGS:-$default_configs}"
have_wrk=0
command -v wrk >/dev/null 2>&1 && have_wrk=1
loads=(client)
[ $have_wrk = 1 ] && loads+=(wrk)

# One server per configuration; every load point runs against it in turn.
run_config() {
  local c t
  local -a flags loads=()
  read -r -a flags <<<"$1"
  tcp_infer_client_loads "$secs" "$batch" "$max_threads" "${conns[@]}"
  if [ $have_wrk = 1 ]; then
    for c in "${conns[@]}"; do
      t=$((c < max_threads ? c : max_threads))
      loads+=(-- wrk -t"$t" -c"$c" -d"${secs}s" --latency -s "$bin/wrk.lua"
        "http://127.0.0.1:{port}/infer")
    done
  fi
  # Each load through tools/cpu.sh: the server's CPU over that load follows its output.
  local -a wrapped=()
  for c in "${loads[@]}"; do
    wrapped+=("$c")
    [ "$c" = -- ] && wrapped+=(bash "$bin/tcp-infer-cpu")
  done
  TCP_INFER_BATCH=$batch "$bin/tcp-infer-run" "$bin/tcp-infer" "${flags[@]}" "${wrapped[@]}"
}

# "load rps p99_ms bad cpu_us_per_request loop% reactor% submit% pool% other%" per point, in
# order: the client's RESULT lines, then wrk's blocks, each with the CPU line that follows it
# ("-" where there was none).
parse() {
  awk '
    function ms(v) {
      if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0
      if (v ~ /m$/) return v * 60000; if (v ~ /s$/) return v * 1000; return v
    }
    function flush(cpu) { if (point != "") print point, cpu; point = "" }
    /^RESULT / {
      flush("- - - - - -")
      for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] }
      point = sprintf("client %.1f %.3f %d", r["rps"], r["p99_us"] / 1000, r["errors"] + r["mismatches"])
      requests = r["requests"]
    }
    /^ +99% / { p99 = ms($2) }
    /requests in/ { wrk_requests = $1 }
    /Non-2xx or 3xx responses:/ { bad = $NF }
    /^Requests\/sec:/ {
      flush("- - - - - -")
      point = sprintf("wrk %.1f %.3f %d", $2, p99, bad + 0); bad = 0; requests = wrk_requests
    }
    /^CPU / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); c[kv[1]] = kv[2] }
      flush(sprintf("%.1f %s %s %s %s %s", requests > 0 ? 1e6 * c["seconds"] / requests : 0,
                    c["loop"], c["reactor"], c["submit"], c["pool"], c["other"]))
    }
    END { flush("- - - - - -") }
  ' "$1"
}

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
status=0
names=()
for entry in "${configs[@]}"; do
  name=${entry%%|*}
  names+=("$name")
  run_config "${entry#*|}" >"$log/$name.txt" 2>"$log/$name.err"
  tcp_infer_run_status "tcp-infer bench" $? "$name" "$log/$name.err" "$log/$name.txt" || status=1
  parse "$log/$name.txt" >"$log/$name.points"
done

# The target at 64 connections: issue 13's bars for one loop without batching (cuv 1.2x, with
# graphs 1.3x), else the 2x this bench was written for.
bar() {
  case $1 in
  cuv) echo 1.2 ;;
  cuv-graph) echo 1.3 ;;
  devices-2*) echo 1.8 ;; # two devices: near twice one's (the loops' HTTP work is per device too)
  *) echo 2 ;;
  esac
}

ref=${names[0]}
echo "tcp-infer bench: $(grep -m 1 -o 'on the [a-zA-Z]* ([^)]*)' "$log/$ref.err"), batch $batch," \
  "$secs s per point, 1 request in flight per connection; req/s, p99 ms, ratio of req/s to $ref"
for name in "${names[@]}"; do
  batching=$(grep -m 1 -o 'up to [0-9]* rows per GPU submission' "$log/$name.err")
  devs=$(grep -m 1 -o '[0-9]* devices, .*balance: [a-z]*' "$log/$name.err")
  echo "  $name: $(grep -m 1 -o '^tcp-infer: .* mode' "$log/$name.err" | sed 's/^tcp-infer: //')," \
    "$(grep -m 1 -o '[0-9]* loops* per device' "$log/$name.err")${batching:+, coalescing $batching}${devs:+, $devs}"
done
printf '%-7s %5s' load conns
for name in "${names[@]}"; do printf ' | %-26s' "$name"; done
echo
verdict=""
i=0
for load in "${loads[@]}"; do
  for c in "${conns[@]}"; do
    i=$((i + 1))
    read -r _ rrps rp99 rbad _ <<<"$(sed -n "${i}p" "$log/$ref.points")"
    printf '%-7s %5s' "$load" "$c"
    for name in "${names[@]}"; do
      read -r _ rps p99 bad _ <<<"$(sed -n "${i}p" "$log/$name.points")"
      if [ -z "${rps:-}" ] || [ -z "${rrps:-}" ]; then
        printf ' | %-26s' "(no result)"
        status=1
        continue
      fi
      [ "${bad:-0}" -ne 0 ] && status=1
      ratio=$(awk -v a="$rps" -v b="$rrps" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
      printf ' | %9s %7s %6sx' "$rps" "$p99" "$ratio"
      if [ "$c" = 64 ] && [ "$name" != "$ref" ]; then
        met=$(awk -v r="$ratio" -v a="$p99" -v b="$rp99" -v t="$(bar "$name")" \
          'BEGIN { print (r >= t && a < b) ? "MET" : "not met" }')
        verdict="$verdict
  $load, $name: $met (${ratio}x against >= $(bar "$name")x, p99 $p99 vs $rp99 ms)"
      fi
    done
    echo
  done
done
[ -n "$verdict" ] && echo "target at 64 connections (the $ref's req/s times the bar, lower p99):$verdict"

# The server's CPU per request (us, the whole process over the load) and its ratio to the
# reference's; then the threads by role, in % of a core (loop/reactor/submit/pool).
echo "server CPU per request, us (ratio to $ref's); threads in % of a core: loop/reactor/submit/pool"
printf '%-7s %5s' load conns
for name in "${names[@]}"; do printf ' | %-26s' "$name"; done
echo
i=0
for load in "${loads[@]}"; do
  for c in "${conns[@]}"; do
    i=$((i + 1))
    read -r _ _ _ _ rcpu _ <<<"$(sed -n "${i}p" "$log/$ref.points")"
    printf '%-7s %5s' "$load" "$c"
    for name in "${names[@]}"; do
      read -r _ _ _ _ cpu lo re su po _ <<<"$(sed -n "${i}p" "$log/$name.points")"
      if [ -z "${cpu:-}" ] || [ "$cpu" = - ]; then
        printf ' | %-26s' "(no CPU figure)"
        continue
      fi
      ratio=$(awk -v a="$cpu" -v b="${rcpu:-0}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
      printf ' | %6s %5sx %13s' "$cpu" "$ratio" "$lo/$re/$su/$po"
    done
    echo
  done
done

# CSV for bench/plot.sh: per load, one row per connection count, req/s and p99 per configuration.
if [ -n "${CUV_BENCH_CSV_DIR:-}" ]; then
  i=0
  for load in "${loads[@]}"; do
    csv=$CUV_BENCH_CSV_DIR/tcp-infer-$load.csv
    { printf 'conns'
      for name in "${names[@]}"; do printf ',%s,%s' "$name" "$name"; done
      echo
      for c in "${conns[@]}"; do
        i=$((i + 1))
        printf '%s' "$c"
        for name in "${names[@]}"; do
          read -r _ rps p99 _ <<<"$(sed -n "${i}p" "$log/$name.points")"
          printf ',%s,%s' "${rps:-}" "${p99:-}"
        done
        echo
      done; } >"$csv" || status=1
  done
  echo "CSV: $CUV_BENCH_CSV_DIR/tcp-infer-{$(IFS=,; echo "${loads[*]}")}.csv"
fi
# The stage timeline: where a request's time goes, stage by stage (apps/tcp-infer/api/stages.h).
stage_every=${TCP_INFER_BENCH_STAGE_SAMPLE:-$((sim ? 10 : 1000))}
read -r -a stage_conns <<<"${TCP_INFER_BENCH_STAGE_CONNS:-16 64}"
for entry in "${configs[@]}"; do
  [ "$stage_every" = 0 ] && break
  name=${entry%%|*}
  case " ${entry#*|} " in *" --baseline "* | *" --offload "* | *" --coalesce"* | *" --isolate "*)
    continue ;; esac
  read -r -a flags <<<"${entry#*|}"
  for c in "${stage_conns[@]}"; do
    loads=()
    tcp_infer_client_loads "$secs" "$batch" "$max_threads" "$c"
    echo "stage timeline: $name, $c connections, one request in $stage_every"
    TCP_INFER_BATCH=$batch "$bin/tcp-infer-run" "$bin/tcp-infer" "${flags[@]}" \
      --stage-sample "$stage_every" "${loads[@]}" 2>&1 |
      sed -n '/^tcp-infer: stage timeline of /,$p' | tail -n +2
  done
done
[ $have_wrk = 1 ] || echo "(wrk not installed: client points only)"
[ $status -eq 0 ] || echo "tcp-infer bench: errors or wrong replies (see above)"
exit $status
