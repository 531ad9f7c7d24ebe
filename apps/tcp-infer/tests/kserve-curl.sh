#!/usr/bin/env bash
# tcp-infer-kserve-curl: the KServe v2 endpoints as curl sees them (run by tcp-infer-run, which
# starts the server and passes its port): metadata, health and readiness, HEAD, a JSON and a
# binary inference (requests made and outputs checked against the host's by tcp-infer-client's
# --make-request and --check; curl sends its bodies with Expect: 100-continue), and invalid ones
# answered 4xx in the protocol's JSON error form. With --not-ready, against an --isolate server
# whose workers cannot start: live, not ready (400 on both readiness routes), and an inference
# answered 503 with Retry-After and counted as a failure of reason R (default BACKEND). With
# --start-hang, against an --isolate server whose first worker hangs in its start-up
# (--debug-start-hang 1): it becomes ready once the front killed that one
# (cuv_infer_worker_start_timeouts_total counts it) and the next worker started, then serves.
# With --deadline as well, an inference sent while that first worker hangs (its
# --isolate-deadline-ms far below the --isolate-start-timeout) must first be answered 503 for its
# deadline (cuv_infer_worker_expired_total counts it), not for the worker that never started.
#
#   kserve-curl.sh --port N --client PATH/tcp-infer-client [--not-ready [--reason R] |
#                  --start-hang [--deadline]]
#
# Exit status 0 when every check passed, 1 at the first that failed (it says which), 2 on a
# usage error.
set -uo pipefail

usage() {
  echo "usage: kserve-curl.sh --port N --client PATH [--not-ready [--reason R] | --start-hang [--deadline]]"
  echo "       (run by tcp-infer-run, which starts the server)"
}
port='' client='' not_ready=0 start_hang=0 deadline=0 reason=BACKEND
while [ $# -gt 0 ]; do
  case $1 in
  --port) port=${2:-}; shift 2 || true ;;
  --client) client=${2:-}; shift 2 || true ;;
  --not-ready) not_ready=1; shift ;;
  --reason) reason=${2:-}; shift 2 || true ;;
  --start-hang) start_hang=1; shift ;;
  --deadline) deadline=1; shift ;;
  --help) usage; exit 0 ;;
  --version) echo "kserve-curl.sh (tcp-infer's tests)"; exit 0 ;;
  *) echo "kserve-curl.sh: '$1': no such option" >&2; usage >&2; exit 2 ;;
  esac
done
[[ $port =~ ^[0-9]+$ && -x $client ]] || { usage >&2; exit 2; }

url=http://127.0.0.1:$port
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "kserve-curl: FAILED: $*" >&2; exit 1; }
# request METHOD PATH [curl args...]: the status; the body in $tmp/out, headers in $tmp/head
request() {
  local method=$1 path=$2
  shift 2
  curl -sS -X "$method" -o "$tmp/out" -D "$tmp/head" -w '%{http_code}' "$@" "$url$path"
}
expect() { # expect STATUS METHOD PATH [curl args...]
  local want=$1 got
  shift
  got=$(request "$@") || fail "curl: $*"
  [ "$got" = "$want" ] || fail "$1 $2: status $got, want $want: $(head -c 300 "$tmp/out")"
}
json_error() { grep -q '^{"error":"..*"}$' "$tmp/out" || fail "not a JSON error: $(cat "$tmp/out")"; }
header() { tr -d '\r' <"$tmp/head" | sed -n "s/^$1: //Ip" | head -n 1; }

if [ "$not_ready" = 1 ]; then
  expect 200 GET /v2/health/live
  expect 400 GET /v2/health/ready
  json_error
  expect 400 GET /v2/models/mlp/ready
  len=$("$client" --make-request 2 --out "$tmp/json") || fail "--make-request"
  expect 503 POST /v2/models/mlp/infer --data-binary "@$tmp/json.body"
  json_error
  [ "$(header Retry-After)" = 1 ] || fail "503 without Retry-After: 1"
  # counted once, with Triton's reason: BACKEND (its worker could not start), or REJECTED (the
  # queue for a worker had no room: --isolate-queue 0)
  failed=$(curl -s "$url/metrics" |
    sed -n "s/^nv_inference_request_failure{model=\"mlp\",reason=\"$reason\",version=\"1\"} //p")
  [ "$failed" = 1 ] || fail "nv_inference_request_failure{reason=\"$reason\"} is '$failed', want 1"
  echo "kserve-curl: not ready, as it should be"
  exit 0
