#!/usr/bin/env bash
# cpu.sh CLIENT [ARGS...]: runs a load client against a server that tcp-infer-run started, and
# prints what the server's process spent meanwhile, after the client's own output:
#
#   CPU seconds=S loop=L reactor=R submit=U pool=P other=O
#
# S is the CPU time (user + system, from /proc/PID/task/*/stat) of every thread of the server
# over the client's run; the others are the shares of it by thread role, in % of one core over
# the same wall time: loop (tcp-infer's infer-loop-N threads), reactor (cuv-reactor), submit
# (cuv-submit-N), pool (libuv's thread-pool workers), other (the main thread, the driver's
# threads). A thread takes the name of the thread that made it, and libuv's pool starts from the
# first loop that queues work: of the threads named after a loop, the first made (the lowest id)
# is the loop, the others are pool threads. The server is TCP_INFER_SERVER_PID (tcp-infer-run sets it);
# without it, or without /proc, the client runs alone and no CPU line is printed. Exit status:
# the client's.
set -u
pid=${TCP_INFER_SERVER_PID:-}
snapshot() { # "tid role ticks" per thread, in order of tid
  local t role name
  local -A seen=()
  for t in $(ls /proc/"$pid"/task | sort -n); do
    name=$(cat "/proc/$pid/task/$t/comm" 2>/dev/null) || continue
    case $name in
    infer-loop*) role=pool; [ -z "${seen[$name]:-}" ] && role=loop; seen[$name]=1 ;;
    cuv-reactor) role=reactor ;;
    cuv-submit*) role=submit ;;
    *) role=other; [ "$t" != "$pid" ] && [ "$name" = "$(cat /proc/"$pid"/comm)" ] && role=pool ;;
    esac
    awk -v id="$t" -v r="$role" '{ print id, r, $14 + $15 }' "/proc/$pid/task/$t/stat" 2>/dev/null
  done
}
if [ -z "$pid" ] || [ ! -d "/proc/$pid/task" ]; then
  exec "$@"
fi
before=$(snapshot)
start=$(date +%s.%N)
"$@"
status=$?
end=$(date +%s.%N)
after=$(snapshot)
awk -v hz="$(getconf CLK_TCK)" -v wall="$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" '
  NR == FNR { t0[$1] = $3; next }
  { d = $3 - ($1 in t0 ? t0[$1] : 0); total += d; role[$2] += d }
  END {
    printf "CPU seconds=%.4f", total / hz
    n = split("loop reactor submit pool other", r, " ")
    for (i = 1; i <= n; i++) printf " %s=%.0f", r[i], 100 * role[r[i]] / hz / wall
    printf "\n"
  }' <(echo "$before") <(echo "$after")
exit "$status"
