/* cuv-bench-chain: the host cost of a 100-op chain of empty kernels executed with cuv_sync.
 *
 *   cuv-bench-chain --chains K   runs exactly K chains after one warm-up chain and prints
 *                                nothing else of note: run it under callgrind with two values of
 *                                K, and (I(K2) - I(K1)) / ((K2 - K1) * 100) is instructions per
 *                                op with every set-up cost cancelled (bench/chain-callgrind.sh)
 *   cuv-bench-chain [--reps R]   wall time per op of the chain (built and run with cuv_sync)
 *                                against the raw driver in the same run: 100 cuLaunchKernel on one
 *                                stream + one cuStreamSynchronize, through the driver cuv loaded
 *                                (CUV_DRIVER), opened again with dlopen + cuGetProcAddress_v2
 *                                (raw.c)
 *   --seq                        chains with cuv_seq (ops built up front) instead of cuv_then
 *                                (each op built by the previous stage's callback)
 *   --typed                      with --chains: each launch through the typed launcher that
 *                                cuv-launchers generated (empty_kernel_launch) instead of
 *                                cuv_launch; the wall-time run always measures both, rep by rep
 *   --buffer-args, --tensor-args with --chains: each op launches tile_saxpy over one 4 x 4 tile,
 *                                through cuv_launch with buffer arguments, or through the
 *                                generated tile_saxpy_launch_tensors with a tensor and a
 *                                partition's tensor over the same buffers (with the launch
 *                                configuration the partition keeps): the difference is what the
 *                                tensor layer costs
 *
 * The kernels come from the test module (tests/kernels), with host twins for the simulator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuv.h>
#include <cuv/tensor.h>

#include "raw.h"
#include "test_kernels_launchers.h"
#include "twins.h"

#define CHAIN_OPS 100

static const char *const usage =
    "usage: cuv-bench-chain [--chains K [--typed | --buffer-args | --tensor-args] | --reps R] "
    "[--seq]\n";

/* What each op of a chain launches (--typed, --buffer-args, --tensor-args). */
enum mode { MODE_PLAIN, MODE_TYPED, MODE_BUFFER_ARGS, MODE_TENSOR_ARGS };

/* ---- the cuv side ---- */

static cuv_device_t *dev;
static cuv_kernel_t *empty;
static test_kernels_module_t kernels; /* the typed launchers' module */
/* tile_saxpy's arguments: x and y, 4 x 4 floats, as buffers and as a tensor and a partition */
enum { TILE = 4 };
static cuv_kernel_t *tile;
static cuv_buffer_t *bx, *by;
static cuv_tensor_t *tx, *ty;
static cuv_partition_t py;
static const unsigned ld = TILE;
static const float alpha = 2.0f;

static void die(const char *what, int rc) {
  fprintf(stderr, "cuv-bench-chain: %s: %s (%s)\n", what, cuv_err_name(rc), cuv_strerror(rc));
  exit(1);
}

static void setup_cuv(void) {
  cuvt_register_twins(); /* for the simulator; harmless on a GPU */
  int rc = bench_cuv_kernel(CUV_BENCH_PTX_PATH, "empty_kernel", &dev, &empty);
  if (rc < 0 || (rc = test_kernels_module_load(&kernels, dev)) < 0)
    die("setup", rc);
}

static void setup_tensors(void) {
  const size_t shape[] = {TILE, TILE};
  tile = kernels.tile_saxpy; /* the typed launchers' module holds it */
  int rc = cuv_buffer_create(&bx, dev, sizeof(float) * TILE * TILE);
  if (rc == 0)
    rc = cuv_buffer_create(&by, dev, sizeof(float) * TILE * TILE);
  if (rc == 0)
    rc = cuv_tensor_create(&tx, bx, 0, CUV_DTYPE_F32, shape, 2);
  if (rc == 0)
    rc = cuv_tensor_create(&ty, by, 0, CUV_DTYPE_F32, shape, 2);
  if (rc == 0)
    rc = cuv_tensor_partition(&py, ty, shape, 2);
  if (rc < 0)
    die("tensor setup", rc);
}

