#!/usr/bin/env bash
# tcp-infer's host instructions and syscalls per request on its loop thread, on the simulator:
# the server (one loop) runs under callgrind while the verifying client sends N1, then N2
# requests, so start-up and first-use costs cancel:
#   per request = (I(N2) - I(N1)) / (N2 - N1)
# Reported per request, for the loop thread (the one that runs loop_main):
#   loop thread      everything it runs: HTTP reads and parsing, building the op, staging,
#                    cuv_uv_submit, the driver calls, the delivery, the response, the writes
#     in driver      ... inside the driver's entry points (the cu* functions of libcuv-sim)
#     cuv + app      ... the rest (libcuv, libcuv-uv, libuv, libc, the server)
#     libcuv self    ... instructions in libcuv's and libcuv-uv's own code alone
#     server self    ... instructions in the server's own code alone (tcp-infer, with the llhttp
#                        it links)
# and, with strace installed, the syscalls per request of the whole server (another run, not
# under valgrind; the simulator's threads included): reads, writes, epoll_wait and all of them.
# The inline spin is off (CUV_SPIN_BUDGET_US=0, so the loop does not poll either): under
# valgrind the polling count depends on timing, as in bench/submit-callgrind.sh.
#
#   apps/tcp-infer/bench/tcp-infer-callgrind.sh [BUILD_DIR] [-- SERVER OPTIONS]
#   N1, N2           requests (default 1000 and 5000)
#   CONNS, DEPTH     client connections and requests pipelined on each (default 64 and 1)
#   BATCH            rows per request (default 8)
#   API              the client's --api: infer (POST /infer, the default), kserve (KServe v2
#                    with JSON tensors: the request's JSON read, the response's written) or
#                    kserve-binary
#   PROFILES         a folder to keep the loop thread's profiles in (loop.N1, loop.N2), for
#                    callgrind_annotate's per-function figures
# Without --graph among the server options, the plain path (--no-graph: the README's figures);
# e.g. apps/tcp-infer/bench/tcp-infer-callgrind.sh build -- --graph
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/tcp-infer-bin.sh"
tcp_infer_bench_options tcp-infer-callgrind.sh "${1:-}"
build=build
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  build=$1
  shift
fi
[ "${1:-}" = "--" ] && shift
server_opts=("$@")
tcp_infer_plain_unless_asked server_opts
set -- "${server_opts[@]}"
tcp_infer_bin "tcp-infer callgrind" "$build"
n1=${N1:-1000}
n2=${N2:-5000}
conns=${CONNS:-64}
depth=${DEPTH:-1}
batch=${BATCH:-8}
api=${API:-infer}
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

. "$here/../../../bench/callgrind-measure.sh"

client() {
  echo -- "$bin/tcp-infer-client" --connections "$conns" --depth "$depth" --batch "$batch" \
    --requests "$1" --threads 1 --api "$api"
}

for n in "$n1" "$n2"; do
  # shellcheck disable=SC2046 # client's words are the client's arguments
  CUV_DRIVER=sim CUV_SPIN_BUDGET_US=0 "$bin/tcp-infer-run" valgrind --tool=callgrind \
    --separate-threads=yes --callgrind-out-file="$work/cg.$n" "$bin/tcp-infer" "$@" \
    $(client "$n") >"$work/log.$n" 2>&1 || { cat "$work/log.$n" >&2; exit 1; }
  loop=$(grep -l 'loop_main' "$work/cg.$n"-* | head -n 1)
  [ -n "$loop" ] || { echo "no loop thread in the profiles" >&2; exit 1; }
  [ -z "${PROFILES:-}" ] || cp "$loop" "$PROFILES/loop.$n"
  read -r total driver self app < <(callgrind_measure "$loop" tcp-infer)
  echo "N=$n: loop thread $total Ir (driver $driver, libcuv self $self, server self $app)"
  eval "total$n=$total driver$n=$driver self$n=$self app$n=$app"
done

per() { callgrind_per "$@"; }
echo "instructions per request, (I(N2)-I(N1)) / (N2-N1), N1=$n1 N2=$n2, $conns connections x" \
  "$depth, batch $batch, API $api, server options: ${*:-none}"
echo "  loop thread     $(per "$((total$n1))" "$((total$n2))")"
echo "    in driver     $(per "$((driver$n1))" "$((driver$n2))")"
echo "    cuv + app     $(per "$((total$n1 - driver$n1))" "$((total$n2 - driver$n2))")"
echo "    libcuv self   $(per "$((self$n1))" "$((self$n2))")"
echo "    server self   $(per "$((app$n1))" "$((app$n2))")"

command -v strace >/dev/null || { echo "(strace not installed: no syscall counts)"; exit 0; }
# Syscalls of the server's threads by name, from strace -c -f's table: "name calls" lines.
# strace blocks fatal signals while it traces a command it started with -o (its -I3): the
# wrapper hands tcp-infer-run's SIGTERM to the server itself, strace's child.
# shellcheck disable=SC2016 # expanded by the wrapper's shell
wrapper='out=$1; shift; strace -f -c -o "$out" "$@" & s=$!
  trap '"'"'kill -TERM $(pgrep -P "$s")'"'"' TERM; wait "$s"; wait "$s"'
for n in "$n1" "$n2"; do
  # shellcheck disable=SC2046
  CUV_DRIVER=sim CUV_SPIN_BUDGET_US=0 "$bin/tcp-infer-run" bash -c "$wrapper" strace \
    "$work/st.$n" "$bin/tcp-infer" "$@" $(client "$n") >"$work/slog.$n" 2>&1 ||
    { cat "$work/slog.$n" >&2; exit 1; }
  # columns: % time, seconds, usecs/call, calls, [errors], syscall (or "total")
  awk '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ { print $NF, $4 }' "$work/st.$n" >"$work/sc.$n"
done
echo "syscalls per request (whole server, every thread: the simulator's streams and cuv's reactor"
echo "too), those at 0.01 or more:"
for name in $(awk '$1 != "total" { print $1 }' "$work/sc.$n2") total; do
  a=$(awk -v k="$name" '$1 == k { print $2 }' "$work/sc.$n1")
  b=$(awk -v k="$name" '$1 == k { print $2 }' "$work/sc.$n2")
  v=$(per "${a:-0}" "${b:-0}" %7.2f)
  if awk -v v="$v" 'BEGIN { exit !(v >= 0.01) }'; then printf '  %-16s %s\n' "$name" "$v"; fi
done
