# Sourced by the tcp-infer benches (tcp-infer.sh, tcp-infer-fault.sh), which run from the source
# tree or as their copies in the build tree, beside the programs (meson copies this file there
# too). tcp_infer_bin WHO [BUILD_DIR] sets bin to the programs' folder: the script's own ($here)
# when tcp-infer is there, else BUILD_DIR (default build)/samples/tcp-infer of the source tree.
tcp_infer_bin() {
  if [ -x "$here/tcp-infer" ]; then
    bin=$here
    return
  fi
  bin=$(cd "$here/.." && pwd)/${2:-build}/samples/tcp-infer
  [ -x "$bin/tcp-infer" ] || { echo "$1: $bin/tcp-infer not built" >&2; exit 1; }
}
