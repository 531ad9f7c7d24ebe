#!/usr/bin/env bash
# Runs one libFuzzer target (a test of suite `fuzz`, see meson.build):
#   run.sh FUZZER NAME ARTIFACTS CORPUS REGRESSIONS
# First replays the committed corpus and regressions (a regression that crashes again fails here),
# then fuzzes for CUV_FUZZ_TIME seconds (default 60) from a scratch copy of both, so the
# committed corpus stays small. A crash leaves its input in ARTIFACTS (crash-*, leak-*, timeout-*):
# copy it to the target's regressions folder with the fix (README.md). Extra libFuzzer flags:
# CUV_FUZZ_FLAGS (e.g. "-jobs=4 -workers=4").
set -uo pipefail
fuzzer=$1 name=$2 artifacts=$3 corpus=$4 regressions=$5
time=${CUV_FUZZ_TIME:-60}

# Huge sizes are part of the input: the allocator returns NULL instead of aborting.
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"

replay=("$corpus")
[ -d "$regressions" ] && replay+=("$regressions")
echo "== $name: replaying ${replay[*]}"
"$fuzzer" -error_exitcode=1 -runs=0 "${replay[@]}" || { echo "== $name: a committed input fails"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$corpus"/* "$work"/ 2>/dev/null
[ -d "$regressions" ] && cp "$regressions"/* "$work"/ 2>/dev/null # they reach deep states
mkdir -p "$artifacts"
flags=(-max_total_time="$time" -timeout=25 -rss_limit_mb=4096 -print_final_stats=1
       -error_exitcode=1 -timeout_exitcode=1
       -artifact_prefix="$artifacts/")
[ -n "${FUZZ_MAX_LEN:-}" ] && flags+=(-max_len="$FUZZ_MAX_LEN")
[ -n "${FUZZ_DICT:-}" ] && [ -f "$FUZZ_DICT" ] && flags+=(-dict="$FUZZ_DICT")
read -r -a extra <<<"${CUV_FUZZ_FLAGS:-}"
echo "== $name: fuzzing for ${time} s"
"$fuzzer" "${flags[@]}" "${extra[@]}" "$work"
status=$?
[ $status -ne 0 ] && echo "== $name: FAILED (status $status); inputs in $artifacts" &&
  ls -1 "$artifacts" >&2
exit $status
