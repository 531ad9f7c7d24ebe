#!/usr/bin/env bash
# tcp-infer-promtool: Prometheus' own linter on GET /metrics. After a few requests (a KServe
# inference, a refused one, a 404) it reads the page over bash's /dev/tcp (no curl needed) and
# runs `promtool check metrics` on it: promtool must report nothing but Triton's own names
# (nv_*: Triton's metrics keep names such as nv_inference_count and *_duration_us that
# promtool's conventions warn about, and that Triton's users expect). Run by tcp-infer-run,
# which starts the server.
#
#   promtool.sh --port N --promtool PATH/promtool
#
# Exit status 0 when promtool reports nothing else, 1 with its report, 2 on a usage error.
set -uo pipefail

usage() {
  echo "usage: promtool.sh --port N --promtool PATH"
  echo "       (run by tcp-infer-run, which starts the server)"
}
port='' promtool=''
while [ $# -gt 0 ]; do
  case $1 in
  --port) port=${2:-}; shift 2 || true ;;
  --promtool) promtool=${2:-}; shift 2 || true ;;
  --help) usage; exit 0 ;;
  --version) echo "promtool.sh (tcp-infer's tests)"; exit 0 ;;
  *) echo "promtool.sh: '$1': no such option" >&2; usage >&2; exit 2 ;;
  esac
done
[[ $port =~ ^[0-9]+$ && -x $promtool ]] || { usage >&2; exit 2; }

# request METHOD PATH [BODY]: the whole response (head and body), the connection closed after it
request() {
  local body=${3:-}
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf '%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s' \
    "$1" "$2" "${#body}" "$body" >&3
  cat <&3
  exec 3<&-
}

# --isolate: the workers may still be starting (the runner's timeout bounds the wait)
until request GET /v2/health/ready | head -1 | grep -q ' 200 '; do sleep 0.05; done
row=$(printf '0.5,%.0s' $(seq 63))0.5
request POST /v2/models/mlp/infer \
  "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":[$row]}]}" |
  head -1 | grep -q ' 200 ' || { echo "promtool.sh: the inference was not answered 200" >&2; exit 1; }
request POST /v2/models/mlp/infer '{"inputs":[]}' >/dev/null
request GET /nope >/dev/null

page=$(mktemp) report=$(mktemp)
trap 'rm -f "$page" "$report"' EXIT
request GET /metrics | tr -d '\r' | sed '1,/^$/d' >"$page"
grep -q '^nv_inference_request_success' "$page" || { echo "promtool.sh: no metrics page" >&2; exit 1; }
"$promtool" check metrics <"$page" >"$report" 2>&1
others=$(grep -v '^nv_[a-z_]* ' "$report")
if [ -n "$others" ]; then
  echo "promtool check metrics on GET /metrics:" >&2
  echo "$others" >&2
  exit 1
fi
echo "promtool: $(grep -c . "$report") findings, all on Triton's own names"
