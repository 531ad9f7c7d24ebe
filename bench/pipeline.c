/* cuv-bench-pipeline: chains of N dependent kernels through each executor, beside the raw driver.
 *
 * N dependent small kernels (the test module's `scale` on 2048 floats, one buffer), N = 1, 10,
 * 100, 1000, median of R repetitions (default 51), executed as:
 *   sync-indiv   cuv_sync of each launch
 *   sync-chain   one cuv_seq chain of the N launches, one cuv_sync
 *   async        the chain through cuv_submit into a cuv_queue, drained by this thread
 *                (cuv_queue_wait + cuv_queue_drain)
 *   async-uv     the chain through the libuv bridge (cuv_uv_submit, uv_run; timed until the
 *                callback runs on the loop thread)
 *   graph        the chain captured once (cuv_graph_capture), replayed with cuv_sync_on
 * and, in the same run and through the same driver (the library cuv loaded, CUV_DRIVER, opened
 * again with dlopen + cuGetProcAddress_v2), the raw columns (raw.h):
 * cuLaunchKernel + cuStreamSynchronize each, N cuLaunchKernel + one synchronize, and a captured
 * graph's cuGraphLaunch + synchronize; graph-inst is capture + instantiate + upload.
 *
 * Then the cost of hazard tracking: ops per second of a K-launch chain (cuv_sync) over 4 buffers
 * with tracking (CUV_HAZARD_ORDER) against the same buffers with CUV_HAZARD_NONE.
 *
 *   cuv-bench-pipeline [--max-n N] [--reps R] [--hazard-ops K]
 *
 * Targets (bench/RESULTS.md): async never slower than sync-chain; graph replay at least 4x faster
 * than sync-indiv at N = 1000. They are reported, never fatal. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuv.h>
#ifdef CUV_BENCH_WITH_UV
#include <cuv/uv.h>
#endif

#include "raw.h"
#include "twins.h"

#define D 2048u
#define FACTOR 1.0001f
#define MAX_NS 4
#define HAZARD_BUFFERS 4

static const char *const usage =
    "usage: cuv-bench-pipeline [--max-n N] [--reps R] [--hazard-ops K]\n";

static void die(const char *what, int rc) {
  fprintf(stderr, "cuv-bench-pipeline: %s: %s (%s)\n", what, cuv_err_name(rc), cuv_strerror(rc));
  exit(1);
}

static void check(const char *what, int rc) {
  if (rc < 0)
    die(what, rc);
}

/* ---- the cuv side ---- */

static cuv_device_t *dev;
static cuv_kernel_t *scale;
static cuv_stream_t *stream; /* sync_on, graphs and the raw columns */

static void setup_cuv(void) {
  cuvt_register_twins(); /* for the simulator; harmless on a GPU */
  int rc = bench_cuv_kernel(CUV_BENCH_PTX_PATH, "scale", &dev, &scale);
  if (rc == 0)
    rc = cuv_stream_create(&stream, dev);
  check("setup", rc);
}

static cuv_op_t *scale_launch(cuv_buffer_t *x) {
  unsigned n = D;
  float factor = FACTOR;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(factor), CUV_ARG_RW(x)};
  return cuv_launch(scale, CUV_DIM1(D / 256), CUV_DIM1(256), 0, args, 3);
}

/* n dependent launches; launch i scales xs[i % nx]. */
static cuv_op_t *chain(cuv_buffer_t **xs, size_t nx, int n) {
  cuv_op_t *op = scale_launch(xs[0]);
  for (int i = 1; i < n; i++)
    op = cuv_seq(op, scale_launch(xs[(size_t)i % nx]));
  return op;
}

static void reset(cuv_buffer_t *x) {
  check("reset", cuv_sync(cuv_memset32(x, 0, 0x3f800000u, D), NULL)); /* 1.0f */
}

static double run_sync_indiv(cuv_buffer_t *x, int n) {
  double t0 = now_us();
  for (int i = 0; i < n; i++)
    check("cuv_sync", cuv_sync(scale_launch(x), NULL));
  return now_us() - t0;
}

static double run_sync_chain(cuv_buffer_t *x, int n) {
  double t0 = now_us();
  check("cuv_sync", cuv_sync(chain(&x, 1, n), NULL));
  return now_us() - t0;
}

