#!/usr/bin/env bash
# tcp-infer --isolate: how fast the server comes back from a sticky device fault (POST
# /debug/fault), a hung worker (POST /debug/hang: a kernel that never ends, killed by the
# watchdog after --isolate-timeout) and a kill -9 of its worker process, under load. One server
# (--isolate --debug-fault) per run; tcp-infer-fault-client keeps verified requests pipelined on
# its connections and triggers the events one after another, while wrk (when installed) adds
# load on other connections. For each event: the time from the debug request's send (or the
# kill) until every request in flight at that moment was answered, and until the first correct
# answer from the worker that took over; how many of those in flight got a correct answer and how
# many an error (issue 16's bar: none, since the server replays what a lost worker held on the
# next one; the client fails on any error, and on any wrong answer); whether the ready spare was
# promoted (promoted=1) or a new process had to start (promoted=0); for a hang, the correct
# answers per second while the hung kernel ran (streams.c routes around its stream), and those
# the spare gave before the watchdog's kill (the requests stuck behind the hung kernel, moved to
# it after --hang-suspect-ms: the first after how long, the longest latency of them); for a
# stop (SIGSTOP to the worker, SIGCONT once the spare answered what it held: a worker that
# neither answers nor ends, moved off after --stall-suspect-ms), the answers the spare gave
# while it was stopped and the first after how long. With nvidia-smi, the GPU memory each worker process holds (a CUDA context, the module, the weights,
# the workspaces): what the spare costs.
#
# Three runs: "spare" (the default --isolate-spares 1; before each event the client waits until
# the spare is ready, and every recovery must be its promotion; each hang must see answers from
# the spare before the watchdog's kill; each stop must be answered by the spare while the worker
# is stopped), "no-spare" (--isolate-spares 0, fewer events: each
# recovery waits for a new worker process), for comparison, and "double" (the active worker and
# its spare killed together, then the active one and, as soon as it took over, the promoted
# spare: each recovery waits for a new worker process, with no error).
#
#   apps/tcp-infer/bench/tcp-infer-fault.sh [BUILD_DIR]  from the source tree (default: build)
#   apps/tcp-infer/tcp-infer-fault-bench         from the build tree (its copy; scripts/gpu runs it)
#
#   CUV_DRIVER                 sim: run on the simulator (its figures say little about a GPU)
#   TCP_INFER_FAULT_FAULTS     debug faults (default 5)
#   TCP_INFER_FAULT_HANGS      debug hangs (default 1), each found after TCP_INFER_FAULT_TIMEOUT
#   TCP_INFER_FAULT_TIMEOUT    the server's --isolate-timeout in ms (default 1000)
#   TCP_INFER_FAULT_SUSPECT    the server's --hang-suspect-ms (default 100, the server's default)
#   TCP_INFER_FAULT_STALL      the server's --stall-suspect-ms (default 20, the server's default;
#                              0: off, then only --hang-suspect-ms answers a stop)
#   TCP_INFER_FAULT_STOPS      stops of the worker (default 2; 0 when TCP_INFER_FAULT_STALL is 0:
#                              the client requires each stop to be seen as a stall)
#   TCP_INFER_FAULT_KILLS      kills of the worker (default 2)
#   TCP_INFER_FAULT_NOSPARE    0: skip the no-spare run; else its faults and kills (default 2: 2
#                              faults and 2 kills)
#   TCP_INFER_FAULT_DOUBLE     0: skip the double run; else its double kills and second kills
#                              (default 2: 2 of each)
#   TCP_INFER_FAULT_CONNS      the verifying client's connections (default 16), depth 8 each
#   TCP_INFER_FAULT_BATCH      rows per request (default 8)
#   TCP_INFER_FAULT_WRK        0: no wrk even when installed; else its connections (default 32)
# Exit status: 0 when every event recovered and every answer was right, 77 without a CUDA
# driver, 1 otherwise, 2 on a usage error.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/tcp-infer-bin.sh"
tcp_infer_bench_options tcp-infer-fault-bench "${1:-}"
tcp_infer_bin "tcp-infer-fault bench" "${1:-}"
faults=${TCP_INFER_FAULT_FAULTS:-5}
hangs=${TCP_INFER_FAULT_HANGS:-1}
timeout_ms=${TCP_INFER_FAULT_TIMEOUT:-1000}
suspect_ms=${TCP_INFER_FAULT_SUSPECT:-100}
stall_ms=${TCP_INFER_FAULT_STALL:-20}
stops=${TCP_INFER_FAULT_STOPS:-$([ "$stall_ms" = 0 ] && echo 0 || echo 2)}
kills=${TCP_INFER_FAULT_KILLS:-2}
nospare=${TCP_INFER_FAULT_NOSPARE:-2}
double=${TCP_INFER_FAULT_DOUBLE:-2}
conns=${TCP_INFER_FAULT_CONNS:-16}
batch=${TCP_INFER_FAULT_BATCH:-8}
wrk_conns=${TCP_INFER_FAULT_WRK:-32}
command -v wrk >/dev/null 2>&1 || wrk_conns=0

