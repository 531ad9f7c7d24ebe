#!/usr/bin/env bash
# Same-run comparison of two trees on one machine: builds the latency and pipeline benches of an
# older tree (a `git worktree add` of it) and of this one side by side, then runs them
# alternately, old then new, twice for latency and once for pipeline, so both meet the same
# machine state. Results go to $OUT (default /tmp/cuv-compare) and the key lines to stdout.
#
#   bench/compare-trees.sh OLD_TREE [OLD_BUILD] [NEW_BUILD]
set -u
old_tree=${1:?usage: bench/compare-trees.sh OLD_TREE [OLD_BUILD] [NEW_BUILD]}
old_build=${2:-/tmp/cuv-old-build}
new_build=${3:-/tmp/cuv-new-build}
out=${OUT:-/tmp/cuv-compare}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"

build() { # BUILD_DIR SOURCE_DIR
  [ -f "$1/meson-private/coredata.dat" ] || meson setup "$1" "$2" >"$out/setup.txt" 2>&1
  ninja -C "$1" bench/cuv-bench-latency bench/cuv-bench-pipeline >"$out/ninja.txt" 2>&1 ||
    { tail -n 20 "$out/ninja.txt"; return 1; }
}

run() { # NAME BUILD_DIR OUTPUT ARGS...
  local name=$1 dir=$2 file=$3
  shift 3
  (cd "$dir" && timeout 150 "./bench/$name" "$@") >"$file" 2>&1
}

build "$old_build" "$old_tree" && build "$new_build" "$root" || exit 1
for round in 1 2; do
  for tree in old new; do
    dir=$old_build && [ $tree = new ] && dir=$new_build
    run cuv-bench-latency "$dir" "$out/latency-$tree-$round.txt" --iters 10000 --tp-ms 300 \
      --idle-ms 500
    echo "== latency, $tree tree, round $round"
    grep -E 'raw: launch \+ cuStream|cuv_sync|cuv bridge|^ +(64|256) ' "$out/latency-$tree-$round.txt"
  done
done
for tree in old new; do
  dir=$old_build && [ $tree = new ] && dir=$new_build
  run cuv-bench-pipeline "$dir" "$out/pipeline-$tree.txt" --reps 31
  echo "== pipeline, $tree tree"
  tail -n 22 "$out/pipeline-$tree.txt"
done