static void free_tensors(void) {
  cuv_partition_release(&py);
  cuv_tensor_unref(tx);
  cuv_tensor_unref(ty);
  cuv_buffer_unref(bx);
  cuv_buffer_unref(by);
}

static cuv_op_t *empty_launch(void) {
  return cuv_launch(empty, CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 0);
}

static cuv_op_t *typed_launch(void) {
  static const cuv_launch_config_t one = {{1, 1, 1}, {1, 1, 1}, 0};
  return empty_kernel_launch(&kernels, one);
}

static cuv_op_t *buffer_launch(void) {
  const cuv_arg_t args[] = {CUV_ARG_VALUE(ld), CUV_ARG_VALUE(ld), CUV_ARG_VALUE(alpha),
                            CUV_ARG_READ(bx), CUV_ARG_RW(by)};
  return cuv_launch(tile, CUV_DIM1(1), CUV_DIM3(TILE, TILE, 1), 0, args, 5);
}

/* Through the generated launcher over tensors (cuv_tensor_launch_args), the partition passed as
 * its tensor with the partition's configuration, as docs/launchers.md says: the one the partition
 * computed when it was made (its config), as a caller launching it often keeps it. */
static cuv_op_t *tensor_launch(void) {
  return tile_saxpy_launch_tensors(&kernels, py.config, ld, ld, alpha,
                                   CUV_IN(tx), CUV_IN(py.tensor));
}

static cuv_op_t *next_launch(cuv_output_t *input, void *arg) { return empty_launch(); }
static cuv_op_t *next_typed(cuv_output_t *input, void *arg) { return typed_launch(); }
static cuv_op_t *next_buffer(cuv_output_t *input, void *arg) { return buffer_launch(); }
static cuv_op_t *next_tensor(cuv_output_t *input, void *arg) { return tensor_launch(); }

/* CHAIN_OPS launches of one mode, each chained after the previous one. */
static cuv_op_t *build_chain(int use_seq, enum mode mode) {
  static cuv_op_t *(*const launches[])(void) = {empty_launch, typed_launch, buffer_launch,
                                                tensor_launch};
  static const cuv_then_fn nexts[] = {next_launch, next_typed, next_buffer, next_tensor};
  cuv_op_t *op = launches[mode]();
  for (int i = 1; i < CHAIN_OPS; i++)
    op = use_seq ? cuv_seq(op, launches[mode]()) : cuv_then(op, nexts[mode], NULL);
  return op;
}

static void run_chain(int use_seq, enum mode mode) {
  int rc = cuv_sync(build_chain(use_seq, mode), NULL);
  if (rc < 0)
    die("cuv_sync", rc);
}

/* ---- the raw driver side, through the library cuv loaded (raw.h) ---- */

typedef struct raw {
  __typeof__(cuLaunchKernel) *launch;
  __typeof__(cuStreamSynchronize) *synchronize;
  CUfunction fn;
  CUstream stream;
} raw_t;

/* Loads the module and the kernel again with raw calls, in the context cuv uses, and takes a
 * stream made the way cuv makes its own (non-blocking). */
static void setup_raw(raw_t *raw, cuv_stream_t *stream) {
  raw_open("cuv-bench-chain", dev);
  raw_resolve("cuLaunchKernel", &raw->launch);
  raw_resolve("cuStreamSynchronize", &raw->synchronize);
  raw->fn = raw_kernel(CUV_BENCH_PTX_PATH, "empty_kernel");
  raw->stream = cuv_stream_handle(stream);
}

static void run_raw(const raw_t *raw) {
  CUresult r = CUDA_SUCCESS;
  for (int i = 0; i < CHAIN_OPS && r == CUDA_SUCCESS; i++)
    r = raw->launch(raw->fn, 1, 1, 1, 1, 1, 1, 0, raw->stream, NULL, NULL);
  if (r == CUDA_SUCCESS)
    r = raw->synchronize(raw->stream);
  raw_check("launch", r);
}

