/* cuv-bench-submit: the loop thread's host cost per submission through the libuv bridge, the
 * shape of cuv-bench-latency's throughput test with a fixed amount of work instead of a time.
 *
 *   cuv-bench-submit --submissions N [--pipelines K]
 *
 * K pipelines (default 64) each submit an empty kernel with cuv_uv_submit and resubmit it from
 * its callback on the loop thread, until N submissions were made in all (after a warm-up round
 * of K). Run under callgrind with two values of N, the loop thread's (I(N2) - I(N1)) / (N2 - N1)
 * is its instructions per submission, submit to callback and retirement included
 * (bench/submit-callgrind.sh). It prints nothing else of note. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuv/uv.h>

#include "raw.h"
#include "twins.h"

static cuv_kernel_t *empty;
static cuv_uv_t *bridge;
static long left; /* submissions still to make */

static void die(const char *what, int rc) {
  fprintf(stderr, "cuv-bench-submit: %s: %s (%s)\n", what, cuv_err_name(rc), cuv_strerror(rc));
  exit(1);
}

static void setup(void) {
  cuvt_register_twins(); /* for the simulator; harmless on a GPU */
  cuv_device_t *dev = NULL;
  int rc = bench_cuv_kernel(CUV_BENCH_PTX_PATH, "empty_kernel", &dev, &empty);
  if (rc == 0)
    rc = cuv_uv_open(&bridge, uv_default_loop());
  if (rc < 0)
    die("setup", rc);
}

static void on_done(int status, cuv_output_t *out, void *arg);

static void submit(void) {
  cuv_op_t *op = cuv_launch(empty, CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 0);
  int rc = cuv_uv_submit(bridge, op, on_done, NULL, NULL);
  if (rc < 0)
    die("cuv_uv_submit", rc);
}

static void on_done(int status, cuv_output_t *out, void *arg) {
  if (status < 0)
    die("callback", status);
  if (left > 0) {
    left--;
    submit();
  }
}

/* K pipelines until `total` submissions were made, then until every callback ran. */
static void run(int k, long total) {
  left = total - k;
  for (int i = 0; i < k; i++)
    submit();
  uv_run(uv_default_loop(), UV_RUN_DEFAULT);
}

int main(int argc, char **argv) {
  long n = -1;
  int k = 64;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--submissions") == 0 && i + 1 < argc)
      n = atol(argv[++i]);
    else if (strcmp(argv[i], "--pipelines") == 0 && i + 1 < argc)
      k = atoi(argv[++i]);
    else
      n = -1, i = argc;
  }
  if (n < k || k < 1) {
    fprintf(stderr, "usage: cuv-bench-submit --submissions N [--pipelines K] (N >= K >= 1)\n");
    return 2;
  }
  setup();
  run(k, k); /* warm-up: streams, reactor slots, event pool, caches */
  run(k, n);
  printf("%ld submissions, %d pipelines\n", n, k);
  cuv_uv_close(bridge, NULL, NULL);
  uv_run(uv_default_loop(), UV_RUN_DEFAULT);
  cuv_kernel_unref(empty);
  return 0;
}
