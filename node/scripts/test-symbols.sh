#!/bin/sh
# test-symbols.sh ADDON: the installed addon is self-contained and uses the libuv of the node
# process that loads it, never a copy of its own (TAP; cuv's meson.build runs it, suite unit).
#   1. no NEEDED entry names a libuv or a library of cuv's (cuv is compiled in)
#   2. no libuv among the libraries it loads, transitively (ldd)
#   3. the uv_* the bridge calls and napi_* are undefined in it (nm -D: U), left for node to provide
#   4. it exports the Node-API entry points only: no uv_*, no cuv_*
#   5. no path of the folder it was built in is written in it (the kernels are embedded)
addon=$1
for tool in readelf nm ldd strings; do
  command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not found"; exit 0; }
done
[ -f "$addon" ] || { echo "Bail out! no such file: $addon"; exit 1; }
echo "1..5"
n=0
check() { # check DESCRIPTION STATUS [diagnostics]
  n=$((n + 1))
  if [ "$2" = 0 ]; then
    echo "ok $n - $1"
  else
    echo "not ok $n - $1"
    [ -n "${3:-}" ] && echo "$3" | sed 's/^/# /'
  fi
}

needed=$(readelf -d "$addon" | grep NEEDED)
echo "$needed" | grep -qiE 'libuv|libcuv'
check "no libuv, no libcuv in NEEDED" $((1 - $?)) "$needed"

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

defined=$(nm -D --defined-only "$addon" | awk '{print $NF}' |
  grep -vxE 'napi_register_module_v1|node_api_module_get_api_version_v1')
[ -z "$defined" ]
check "only the Node-API entry points exported" $? "$defined"

package=$(cd "$(dirname "$addon")/../.." && pwd)
strings "$addon" | grep -qF "$package"
check "no path of $package in it" $((1 - $?))
