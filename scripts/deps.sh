# Sourced by scripts/test and scripts/demo: installs the Debian packages cuv needs to build and
# test, calling apt-get (and `apt-get update`, once) only when something is missing.

# The one list to extend (Debian 12 names). python3 comes with meson; it runs tap-summary.py.
# spin checks model/timeline.pml (model/check-timeline); g++ compiles the public headers as C++
# (tests/headers); libjansson-dev reads tcp-infer's JSON (apps/tcp-infer/kserve_json.c); doxygen builds
# the API reference (tests reference, check-reference); python3-numpy lets tcp-infer's model test
# check its plain-Python reference against numpy's (apps/tcp-infer/tests/model-repo.py); prometheus
# brings promtool, which lints tcp-infer's /metrics (tests tcp-infer-promtool).
CUV_APT_PACKAGES="meson ninja-build pkg-config gcc g++ libc6-dev libuv1-dev libcmocka-dev node-llhttp libjansson-dev spin"
CUV_APT_PACKAGES="$CUV_APT_PACKAGES doxygen python3-numpy prometheus"
# Fuzzing (scripts/fuzz, which scripts/test runs): clang and its libFuzzer runtime, which
# Debian's clang only recommends.
CUV_FUZZ_APT_PACKAGES="clang libclang-rt-14-dev"
# The Node package (node/) needs node, its headers and npm (which brings node-gyp). Debian 12's
# nodejs has no headers (libnode-dev has them) and no npm; NodeSource's nodejs has all three, and
# its files clash with libnode-dev's and npm's: ask for the Debian ones only where missing.
[ -f /usr/include/node/node_api.h ] || CUV_APT_PACKAGES="$CUV_APT_PACKAGES nodejs libnode-dev"
command -v npm >/dev/null 2>&1 || CUV_APT_PACKAGES="$CUV_APT_PACKAGES npm"

cuv_missing_packages() {
  local pkg missing=""
  for pkg in $CUV_APT_PACKAGES "$@"; do
    dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q '^install ok installed$' ||
      missing="$missing $pkg"
  done
  echo "${missing# }"
}

# cuv_install_missing [extra packages...]: returns non-zero when an install was needed and failed.
cuv_install_missing() {
  command -v dpkg-query >/dev/null 2>&1 || return 0 # not Debian-like: trust the machine
  local missing sudo=""
  missing=$(cuv_missing_packages "$@")
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo="sudo"
    else
      echo "missing packages: $missing (run as root or install them)" >&2
      return 1
    fi
  fi
  echo "installing: $missing"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq || echo "apt-get update failed; trying the install anyway" >&2
  # shellcheck disable=SC2086 # word splitting of the package list is intended
  $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
    { echo "apt-get install failed for: $missing" >&2; return 1; }
}

# cuv_setup_build DIR [meson options...]: configures DIR, or reconfigures it with the options when
# it exists already (a build dir of another Meson version is wiped and set up again).
cuv_setup_build() {
  local dir=$1
  shift
  if [ -f "$dir/meson-private/coredata.dat" ]; then
    meson setup --reconfigure "$dir" "$@" >/dev/null ||
      meson setup --wipe "$dir" "$@"
  else
    meson setup "$dir" "$@"
  fi
}
