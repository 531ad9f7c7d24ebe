/* Validation tested at its boundaries, one byte or one unit on each side (tests/uv/bad-input.c
 * checks far-out values): each launch dimension at zero (lib/launch.c), a kernel name at the
 * length limit and one byte over (lib/module.h keeps 127 bytes and the NUL), a policy of exactly
 * 1024 streams and of 1025 (lib/policy.c), and the range checks of copies, sets, host buffers and
 * launch arguments (lib/buffer.c cuv__buffer_check_range, lib/host_buffer.c) at offset == size,
 * offset + bytes == size and size + 1. Errors of op constructors are read with cuv_op_error;
 * every accepted op is executed, and what lands at the last byte is checked. */
#include "counted.h"

#define SIZE 4096 /* bytes of the buffers here */

static void expect_op(cuv_op_t *op, int want) {
  int got = cuv_op_error(op);
  if (got != want)
    print_error("op error %s, want %s\n", cuv_err_name(got), cuv_err_name(want));
  assert_int_equal(got, want);
  if (want == 0)
    assert_cuv_ok(cuv_sync(op, NULL));
  else
    cuv_op_destroy(op);
}

/* ---- launch dimensions ---- */

static void test_each_launch_dimension_at_zero(void **state) {
  cuv_kernel_t *k = cuvt_kernel_ok("empty_kernel");
  const cuv_dim3_t one = CUV_DIM3(1, 1, 1);
  const cuv_dim3_t zeros[] = {CUV_DIM3(0, 1, 1), CUV_DIM3(1, 0, 1), CUV_DIM3(1, 1, 0)};
  for (int i = 0; i < 3; i++) {
    expect_op(cuv_launch(k, zeros[i], one, 0, NULL, 0), CUV_EINVAL); /* grid x, y, z */
    expect_op(cuv_launch(k, one, zeros[i], 0, NULL, 0), CUV_EINVAL); /* block x, y, z */
  }
  expect_op(cuv_launch(k, one, one, 0, NULL, 0), 0); /* one of each: runs */
}

/* ---- kernel names ---- */

static void test_kernel_name_length_limit(void **state) {
  cuv_module_t *mod;
  assert_cuv_ok(cuv_module_load_file(&mod, cuvt_device(), cuvt_ptx_path()));
  char name[130];
  cuv_kernel_t *k = (cuv_kernel_t *)&name; /* must stay untouched on failure */
  memset(name, 'k', sizeof name);
  name[127] = '\0'; /* 127 bytes: the longest name kept; looked up, not found */
  assert_int_equal(cuv_kernel_get(&k, mod, name), CUV_ENOTFOUND);
  name[127] = 'k';
  name[128] = '\0'; /* 128 bytes: one over */
  assert_int_equal(cuv_kernel_get(&k, mod, name), CUV_EINVAL);
  assert_ptr_equal(k, (cuv_kernel_t *)&name);
  assert_cuv_ok(cuv_kernel_get(&k, mod, "empty_kernel")); /* the module still works */
  cuv_kernel_unref(k);
  cuv_module_unref(mod);
}

/* ---- policy sizes ---- */

static void test_policy_of_1024_and_1025_streams(void **state) {
  cuv_policy_t *p = NULL;
  assert_int_equal(cuv_policy_round_robin(&p, cuvt_device(), 1025), CUV_EINVAL);
  assert_null(p);
  assert_int_equal(cuv_policy_least_loaded(&p, cuvt_device(), 1025), CUV_EINVAL);
  assert_null(p);
  assert_cuv_ok(cuv_policy_round_robin(&p, cuvt_device(), 1024));
  /* 1024 distinct streams, round and round. */
  cuv_stream_t *first, *s;
  assert_cuv_ok(cuv_policy_next_stream(p, NULL, &first));
  for (int i = 1; i < 1024; i++) {
    assert_cuv_ok(cuv_policy_next_stream(p, NULL, &s));
    assert_ptr_not_equal(s, first);
  }
  assert_cuv_ok(cuv_policy_next_stream(p, NULL, &s));
  assert_ptr_equal(s, first);
  assert_cuv_ok(cuv_sync_policy(p, cuv_value(NULL, NULL), NULL));
  cuv_policy_destroy(p);
  assert_cuv_ok(cuv_policy_least_loaded(&p, cuvt_device(), 1024));
  cuv_policy_destroy(p);
}

