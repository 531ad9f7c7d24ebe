#!/usr/bin/env bash
# tcp-infer's demo, run by scripts/demo from the build tree: a guided run. It says what it
# measures, then serves tcp-infer twice under the same load, each server on an ephemeral port:
#   cuv          tcp-infer --loops 4 --coalesce (and the arguments; the server's default replays
#                each batch as a CUDA graph, --no-graph among them takes the plain path): GPU
#                work whose completions reach the loops through cuv's bridge
#   thread pool  tcp-infer --baseline --loops 4 --coalesce: the same loops and batching, each
#                batch's GPU work in libuv's thread pool, blocking there in cuv_sync (like with
#                like: against one pool loop without batching cuv's ratio would be the batching's)
# The load is the verifying client (every reply checked against the host) and then wrk, where it
# is installed. It prints each server's requests/s and latencies, their ratio, and what to try
# next. It runs on the GPU when a CUDA driver loads, else on cuv's CPU simulator (CUV_DRIVER=sim),
# saying which and why; CUV_DRIVER set by the caller is respected as is. A driver that loads but
# fails is an error, not a reason to fall back.
# Exit status: 0 when every reply was right; 77 when CUV_DRIVER names a driver that does not
# load; 2 on a usage error (the server's); non-zero when a server or a reply failed.
#   TCP_INFER_DEMO_SECONDS  seconds per load (default 3)
#   TCP_INFER_DEMO_WRK      wrk to run (default: the PATH's, where there is one); none: the
#                           verifying client alone
#   tcp-infer-demo [SERVER OPTIONS...] | --help | --version
set -uo pipefail
case ${1:-} in
--help)
  sed -n '2,/^set -uo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0 ;;
