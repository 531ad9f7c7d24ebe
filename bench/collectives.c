/* cuv-bench-collectives: cuv's all-reduce against raw NCCL in the same run, over every device of
 * the process (one communicator each: raw NCCL's made like ncclCommInitAll, cuv's with
 * cuv_comm_init_all), float sums in place.
 *
 *   cuv-bench-collectives [--devices N] [--iters N] [--sizes B,B,...] [--bw-sizes B,B,...]
 *
 * 1. Bus bandwidth (nccl-tests' busbw = bytes / time * 2(n-1)/n) at --bw-sizes (default 128 MiB
 *    and 1 GiB): back-to-back all-reduces, then a wait for the last. With one device (one rank)
 *    there is no bus: the rows give bytes / time of NCCL's local copy instead.
 * 2. Time per op and host time per op at --sizes (default 8 B to 1 MiB): the same back-to-back
 *    loop; host time is what the submitting thread spends per op (raw: the grouped calls; cuv:
 *    cuv_submit).
 * 3. An all-reduce of 4 KiB captured in a CUDA graph (cuv_graph_capture), replayed back to back:
 *    time per replay.
 * Rows: raw (blocking NCCL communicators, every rank's call in one group, as the anchor program
 * does); cuv on the communicator's stream of rank 0 (cuv_comm_stream: the other ranks' parts are
 * forked and joined); cuv on a stream of the device's default policy (every part forked). cuv's
 * ops go through cuv_submit into a queue that this thread drains at the end.
 *
 * One device is enough (--devices 1, or a machine with one GPU): a one-rank communicator still
 * pays every host cost of a collective (the group, its ncclGroupEnd, cuv's submission), so its
 * rows show cuv's per-op overhead against raw NCCL's, not bus bandwidth.
 *
 * The raw side opens the NCCL cuv opened (libnccl.so.2, or with CUV_DRIVER=sim the simulator's,
 * where this bench runs as a smoke test: --devices 2 --sizes 8,4096 --bw-sizes 65536 --iters 5,
 * and again with --devices 1; the simulator's figures say nothing of a GPU's speed). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuv/sim.h>

#include "nccl_funcs.h"
#include "raw.h"

#define MAX_DEV 8
#define MAX_SIZES 32

static const char *prog = "cuv-bench-collectives";
static int ndev, iters = 50;
static cuv_device_t *devs[MAX_DEV];
static cuv_buffer_t *bufs[MAX_DEV];
static size_t buf_bytes;

/* ---- raw NCCL ---- */

static cuv__nccl_funcs_t nccl;
static cuv__nccl_comm_t raw_comms[MAX_DEV];
static CUstream raw_streams[MAX_DEV];
static __typeof__(cuCtxSetCurrent) *set_current;
static __typeof__(cuStreamCreate) *stream_create;
static __typeof__(cuStreamSynchronize) *stream_sync;

static void nccl_check(const char *what, cuv__nccl_result_t r) {
  if (r != CUV__NCCL_SUCCESS) {
    fprintf(stderr, "%s: raw %s failed: ncclResult_t %d\n", prog, what, r);
    exit(1);
  }
}

