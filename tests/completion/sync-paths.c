/* The blocking executors' wait, under each CUV_HOST_SYNC setting (tests/meson.build runs
 * this file once per setting): results are right, and on the simulator the host-function path is
 * proven taken (or not) by counting cuLaunchHostFunc calls. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "common.h"
#include "counted.h"

#define N 4096

static const char *host_sync(void) {
  const char *mode = getenv("CUV_HOST_SYNC");
  return mode ? mode : "";
}

/* saxpy on fresh data through cuv_sync, checked on the host. */
static void run_saxpy(void) {
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *want = malloc(N * sizeof *want);
  assert_non_null(x);
  assert_non_null(y);
  assert_non_null(want);
  cuvt_random_ints(x, N);
  cuvt_random_ints(y, N);
  float a = (float)(cuvt_random_u32() % 7) + 1.0f;
  for (size_t i = 0; i < N; i++)
    want[i] = a * x[i] + y[i];
  cuv_buffer_t *bx = cuvt_buffer_of(x, N), *by = cuvt_buffer_of(y, N);
  unsigned n = N;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_READ(bx), CUV_ARG_RW(by)};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_seq(cuv_launch(cuvt_kernel("saxpy"), CUVT_GRID(N), CUVT_BLOCK, 0,
                                            args, 4),
                                 cuv_download(by, 0, N * sizeof(float))),
                         &out));
  assert_memory_equal(out.data, want, N * sizeof(float));
  cuv_output_release(&out);
  cuv_buffer_unref(bx);
  cuv_buffer_unref(by);
  free(x);
  free(y);
  free(want);
}

static void test_sync_results(void **state) {
  for (int i = 0; i < 20; i++)
    run_saxpy();
}

/* Host functions launched, with or without a host-task mode (tests/completion/host-modes.c says
 * which entry point carries which). */
static unsigned long host_function_calls(void) {
  return cuv_sim_calls("cuLaunchHostFunc") + cuv_sim_calls("cuLaunchHostFunc_v2");
}

/* Each cuv_sync waits through exactly one host function in the host-sync modes, none otherwise. */
static void sim_only_host_function_count(void **state) {
  if (!cuvt_is_sim())
    return; /* counting calls is the simulator's; the results test covers the GPU */
  unsigned long before = host_function_calls();
  assert_cuv_ok(cuv_sync(cuv_value(NULL, NULL), NULL));
  unsigned long calls = host_function_calls() - before;
  bool forced = strcmp(host_sync(), "spin") == 0 || strcmp(host_sync(), "block") == 0;
  assert_int_equal(calls, forced ? 1 : 0);
}

/* A host function that cannot be enqueued falls back to the event: still correct. */
static void sim_only_host_function_refused(void **state) {
  if (!cuvt_is_sim())
    return;
  cuv_sim_fail("cuLaunchHostFunc", 0, CUDA_ERROR_NOT_SUPPORTED);
  cuv_sim_fail("cuLaunchHostFunc_v2", 0, CUDA_ERROR_NOT_SUPPORTED);
  run_saxpy();
  cuv_sim_fail_clear();
}

int main(void) {
  cuvt_init();
  print_message("# CUV_HOST_SYNC=%s\n", host_sync());
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sync_results),
      cmocka_unit_test(sim_only_host_function_count),
      cmocka_unit_test(sim_only_host_function_refused),
  };
  return cuvt_run(tests);
}