static cuv_queue_t *queue;

static void count_done(int status, cuv_output_t *output, void *arg) {
  if (status < 0)
    die("async chain", status);
  ++*(int *)arg;
}

static double run_async(cuv_buffer_t *x, int n) {
  int done = 0;
  double t0 = now_us();
  check("cuv_submit", cuv_submit(queue, chain(&x, 1, n), count_done, &done, NULL));
  while (cuv_queue_drain(queue) == 0)
    cuv_queue_wait(queue, -1);
  double t = now_us() - t0;
  if (done != 1)
    die("async chain", CUV_EINVAL);
  return t;
}

#ifdef CUV_BENCH_WITH_UV
static uv_loop_t *loop;
static cuv_uv_t *bridge;

typedef struct uv_done {
  int done;
  double at_us; /* when the callback ran */
} uv_done_t;

static void stamp_done(int status, cuv_output_t *output, void *arg) {
  uv_done_t *d = arg;
  if (status < 0)
    die("async-uv chain", status);
  (void)output;
  d->at_us = now_us();
  d->done++;
}

/* Submit to callback, as the latency benchmark counts it: the callback on the loop thread is
 * where the program learns the result (uv_run returns a loop iteration later). */
static double run_async_uv(cuv_buffer_t *x, int n) {
  uv_done_t d = {0};
  double t0 = now_us();
  check("cuv_uv_submit", cuv_uv_submit(bridge, chain(&x, 1, n), stamp_done, &d, NULL));
  while (!d.done) /* the bridge keeps the loop alive exactly while the chain is in flight */
    uv_run(loop, UV_RUN_DEFAULT);
  return d.at_us - t0;
}
#endif

static double run_graph(cuv_graph_t *g) {
  double t0 = now_us();
  check("graph replay", cuv_sync_on(cuv_graph_stream(g), cuv_graph_launch(g), NULL));
  return now_us() - t0;
}

/* ---- the raw driver side, through the library cuv loaded (raw.h) ---- */

typedef struct raw {
  __typeof__(cuLaunchKernel) *launch;
  __typeof__(cuStreamSynchronize) *synchronize;
  __typeof__(cuStreamBeginCapture) *begin_capture;
  __typeof__(cuStreamEndCapture) *end_capture;
  __typeof__(cuGraphInstantiate) *instantiate;
  __typeof__(cuGraphUpload) *upload;
  __typeof__(cuGraphLaunch) *graph_launch;
  __typeof__(cuGraphExecDestroy) *exec_destroy;
  __typeof__(cuGraphDestroy) *graph_destroy;
  CUfunction fn;
  CUstream s;
} raw_t;

static raw_t raw;

/* The module loaded again with raw calls, in cuv's context; cuv's own stream's CUstream. */
static void setup_raw(void) {
  raw_open("cuv-bench-pipeline", dev);
  raw_resolve("cuLaunchKernel", &raw.launch);
  raw_resolve("cuStreamSynchronize", &raw.synchronize);
  raw_resolve("cuStreamBeginCapture", &raw.begin_capture);
  raw_resolve("cuStreamEndCapture", &raw.end_capture);
  /* Not "cuGraphInstantiate": the driver resolves that name to the legacy five-argument one. */
  raw_resolve("cuGraphInstantiateWithFlags", &raw.instantiate);
  raw_resolve("cuGraphUpload", &raw.upload);
  raw_resolve("cuGraphLaunch", &raw.graph_launch);
  raw_resolve("cuGraphExecDestroy", &raw.exec_destroy);
  raw_resolve("cuGraphDestroy", &raw.graph_destroy);
  raw.fn = raw_kernel(CUV_BENCH_PTX_PATH, "scale");
  raw.s = cuv_stream_handle(stream);
}

static void raw_launch(CUdeviceptr *x) {
  unsigned n = D;
  float factor = FACTOR;
  void *args[] = {&n, &factor, x};
  raw_check("cuLaunchKernel", raw.launch(raw.fn, D / 256, 1, 1, 256, 1, 1, 0, raw.s, args, NULL));
}

static double raw_sync_indiv(CUdeviceptr x, int n) {
  double t0 = now_us();
  for (int i = 0; i < n; i++) {
    raw_launch(&x);
    raw_check("cuStreamSynchronize", raw.synchronize(raw.s));
  }
  return now_us() - t0;
}

