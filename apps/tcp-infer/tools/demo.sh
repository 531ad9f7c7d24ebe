#!/usr/bin/env bash
# tcp-infer's demo, run by scripts/demo from the build tree: starts the server on an ephemeral
# port, drives it with the verifying client for a few seconds (every reply checked on the host),
# then with wrk when it is installed, and prints the requests/s and latencies they measured.
# Arguments go to the server (e.g. --baseline). Exit status 77 when no CUDA driver loads
# (scripts/demo then runs it again with CUV_DRIVER=sim); non-zero when a reply was wrong.
#   TCP_INFER_DEMO_SECONDS  seconds per load (default 3)
#   tcp-infer-demo --help | --version   (any other option goes to the server, which checks it)
set -uo pipefail
case ${1:-} in
--help)
  sed -n '2,/^set -uo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0 ;;
--version) echo "tcp-infer-demo (tcp-infer's tools)"; exit 0 ;;
esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
secs=${TCP_INFER_DEMO_SECONDS:-3}

loads=(-- "$here/tcp-infer-client" --connections 16 --depth 4 --batch 8 --duration "$secs")
if command -v wrk >/dev/null 2>&1; then
  export TCP_INFER_BATCH=8 # wrk.lua's batch
  loads+=(-- wrk -t2 -c16 -d"${secs}s" --latency -s "$here/wrk.lua" "http://127.0.0.1:{port}/infer")
else
  echo "demo: wrk is not installed; only the verifying client runs"
fi
"$here/tcp-infer-run" "$here/tcp-infer" "$@" "${loads[@]}"
