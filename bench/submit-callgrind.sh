#!/usr/bin/env bash
# The libuv bridge's host instructions per submission on the loop thread, on the simulator,
# measured with callgrind: cuv-bench-submit runs K pipelines resubmitting an empty kernel from
# their callbacks, twice, with N1 and N2 submissions, so start-up and first-use costs cancel:
#   per submission = (I(N2) - I(N1)) / (N2 - N1)
# Reported per submission, for the loop thread (thread 1):
#   loop thread      everything it runs: building the op, cuv_uv_submit, the driver calls, libuv,
#                    the drain, the callback, retirement
#     in driver      ... inside the driver's entry points (the cu* functions of libcuv-sim)
#     cuv + libuv    ... the rest
#     libcuv self    ... instructions in libcuv's and libcuv-uv's own code alone
# The inline spin is off (CUV_SPIN_BUDGET_US=0, so the loop does not poll either): under
# valgrind the polling count depends on timing. Completions then come from the reactor thread,
# and how many a wake-up drains at once varies a little from run to run.
#
#   bench/submit-callgrind.sh [BUILD_DIR]
#   N1, N2, K        submissions and pipelines (default 2000, 12000, 64)
#   PROFILES=DIR     keep the two runs' profiles (DIR/cg.N1-01, DIR/cg.N2-01: the loop thread)
#                    for callgrind_annotate
set -euo pipefail

build=${1:-build}
n1=${N1:-2000}
n2=${N2:-12000}
k=${K:-64}
bench=$build/bench/cuv-bench-submit
[ -x "$bench" ] || { echo "no $bench: build cuv with libuv first" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }

if [ -n "${PROFILES:-}" ]; then
  mkdir -p "$PROFILES"
  work=$(cd "$PROFILES" && pwd)
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

. "$(dirname "${BASH_SOURCE[0]}")/callgrind-measure.sh"

for n in "$n1" "$n2"; do
  CUV_DRIVER=sim CUV_SPIN_BUDGET_US=0 valgrind --tool=callgrind --separate-threads=yes \
    --callgrind-out-file="$work/cg.$n" "$bench" --submissions "$n" --pipelines "$k" \
    >"$work/log.$n" 2>&1 || { cat "$work/log.$n" >&2; exit 1; }
  read -r total driver self _ < <(callgrind_measure "$work/cg.$n-01")
  echo "N=$n: loop thread $total Ir (driver $driver, libcuv self $self)"
  eval "total$n=$total driver$n=$driver self$n=$self"
done

per() { callgrind_per "$@"; }
echo "instructions per submission, (I(N2)-I(N1)) / (N2-N1), N1=$n1 N2=$n2 K=$k"
echo "  loop thread     $(per "$((total$n1))" "$((total$n2))")"
echo "    in driver     $(per "$((driver$n1))" "$((driver$n2))")"
echo "    cuv + libuv   $(per "$((total$n1 - driver$n1))" "$((total$n2 - driver$n2))")"
echo "    libcuv self   $(per "$((self$n1))" "$((self$n2))")"