static double raw_sync_chain(CUdeviceptr x, int n) {
  double t0 = now_us();
  for (int i = 0; i < n; i++)
    raw_launch(&x);
  raw_check("cuStreamSynchronize", raw.synchronize(raw.s));
  return now_us() - t0;
}

static CUgraphExec raw_capture(CUdeviceptr x, int n, double *inst_us) {
  double t0 = now_us();
  CUgraph graph;
  CUgraphExec exec;
  raw_check("cuStreamBeginCapture", raw.begin_capture(raw.s, CU_STREAM_CAPTURE_MODE_RELAXED));
  for (int i = 0; i < n; i++)
    raw_launch(&x);
  raw_check("cuStreamEndCapture", raw.end_capture(raw.s, &graph));
  raw_check("cuGraphInstantiate", raw.instantiate(&exec, graph, 0));
  raw_check("cuGraphUpload", raw.upload(exec, raw.s));
  raw_check("cuStreamSynchronize", raw.synchronize(raw.s));
  *inst_us = now_us() - t0;
  raw_check("cuGraphDestroy", raw.graph_destroy(graph));
  return exec;
}

static double raw_graph(CUgraphExec exec) {
  double t0 = now_us();
  raw_check("cuGraphLaunch", raw.graph_launch(exec, raw.s));
  raw_check("cuStreamSynchronize", raw.synchronize(raw.s));
  return now_us() - t0;
}

/* ---- the table ---- */

enum { SYNC_INDIV, SYNC_CHAIN, ASYNC, ASYNC_UV, GRAPH, RAW_INDIV, RAW_CHAIN, RAW_GRAPH, COLS };
static const char *const col_names[COLS] = {"sync-indiv", "sync-chain", "async",   "async-uv",
                                            "graph",      "raw-indiv",  "raw-chain", "raw-graph"};

typedef struct row {
  int n;
  double us[COLS];
  double graph_inst_us, raw_graph_inst_us;
  uint64_t uv_reactor, uv_polled; /* async-uv's completions by the reactor, and seen by the loop */
  double paired[2][3]; /* async and async-uv over sync-chain, rep by rep: p25, median, p75 */
} row_t;

/* The columns alternate within each repetition, so a repetition's two times met the same machine
 * state: the spread of their ratio over the repetitions says whether a difference of medians is
 * more than noise. */
static void paired_ratios(double out[3], const double *a, const double *b, int reps) {
  double *r = malloc((size_t)reps * sizeof *r);
  if (!r)
    die("malloc", CUV_ENOMEM);
  for (int i = 0; i < reps; i++)
    r[i] = b[i] > 0 ? a[i] / b[i] : 0;
  out[0] = percentile(r, reps, 0.25);
  out[1] = percentile(r, reps, 0.5);
  out[2] = percentile(r, reps, 0.75);
  free(r);
}

static void measure(row_t *row, cuv_buffer_t *x, int reps) {
  int n = row->n;
  double *t[COLS];
  for (int c = 0; c < COLS; c++)
    if (!(t[c] = calloc((size_t)reps, sizeof *t[c])))
      die("calloc", CUV_ENOMEM);
  reset(x);
  CUdeviceptr xp = cuv_buffer_ptr(x);
  double t0 = now_us();
  cuv_graph_t *g = NULL;
  check("cuv_graph_capture", cuv_graph_capture(&g, chain(&x, 1, n), stream, NULL));
  row->graph_inst_us = now_us() - t0;
  CUgraphExec exec = raw_capture(xp, n, &row->raw_graph_inst_us);
  for (int w = 0; w < 3; w++) { /* warm-up: streams, event pool, reactor, caches */
    run_sync_indiv(x, 1);
    run_sync_chain(x, n);
    run_async(x, n);
#ifdef CUV_BENCH_WITH_UV
    run_async_uv(x, n);
#endif
    run_graph(g);
    raw_sync_chain(xp, 1);
    raw_graph(exec);
  }
  /* Column by column within each repetition, so drift hits every column alike. */
  for (int r = 0; r < reps; r++) {
    t[SYNC_INDIV][r] = run_sync_indiv(x, n);
    t[SYNC_CHAIN][r] = run_sync_chain(x, n);
    t[ASYNC][r] = run_async(x, n);
#ifdef CUV_BENCH_WITH_UV
    cuv_stats_t before, after;
    cuv_stats(&before);
    t[ASYNC_UV][r] = run_async_uv(x, n);
    cuv_stats(&after);
    row->uv_reactor += after.completed_reactor - before.completed_reactor;
    row->uv_polled += after.completed_polled - before.completed_polled;
#endif
    t[GRAPH][r] = run_graph(g);
    t[RAW_INDIV][r] = raw_sync_indiv(xp, n);
    t[RAW_CHAIN][r] = raw_sync_chain(xp, n);
    t[RAW_GRAPH][r] = raw_graph(exec);
  }
  paired_ratios(row->paired[0], t[ASYNC], t[SYNC_CHAIN], reps); /* before percentile sorts */
  paired_ratios(row->paired[1], t[ASYNC_UV], t[SYNC_CHAIN], reps);
  for (int c = 0; c < COLS; c++) {
    row->us[c] = percentile(t[c], reps, 0.5);
    free(t[c]);
  }
  cuv_graph_unref(g);
  raw_check("cuGraphExecDestroy", raw.exec_destroy(exec));
}

