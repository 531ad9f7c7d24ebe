#!/usr/bin/env bash
# tcp-infer-bench-smoke: the tcp-infer bench runs to the end on the simulator and prints its two
# tables, requests/s and the server's CPU per request by thread role, with a figure in every cell
# of both (one second per point, 4 connections, the thread pool against cuv), and cuv's stage
# timeline at 4 connections with its nine stages. Nothing timed is asserted: the simulator's
# figures say nothing about a GPU.
#
#   bench-smoke.sh BENCH
set -uo pipefail
bench=${1:?usage: bench-smoke.sh BENCH}
out=$(CUV_DRIVER=sim TCP_INFER_BENCH_SECONDS=1 TCP_INFER_BENCH_CONNS=4 TCP_INFER_BENCH_STAGE_CONNS=4 \
  TCP_INFER_BENCH_CONFIGS="baseline|--baseline;cuv|--no-graph" PATH=/usr/bin:/bin "$bench" 2>&1)
status=$?
echo "$out"
[ $status -eq 0 ] || { echo "bench-smoke: the bench exited with $status"; exit 1; }
fail=0
grep -q '^server CPU per request' <<<"$out" || { echo "bench-smoke: no CPU table"; fail=1; }
# The CPU table's row: "client 4 | US RATIOx L/R/S/P | ..." for both configurations.
row=$(sed -n '/^server CPU per request/,$p' <<<"$out" | grep -m 1 '^client ')
cells=$(grep -oE '[0-9.]+ +[0-9.]+x +[0-9]+/[0-9]+/[0-9]+/[0-9]+' <<<"$row" | wc -l)
[ "$cells" -eq 2 ] || { echo "bench-smoke: $cells CPU cells of 2 in: $row"; fail=1; }
grep -q '(no CPU figure)\|(no result)' <<<"$out" && { echo "bench-smoke: a cell is missing"; fail=1; }
stages=$(sed -n '/^stage timeline: cuv, 4 connections/,/total:/p' <<<"$out" |
  grep -cE '^ +[0-9]+ +[0-9]+  ')
[ "$stages" -eq 9 ] || { echo "bench-smoke: $stages of 9 stage lines for cuv"; fail=1; }
grep -q '^stage timeline: baseline' <<<"$out" && { echo "bench-smoke: a baseline timeline"; fail=1; }
[ $fail -eq 0 ] && echo "bench-smoke: both tables and the stage timeline complete"
exit $fail
