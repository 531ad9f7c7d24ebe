/* Laziness (the seed's rule): building an op touches no stream. Every constructor and combinator
 * is built, nested and dropped while the simulator counts the driver calls that enqueue work or
 * allocate on a stream; none may happen until an executor runs the op, and then the work does
 * run (the count moves). Simulator only: it counts calls the real driver cannot. */
#include <cuv/sim.h>

#include "counted.h"
#include "test_kernels_launchers.h"

static test_kernels_module_t kernels; /* typed launchers (tests/kernels) */

/* The entry points that put work on a stream or take memory from it. */
static const char *const stream_entries[] = {
    "cuLaunchKernel",       "cuMemcpyHtoDAsync",    "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync",
    "cuMemsetD8Async",      "cuMemsetD16Async",     "cuMemsetD32Async",  "cuStreamWriteValue32",
    "cuStreamWriteValue64", "cuEventRecord",        "cuStreamWaitEvent", "cuLaunchHostFunc",
    "cuMemAllocAsync",      "cuMemFreeAsync",       "cuGraphLaunch",     "cuStreamBeginCapture",
    "cuLaunchHostFunc_v2",
};
#define N_ENTRIES (sizeof stream_entries / sizeof stream_entries[0])

static unsigned long stream_calls(void) {
  unsigned long n = 0;
  for (size_t i = 0; i < N_ENTRIES; i++)
    n += cuv_sim_calls(stream_entries[i]);
  return n;
}

static cuv_op_t *then_next(cuv_output_t *input, void *arg) { return cuv_value(NULL, NULL); }
static int map_keep(cuv_output_t *value, void *arg) { return 0; }
static cuv_op_t *in_context(cuv_stream_t *stream, void *arg) { return cuv_value(NULL, NULL); }

/* One op of every kind, nested through every combinator. */
static cuv_op_t *build_everything(cuv_buffer_t *a, cuv_buffer_t *b, cuv_host_buffer_t *host) {
  enum { N = 256 };
  static unsigned char bytes[N * 4];
  cuv_op_t *leaves[] = {
      cuv_alloc(cuvt_device(), 64),
      cuvt_fill_u32(a, N, 7),
      cuvt_copy_f32(b, a, N),
      cuv_memcpy_htod(a, 0, bytes, sizeof bytes, 0),
      cuv_memcpy_dtod(b, 0, a, 0, sizeof bytes),
      cuv_memset8(a, 0, 1, 16),
      cuv_memset32(b, 0, 3, 4),
      cuv_memset16(a, 2, 5, 4),
      cuv_download(a, 0, 16),
      cuv_upload(a, 0, host, 0, 16),
      cuv_download_into(host, 0, b, 0, 16),
      cuv_with_context(in_context, NULL, NULL),
      add_one_launch(&kernels, cuv_for_num_elems(N), N, b),
      cuv_fill8(cuvt_device(), 16, 1),
      cuv_fill16(cuvt_device(), 16, 2),
      cuv_fill32(cuvt_device(), 16, 3),
      cuv_zeros(cuvt_device(), 16),
      cuv_ones_f32(cuvt_device(), 16),
      cuv_iota_u32(cuvt_device(), 16, 0, 1),
      cuv_iota_f32(cuvt_device(), 16, 0.5f, 2.0f),
      cuv_dup(b),
  };
  size_t n = sizeof leaves / sizeof leaves[0];
  cuv_op_t *zipped = cuv_zip(leaves, n);
  cuv_op_t *then = cuv_then(cuv_value(NULL, NULL), then_next, NULL);
  cuv_op_t *map = cuv_map(then, map_keep, NULL);
  cuv_op_t *branches[] = {cuvt_fill_u32(a, N, 1), cuvt_fill_u32(b, N, 2)};
  cuv_op_t *fork = cuv_fork(branches, 2);
  return cuv_seq(cuv_seq(zipped, map), fork);
}

static void test_building_touches_no_stream(void **state) {
  cuv_buffer_t *a = cuvt_buffer(1024 * 4), *b = cuvt_buffer(1024 * 4);
  cuv_host_buffer_t *host;
  assert_cuv_ok(cuv_host_buffer_create(&host, cuvt_device(), 64));
  cuv_shared_t *shared = cuv_shared(cuvt_fill_u32(a, 16, 9));
  unsigned long before = stream_calls();
  cuv_op_t *dropped = build_everything(a, b, host);
  cuv_op_t *clone = cuv_shared_clone(shared);
  cuv_op_destroy(dropped); /* built and dropped: nothing ran */
  cuv_op_t *kept = build_everything(a, b, host);
  assert_int_equal(stream_calls(), before);
  assert_cuv_ok(cuv_sync(cuv_seq(kept, clone), NULL));
  assert_true(stream_calls() > before); /* the same ops do run when executed */
  cuv_shared_unref(shared);
  cuv_host_buffer_unref(host);
  cuv_buffer_unref(a);
  cuv_buffer_unref(b);
}

int main(void) {
  cuvt_init();
  if (!cuvt_is_sim())
    return 77; /* counting calls is the simulator's */
  if (test_kernels_module_load(&kernels, cuvt_device()) != 0)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_building_touches_no_stream),
  };
  return cuvt_run(tests);
}
