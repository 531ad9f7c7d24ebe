#!/usr/bin/env bash
# tcp-infer-stages: --stage-sample times one request in N and prints each stage's median and p99
# at exit. With N = 1 every answered request is sampled (the verifying client's count, with graphs,
# the default, and without, --no-graph), with N = 7 one in seven of them (both ways), and the
# baseline, which does not go through cuv one request at a time, prints no timeline. Each printed
# stage has two whole numbers, a median no larger than its p99. Nothing timed is asserted.
#
#   stages.sh RUN SERVER CLIENT
set -uo pipefail
run=${1:?usage: stages.sh RUN SERVER CLIENT}; server=${2:?}; client=${3:?}
requests=400
fail=0
check() { # name, expected sampled count ("none": no timeline), server options...
  local name=$1 want=$2
  shift 2
  local out
  out=$("$run" "$server" "$@" -- "$client" --connections 4 --depth 2 --batch 1-16 \
    --requests "$requests" 2>&1)
  local status=$?
  if grep -q 'exited with status 77 before listening' <<<"$out"; then
    echo "stages: no driver here (status 77)"
    exit 77
  fi
  [ $status -eq 0 ] || { echo "$out"; echo "stages: $name: the run failed"; fail=1; return; }
  local head
  head=$(grep '^tcp-infer: stage timeline of ' <<<"$out")
  if [ "$want" = none ]; then
    [ -z "$head" ] || { echo "stages: $name: a timeline where none was asked: $head"; fail=1; }
    echo "stages: $name: no timeline, as asked"
    return
  fi
  local got
  got=$(sed -nE 's/^tcp-infer: stage timeline of ([0-9]+) sampled requests.*/\1/p' <<<"$head")
  [ "$got" = "$want" ] || { echo "$out"; echo "stages: $name: $got sampled, want $want"; fail=1; }
  local lines
  lines=$(sed -n '/^tcp-infer: stage timeline of /,$p' <<<"$out" | tail -n +2 |
    awk 'NF >= 3 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $1 <= $2' | wc -l)
  [ "$lines" -eq 9 ] || { echo "$out"; echo "stages: $name: $lines of 9 stage lines"; fail=1; }
  echo "stages: $name: $got sampled, $lines stages"
}
check graph "$requests" --stage-sample 1
check cuv "$requests" --no-graph --stage-sample 1
check graph-1-in-7 "$(( (requests + 6) / 7 ))" --stage-sample 7
check cuv-1-in-7 "$(( (requests + 6) / 7 ))" --no-graph --stage-sample 7
check baseline none --baseline --stage-sample 1
check off none
exit $fail