/* ---- measuring ---- */

/* cuv_launch, typed and raw alternate rep by rep, in turn first, so drift (clocks, other load)
 * and the order hit all alike. */
static void wall(int reps, int use_seq) {
  cuv_stream_t *stream;
  int rc = cuv_stream_create(&stream, dev);
  if (rc < 0)
    die("cuv_stream_create", rc);
  raw_t raw;
  setup_raw(&raw, stream);
  double *us[3]; /* per op: cuv_launch, typed, raw */
  for (int k = 0; k < 3; k++)
    us[k] = calloc((size_t)reps, sizeof *us[k]);
  for (int i = 0; i < 5; i++) { /* warm-up: streams, event pool, staging, caches */
    run_chain(use_seq, MODE_PLAIN);
    run_chain(use_seq, MODE_TYPED);
    run_raw(&raw);
  }
  for (int i = 0; i < reps; i++) {
    for (int j = 0; j < 3; j++) { /* each goes first, second and third in turn */
      int k = (i + j) % 3;
      double t0 = now_us();
      if (k == 2)
        run_raw(&raw);
      else
        run_chain(use_seq, k);
      us[k][i] = (now_us() - t0) / CHAIN_OPS;
    }
  }
  double p50[3], p90[3];
  for (int k = 0; k < 3; k++) {
    p50[k] = percentile(us[k], reps, 0.5);
    p90[k] = percentile(us[k], reps, 0.9);
  }
  printf("device %s, driver %s, %d-op %s-chain of empty_kernel, %d reps\n", cuv_device_name(dev),
         cuv_driver_name(), CHAIN_OPS, use_seq ? "seq" : "then", reps);
  printf("cuv chain (build + cuv_sync)     p50 %8.3f us/op  p90 %8.3f us/op\n", p50[0], p90[0]);
  printf("typed chain (generated launcher) p50 %8.3f us/op  p90 %8.3f us/op\n", p50[1], p90[1]);
  printf("raw cuLaunchKernel x%d + sync   p50 %8.3f us/op  p90 %8.3f us/op\n", CHAIN_OPS, p50[2],
         p90[2]);
  printf("ratio cuv/raw (p50)              %8.3f\n", p50[0] / p50[2]);
  printf("ratio typed/raw (p50)            %8.3f\n", p50[1] / p50[2]);
  printf("ratio typed/cuv (p50)            %8.3f\n", p50[1] / p50[0]);
  for (int k = 0; k < 3; k++)
    free(us[k]);
  cuv_stream_destroy(stream);
}

int main(int argc, char **argv) {
  int chains = -1, reps = 0, use_seq = 0;
  enum mode mode = MODE_PLAIN;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--chains") == 0 && i + 1 < argc)
      chains = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--seq") == 0)
      use_seq = 1;
    else if (strcmp(argv[i], "--typed") == 0)
      mode = MODE_TYPED;
    else if (strcmp(argv[i], "--buffer-args") == 0)
      mode = MODE_BUFFER_ARGS;
    else if (strcmp(argv[i], "--tensor-args") == 0)
      mode = MODE_TENSOR_ARGS;
    else {
      fputs(usage, stderr);
      return 2;
    }
  }
  static const char *const of[] = {"", " of typed launches", " of buffer-argument launches",
                                   " of tensor-argument launches"};
  setup_cuv();
  setup_tensors();
  if (chains >= 0) {
    run_chain(use_seq, mode); /* warm-up, in both runs of a callgrind pair */
    for (int i = 0; i < chains; i++)
      run_chain(use_seq, mode);
    printf("ran %d %d-op %s-chains%s (+1 warm-up) on %s\n", chains, CHAIN_OPS,
           use_seq ? "seq" : "then", of[mode], cuv_driver_name());
  } else {
    wall(reps > 0 ? reps : (cuv_driver_is_sim() ? 50 : 500), use_seq);
  }
  free_tensors();
  test_kernels_module_destroy(&kernels);
  cuv_kernel_unref(empty);
  cuv_device_unref(dev);
  return 0;
}