/* ---- ranges ---- */

static void test_copy_ranges_at_the_end(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(SIZE), *other = cuvt_buffer(SIZE);
  unsigned char host[8] = {0};
  unsigned char byte = (unsigned char)(cuvt_nonzero_u32() | 1u);
  assert_cuv_ok(cuv_sync(cuv_memset8(buf, 0, 0, SIZE), NULL));
  /* offset == size: zero bytes fine, one byte out. */
  expect_op(cuv_memcpy_htod(buf, SIZE, host, 0, CUV_COPY_STAGE), 0);
  expect_op(cuv_memcpy_htod(buf, SIZE, host, 1, CUV_COPY_STAGE), CUV_ERANGE);
  expect_op(cuv_memcpy_dtoh(host, buf, SIZE, 0), 0);
  expect_op(cuv_memcpy_dtoh(host, buf, SIZE, 1), CUV_ERANGE);
  expect_op(cuv_memset8(buf, SIZE, 1, 0), 0);
  expect_op(cuv_memset8(buf, SIZE, 1, 1), CUV_ERANGE);
  expect_op(cuv_memset32(buf, SIZE, 1, 0), 0);
  expect_op(cuv_memset32(buf, SIZE, 1, 1), CUV_ERANGE);
  expect_op(cuv_memset16(buf, SIZE, 1, 0), 0);
  expect_op(cuv_memset16(buf, SIZE, 1, 1), CUV_ERANGE);
  expect_op(cuv_memcpy_dtod(buf, SIZE, other, 0, 0), 0);
  expect_op(cuv_memcpy_dtod(buf, 0, other, SIZE, 0), 0);
  expect_op(cuv_memcpy_dtod(buf, SIZE, other, 0, 1), CUV_ERANGE);
  expect_op(cuv_memcpy_dtod(buf, 0, other, SIZE, 1), CUV_ERANGE);
  expect_op(cuv_download(buf, SIZE, 1), CUV_ERANGE);
  /* offset > size, even with zero bytes. */
  expect_op(cuv_memcpy_htod(buf, SIZE + 1, host, 0, CUV_COPY_STAGE), CUV_ERANGE);
  expect_op(cuv_memcpy_dtoh(host, buf, SIZE + 1, 0), CUV_ERANGE);
  expect_op(cuv_memset8(buf, SIZE + 1, 1, 0), CUV_ERANGE);
  /* offset + bytes == size: the last byte (and the last word), written and read back. */
  expect_op(cuv_memcpy_htod(buf, SIZE - 1, &byte, 1, CUV_COPY_STAGE), 0);
  expect_op(cuv_memcpy_dtoh(host, buf, SIZE - 1, 1), 0);
  assert_int_equal(host[0], byte);
  expect_op(cuv_memcpy_dtod(other, SIZE - 1, buf, SIZE - 1, 1), 0);
  cuvt_read(host, other, SIZE - 1, 1);
  assert_int_equal(host[0], byte);
  expect_op(cuv_memset32(buf, SIZE - 4, 0x01020304u, 1), 0);
  uint32_t word = 0;
  cuvt_read(&word, buf, SIZE - 4, 4);
  assert_int_equal(word, 0x01020304u);
  expect_op(cuv_memset8(buf, SIZE - 1, 0xab, 1), 0);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_download(buf, SIZE - 1, 1), &out));
  assert_int_equal(*(unsigned char *)out.data, 0xab);
  cuv_output_release(&out);
  /* offset + bytes == size + 1, from each side. */
  expect_op(cuv_memcpy_htod(buf, SIZE - 1, host, 2, CUV_COPY_STAGE), CUV_ERANGE);
  expect_op(cuv_memcpy_dtoh(host, buf, SIZE - 1, 2), CUV_ERANGE);
  expect_op(cuv_memcpy_dtod(other, SIZE - 1, buf, 0, 2), CUV_ERANGE);
  expect_op(cuv_memcpy_dtod(other, 0, buf, SIZE - 1, 2), CUV_ERANGE);
  expect_op(cuv_memset8(buf, SIZE - 1, 1, 2), CUV_ERANGE);
  expect_op(cuv_memset32(buf, SIZE - 4, 1, 2), CUV_ERANGE);
  expect_op(cuv_memset16(buf, SIZE - 2, 1, 2), CUV_ERANGE);
  expect_op(cuv_download(buf, SIZE - 1, 2), CUV_ERANGE);
  expect_op(cuv_memcpy_htod(buf, 0, host, SIZE + 1, CUV_COPY_BORROW), CUV_ERANGE);
  /* The whole buffer is in range. */
  expect_op(cuv_memset8(buf, 0, 0, SIZE), 0);
  cuv_buffer_unref(buf);
  cuv_buffer_unref(other);
}

