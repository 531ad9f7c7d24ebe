# Sourced by the tcp-infer benches (tcp-infer.sh, tcp-infer-fault.sh, tcp-infer-batching.sh,
# tcp-infer-slowloris.sh, tcp-infer-nonreaders.sh, tcp-infer-callgrind.sh), which run from the source tree
# (apps/tcp-infer/bench/) or as their copies in the build tree, beside the programs (meson copies
# this file there too).
#
# tcp_infer_bench_options NAME [ARG]: the bench's own options, its first argument: --help prints
# the calling script's header comment, --version its name, both exit 0; any other option (but --)
# is a usage error, exit 2.
tcp_infer_bench_options() {
  case ${2:-} in
  --help)
    sed -n '2,/^set -[eu]*o pipefail/p' "${BASH_SOURCE[1]}" | sed '$d; s/^# \{0,1\}//'
    exit 0 ;;
  --version) echo "$1 (tcp-infer's benches)"; exit 0 ;;
  --) ;;
  -*) echo "$1: '$2': no such option (--help)" >&2; exit 2 ;;
  esac
}

# tcp_infer_plain_unless_asked ARRAY: appends --no-graph to the server options in the array named
# ARRAY unless they say --graph or --no-graph. The server replays CUDA graphs by default where it
# can (README: CUDA graphs); these benches' figures in bench/RESULTS.md and the README were taken
# on the plain path, which they keep measuring unless told otherwise.
tcp_infer_plain_unless_asked() {
  local -n opts=$1
  case " ${opts[*]-} " in *" --graph "* | *" --no-graph "*) ;; *) opts+=(--no-graph) ;; esac
}

# tcp_infer_client_loads SECONDS BATCH THREADS CONNS...: the verifying client's runs for
# tcp-infer-run, one per connection count, one request in flight per connection, at most THREADS
# threads; into the array `loads`.
tcp_infer_client_loads() {
  local secs=$1 batch=$2 max_threads=$3 c
  shift 3
  for c in "$@"; do
    loads+=(-- "$bin/tcp-infer-client" --connections "$c" --depth 1 --batch "$batch"
      --threads "$((c < max_threads ? c : max_threads))" --duration "$secs")
  done
}

# tcp_infer_run_status WHO RC WHAT ERR OUT: after a run of tcp-infer-run, its status RC: 77 (no
# CUDA driver) ends the bench with 77; another failure is reported with the tails of its logs
# and returns 1; success returns 0.
tcp_infer_run_status() {
  if [ "$2" -eq 77 ]; then
    echo "$1: no CUDA driver (set CUV_DRIVER=sim to run it on the simulator)"
    exit 77
  fi
  [ "$2" -eq 0 ] && return 0
  echo "$1: $3 failed (status $2):"
  tail -n 20 "$4" "$5"
  return 1
}

# tcp_infer_points OUT: the verifying client's two points in OUT (its RESULT requests lines: alone,
# then under load) into rps0 p990 bad0 and rps1 p991 bad1 (req/s, p99 in ms, errors).
tcp_infer_points() {
  local points
  mapfile -t points < <(awk '/^RESULT requests/ {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] }
      printf "%s %s %d\n", r["rps"], r["p99_us"] / 1000, r["errors"] + r["mismatches"] }' "$1")
  read -r rps0 p990 bad0 <<<"${points[0]:-}"
  read -r rps1 p991 bad1 <<<"${points[1]:-}"
}

# tcp_infer_p99_ratio BAR: the loaded point's p99 over the one alone (tcp_infer_points), against
# the bar.
tcp_infer_p99_ratio() {
  [ -n "${p991:-}" ] && [ -n "${p990:-}" ] || return 0
  awk -v a="$p991" -v b="$p990" -v bar="$1" 'BEGIN { r = b > 0 ? a / b : 0
    printf "  p99 ratio %.2f: %s (bar: %sx)\n", r, r <= bar ? "MET" : "not met", bar }'
}

# tcp_infer_bin WHO [BUILD_DIR] sets bin to the programs' folder: the script's own ($here) when
# tcp-infer is there, else BUILD_DIR/apps/tcp-infer, BUILD_DIR being relative to the repository's
# root unless absolute (default build).
tcp_infer_bin() {
  if [ -x "$here/tcp-infer" ]; then
    bin=$here
    return
  fi
  local build=${2:-build}
  [[ $build == /* ]] || build=$(cd "$here/../../.." && pwd)/$build
  bin=$build/apps/tcp-infer
  [ -x "$bin/tcp-infer" ] || { echo "$1: $bin/tcp-infer not built" >&2; exit 1; }
}