static void print_table(const row_t *rows, int nrows, int reps) {
  printf("device %s, driver %s; N dependent `scale` kernels on %u floats, median of %d reps (us)\n",
         cuv_device_name(dev), cuv_driver_name(), D, reps);
  printf("%6s", "N");
  for (int c = 0; c < COLS; c++)
    printf(" %11s", col_names[c]);
  printf(" %11s %11s\n", "graph-inst", "raw-g-inst");
  for (int i = 0; i < nrows; i++) {
    printf("%6d", rows[i].n);
    for (int c = 0; c < COLS; c++) {
#ifndef CUV_BENCH_WITH_UV
      if (c == ASYNC_UV) {
        printf(" %11s", "-");
        continue;
      }
#endif
      printf(" %11.2f", rows[i].us[c]);
    }
    printf(" %11.1f %11.1f\n", rows[i].graph_inst_us, rows[i].raw_graph_inst_us);
  }
  printf("\nratios (cuv / raw, and the targets)\n");
  printf("%6s %11s %11s %11s %14s %14s %14s\n", "N", "indiv/raw", "chain/raw", "graph/raw",
         "async/chain", "uv/chain", "indiv/graph");
  for (int i = 0; i < nrows; i++) {
    const double *u = rows[i].us;
    printf("%6d %11.2f %11.2f %11.2f %14.2f", rows[i].n, u[SYNC_INDIV] / u[RAW_INDIV],
           u[SYNC_CHAIN] / u[RAW_CHAIN], u[GRAPH] / u[RAW_GRAPH], u[ASYNC] / u[SYNC_CHAIN]);
#ifdef CUV_BENCH_WITH_UV
    printf(" %14.2f", u[ASYNC_UV] / u[SYNC_CHAIN]);
#else
    printf(" %14s", "-");
#endif
    printf(" %14.2f\n", u[SYNC_INDIV] / u[GRAPH]);
  }
  bool async_ok = true;
  for (int i = 0; i < nrows; i++) {
    async_ok = async_ok && rows[i].us[ASYNC] <= rows[i].us[SYNC_CHAIN];
#ifdef CUV_BENCH_WITH_UV
    async_ok = async_ok && rows[i].us[ASYNC_UV] <= rows[i].us[SYNC_CHAIN];
#endif
  }
  printf("target: async never slower than sync-chain: %s\n", async_ok ? "met" : "MISSED");
  printf("paired per-repetition ratios over sync-chain, median [p25, p75]:\n");
  for (int i = 0; i < nrows; i++) {
    const double(*p)[3] = rows[i].paired;
    printf("  N=%-5d async %.3f [%.3f, %.3f]", rows[i].n, p[0][1], p[0][0], p[0][2]);
#ifdef CUV_BENCH_WITH_UV
    printf("   async-uv %.3f [%.3f, %.3f]", p[1][1], p[1][0], p[1][2]);
#endif
    printf("\n");
  }
#ifdef CUV_BENCH_WITH_UV
  printf("async-uv completions seen by the polling loop (cuv_queue_poll) / by the reactor:");
  for (int i = 0; i < nrows; i++)
    printf(" N=%d %llu/%llu", rows[i].n, (unsigned long long)rows[i].uv_polled,
           (unsigned long long)rows[i].uv_reactor);
  printf("\n");
#endif
  const row_t *last = &rows[nrows - 1];
  if (last->n == 1000)
    printf("target: graph >= 4x faster than sync-indiv at N = 1000: %s (%.2fx)\n",
           last->us[SYNC_INDIV] >= 4 * last->us[GRAPH] ? "met" : "MISSED",
           last->us[SYNC_INDIV] / last->us[GRAPH]);
}

