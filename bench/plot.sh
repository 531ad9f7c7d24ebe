#!/usr/bin/env bash
# Turns cuv-bench-latency's CSV files (CUV_BENCH_CSV_DIR) into SVG charts with gnuplot:
#   latency-cdf.svg   submit -> callback latency, one CDF per row (raw and cuv), log scale
#   throughput.svg    completions/s into one loop against K pipelines (raw flag, raw hostfn, cuv)
#   tcp-infer-LOAD.svg  tcp-infer's req/s and p99 against connections, one curve per server mode
#                     (apps/tcp-infer/bench/tcp-infer.sh's tcp-infer-LOAD.csv, LOAD client or wrk)
#   tcp-infer-batching.svg  req/s and p99 against --max-queue-delay-us, one curve per connection
#                     count (apps/tcp-infer/bench/tcp-infer-batching.sh's CSV files)
#
#   bench/plot.sh CSV_DIR OUT_DIR
# Needs gnuplot (Debian's gnuplot-nox).
set -eu
csv=${1:?usage: bench/plot.sh CSV_DIR OUT_DIR}
out=${2:?usage: bench/plot.sh CSV_DIR OUT_DIR}
command -v gnuplot >/dev/null || { echo "bench/plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 77; }
mkdir -p "$out"

# The lines every chart starts with: preamble WIDTH HEIGHT FILE TITLE XLABEL YLABEL.
preamble() {
  cat <<GP
set terminal svg size $1,$2 dynamic font 'sans,11' noenhanced
set output '$out/$3'
set datafile separator ','
set title '$4'
set xlabel '$5'
set ylabel '$6'
set grid
GP
}

# One CDF per latency file; the title is the row name on the file's first line.
curves=""
for f in "$csv"/latency-*.csv; do
  [ -e "$f" ] || continue
  title=$(head -n 1 "$f" | sed 's/^# //; s/"/'"'"'/g')
  dash=1 # the raw baselines dashed, cuv's rows solid
  case $(basename "$f") in latency-raw-*) dash=2 ;; esac
  curves="$curves${curves:+, }'$f' using 2:1 skip 2 with lines lw 2 dt $dash title \"$title\""
done
if [ -n "$curves" ]; then
  {
    preamble 1100 560 latency-cdf.svg \
      'empty kernel, submit -> callback on the loop thread (cuv-bench-latency, section 1)' \
      'microseconds (log scale)' 'fraction of submissions'
    cat <<GP
set logscale x
set xrange [5:100]
set yrange [0:1]
set key outside right center font ',9'
plot $curves
GP
  } | gnuplot
fi

if [ -f "$csv/throughput.csv" ]; then
  {
    preamble 900 480 throughput.svg 'K pipelines into one loop thread (cuv-bench-latency, section 2)' \
      'K (pipelines in flight, log scale)' 'completions per second'
    cat <<GP
set logscale x 2
set key left top
plot '$csv/throughput.csv' using 1:2 skip 1 with linespoints lw 2 title 'raw launch + flag, spinning thread', \
     '' using 1:3 skip 1 with linespoints lw 2 title 'raw launch + host function', \
     '' using 1:4 skip 1 with linespoints lw 2 title 'cuv bridge (cuv_uv_submit)'
GP
  } | gnuplot
fi
# tcp-infer: "conns,MODE,MODE,..." with each mode's req/s then p99 ms; two panels side by side.
for f in "$csv"/tcp-infer-*.csv; do
  [ -e "$f" ] || continue
  case $f in *tcp-infer-batching-*) continue ;; esac # below
  load=$(basename "$f" .csv)
  load=${load#tcp-infer-}
  n=$(head -n 1 "$f" | awk -F, '{ print NF }')
  {
    preamble 1100 460 "tcp-infer-$load.svg" "tcp-infer, $load load: requests/s" \
      'connections (log scale)' 'requests per second'
    cat <<GP
set logscale x 2
set key left top font ',9'
set multiplot layout 1,2
plot for [i=2:$n:2] '$f' using 1:i with linespoints lw 2 title columnheader(i)
set title 'tcp-infer, $load load: p99 latency'
set ylabel 'milliseconds'
plot for [i=3:$n:2] '$f' using 1:i with linespoints lw 2 title columnheader(i)
unset multiplot
GP
  } | gnuplot
done
# tcp-infer's batching delay: "delay_us,rps,p99_ms" per connection count; req/s and p99 panels.
curves_r="" curves_p=""
for f in "$csv"/tcp-infer-batching-*.csv; do
  [ -e "$f" ] || continue
  c=$(basename "$f" .csv)
  c=${c#tcp-infer-batching-}
  curves_r="$curves_r${curves_r:+, }'$f' using 1:2 skip 1 with linespoints lw 2 title '$c connections'"
  curves_p="$curves_p${curves_p:+, }'$f' using 1:3 skip 1 with linespoints lw 2 title '$c connections'"
done
if [ -n "$curves_r" ]; then
  {
    preamble 1100 460 tcp-infer-batching.svg 'tcp-infer dynamic batching: requests/s' \
      'max_queue_delay_us' 'requests per second'
    cat <<GP
set key left top font ',9'
set multiplot layout 1,2
plot $curves_r
set title 'tcp-infer dynamic batching: p99 latency'
set ylabel 'milliseconds'
plot $curves_p
unset multiplot
GP
  } | gnuplot
fi
ls "$out"
