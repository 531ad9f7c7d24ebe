#!/bin/sh
# test-symbols.sh ADDON: the addon must use the libuv of the node process that loads it, never a
# copy of its own (TAP output).
#   1. no NEEDED entry names a libuv (the module's own, readelf -d)
#   2. no libuv among the libraries it loads, transitively (ldd)
#   3. the uv_* the bridge calls are undefined in it (nm -D: U), left for node to provide
#   4. it defines no uv_* symbol
addon=$1
for tool in readelf nm ldd; do
  command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not found"; exit 0; }
done
[ -f "$addon" ] || { echo "Bail out! no such file: $addon"; exit 1; }
echo "1..4"
n=0
check() { # check DESCRIPTION STATUS [diagnostics]
  n=$((n + 1))
  if [ "$2" = 0 ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; [ -n "${3:-}" ] && echo "$3" | sed 's/^/# /'; fi
}

needed=$(readelf -d "$addon" | grep NEEDED)
echo "$needed" | grep -qi 'libuv'
check "no libuv in NEEDED" $((1 - $?)) "$needed"

libs=$(ldd "$addon" 2>&1)
echo "$libs" | grep -qi 'libuv'
check "no libuv loaded transitively" $((1 - $?)) "$libs"

undefined=$(nm -D --undefined-only "$addon" | awk '{print $NF}')
missing=""
for sym in uv_async_init uv_async_send uv_idle_start uv_check_start uv_close uv_queue_work \
  uv_walk uv_thread_self napi_get_uv_event_loop; do
  echo "$undefined" | grep -qx "$sym" || missing="$missing $sym"
done
[ -z "$missing" ]
check "uv_* and napi_* undefined, resolved from node" $? "not undefined:$missing"

defined=$(nm -D --defined-only "$addon" | awk '{print $NF}' | grep '^uv_')
[ -z "$defined" ]
check "no uv_* defined in the addon" $? "$defined"