# The load: wrk in the background for as long as the fault client runs (it is stopped after).
# $1 is the port (tcp-infer-run substitutes it).
load='port=$1; shift
  if [ "$WRK_CONNS" != 0 ]; then
    TCP_INFER_BATCH=$BATCH wrk -t2 -c"$WRK_CONNS" -d600s --latency -s "$BIN/wrk.lua" \
      "http://127.0.0.1:$port/infer" >"$WRK_OUT" 2>&1 &
    wrk_pid=$!
    sleep 1
  fi
  "$BIN/tcp-infer-fault-client" --port "$port" "$@"
  rc=$?
  [ -n "${wrk_pid:-}" ] && kill -INT "$wrk_pid" && wait "$wrk_pid"
  exit $rc'

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# Per kind: median and worst of both times, the requests in flight that got an answer or an
# error, and how many recoveries were promotions.
summarize() {
  awk '
    /^RESULT event/ {
      delete r # the fields of this line alone (those a hang adds must not stay)
      for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] }
      k = r["event"]; n[k]++
      a[k, n[k]] = r["answered_us"]; f[k, n[k]] = r["first_correct_us"]
      ok[k] += r["inflight_ok"]; err[k] += r["inflight_err"]; pr[k] += r["promoted"] > 0
      if ("window_rps" in r) { wr[k] += r["window_rps"]; wn[k]++ }
      if ("window_spare" in r) {
        ws[k] += r["window_spare"]; fs[k, n[k]] = r["first_spare_us"]
        if (r["spare_max_latency_us"] > sl[k]) sl[k] = r["spare_max_latency_us"]
      }
      if ("held_spare" in r) { hs[k] += r["held_spare"]; hn[k]++; fh[k, n[k]] = r["first_spare_us"] }
    }
    function sort(x, m, k,   i, j, t) {
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
        if (x[k, j] < x[k, i]) { t = x[k, i]; x[k, i] = x[k, j]; x[k, j] = t }
    }
    function median(x, m, k,   h) {
      h = int((m + 1) / 2)
      return m % 2 ? x[k, h] : (x[k, h] + x[k, h + 1]) / 2
    }
    END {
      for (k in n) {
        sort(a, n[k], k); sort(f, n[k], k); if (wn[k]) sort(fs, n[k], k)
        printf "  %-5s x%d: in flight answered %.1f ms median, %.1f worst; first correct answer " \
               "%.1f ms median, %.1f worst; in flight %d correct, %d errors; spare promoted %d " \
               "of %d\n", k, n[k], median(a, n[k], k) / 1000, a[k, n[k]] / 1000,
               median(f, n[k], k) / 1000, f[k, n[k]] / 1000, ok[k], err[k], pr[k], n[k]
        if (wn[k])
          printf "        correct answers per second while the kernel hung: %.1f (mean); " \
                 "from the spare before the kill: %d, the first after %.1f ms median, the " \
                 "longest latency %.1f ms\n", wr[k] / wn[k], ws[k], median(fs, n[k], k) / 1000,
                 sl[k] / 1000
        if (hn[k]) {
          sort(fh, n[k], k)
          printf "        from the spare while the worker was stopped: %d, the first after %.1f " \
                 "ms median\n", hs[k], median(fh, n[k], k) / 1000
        }
      }
    }' "$1"
}

