#!/usr/bin/env bash
# Host instructions per op of a 100-op chain of empty kernels run with cuv_sync, on the
# simulator, measured with callgrind. The chain program runs twice, with K1 and K2 chains (plus
# one warm-up chain each), so start-up and first-use costs cancel:
#   per op = (I(K2) - I(K1)) / ((K2 - K1) * 100)
# Reported per op:
#   all threads      everything, the simulator's stream workers (the "GPU") included
#   calling thread   the thread that builds and runs the chains: what a program pays on its thread
#     in driver      ... inside the driver's entry points (inclusive: cuLaunchKernel & co. of
#                    libcuv-sim, the stand-in for libcuda, with the malloc/locks they call)
#     cuv            ... the rest: libcuv building and executing the ops, the mallocs and locks it
#                    calls, and the benchmark's own loop (a few instructions per op)
#     libcuv self    ... instructions in libcuv's own code alone (no libc)
#
#   bench/chain-callgrind.sh [BUILD_DIR] [-- extra cuv-bench-chain args, e.g. --seq]
#   K1, K2            chain counts (default 20 and 120)
# The inline spin is disabled (CUV_SPIN_BUDGET_US=0): under valgrind its polling count
# depends on timing, which would make the figure noisy rather than say more.
set -euo pipefail

build=${1:-build}
shift || true
[ "${1:-}" = "--" ] && shift
k1=${K1:-20}
k2=${K2:-120}
bench=$build/bench/cuv-bench-chain
[ -x "$bench" ] || { echo "no $bench: build cuv first (meson setup $build && ninja -C $build)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

summary() { awk '/^summary:/ { print $2 }' "$1"; }

# Of one thread's profile: "inclusive Ir in driver entry points, self Ir in libcuv". The entry
# points (cu* functions of libcuv-sim) do not call one another, so their inclusive costs add up.
driver_and_self() {
  { callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null | sed 's/^/I /'
    callgrind_annotate --inclusive=no --threshold=100 "$1" 2>/dev/null | sed 's/^/S /'; } | awk '
    { ir = $2; gsub(",", "", ir) }
    $1 == "I" && /libcuv-sim\.so/ && /:cu[A-Z][A-Za-z0-9_]* \[/ { driver += ir }
    $1 == "S" && /\[[^]]*\/libcuv\.so[^]]*\]$/ { self += ir }
    END { printf "%d %d\n", driver, self }'
}

for k in "$k1" "$k2"; do
  CUV_DRIVER=sim CUV_SPIN_BUDGET_US=0 valgrind --tool=callgrind --separate-threads=yes \
    --callgrind-out-file="$work/cg.$k" "$bench" --chains "$k" "$@" >"$work/log.$k" 2>&1 ||
    { cat "$work/log.$k" >&2; exit 1; }
  all=0
  for f in "$work/cg.$k"-*; do all=$((all + $(summary "$f"))); done
  main=$(summary "$work/cg.$k-01") # thread 1: the program's main thread
  read -r driver self < <(driver_and_self "$work/cg.$k-01")
  echo "K=$k: all threads $all Ir; calling thread $main (driver $driver, libcuv self $self)"
  eval "all$k=$all main$k=$main driver$k=$driver self$k=$self"
done

ops=$(( (k2 - k1) * 100 ))
per_op() { awk -v a="$1" -v b="$2" -v n="$ops" 'BEGIN { printf "%6.0f", (b - a) / n }'; }
echo "instructions per op, (I(K2)-I(K1)) / ((K2-K1)*100), K1=$k1 K2=$k2, args: ${*:-none}"
echo "  all threads     $(per_op "$((all$k1))" "$((all$k2))")"
echo "  calling thread  $(per_op "$((main$k1))" "$((main$k2))")"
echo "    in driver     $(per_op "$((driver$k1))" "$((driver$k2))")"
echo "    cuv           $(per_op "$((main$k1 - driver$k1))" "$((main$k2 - driver$k2))")"
echo "    libcuv self   $(per_op "$((self$k1))" "$((self$k2))")"