/* ---- hazard tracking cost ---- */

static void hazard_cost(int ops, int reps) {
  cuv_buffer_t *xs[HAZARD_BUFFERS];
  for (int i = 0; i < HAZARD_BUFFERS; i++) {
    check("cuv_buffer_create", cuv_buffer_create(&xs[i], dev, D * sizeof(float)));
    reset(xs[i]);
  }
  double *t[2];
  for (int m = 0; m < 2; m++)
    if (!(t[m] = calloc((size_t)reps, sizeof *t[m])))
      die("calloc", CUV_ENOMEM);
  for (int r = -2; r < reps; r++) { /* two warm-ups */
    for (int m = 0; m < 2; m++) {
      for (int i = 0; i < HAZARD_BUFFERS; i++)
        check("cuv_buffer_set_hazard_mode",
              cuv_buffer_set_hazard_mode(xs[i], m ? CUV_HAZARD_NONE : CUV_HAZARD_ORDER));
      double t0 = now_us();
      check("cuv_sync", cuv_sync(chain(xs, HAZARD_BUFFERS, ops), NULL));
      if (r >= 0)
        t[m][r] = now_us() - t0;
    }
  }
  double tracked = percentile(t[0], reps, 0.5), none = percentile(t[1], reps, 0.5);
  printf("\nhazard tracking: a %d-launch chain over %d buffers, cuv_sync, median of %d reps\n",
         ops, HAZARD_BUFFERS, reps);
  printf("tracked (CUV_HAZARD_ORDER) %12.0f ops/s  (%9.1f us per chain)\n", ops / tracked * 1e6,
         tracked);
  printf("untracked (CUV_HAZARD_NONE) %11.0f ops/s  (%9.1f us per chain)\n", ops / none * 1e6,
         none);
  printf("tracked / untracked throughput %.3f\n", none / tracked);
  for (int m = 0; m < 2; m++)
    free(t[m]);
  for (int i = 0; i < HAZARD_BUFFERS; i++)
    cuv_buffer_unref(xs[i]);
}

int main(int argc, char **argv) {
  int max_n = 1000, reps = 51, hazard_ops = 1000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--max-n") == 0 && i + 1 < argc)
      max_n = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--hazard-ops") == 0 && i + 1 < argc)
      hazard_ops = atoi(argv[++i]);
    else {
      fputs(usage, stderr);
      return 2;
    }
  }
  if (max_n < 1 || reps < 1 || hazard_ops < 1) {
    fputs(usage, stderr);
    return 2;
  }
  setup_cuv();
  setup_raw();
  check("cuv_queue_create", cuv_queue_create(&queue, NULL, NULL));
#ifdef CUV_BENCH_WITH_UV
  loop = uv_default_loop();
  check("cuv_uv_open", cuv_uv_open(&bridge, loop));
#endif
  cuv_buffer_t *x;
  check("cuv_buffer_create", cuv_buffer_create(&x, dev, D * sizeof(float)));
  static const int all_ns[MAX_NS] = {1, 10, 100, 1000};
  row_t rows[MAX_NS] = {0};
  int nrows = 0;
  for (int i = 0; i < MAX_NS && all_ns[i] <= max_n; i++) {
    rows[nrows].n = all_ns[i];
    measure(&rows[nrows++], x, reps);
  }
  print_table(rows, nrows, reps);
  hazard_cost(hazard_ops, reps);

  cuv_buffer_unref(x);
#ifdef CUV_BENCH_WITH_UV
  cuv_uv_close(bridge, NULL, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
#endif
  check("cuv_queue_destroy", cuv_queue_destroy(queue));
  cuv_stream_destroy(stream);
  cuv_kernel_unref(scale);
  cuv_device_unref(dev);
  return 0;
}
