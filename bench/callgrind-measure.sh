# Sourced by bench/submit-callgrind.sh and apps/tcp-infer/bench/tcp-infer-callgrind.sh.
#
# callgrind_measure FILE [PROGRAM]: of one thread's profile, prints "total driver self program":
# its total Ir, the inclusive Ir in the driver's entry points (the cu* functions of libcuv-sim,
# which do not call one another, so their inclusive costs add up), the self Ir in libcuv and
# libcuv-uv, and the self Ir in PROGRAM's own code (0 without PROGRAM). Printed with %.0f: mawk's
# %d stops at 2^31 - 1, which a run of a few thousand KServe JSON requests passes.
# callgrind_annotate names no object for code inlined from a header ("lib/pool.h:sub_new"): the
# self Ir of lib/ and uv/ headers counts as libcuv's (cuv-bench-submit's inlined pool and
# reference counts were about 120 instructions per submission that it missed).
callgrind_measure() {
  local f=$1 program=${2:-}
  { awk '/^summary:/ { print "T", $2 }' "$f"
    callgrind_annotate --inclusive=yes --threshold=100 "$f" 2>/dev/null | sed 's/^/I /'
    callgrind_annotate --inclusive=no --threshold=100 "$f" 2>/dev/null | sed 's/^/S /'; } |
    awk -v program="$program" '
    { ir = $2; gsub(",", "", ir) }
    $1 == "T" { total = $2 }
    $1 == "I" && /libcuv-sim\.so/ && /:cu[A-Z][A-Za-z0-9_]* \[/ { driver += ir }
    $1 == "S" && /\[[^]]*\/libcuv(-uv)?\.so[^]]*\]$/ { self += ir }
    $1 == "S" && !/\]$/ && /\/(lib|uv)\/[^\/]+\.h:/ { self += ir }
    $1 == "S" && program != "" && index($0, "/" program "]") { app += ir }
    END { printf "%.0f %.0f %.0f %.0f\n", total, driver, self, app }'
}

# callgrind_per A B [FORMAT]: (B - A) / (N2 - N1), with n1 and n2 set by the caller.
callgrind_per() {
  awk -v a="$1" -v b="$2" -v n="$((n2 - n1))" -v f="${3:-%7.0f}" 'BEGIN { printf f, (b - a) / n }'
}
