#!/usr/bin/env bash
# Where a server's CPU goes under load: starts tcp-infer with the given options, drives it with
# wrk, and over the middle of the run samples each thread's CPU (/proc/PID/task/*/stat) and, when
# perf is on PATH, records the whole process (perf record -g). Prints the request rate, each
# thread's share of a core, the process's CPU per request and perf's top symbols by thread.
#
#   bench/profile-server.sh BUILD_DIR NAME CONNS SECONDS [SERVER OPTIONS...]
#
# With perf, the loop thread (infer-loop-0) is also counted alone (perf stat: cycles and
# instructions, printed per request) and recorded alone, so its report ranks what one request
# costs the loop, apart from the threads that share its process.
#
# Without --graph among the options the server runs the plain path (--no-graph is added: the
# profiles in bench/RESULTS.md were taken so; the server's default replays graphs).
#
# Output goes to stdout; perf's data, when taken, to $OUT/NAME-CONNS.perf.txt (OUT: default /tmp).
set -uo pipefail
build=${1:?build dir}; name=${2:?name}; conns=${3:?conns}; secs=${4:?seconds}
shift 4
bin=$build/apps/tcp-infer
out=${OUT:-/tmp}
port=$((20000 + RANDOM % 20000))
case " $* " in *" --graph "* | *" --no-graph "*) ;; *) set -- "$@" --no-graph ;; esac
"$bin/tcp-infer" --port "$port" "$@" 2>"$out/$name-$conns.server.txt" &
pid=$!
for _ in $(seq 200); do
  grep -q 'listening on' "$out/$name-$conns.server.txt" 2>/dev/null && break
  sleep 0.05
done
threads=$((conns < 4 ? conns : 4))
wrk -t"$threads" -c"$conns" -d"${secs}s" -s "$bin/wrk.lua" "http://127.0.0.1:$port/infer" \
  >"$out/$name-$conns.wrk.txt" 2>&1 &
wpid=$!
sleep 1
hz=$(getconf CLK_TCK)
window=$((secs - 2))
declare -A before
for t in /proc/"$pid"/task/*; do before[${t##*/}]=$(awk '{print $14 + $15}' "$t/stat"); done
loop_tid=$(for t in $(ls /proc/"$pid"/task | sort -n); do
  [ "$(cat "/proc/$pid/task/$t/comm")" = infer-loop-0 ] && echo "$t"; done | head -n 1)
if command -v perf >/dev/null; then
  calls=raw_syscalls:sys_enter,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait
  calls=$calls,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_writev
  perf stat -x, -e "task-clock,cycles,instructions,$calls" -t "$loop_tid" \
    -o "$out/$name-$conns.stat.txt" \
    -- sleep "$window" >/dev/null 2>&1 &
  spid=$!
  perf record -q -F 999 -p "$pid" -o "$out/$name-$conns.perf.data" -- sleep "$window" \
    >/dev/null 2>&1 &
  rpid=$!
  perf record -q -F 2999 -t "$loop_tid" -o "$out/$name-$conns.loop.data" -- sleep "$window" \
    >/dev/null 2>&1
  wait "$spid" "$rpid"
else
  sleep "$window"
fi
total=0
lines=()
for t in /proc/"$pid"/task/*; do
  id=${t##*/}
  [ -n "${before[$id]:-}" ] || continue
  now=$(awk '{print $14 + $15}' "$t/stat") || continue
  d=$((now - before[$id])); total=$((total + d))
  role=$(cat "$t/comm"); [ "$id" = "$pid" ] && role="loop(main)"
  lines+=("$(awk -v d="$d" -v hz="$hz" -v s="$window" -v n="$role" \
    'BEGIN { printf "%.0f%% %s", 100 * d / hz / s, n }')")
done
wait "$wpid"
kill -TERM "$pid"; wait "$pid"
rps=$(awk '/^Requests\/sec:/ {print $2}' "$out/$name-$conns.wrk.txt")
cpu=$(awk -v d="$total" -v hz="$hz" -v s="$window" 'BEGIN { printf "%.0f", 100 * d / hz / s }')
us=$(awk -v d="$total" -v hz="$hz" -v s="$window" -v r="$rps" \
  'BEGIN { printf "%.1f", 1e6 * d / hz / s / r }')
echo "$name c=$conns $rps req/s | cpu $cpu% | $us us CPU/req | $(printf '%s\n' "${lines[@]}" |
  sort -rn | head -8 | tr '\n' ';')"
if [ -f "$out/$name-$conns.stat.txt" ]; then # CSV: value,unit,event,...
  awk -F, -v r="$rps" -v s="$window" -v n="$name" -v c="$conns" '
    $3 ~ /^cycles/ { cy = $1 } $3 ~ /^instructions/ { in_ = $1 } $3 ~ /^task-clock/ { tc = $1 }
    $3 == "raw_syscalls:sys_enter" { sys = $1 } $3 ~ /futex$/ { fx = $1 }
    $3 ~ /epoll_wait$/ { ep = $1 } $3 ~ /enter_read$/ { rd = $1 } $3 ~ /enter_writev?$/ { wr += $1 }
    END { if (r > 0 && cy + 0 > 0)
            printf "%s c=%s loop thread per request: %.0f cycles, %.0f instructions (IPC %.2f), %.2f us\n",
              n, c, cy / s / r, in_ / s / r, (cy > 0 ? in_ / cy : 0), tc * 1000 / s / r
          else print n " c=" c " loop thread: no cycle counts (" FILENAME ")"
          if (r > 0 && sys + 0 > 0)
            printf "%s c=%s loop thread syscalls per request: %.2f (futex %.2f, epoll_wait %.2f, read %.2f, write %.2f)\n",
              n, c, sys / s / r, fx / s / r, ep / s / r, rd / s / r, wr / s / r }' \
    "$out/$name-$conns.stat.txt"
fi
if [ -f "$out/$name-$conns.loop.data" ]; then
  { echo "== $name c=$conns: the loop thread alone, by symbol (share of its samples)"
    perf report -i "$out/$name-$conns.loop.data" --no-children --sort dso --stdio 2>/dev/null |
      grep -v '^#' | grep '%' | head -12
    perf report -i "$out/$name-$conns.loop.data" --no-children --sort dso,sym --stdio 2>/dev/null |
      grep -v '^#' | grep '%' | head -120
  } >"$out/$name-$conns.loop.txt"
  rm -f "$out/$name-$conns.loop.data"
fi
if [ -f "$out/$name-$conns.perf.data" ]; then
  for comm in $(perf report -i "$out/$name-$conns.perf.data" --sort comm --stdio 2>/dev/null |
    awk '/%/ && $1+0 > 3 {print $2}'); do
    echo "== thread $comm (share of its own samples), by library"
    perf report -i "$out/$name-$conns.perf.data" --comms "$comm" --percentage relative \
      --no-children --sort dso --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -8
    echo "== thread $comm (share of its own samples)"
    perf report -i "$out/$name-$conns.perf.data" --comms "$comm" --percentage relative \
      --no-children --sort dso,sym --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -45
  done >"$out/$name-$conns.perf.txt"
  rm -f "$out/$name-$conns.perf.data"
fi
