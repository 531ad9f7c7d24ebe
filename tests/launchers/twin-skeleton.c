/* cuv-launchers --twins (docs/simulator.md): the skeleton it generated from kinds.cu compiles
 * with the project's warnings as errors, registers a twin for every kernel, and runs on the
 * simulator: k_xor with the body twin-bodies.h supplies (results checked against the host),
 * k_odd, whose body nobody wrote, fails its launch with CUDA_ERROR_NOT_SUPPORTED (last: the
 * simulator keeps a twin's failure as the context's, as a GPU keeps a fault). Suite sim. */
#include <string.h>

#include "../common.h"
#include "../counted.h"
#include "kinds_launchers.h"

int kinds_register_twins(void); /* kinds_twins.c, generated */
#define CUV_TWIN_NOT_WRITTEN 801 /* as kinds_twins.c defines it */

static kinds_module_t kinds;

static void test_written_body_runs(void **state) {
  (void)state;
  enum { N = 300 }; /* not a multiple of the block: the body must stop at n */
  unsigned in[N], got[N], key = cuvt_random_u32();
  for (size_t i = 0; i < N; i++)
    in[i] = cuvt_random_u32();
  cuv_buffer_t *din = cuvt_buffer(sizeof in), *dout = cuvt_buffer(sizeof got);
  cuvt_upload(din, 0, in, sizeof in);
  assert_cuv_ok(cuv_sync(k_xor_launch(&kinds, cuv_for_num_elems(N), N, din, key, dout), NULL));
  cuvt_read(got, dout, 0, sizeof got);
  for (size_t i = 0; i < N; i++)
    assert_int_equal(got[i], in[i] ^ key);
  cuv_buffer_unref(din);
  cuv_buffer_unref(dout);
}

static void test_unwritten_body_fails(void **state) {
  (void)state;
  enum { N = 64 };
  float x[N], y[N];
  cuvt_random_floats(x, N);
  cuvt_random_floats(y, N);
  cuv_buffer_t *dx = cuvt_buffer(sizeof x), *dy = cuvt_buffer(sizeof y);
  cuvt_upload(dx, 0, x, sizeof x);
  cuvt_upload(dy, 0, y, sizeof y);
  int rc = cuv_sync(k_odd_launch(&kinds, cuv_for_num_elems(N), N, 2.0f, dx, dy), NULL);
  assert_int_equal(rc, CUV_ECUDA(CUV_TWIN_NOT_WRITTEN));
  assert_int_equal(cuv_cuda_result(rc), 801); /* CUDA_ERROR_NOT_SUPPORTED */
  cuv_buffer_unref(dx);
  cuv_buffer_unref(dy);
}

int main(void) {
  cuvt_init();
  if (kinds_register_twins() != 0)
    return 1;
  int rc = kinds_module_load(&kinds, cuvt_device());
  if (rc < 0) {
    fprintf(stderr, "kinds_module_load: %s\n", cuv_strerror(rc));
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_written_body_runs),
      cmocka_unit_test(test_unwritten_body_fails),
  };
  rc = cuvt_run(tests);
  kinds_module_destroy(&kinds);
  return rc;
}
