/* cuv without a usable NCCL: pointed at a library that does not exist (CUV_NCCL, set by
 * tests/meson.build), at one too old (the simulator reporting 2.18.4: argument `old`) or at one
 * lacking an entry point (CUV_SIM_HIDE: argument `lacking`). Every call that needs NCCL fails with
 * CUV_ENONCCL and cuv_nccl_error() says what was missing; everything else still works. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char *expected_words; /* what cuv_nccl_error must mention */

static void test_collectives_refused(void **state) {
  (void)state;
  int version = 0;
  assert_int_equal(cuv_nccl_version(&version), CUV_ENONCCL);
  const char *why = cuv_nccl_error();
  assert_non_null(why);
  print_message("# cuv_nccl_error: %s\n", why);
  assert_non_null(strstr(why, expected_words));
  assert_string_equal(cuv_err_name(CUV_ENONCCL), "CUV_ENONCCL");
  cuv_nccl_id_t id;
  assert_int_equal(cuv_nccl_unique_id(&id), CUV_ENONCCL);
  cuv_device_t *dev = cuvt_device();
  cuv_op_t *op = cuv_comm_init_all(&dev, 1);
  assert_int_equal(cuv_op_error(op), CUV_ENONCCL);
  assert_int_equal(cuv_sync(op, NULL), CUV_ENONCCL);
  memset(&id, 0, sizeof id);
  op = cuv_comm_init_rank(dev, &id, 0, 1);
  assert_int_equal(cuv_op_error(op), CUV_ENONCCL);
  cuv_op_destroy(op);
}

/* The rest of cuv does without: a fill and its download. */
static void test_rest_works(void **state) {
  (void)state;
  cuv_buffer_t *buf;
  uint32_t value = cuvt_random_u32(), got = 0;
  assert_cuv_ok(cuv_buffer_create(&buf, cuvt_device(), 4));
  assert_cuv_ok(cuv_sync(cuv_memset32(buf, 0, value, 1), NULL));
  assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(&got, buf, 0, 4), NULL));
  assert_int_equal(got, value);
  cuv_buffer_unref(buf);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "old") == 0) {
    cuv_sim_nccl_set_version(21804); /* before cuv first looks at NCCL */
    expected_words = "2.18.4";
  } else if (strcmp(mode, "lacking") == 0) {
    expected_words = "lacks ncclCommAbort"; /* CUV_SIM_HIDE=ncclCommAbort */
  } else {
    expected_words = getenv("CUV_NCCL");
    if (!expected_words) {
      fprintf(stderr, "set CUV_NCCL to a library that does not exist\n");
      return 1;
    }
  }
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_collectives_refused),
      cmocka_unit_test(test_rest_works),
  };
  return cuvt_run(tests);
}
