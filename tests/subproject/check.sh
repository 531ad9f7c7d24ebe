#!/bin/sh
# The `subproject` test (TAP): cuv as a subproject of parent/ (subprojects/cuv is a link to this
# source tree) registers no test and builds nothing but its libraries in the parent, with
# -Dcuv:tests=disabled and with its defaults; the parent links dependency('cuv'), 'cuv-sim' and
# 'cuv-uv', generates typed launchers with cuv's cuv-launchers, and runs on the simulator. Then,
# with -Dcuda-headers=system, a missing CUDA tree, named by -Dcuda-root, CUDA_PATH or CUDA_HOME,
# stops the configuration with the project's message naming all three; by default it does not,
# and the build takes cuv's own declarations of the driver API.
# usage: check.sh MESON SOURCE_DIR CUDA_ROOT SANITIZE CC...
set -eu
meson=$1 src=$2 cuda=$3 sanitize=$4
shift 4
if [ "$sanitize" != none ]; then
  echo "1..0 # SKIP sanitizer build ($sanitize): the parent is built without the runtime"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CC="$*"

cp -R "$src/tests/subproject/parent" "$tmp/parent"
cp "$src/tests/install/consumer.c" "$src/tests/install/consumer-uv.c" \
  "$src/tests/install/consumer-typed.c" "$src/tests/install/typed.cu" \
  "$src/tests/install/typed-sim.ptx" "$tmp/parent/"
mkdir "$tmp/parent/subprojects"
ln -s "$src" "$tmp/parent/subprojects/cuv"

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)) failed=$((failed + 1))
  echo "not ok $n - $1"
  [ -f "$2" ] && sed 's/^/# /' "$2"
  return 0
}

# check_parent BUILD: every test the parent registers is its own (meson gives a subproject's
# tests the suite "cuv:..."), and every target cuv adds is one of its libraries.
check_parent() {
  "$meson" introspect --tests "$1" >"$1.tests.json" &&
    "$meson" introspect --targets "$1" >"$1.targets.json" &&
    python3 - "$1.tests.json" "$1.targets.json" <<'PY'
import json, sys
tests = json.load(open(sys.argv[1]))
targets = json.load(open(sys.argv[2]))
bad = [t['name'] for t in tests
       if t['name'] not in ('parent', 'parent-uv', 'parent-typed')
       or any(s.startswith('cuv:') for s in t['suite'])]
libs = {'cuv', 'cuv-internal', 'cuv-sim', 'cuv-uv'}
bad += [t['name'] for t in targets if t['subproject'] == 'cuv' and t['name'] not in libs]
print('\n'.join(bad))
sys.exit(1 if bad else 0)
PY
}

echo "1..8"
if "$meson" setup "$tmp/b" "$tmp/parent" -Dcuv:tests=disabled -Dcuv:cuda-root="$cuda" \
  >"$tmp/setup.log" 2>&1; then
  ok "parent configures with cuv as a subproject (-Dcuv:tests=disabled)"
else
  not_ok "parent configures with cuv as a subproject (-Dcuv:tests=disabled)" "$tmp/setup.log"
fi
if check_parent "$tmp/b" >"$tmp/check.log" 2>&1; then
  ok "-Dcuv:tests=disabled: only the parent's tests, only cuv's libraries"
else
  not_ok "-Dcuv:tests=disabled: only the parent's tests, only cuv's libraries" "$tmp/check.log"
fi
if "$meson" test -C "$tmp/b" >"$tmp/test.log" 2>&1; then
  ok "the parent links cuv, cuv-sim (and cuv-uv) and its tests pass on the simulator"
else
  cat "$tmp/b/meson-logs/testlog.txt" >>"$tmp/test.log" 2>/dev/null || true
  not_ok "the parent links cuv, cuv-sim (and cuv-uv) and its tests pass on the simulator" \
    "$tmp/test.log"
fi
if "$meson" setup "$tmp/d" "$tmp/parent" -Dcuv:cuda-root="$cuda" >"$tmp/setup-d.log" 2>&1 &&
  check_parent "$tmp/d" >>"$tmp/setup-d.log" 2>&1; then
  ok "cuv's defaults as a subproject: only the parent's tests, only cuv's libraries"
else
  not_ok "cuv's defaults as a subproject: only the parent's tests, only cuv's libraries" \
    "$tmp/setup-d.log"
fi

# missing NAME LOG EXPECTED...: the setup whose output is LOG failed, naming each EXPECTED.
missing() {
  name=$1 log=$2
  shift 2
  for want in "$@" "-Dcuda-root" CUDA_PATH CUDA_HOME; do
    grep -qF -- "$want" "$log" || { not_ok "$name (no \"$want\")" "$log"; return 0; }
  done
  ok "$name"
}
# These fail while configuring, before anything is built.
"$meson" setup "$tmp/m1" "$src" -Dcuda-headers=system -Dcuda-root=/nonexistent/cuda-root \
  >"$tmp/m1.log" 2>&1 ||
  missing "-Dcuda-root without cuda.h: the project's message" "$tmp/m1.log" \
    "/nonexistent/cuda-root/include (from -Dcuda-root)"
[ -f "$tmp/m1/build.ninja" ] && not_ok "-Dcuda-root=/nonexistent configured" /dev/null
env CUDA_PATH=/nonexistent/cuda-path CUDA_HOME="$cuda" "$meson" setup "$tmp/m2" "$src" \
  -Dcuda-headers=system >"$tmp/m2.log" 2>&1 ||
  missing "CUDA_PATH honoured, before CUDA_HOME" "$tmp/m2.log" \
    "/nonexistent/cuda-path/include (from CUDA_PATH)"
[ -f "$tmp/m2/build.ninja" ] && not_ok "CUDA_PATH=/nonexistent configured" /dev/null
env -u CUDA_PATH CUDA_HOME=/nonexistent/cuda-home "$meson" setup "$tmp/m3" "$src" \
  -Dcuda-headers=system >"$tmp/m3.log" 2>&1 ||
  missing "CUDA_HOME honoured" "$tmp/m3.log" "/nonexistent/cuda-home/include (from CUDA_HOME)"
[ -f "$tmp/m3/build.ninja" ] && not_ok "CUDA_HOME=/nonexistent configured" /dev/null
# The default (-Dcuda-headers=auto) configures without a CUDA tree, on cuv's own cuda.h.
if "$meson" setup "$tmp/m4" "$src" -Dcuda-root=/nonexistent/cuda-root -Dtests=disabled \
  >"$tmp/m4.log" 2>&1 && grep -q "cuda.h *: cuv's own declarations" "$tmp/m4.log" &&
  [ -f "$tmp/m4/build.ninja" ]; then
  ok "no CUDA tree: configured with cuv's own declarations (-Dcuda-headers=auto)"
else
  not_ok "no CUDA tree: configured with cuv's own declarations (-Dcuda-headers=auto)" "$tmp/m4.log"
fi
[ "$failed" -eq 0 ] && [ "$n" -eq 8 ]