static void test_host_buffer_ranges_at_the_end(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(SIZE);
  cuv_host_buffer_t *h;
  assert_cuv_ok(cuv_host_buffer_create(&h, cuvt_device(), SIZE));
  unsigned char *data = cuv_host_buffer_data(h);
  data[SIZE - 1] = (unsigned char)(cuvt_nonzero_u32() | 1u);
  expect_op(cuv_upload(buf, 0, h, SIZE, 0), 0);
  expect_op(cuv_upload(buf, 0, h, SIZE, 1), CUV_ERANGE);
  expect_op(cuv_upload(buf, 0, h, SIZE + 1, 0), CUV_ERANGE);
  expect_op(cuv_upload(buf, 0, h, SIZE - 1, 2), CUV_ERANGE);
  expect_op(cuv_download_into(h, SIZE, buf, 0, 0), 0);
  expect_op(cuv_download_into(h, SIZE, buf, 0, 1), CUV_ERANGE);
  expect_op(cuv_download_into(h, SIZE - 1, buf, 0, 2), CUV_ERANGE);
  /* The last byte, to the device's last byte and back into the host buffer's first. */
  expect_op(cuv_upload(buf, SIZE - 1, h, SIZE - 1, 1), 0);
  unsigned char want = data[SIZE - 1];
  data[0] = 0;
  expect_op(cuv_download_into(h, 0, buf, SIZE - 1, 1), 0);
  assert_int_equal(data[0], want);
  cuv_host_buffer_unref(h);
  cuv_buffer_unref(buf);
}

/* A buffer argument's offset: == size is accepted (a pointer one past the end), size + 1 is out
 * of range. The kernel never dereferences it (n = 0). */
static void test_launch_argument_offset_at_the_end(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(SIZE);
  unsigned n = 0, value = 1;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(value),
                      CUV_ARG_WRITE_AT(buf, SIZE)};
  expect_op(cuv_launch(cuvt_kernel_ok("fill_u32"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 3), 0);
  args[2].offset = SIZE + 1;
  expect_op(cuv_launch(cuvt_kernel_ok("fill_u32"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 3),
            CUV_ERANGE);
  cuv_buffer_unref(buf);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_launch_dimension_at_zero),
      cmocka_unit_test(test_kernel_name_length_limit),
      cmocka_unit_test(test_policy_of_1024_and_1025_streams),
      cmocka_unit_test(test_copy_ranges_at_the_end),
      cmocka_unit_test(test_host_buffer_ranges_at_the_end),
      cmocka_unit_test(test_launch_argument_offset_at_the_end),
  };
  return cuvt_run(tests);
}
