# Sourced by the tcp-infer benches (tcp-infer.sh, tcp-infer-fault.sh), which run from the source
# tree (apps/tcp-infer/bench/) or as their copies in the build tree, beside the programs (meson
# copies this file there too). tcp_infer_bin WHO [BUILD_DIR] sets bin to the programs' folder: the
# script's own ($here) when tcp-infer is there, else BUILD_DIR/apps/tcp-infer, BUILD_DIR being
# relative to the repository's root unless absolute (default build).
tcp_infer_bin() {
  if [ -x "$here/tcp-infer" ]; then
    bin=$here
    return
  fi
  local build=${2:-build}
  [[ $build == /* ]] || build=$(cd "$here/../../.." && pwd)/$build
  bin=$build/apps/tcp-infer
  [ -x "$bin/tcp-infer" ] || { echo "$1: $bin/tcp-infer not built" >&2; exit 1; }
}
