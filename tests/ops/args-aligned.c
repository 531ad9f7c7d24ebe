/* Over-aligned kernel arguments (cuda-async supports them): a struct __align__(16) of four floats,
 * a double2, an 8-byte value after a 1-byte one, a struct __align__(32) and a 16-byte struct
 * aligned at 8, each mixed with pointers, passed through cuv_launch as CUV_ARG_VALUE and checked
 * against host math on fresh random data. The parameter layout the driver reports
 * (cuFuncGetParamInfo) is checked against the same members in a C struct, on the GPU and on the
 * simulator alike: that is how the simulator is held to what the driver does. */
#include <stddef.h>

#include "arg-types.h"
#include "counted.h"
#include "driver-util.h"

/* The kernels' parameter lists as C structs: offsetof is where the driver must place each. */
struct f4_params {
  unsigned n;
  struct cuvt_f4 v;
  const float *x;
  float *y;
};
struct d2_params {
  unsigned n;
  struct cuvt_d2 ab;
  const double *x;
  double *y;
};
struct u8_u64_params {
  unsigned char shift;
  unsigned long long add;
  const unsigned long long *x;
  unsigned long long *y;
  unsigned n;
};
/* The driver places parameters at most 16-aligned (the GPU, driver 580): the struct __align__(32)
 * sits at offset 16 after the 1-byte tag, not at 32 as in a C struct of the same members. */
struct a32_params {
  signed char tag;
  struct __attribute__((aligned(16))) {
    float v[8];
  } s;
  const float *x;
  float *y;
  unsigned n;
  struct cuvt_dq q;
};

typedef struct member {
  size_t offset, size;
} member_t;
#define MEMBER(type, m)                                                                            \
  { offsetof(struct type, m), sizeof(((struct type *)0)->m) }

static void expect_layout(const char *kernel, const member_t *members, size_t n) {
  CUfunction fn = cuvt_fn(kernel);
  size_t offset, size;
  for (size_t i = 0; i < n; i++) {
    CU_OK(cuv__drv.cuFuncGetParamInfo(fn, i, &offset, &size));
    if (offset != members[i].offset || size != members[i].size)
      print_error("%s parameter %zu: offset %zu size %zu, want %zu and %zu\n", kernel, i, offset,
                  size, members[i].offset, members[i].size);
    assert_int_equal(offset, members[i].offset);
    assert_int_equal(size, members[i].size);
  }
  assert_int_equal(cuv__drv.cuFuncGetParamInfo(fn, n, &offset, &size), CUDA_ERROR_INVALID_VALUE);
}

static void test_parameter_layout_is_the_c_layout(void **state) {
  if (!cuv__drv.cuFuncGetParamInfo) {
    printf("# this driver reports no parameter layout (CUDA 12.4+ does): not checked\n");
    return;
  }
  static const member_t f4[] = {MEMBER(f4_params, n), MEMBER(f4_params, v), MEMBER(f4_params, x),
                                MEMBER(f4_params, y)};
  static const member_t d2[] = {MEMBER(d2_params, n), MEMBER(d2_params, ab), MEMBER(d2_params, x),
                                MEMBER(d2_params, y)};
  static const member_t u8_u64[] = {MEMBER(u8_u64_params, shift), MEMBER(u8_u64_params, add),
                                    MEMBER(u8_u64_params, x), MEMBER(u8_u64_params, y),
                                    MEMBER(u8_u64_params, n)};
  static const member_t a32[] = {MEMBER(a32_params, tag), MEMBER(a32_params, s),
                                 MEMBER(a32_params, x),   MEMBER(a32_params, y),
                                 MEMBER(a32_params, n),   MEMBER(a32_params, q)};
  expect_layout("args_f4", f4, 4);
  expect_layout("args_double2", d2, 4);
  expect_layout("args_u8_u64", u8_u64, 5);
  expect_layout("args_a32", a32, 6);
}

static unsigned random_n(void) { return 1 + cuvt_random_u32() % 5000; }

/* An integer in [-1000, 1000]: products and sums of a few stay exact in float and double, so the
 * GPU's fused multiply-adds round as the host does. */
static float small_int(void) { return (float)((int)(cuvt_random_u32() % 2001) - 1000); }

static void launch(const char *kernel, unsigned n, const cuv_arg_t *args, size_t nargs) {
  assert_cuv_ok(
      cuv_sync(cuv_launch(cuvt_kernel(kernel), CUVT_GRID(n), CUVT_BLOCK, 0, args, nargs), NULL));
}

