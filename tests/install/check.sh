#!/bin/sh
# The `install` test: stages `meson install` of the build into a temporary DESTDIR, then builds
# small programs against the installed pkg-config files only (cuv, and cuv-sim / cuv-uv where
# they are installed; a C++ one where there is a C++ compiler) and runs them on the simulator;
# with cuv-sim, one launches through typed launchers written by the installed cuv-launchers.
# A static build (-Ddefault_library=static) is linked as pkg-config --static says.
# usage: check.sh MESON BUILD_DIR SOURCE_DIR SANITIZE CC...
set -eu
meson=$1 build=$2 src=$3 sanitize=$4
shift 4
if [ "$sanitize" != none ]; then
  echo "1..0 # SKIP sanitizer build ($sanitize): consumers are built without the runtime"
  exit 0
fi
command -v pkg-config >/dev/null || { echo "1..0 # SKIP pkg-config not found"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Not --no-rebuild: `meson test --suite unit` builds only what tests need, not every install target.
"$meson" install -C "$build" --quiet --destdir "$tmp/root" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; echo "1..1"; echo "not ok 1 - meson install"; exit 1; }

pc=$(find "$tmp/root" -name cuv.pc | head -n 1)
[ -n "$pc" ] || { echo "1..1"; echo "not ok 1 - cuv.pc not installed"; exit 1; }
# A staged install: the .pc files name the real prefix; the sysroot maps it into DESTDIR.
PKG_CONFIG_PATH=$(dirname "$pc")
PKG_CONFIG_SYSROOT_DIR="$tmp/root"
LD_LIBRARY_PATH="$(dirname "$(dirname "$pc")")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Without libcuv.so, -lcuv is the archive, which needs the private libraries too.
static=
[ -e "$(dirname "$(dirname "$pc")")/libcuv.so" ] || static=--static
CUV_DRIVER=sim
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR LD_LIBRARY_PATH CUV_DRIVER

n=0 failed=0
# check NAME SOURCE PKGS CC...: compile SOURCE against PKGS with the compiler command CC (which
# may be several words, and extra flags, the language standard among them), run it, print one
# TAP line.
check() {
  name=$1 source=$2 pkgs=$3
  shift 3
  n=$((n + 1))
  # shellcheck disable=SC2046,SC2086 # pkg-config's flags and the package list are meant to split
  if "$@" -Wall -Werror -o "$tmp/$name" "$src/tests/install/$source" \
    $(pkg-config --cflags --libs $static $pkgs) >"$tmp/$name.log" 2>&1 &&
    "$tmp/$name" >>"$tmp/$name.log" 2>&1; then
    echo "ok $n - $name"
  else
    failed=$((failed + 1))
    echo "not ok $n - $name"
    sed 's/^/# /' "$tmp/$name.log"
  fi
}

# typed CC...: the installed generator (cuv.pc's launchers, inside DESTDIR) writes typed.cu's
# launchers, then consumer-typed.c is built with them against cuv and cuv-sim and run (check).
typed() {
  gen=$(pkg-config --variable=launchers cuv) # pkgconf puts the sysroot in front; others do not
  [ -e "$gen" ] || gen="$tmp/root$gen"
  mkdir -p "$tmp/typed"
  "$gen" "$src/tests/install/typed.cu" --ptx "$src/tests/install/typed-sim.ptx" \
    --header "$tmp/typed/typed_launchers.h" --source "$tmp/typed/typed_launchers.c" ||
    echo "# cuv-launchers failed: the build below fails"
  check cuv-launchers consumer-typed.c "cuv cuv-sim" "$@" -std=gnu11 -I"$tmp/typed" \
    "$tmp/typed/typed_launchers.c"
}

cxx=$(command -v c++ || true)
plan=1
pkg-config --exists cuv-sim && plan=$((plan + 2))
pkg-config --exists cuv-uv && plan=$((plan + 1))
[ -n "$cxx" ] && plan=$((plan + 1))
echo "1..$plan"
check cuv consumer.c cuv "$@" -std=gnu11
if pkg-config --exists cuv-sim; then
  check cuv-sim consumer.c "cuv cuv-sim" "$@" -std=gnu11 -DWITH_SIM
  typed "$@"
fi
if pkg-config --exists cuv-uv; then
  check cuv-uv consumer-uv.c cuv-uv "$@" -std=gnu11
fi
if [ -n "$cxx" ]; then
  check cuv-c++ consumer.cpp cuv "$cxx" -std=c++11 -pedantic
fi
[ "$failed" -eq 0 ]