# The GPU memory of the compute processes, sampled every half second while a run lasts
# ($log/sampling removed stops it): "pid MiB" lines in $log/gpu-mem.txt.
sample_gpu_memory() {
  while [ -e "$log/sampling" ]; do
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
      tr -d ',' >>"$log/gpu-mem.txt"
    sleep 0.5
  done
}

# The largest memory each process held, and their median: what a worker (and a spare) costs.
report_gpu_memory() {
  [ -s "$log/gpu-mem.txt" ] || return 0
  awk '{ if ($2 > m[$1]) m[$1] = $2 } END { for (p in m) print m[p] }' "$log/gpu-mem.txt" |
    sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "  GPU memory per worker process " \
      "(%d processes): median %d MiB, largest %d MiB: what each spare holds idle\n", NR,
      v[int((NR + 1) / 2)], v[NR] }'
}

# One run: NAME, then the server's extra options, --, the fault client's options. 0, 77 or 1.
run() {
  local name=$1 rc
  shift
  : >"$log/gpu-mem.txt"
  if command -v nvidia-smi >/dev/null 2>&1 && [ "${CUV_DRIVER:-}" != sim ]; then
    touch "$log/sampling"
    sample_gpu_memory &
  fi
  local -a server=()
  while [ "$1" != -- ]; do server+=("$1"); shift; done
  shift
  BIN=$bin BATCH=$batch WRK_CONNS=$wrk_conns WRK_OUT=$log/wrk.txt \
    "$bin/tcp-infer-run" "$bin/tcp-infer" --isolate --debug-fault "${server[@]}" \
    -- bash -c "$load" load '{port}' --connections "$conns" --depth 8 --batch "$batch" \
    --warmup 500 "$@" >"$log/out.txt" 2>"$log/err.txt"
  rc=$?
  rm -f "$log/sampling"
  wait
  [ $rc -eq 77 ] && return 77
  echo "$name: tcp-infer ${server[*]}; tcp-infer-fault-client $*"
  grep '^RESULT event' "$log/out.txt" | sed 's/^/  /'
  summarize "$log/out.txt"
  grep '^RESULT summary' "$log/out.txt" | sed 's/^/  /'
  report_gpu_memory
  if [ "$wrk_conns" != 0 ] && [ -s "$log/wrk.txt" ]; then
    echo "  wrk: $(grep -m 1 '^Requests/sec' "$log/wrk.txt"), $(grep -m 1 'requests in' \
      "$log/wrk.txt" | sed 's/^ *//'), non-2xx: $(grep -m 1 -o 'Non-2xx or 3xx responses: [0-9]*' \
      "$log/wrk.txt" | grep -o '[0-9]*$' || echo 0)"
  fi
  grep -h '^tcp-infer: \(spare \)\?worker [0-9]' "$log/err.txt" | sed 's/^/    /'
  if [ $rc -ne 0 ]; then
    echo "tcp-infer-fault bench: $name FAILED (status $rc):"
    tail -n 20 "$log/err.txt"
    return 1
  fi
  grep -m 1 -o 'on the [a-zA-Z]* ([^)]*)' "$log/err.txt" >"$log/device.txt"
  return 0
}

echo "tcp-infer-fault bench: $conns verified connections x 8 in flight, batch $batch," \
  "$([ "$wrk_conns" = 0 ] && echo "no wrk" || echo "wrk on $wrk_conns more connections")"
run spare --isolate-timeout "$timeout_ms" --hang-suspect-ms "$suspect_ms" \
  --stall-suspect-ms "$stall_ms" -- --faults "$faults" --hangs "$hangs" --kills "$kills" \
  --stops "$stops" --spare --moves
rc=$?
if [ $rc -eq 77 ]; then
  echo "tcp-infer-fault bench: no CUDA driver (set CUV_DRIVER=sim to run it on the simulator)"
  exit 77
fi
if [ "$nospare" != 0 ]; then
  run no-spare --isolate-spares 0 -- --faults "$nospare" --hangs 0 --kills "$nospare" || rc=1
fi
if [ "$double" != 0 ] && [ $rc -ne 77 ]; then
  run double -- --faults 0 --hangs 0 --kills 0 --double-kills "$double" \
    --second-kills "$double" || rc=1
fi
echo "tcp-infer-fault bench: $(cat "$log/device.txt" 2>/dev/null)"
exit $rc