/* The NCCL cuv opened: the simulator's (linked here), or the library CUV_NCCL names. */
static void raw_nccl_open(void) {
  void *lib = NULL;
  const char *path = getenv("CUV_NCCL");
  if (!cuv_driver_is_sim())
    lib = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#define BENCH_RESOLVE(name, params)                                                               \
  do {                                                                                            \
    void *fn = cuv_driver_is_sim() ? cuv_sim_nccl_proc(#name) : lib ? dlsym(lib, #name) : NULL;   \
    if (!fn) {                                                                                    \
      fprintf(stderr, "%s: raw NCCL lacks %s\n", prog, #name);                                    \
      exit(1);                                                                                    \
    }                                                                                             \
    memcpy(&nccl.name, &fn, sizeof fn);                                                           \
  } while (0);
  CUV__NCCL_FUNCS(BENCH_RESOLVE)
#undef BENCH_RESOLVE
}

static void raw_setup(void) {
  raw_open(prog, devs[0]);
  raw_resolve("cuCtxSetCurrent", &set_current);
  raw_resolve("cuStreamCreate", &stream_create);
  raw_resolve("cuStreamSynchronize", &stream_sync);
  raw_nccl_open();
  cuv__nccl_id_t id;
  nccl_check("ncclGetUniqueId", nccl.ncclGetUniqueId(&id));
  nccl_check("ncclGroupStart", nccl.ncclGroupStart());
  for (int i = 0; i < ndev; i++) {
    raw_check("cuCtxSetCurrent", set_current(cuv_device_context(devs[i])));
    raw_check("cuStreamCreate", stream_create(&raw_streams[i], CU_STREAM_NON_BLOCKING));
    nccl_check("ncclCommInitRankConfig",
               nccl.ncclCommInitRankConfig(&raw_comms[i], ndev, id, i, NULL));
  }
  nccl_check("ncclGroupEnd", nccl.ncclGroupEnd());
}

static void raw_sync_all(void) {
  for (int i = 0; i < ndev; i++) {
    raw_check("cuCtxSetCurrent", set_current(cuv_device_context(devs[i])));
    raw_check("cuStreamSynchronize", stream_sync(raw_streams[i]));
  }
}

/* One grouped all-reduce of `bytes` on every device; returns the host time of the calls. */
static double raw_one(size_t bytes) {
  double t0 = now_us();
  nccl_check("ncclGroupStart", nccl.ncclGroupStart());
  for (int i = 0; i < ndev; i++) {
    void *p = (void *)(uintptr_t)cuv_buffer_ptr(bufs[i]);
    nccl_check("ncclAllReduce", nccl.ncclAllReduce(p, p, bytes / 4, CUV_NCCL_FLOAT32,
                                                   CUV_NCCL_SUM, raw_comms[i], raw_streams[i]));
  }
  nccl_check("ncclGroupEnd", nccl.ncclGroupEnd());
  return now_us() - t0;
}

/* ---- cuv ---- */

static cuv_comm_t *comm;
static cuv_queue_t *queue;
static int done_count, done_failed;

static void bench_done(int status, cuv_output_t *output, void *arg) {
  (void)output;
  (void)arg;
  done_count++;
  done_failed += status != 0;
}

static void cuv_setup(void) {
  cuv_output_t out;
  int rc = cuv_sync(cuv_comm_init_all(devs, (size_t)ndev), &out);
  if (rc != 0) {
    fprintf(stderr, "%s: cuv_comm_init_all: %s (%s)\n", prog, cuv_err_name(rc), cuv_strerror(rc));
    exit(1);
  }
  comm = cuv_output_take(&out).data;
  if (cuv_queue_create(&queue, NULL, NULL) != 0)
    exit(1);
}

static void cuv_wait_all(int submitted) {
  while (done_count < submitted) {
    cuv_queue_wait(queue, -1);
    cuv_queue_drain(queue);
  }
  if (done_failed) {
    fprintf(stderr, "%s: %d cuv all-reduces failed\n", prog, done_failed);
    exit(1);
  }
  done_count = 0;
}

/* One cuv all-reduce of `bytes`, on `stream` (NULL: the default policy's); the host time of the
 * cuv_submit call. */
static double cuv_one(size_t bytes, cuv_stream_t *stream) {
  cuv_submit_opts_t opts = {.stream = stream};
  double t0 = now_us();
  int rc = cuv_submit(queue, cuv_comm_all_reduce(comm, NULL, bufs, bytes / 4, CUV_NCCL_FLOAT32,
                                                 CUV_NCCL_SUM),
                      bench_done, NULL, &opts);
  double host = now_us() - t0;
  if (rc != 0) {
    fprintf(stderr, "%s: cuv_submit: %s\n", prog, cuv_err_name(rc));
    exit(1);
  }
  return host;
}

/* ---- the loops ---- */

enum { ROW_RAW, ROW_CUV_COMM, ROW_CUV_POLICY, ROWS };
static const char *const row_names[ROWS] = {"raw NCCL", "cuv, comm stream", "cuv, policy stream"};

typedef struct result {
  double us_per_op, host_us_per_op;
} result_t;

/* `n` back-to-back all-reduces of `bytes` (after a warm-up), then the wait for all. */
static result_t measure(int row, size_t bytes, int n) {
  cuv_stream_t *stream = row == ROW_CUV_COMM ? cuv_comm_stream(comm, 0) : NULL;
  double host = 0;
  for (int warm = 0; warm < 2; warm++)
    row == ROW_RAW ? raw_one(bytes) : cuv_one(bytes, stream);
  row == ROW_RAW ? raw_sync_all() : cuv_wait_all(2);
  double t0 = now_us();
  for (int i = 0; i < n; i++)
    host += row == ROW_RAW ? raw_one(bytes) : cuv_one(bytes, stream);
  row == ROW_RAW ? raw_sync_all() : cuv_wait_all(n);
  double total = now_us() - t0;
  return (result_t){total / n, host / n};
}

/* nccl-tests' bus bandwidth; with one rank, which moves nothing over a bus, bytes / time. */
static double bus_gbs(size_t bytes, double us) {
  double factor = ndev > 1 ? 2.0 * (ndev - 1) / ndev : 1.0;
  return bytes / us / 1e3 * factor;
}

static void bandwidth(const size_t *sizes, int nsizes) {
  if (ndev > 1)
    printf("\n1. all-reduce bus bandwidth, %d devices (GB/s; ratio to raw)\n", ndev);
  else
    printf("\n1. all-reduce on one rank: bytes / time of NCCL's local copy, not bus bandwidth "
           "(GB/s; ratio to raw)\n");
  printf("%12s %12s %18s %18s\n", "bytes", row_names[0], row_names[1], row_names[2]);
  for (int s = 0; s < nsizes; s++) {
    double bw[ROWS];
    int n = iters / 5 > 2 ? iters / 5 : 2;
    for (int r = 0; r < ROWS; r++)
      bw[r] = bus_gbs(sizes[s], measure(r, sizes[s], n).us_per_op);
    printf("%12zu %12.2f %12.2f %5.3fx %12.2f %5.3fx\n", sizes[s], bw[0], bw[1], bw[1] / bw[0],
           bw[2], bw[2] / bw[0]);
  }
}

static void latency(const size_t *sizes, int nsizes) {
  printf("\n2. time per all-reduce and host time per op (us; ratio to raw; host: cuv - raw)\n");
  printf("%10s %9s %9s %16s %16s %16s %16s\n", "bytes", "raw", "raw host", "cuv comm",
         "cuv comm host", "cuv policy", "cuv policy host");
  for (int s = 0; s < nsizes; s++) {
    result_t r[ROWS];
    for (int k = 0; k < ROWS; k++)
      r[k] = measure(k, sizes[s], iters);
    printf("%10zu %9.1f %9.2f %9.1f %5.2fx %9.2f %+6.2f %9.1f %5.2fx %9.2f %+6.2f\n", sizes[s],
           r[0].us_per_op, r[0].host_us_per_op, r[1].us_per_op, r[1].us_per_op / r[0].us_per_op,
           r[1].host_us_per_op, r[1].host_us_per_op - r[0].host_us_per_op, r[2].us_per_op,
           r[2].us_per_op / r[0].us_per_op, r[2].host_us_per_op,
           r[2].host_us_per_op - r[0].host_us_per_op);
  }
}

/* An all-reduce captured on a stream of device 0, its replays enqueued back to back. */
static void graph(size_t bytes) {
  cuv_stream_t *s;
  cuv_graph_t *g;
  int rc = cuv_stream_create(&s, devs[0]);
  if (rc == 0)
    rc = cuv_graph_capture(&g, cuv_comm_all_reduce(comm, NULL, bufs, bytes / 4, CUV_NCCL_FLOAT32,
                                                   CUV_NCCL_SUM),
                           s, NULL);
  if (rc != 0) {
    fprintf(stderr, "%s: capturing the all-reduce: %s\n", prog, cuv_err_name(rc));
    exit(1);
  }
  for (int i = 0; i < 2; i++)
    cuv_sync_on(s, cuv_graph_launch(g), NULL);
  double t0 = now_us();
  for (int i = 0; i < iters && rc == 0; i++)
    rc = cuv_enqueue_on(s, cuv_graph_launch(g), NULL);
  if (rc == 0)
    rc = cuv_stream_synchronize(s);
  double us = (now_us() - t0) / iters;
  printf("\n3. all-reduce of %zu bytes in a captured graph, replayed back to back: %.1f us per "
         "replay (%s)\n", bytes, us, rc == 0 ? "ok" : cuv_err_name(rc));
  cuv_graph_unref(g);
  cuv_stream_destroy(s);
}

/* ---- set-up ---- */

static int parse_sizes(const char *text, size_t *out) {
  int n = 0;
  for (char *end; *text && n < MAX_SIZES; text = *end ? end + 1 : end)
    out[n++] = (size_t)strtoull(text, &end, 10) & ~(size_t)3; /* whole floats */
  return n;
}

int main(int argc, char **argv) {
  size_t sizes[MAX_SIZES] = {8, 64, 512, 4096, 32768, 262144, 1048576};
  size_t bw_sizes[MAX_SIZES] = {(size_t)128 << 20, (size_t)1 << 30};
  int nsizes = 7, nbw = 2, want_dev = MAX_DEV;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--iters") == 0)
      iters = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--devices") == 0)
      want_dev = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--sizes") == 0)
      nsizes = parse_sizes(argv[i + 1], sizes);
    else if (strcmp(argv[i], "--bw-sizes") == 0)
      nbw = parse_sizes(argv[i + 1], bw_sizes);
  }
  cuv_sim_set_device_count(want_dev < MAX_DEV ? want_dev : 2); /* the simulator only */
  int count = 0, version = 0, rc = cuv_init();
  if (rc == 0)
    rc = cuv_device_count(&count);
  if (rc == 0)
    rc = cuv_nccl_version(&version);
  if (rc != 0 || count < 1) {
    fprintf(stderr, "%s: %s\n", prog, rc ? cuv_strerror(rc) : "needs a device");
    return rc == CUV_ENODRIVER || rc == CUV_ENONCCL || count < 1 ? 77 : 1;
  }
  ndev = count < want_dev ? count : want_dev;
  for (int s = 0; s < nsizes; s++)
    buf_bytes = sizes[s] > buf_bytes ? sizes[s] : buf_bytes;
  for (int s = 0; s < nbw; s++)
    buf_bytes = bw_sizes[s] > buf_bytes ? bw_sizes[s] : buf_bytes;
  for (int i = 0; i < ndev && rc == 0; i++)
    if ((rc = cuv_device_open(&devs[i], i)) == 0 &&
        (rc = cuv_buffer_create(&bufs[i], devs[i], buf_bytes)) == 0)
      rc = cuv_sync(cuv_memset32(bufs[i], 0, 0, buf_bytes / 4), NULL);
  if (rc != 0) {
    fprintf(stderr, "%s: setting up: %s\n", prog, cuv_err_name(rc));
    return 1;
  }
  printf("%s: %d devices (%s), NCCL %d, %d iterations per size\n", prog, ndev,
         cuv_device_name(devs[0]), version, iters);
  if (ndev == 1)
    printf("one rank: the rows show the per-op overhead (host and time per op against raw "
           "NCCL's), not bus bandwidth\n");
  raw_setup();
  cuv_setup();
  bandwidth(bw_sizes, nbw);
  latency(sizes, nsizes);
  graph(4096);
  cuv_comm_unref(comm);
  cuv_queue_destroy(queue);
  return 0;
}
