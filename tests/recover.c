/* After a sticky fault (its own process: a fault kills the context): every blocking call and
 * submission resolves with the driver's error, cuv_device_recover refuses while work is in flight
 * and then starts a new epoch, in which objects of the old one report CUV_ELOST. Where the driver
 * cannot clear the fault in-process (driver 580, and libcuv-sim like it), recovery returns the
 * fault: the test accepts either outcome and checks what follows from each. */
#include <cuda.h>

#include "common.h"
#include "counted.h"

static int launch_fault(void) {
  unsigned long long bad = 0x10; /* the GPU's first page is never mapped */
  cuv_arg_t args[] = {CUV_ARG_VALUE(bad)};
  return cuv_sync(cuv_launch(cuvt_kernel("fault_kernel"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 1),
                  NULL);
}

static void test_fault_then_recover(void **state) {
  cuv_device_t *dev = cuvt_device();
  cuv_buffer_t *old = cuvt_buffer(64);
  cuv_stats_t before;
  cuv_stats(&before);

  int fault = launch_fault();
  assert_true(CUV_IS_ECUDA(fault));
  print_message("# fault: %s\n", cuv_err_name(fault));
  /* Sticky: the next submission fails too, and nothing is left in flight. */
  assert_true(CUV_IS_ECUDA(cuv_sync(cuv_memset8(old, 0, 1, 64), NULL)));
  cuv_stats_t after;
  cuv_stats(&after);
  assert_true(after.faults > before.faults);
  assert_true(after.leaked > before.leaked); /* unprovable completion: leaked on purpose */

  unsigned epoch = cuv_device_epoch(dev);
  int rc = cuv_device_recover(dev);
  print_message("# recover: %s (%s)\n", cuv_err_name(rc), cuv_strerror(rc));
  assert_int_equal(cuv_device_epoch(dev), epoch + 1);
  int use_old = cuv_sync(cuv_memset8(old, 0, 1, 64), NULL);
  cuv_buffer_unref(old); /* safe to release in any epoch */
  if (rc != 0) {
    /* The driver keeps the fault (restart the process): every use fails, none crashes. */
    assert_true(CUV_IS_ECUDA(rc));
    assert_true(use_old == CUV_ELOST || CUV_IS_ECUDA(use_old));
    return;
  }
  assert_int_equal(use_old, CUV_ELOST); /* objects of the old epoch are lost */
  /* Recovered: a new buffer and the old module's kernels work again. */
  enum { N = 1024 };
  cuv_buffer_t *buf = cuvt_buffer(N * sizeof(unsigned));
  unsigned n = N, value = cuvt_random_u32();
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(value), CUV_ARG_WRITE(buf)};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_seq(cuv_launch(cuvt_kernel("fill_u32"), CUVT_GRID(N), CUVT_BLOCK, 0,
                                            args, 3),
                                 cuv_download(buf, 0, N * sizeof(unsigned))),
                         &out));
  for (size_t i = 0; i < N; i++)
    assert_int_equal(((unsigned *)out.data)[i], value);
  cuv_output_release(&out);
  cuv_buffer_unref(buf);
}

static void test_recover_refuses_bad_arguments(void **state) {
  assert_int_equal(cuv_device_recover(NULL), CUV_EINVAL);
  assert_int_equal(cuv_device_set_auto_recover(NULL, 1), CUV_EINVAL);
  assert_int_equal(cuv_device_epoch(NULL), 0);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_recover_refuses_bad_arguments),
      cmocka_unit_test(test_fault_then_recover),
  };
  return cuvt_run(tests);
}