fi

if [ "$deadline" = 1 ]; then # while the first worker hangs in its start-up
  "$client" --make-request 2 --out "$tmp/json" >/dev/null || fail "--make-request"
  expect 503 POST /v2/models/mlp/infer --data-binary "@$tmp/json.body"
  json_error
  grep -q 'before its deadline' "$tmp/out" ||
    fail "503, but not for its deadline: $(cat "$tmp/out")"
  [ "$(header Retry-After)" = 1 ] || fail "503 without Retry-After: 1"
  expect 200 GET /metrics
  n=$(sed -n 's/^cuv_infer_worker_expired_total //p' "$tmp/out")
  [ "${n:-0}" -ge 1 ] ||
    fail "answered at its deadline, but cuv_infer_worker_expired_total is ${n:-absent}"
fi

# Readiness first: workers may still be starting (the runner's timeout bounds the wait).
until [ "$(request GET /v2/health/ready)" = 200 ]; do sleep 0.05; done
if [ "$start_hang" = 1 ]; then
  expect 200 GET /metrics
  n=$(sed -n 's/^cuv_infer_worker_start_timeouts_total //p' "$tmp/out")
  [ "${n:-0}" -ge 1 ] || fail "ready, but no worker was killed for its start-up"
  "$client" --make-request 4 --out "$tmp/json" >/dev/null || fail "--make-request"
  expect 200 POST /v2/models/mlp/infer --data-binary "@$tmp/json.body"
  "$client" --check "$tmp/json" --response "$tmp/out" || fail "after the start-up hang: outputs"
  echo "kserve-curl: the worker stuck in its start-up was killed, the next one serves"
  exit 0
fi
expect 200 GET /v2/health/live
expect 200 GET /v2
grep -q '"binary_tensor_data"' "$tmp/out" || fail "GET /v2: no binary_tensor_data extension"
expect 200 GET /v2/models/mlp
grep -q '"name":"INPUT0","datatype":"FP32","shape":\[-1,64\]' "$tmp/out" ||
  fail "GET /v2/models/mlp: $(cat "$tmp/out")"
expect 200 GET /v2/models/mlp/versions/1/ready
expect 200 HEAD /v2/models/mlp -I
[ "$(header Content-Length)" -gt 0 ] || fail "HEAD /v2/models/mlp: no Content-Length"
[ -n "$(header Date)" ] || fail "no Date header"

# A JSON inference, and a binary one (binary outputs, their JSON part's length in a header).
len=$("$client" --make-request 5 --out "$tmp/json") || fail "--make-request"
expect 200 POST /v2/models/mlp/infer -H 'Content-Type: application/json' \
  --data-binary "@$tmp/json.body"
"$client" --check "$tmp/json" --response "$tmp/out" || fail "JSON inference: wrong outputs"
len=$("$client" --make-request 7 --binary --out "$tmp/bin") || fail "--make-request --binary"
expect 200 POST /v2/models/mlp/infer -H "Inference-Header-Content-Length: $len" \
  --data-binary "@$tmp/bin.body"
[ "$(header Content-Type)" = application/octet-stream ] || fail "binary output's Content-Type"
"$client" --check "$tmp/bin" --response "$tmp/out" \
  --header-length "$(header Inference-Header-Content-Length)" || fail "binary: wrong outputs"

# Invalid requests: a 4xx in the JSON error form each.
expect 400 POST /v2/models/mlp/infer --data-binary \
  '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,63],"data":[1]}]}'
json_error
expect 400 POST /v2/models/mlp/infer --data-binary \
  '{"inputs":[{"name":"INPUT0","datatype":"INT8","shape":[1,64],"data":[1]}]}'
json_error
expect 400 POST /v2/models/mlp/infer --data-binary '{"inputs": ['
json_error
head -c "$(($(stat -c %s "$tmp/bin.body") - 10))" "$tmp/bin.body" >"$tmp/cut"
expect 400 POST /v2/models/mlp/infer -H "Inference-Header-Content-Length: $len" \
  --data-binary "@$tmp/cut"
json_error
expect 404 GET /v2/models/other
json_error
expect 405 GET /v2/models/mlp/infer
json_error
[ "$(header Allow)" = POST ] || fail "405 without Allow: POST"
echo "kserve-curl: every check passed"