static void test_float4_struct(void **state) {
  unsigned n = random_n();
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  for (unsigned i = 0; i < n; i++)
    x[i] = small_int();
  struct cuvt_f4 v = {small_int(), small_int(), small_int(), small_int()};
  cuv_buffer_t *dx = cuvt_buffer_of(x, n), *dy = cuvt_buffer(n * sizeof *y);
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(v), CUV_ARG_READ(dx), CUV_ARG_WRITE(dy)};
  launch("args_f4", n, args, 4);
  cuvt_read(y, dy, 0, n * sizeof *y);
  for (unsigned i = 0; i < n; i++)
    assert_true(y[i] == x[i] * v.x + v.y * v.z - v.w);
  cuv_buffer_unref(dx);
  cuv_buffer_unref(dy);
  free(x);
  free(y);
}

static void test_double2(void **state) {
  unsigned n = random_n();
  double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  for (unsigned i = 0; i < n; i++)
    x[i] = small_int();
  struct cuvt_d2 ab = {small_int(), small_int()};
  cuv_buffer_t *dx = cuvt_buffer(n * sizeof *x), *dy = cuvt_buffer(n * sizeof *y);
  cuvt_upload(dx, 0, x, n * sizeof *x);
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(ab), CUV_ARG_READ(dx), CUV_ARG_WRITE(dy)};
  launch("args_double2", n, args, 4);
  cuvt_read(y, dy, 0, n * sizeof *y);
  for (unsigned i = 0; i < n; i++)
    assert_true(y[i] == ab.x * x[i] + ab.y);
  cuv_buffer_unref(dx);
  cuv_buffer_unref(dy);
  free(x);
  free(y);
}

static void test_u64_after_u8(void **state) {
  unsigned n = random_n();
  unsigned long long *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  for (unsigned i = 0; i < n; i++)
    x[i] = (unsigned long long)cuvt_random_u32() << 32 | cuvt_random_u32();
  unsigned char shift = (unsigned char)(1 + cuvt_random_u32() % 63);
  unsigned long long add = (unsigned long long)cuvt_random_u32() << 32 | cuvt_random_u32();
  cuv_buffer_t *dx = cuvt_buffer(n * sizeof *x), *dy = cuvt_buffer(n * sizeof *y);
  cuvt_upload(dx, 0, x, n * sizeof *x);
  cuv_arg_t args[] = {CUV_ARG_VALUE(shift), CUV_ARG_VALUE(add), CUV_ARG_READ(dx), CUV_ARG_WRITE(dy),
                      CUV_ARG_VALUE(n)};
  launch("args_u8_u64", n, args, 5);
  cuvt_read(y, dy, 0, n * sizeof *y);
  for (unsigned i = 0; i < n; i++)
    assert_true(y[i] == (x[i] << shift) + add);
  cuv_buffer_unref(dx);
  cuv_buffer_unref(dy);
  free(x);
  free(y);
}

static void test_align32_struct_and_aligned8_struct(void **state) {
  unsigned n = random_n();
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  for (unsigned i = 0; i < n; i++)
    x[i] = small_int();
  signed char tag = (signed char)(cuvt_random_u32() % 255 - 127);
  struct cuvt_a32 s;
  for (int i = 0; i < 8; i++)
    s.v[i] = small_int();
  struct cuvt_dq q = {small_int(), small_int()};
  cuv_buffer_t *dx = cuvt_buffer_of(x, n), *dy = cuvt_buffer(n * sizeof *y);
  cuv_arg_t args[] = {CUV_ARG_VALUE(tag), CUV_ARG_VALUE(s), CUV_ARG_READ(dx),
                      CUV_ARG_WRITE(dy),  CUV_ARG_VALUE(n), CUV_ARG_VALUE(q)};
  launch("args_a32", n, args, 6);
  cuvt_read(y, dy, 0, n * sizeof *y);
  for (unsigned i = 0; i < n; i++)
    assert_true(y[i] == x[i] * s.v[i % 8] + (float)tag + (float)q.a + q.b);
  cuv_buffer_unref(dx);
  cuv_buffer_unref(dy);
  free(x);
  free(y);
}

int main(void) {
  cuvt_drv_setup();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parameter_layout_is_the_c_layout),
      cmocka_unit_test(test_float4_struct),
      cmocka_unit_test(test_double2),
      cmocka_unit_test(test_u64_after_u8),
      cmocka_unit_test(test_align32_struct_and_aligned8_struct),
  };
  return cuvt_run(tests);
}