--version) echo "tcp-infer-demo (tcp-infer's tools)"; exit 0 ;;
esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
secs=${TCP_INFER_DEMO_SECONDS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The thread-pool server runs in every demo: a --baseline among the arguments is dropped.
cuv_opts=(--loops 4 --coalesce)
dropped=0
for arg in "$@"; do
  if [ "$arg" = --baseline ]; then
    dropped=1
  else
    cuv_opts+=("$arg")
  fi
done
base_opts=(--baseline --loops 4 --coalesce)

# Prints its words wrapped to fit 96 columns, the lines after the first indented under a label.
say() { fold -s -w 88 <<<"$*" | sed 's/ *$//; 1!s/^/        /'; }

# A path as the caller would type it: relative to the current folder when under it.
shown() {
  local rel
  rel=$(realpath --relative-to=. "$1" 2>/dev/null) || rel=$1
  case $rel in ../*) echo "$1" ;; *) echo "$rel" ;; esac
}

wrk=${TCP_INFER_DEMO_WRK:-wrk}
have_wrk=0
[ "$wrk" != none ] && command -v "$wrk" >/dev/null 2>&1 && have_wrk=1
wrk_note=", then wrk"
[ $have_wrk = 1 ] || wrk_note=" (wrk, where installed, adds a second load)"

# Which driver: a server that starts and stops at once says (exit 77: no driver loads; the
# banner names the device). Bad options stop the demo here, before it says anything, with the
# server's message.
probe() {
  "$here/tcp-infer" --port 0 --duration 0.01 "${cuv_opts[@]}" >"$work/probe.out" \
    2>"$work/probe.err" </dev/null
}
probe
status=$?
fallback=0
if [ $status -eq 77 ] && [ -z "${CUV_DRIVER:-}" ]; then
  why=$(sed -n 's/^tcp-infer: no CUDA driver: \(.*\); CUV_DRIVER=sim .*/\1/p' "$work/probe.err")
  fallback=1
  export CUV_DRIVER=sim
  probe
  status=$?
fi
if [ $status -ne 0 ]; then
  cat "$work/probe.err" >&2
  exit $status
fi
# The banner: "tcp-infer: MODE mode on the GPU (DEVICE), N loops per device, ...".
banner=$(grep -m 1 '^tcp-infer: .* mode on ' "$work/probe.out")
device=$(sed -n 's/.* mode on [a-zA-Z ]* (\(.*\)), [0-9]* loops\{0,1\} per .*/\1/p' <<<"$banner")
sim=0
case $banner in *" mode on the simulator "*) sim=1 ;; esac

cat <<EOF
cuv demo: tcp-infer, an HTTP server answering inference requests (a small MLP on the GPU),
served twice under the same load, one server after the other:
  cuv          tcp-infer ${cuv_opts[*]}
               each libuv loop batches the requests of one iteration into one GPU submission,
               whose completion cuv brings back to the loop
  thread pool  tcp-infer ${base_opts[*]}
               the same loops and batching, each batch's GPU work the usual libuv way:
               uv_queue_work, with a blocking cuv_sync in libuv's thread pool
  load         16 connections with 4 requests of 8 rows in flight each, ${secs} s: the verifying
               client (every reply checked against the host)${wrk_note}
EOF
[ $dropped = 1 ] &&
  echo "  (the thread-pool server runs in every demo: the argument --baseline was dropped)"
if [ $fallback = 1 ]; then
  say "driver: cuv's CPU simulator (CUV_DRIVER=sim), since the GPU path needs an NVIDIA driver" \
    "and none loads here: ${why:-no CUDA driver}"
fi
if [ $sim = 1 ]; then
  [ $fallback = 1 ] || echo "driver: cuv's CPU simulator (CUV_DRIVER=$CUV_DRIVER)"
  echo "note:   on the simulator, the GPU's work runs on CPU threads of this $(nproc)-core machine,"
  echo "        beside both servers and the load: these timings say nothing about cuv on a GPU"
  echo "        (bench/RESULTS.md has figures measured on one)"
else
  echo "driver: the GPU, ${device:-device 0} (CUV_DRIVER=${CUV_DRIVER:-cuda})"
fi

loads=(-- "$here/tcp-infer-client" --connections 16 --depth 4 --batch 8 --duration "$secs")
if [ $have_wrk = 1 ]; then
  export TCP_INFER_BATCH=8 # wrk.lua's batch
  loads+=(-- "$wrk" -t2 -c16 -d"${secs}s" --latency -s "$here/wrk.lua"
    "http://127.0.0.1:{port}/infer")
fi

# serve KEY LABEL OPTIONS...: one server under the loads; its figures into $work/KEY.fig as
# "client RPS P50_MS P99_MS REPLIES WRONG" and "wrk RPS P50 P99"; the whole output in KEY.log,
# shown only when the run failed.
serve() {
  local name=$1 label=$2
  shift 2
  echo
  echo "$label: tcp-infer $*"
  "$here/tcp-infer-run" "$here/tcp-infer" "$@" "${loads[@]}" >"$work/$name.log" 2>&1
  local rc=$?
  awk '
    /^RESULT / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      printf "client %.0f %.2f %.2f %d %d\n", v["rps"], v["p50_us"] / 1000, v["p99_us"] / 1000,
             v["requests"], v["errors"] + v["mismatches"]
    }
    /^ +50% / { p50 = $2 }
    /^ +99% / { p99 = $2 }
    /^Requests\/sec:/ { printf "wrk %.0f %s %s\n", $2, p50, p99 }
  ' "$work/$name.log" >"$work/$name.fig"
  local kind rps p50 p99 replies wrong
  while read -r kind rps p50 p99 replies wrong; do
    if [ "$kind" = client ]; then
      [ "$wrong" = 0 ] && wrong="all right" || wrong="$wrong WRONG"
      printf '  verifying client %7s requests/s, latency p50 %s ms, p99 %s ms; %s replies, %s\n' \
        "$rps" "$p50" "$p99" "$replies" "$wrong"
    else
      printf '  wrk              %7s requests/s, latency p50 %s, p99 %s\n' "$rps" "$p50" "$p99"
    fi
  done <"$work/$name.fig"
  if [ $rc -ne 0 ]; then
    echo "demo: the $label run failed (status $rc); its output:" >&2
    sed 's/^/  /' "$work/$name.log" >&2
    exit $rc
  fi
}
serve cuv cuv "${cuv_opts[@]}"
serve pool "thread pool" "${base_opts[@]}"

# The ratios, load by load.
ratio() {
  awk -v k="$1" '
    FNR == 1 { file++ }
    $1 == k { r[file] = $2 }
    END { if (r[1] && r[2]) printf "%.2fx", r[1] / r[2]; else printf "-" }
  ' "$work/cuv.fig" "$work/pool.fig"
}
echo
summary="cuv against the thread pool: $(ratio client) the requests/s with the verifying client"
[ $have_wrk = 1 ] && summary+=", $(ratio wrk) with wrk"
echo "$summary"
if [ $sim = 1 ]; then
  echo "        (on the simulator: a measure of neither)"
else
  echo "        (on ${device:-this GPU}; bench/RESULTS.md has more loads and configurations)"
fi

bin=$(shown "$here")
env=""
[ $sim = 1 ] && env="CUV_DRIVER=sim "
echo
echo "try next:"
next() { printf '  %s\n      %s\n' "$1" "$2"; }
next "$env$bin/tcp-infer --port 8080" \
  "serve it yourself (apps/tcp-infer/README.md has curl requests to send it, and every option)"
next "scripts/demo --no-graph" "this demo without CUDA graphs (each batch enqueued call by call)"
next "$env$bin/tcp-infer-bench" \
  "more configurations, at 1, 16 and 64 connections (bench/RESULTS.md has a GPU's figures)"
next "scripts/test" "cuv's tests; include/cuv.h documents the API, samples/ has small programs"
