/* Typed launchers (docs/launchers.md): the launchers cuv-launchers generated from
 * kinds.cu run its kernels with fresh random arguments of every kind (scalars of each width,
 * vector and half types, structs by value, one over-aligned, twenty parameters, buffers at
 * offsets), and each result is checked against the same computation on the host. Then the
 * module's three loaders, the launch configurations of cuv_for_num_elems, and a submission's
 * callback counted. Suites sim (host twins: twins.c) and gpu. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "../counted.h"
#include "bits.h"
#include "kinds_launchers.h"
#include "twins.h"

static kinds_module_t kinds;

static uint64_t random_u64(void) { return (uint64_t)cuvt_random_u32() << 32 | cuvt_random_u32(); }

static float random_float(void) {
  float f;
  cuvt_random_floats(&f, 1);
  return f;
}

/* Runs op, then reads `bytes` of buf into dst. */
static void run_and_read(cuv_op_t *op, void *dst, cuv_buffer_t *buf, size_t bytes) {
  assert_cuv_ok(cuv_sync(op, NULL));
  cuvt_read(dst, buf, 0, bytes);
}

static void test_scalars(void **state) {
  int8_t a = (int8_t)cuvt_random_u32();
  unsigned char b = (unsigned char)cuvt_random_u32();
  short c = (short)cuvt_random_u32();
  unsigned short d = (unsigned short)cuvt_random_u32();
  int e = (int)cuvt_random_u32();
  unsigned f = cuvt_random_u32();
  long g = (long)random_u64();
  unsigned long long h = random_u64();
  size_t i = (size_t)random_u64();
  float j = random_float();
  double k = (double)random_float() / 7.0;
  bool l = cuvt_random_u32() & 1;
  unsigned long long want[] = {widen(a), b, widen(c), d, widen(e), f, widen(g), h, i,
                               float_bits(j), double_bits(k), l}, got[12];
  cuv_buffer_t *out = cuvt_buffer(sizeof got);
  run_and_read(k_scalars_launch(&kinds, cuv_for_num_elems(1), a, b, c, d, e, f, g, h, i, j, k, l,
                                out),
               got, out, sizeof got);
  for (size_t n = 0; n < 12; n++) {
    if (got[n] != want[n])
      print_error("parameter %zu: got %llx, want %llx\n", n, got[n], want[n]);
    assert_true(got[n] == want[n]);
  }
  cuv_buffer_unref(out);
}

static void test_vectors(void **state) {
  cuv_double2_t d2 = {random_float() / 3.0, random_float() / 9.0};
  cuv_float4_t f4 = {random_float(), random_float(), random_float(), random_float()};
  cuv_uchar3_t c3 = {(unsigned char)cuvt_random_u32(), (unsigned char)cuvt_random_u32(),
                     (unsigned char)cuvt_random_u32()};
  cuv_short2_t s2 = {(short)cuvt_random_u32(), (short)cuvt_random_u32()};
  cuv_longlong4_32a_t l4 = {(long long)random_u64(), (long long)random_u64(),
                            (long long)random_u64(), (long long)random_u64()};
  cuv_half_t h = {(uint16_t)cuvt_random_u32()};
  unsigned long long want[] = {double_bits(d2.x), double_bits(d2.y), float_bits(f4.x),
                               float_bits(f4.y),  float_bits(f4.z),  float_bits(f4.w),
                               c3.x,              c3.y,              c3.z,
                               widen(s2.x),       widen(s2.y),       widen(l4.x),
                               widen(l4.y),       widen(l4.z),       widen(l4.w),
                               h.bits},
                     got[16];
  cuv_buffer_t *out = cuvt_buffer(sizeof got);
  run_and_read(k_vectors_launch(&kinds, cuv_for_num_elems(1), d2, f4, c3, s2, l4, h, out), got,
               out, sizeof got);
  for (size_t n = 0; n < 16; n++) {
    if (got[n] != want[n])
      print_error("member %zu: got %llx, want %llx\n", n, got[n], want[n]);
    assert_true(got[n] == want[n]);
  }
  assert_int_equal(_Alignof(cuv_longlong4_32a_t), 32);
  assert_int_equal(sizeof(cuv_uchar3_t), 3);
  cuv_buffer_unref(out);
}

static void test_structs(void **state) {
  enum { N = 1000 };
  kinds_big_t *in = calloc(N, sizeof *in), *got = calloc(N, sizeof *got);
  for (size_t i = 0; i < N; i++)
    in[i] = (kinds_big_t){random_float(), (int)(cuvt_random_u32() % 1000u)};
  kinds_pair_t p = {random_float(), (int8_t)(cuvt_random_u32() % 100u)};
  kinds_big_t g = {random_float(), (int)(cuvt_random_u32() % 1000u)};
  cuv_buffer_t *din = cuvt_buffer(N * sizeof *in), *dout = cuvt_buffer(N * sizeof *got);
  cuvt_upload(din, 0, in, N * sizeof *in);
  run_and_read(k_structs_launch(&kinds, cuv_for_num_elems(N), N, p, g, din, dout), got, dout,
               N * sizeof *got);
  for (size_t i = 0; i < N; i++) {
    double want = in[i].a * p.a + g.a;
    assert_true(fabs(got[i].a - want) <= 1e-9 * (1.0 + fabs(want)));
    assert_int_equal(got[i].b, in[i].b + p.b + g.b);
  }
  cuv_buffer_unref(din);
  cuv_buffer_unref(dout);
  free(in);
  free(got);
}

static void test_twenty_parameters(void **state) {
  enum { N = 777 };
  float a[9], *x[9], *want = calloc(N, sizeof *want), *got = calloc(N, sizeof *got);
  cuv_buffer_t *dx[9];
  cuvt_random_floats(a, 9);
  for (int k = 0; k < 9; k++) {
    x[k] = malloc(N * sizeof *x[k]);
    cuvt_random_floats(x[k], N);
    dx[k] = cuvt_buffer_of(x[k], N);
  }
  for (size_t i = 0; i < N; i++)
    for (int k = 0; k < 9; k++)
      want[i] += a[k] * x[k][i];
  cuv_buffer_t *y = cuvt_buffer(N * sizeof *got);
  run_and_read(k_many_launch(&kinds, cuv_for_num_elems(N), N, a[0], a[1], a[2], a[3], a[4], a[5],
                             a[6], a[7], a[8], dx[0], dx[1], dx[2], dx[3], dx[4], dx[5], dx[6],
                             dx[7], dx[8], y),
               got, y, N * sizeof *got);
  for (size_t i = 0; i < N; i++)
    assert_true(fabsf(got[i] - want[i]) <= 1e-3f * (1.0f + fabsf(want[i])));
  for (int k = 0; k < 9; k++) {
    cuv_buffer_unref(dx[k]);
    free(x[k]);
  }
  cuv_buffer_unref(y);
  free(want);
  free(got);
}

/* k_odd at byte offsets into larger buffers: only y[yo .. yo + n) changes. */
static void test_offsets(void **state) {
  enum { N = 300, XO = 17, YO = 45, LEN = 400 };
  float x[LEN], y[LEN], got[LEN], s = random_float();
  cuvt_random_floats(x, LEN);
  cuvt_random_floats(y, LEN);
  cuv_buffer_t *dx = cuvt_buffer_of(x, LEN), *dy = cuvt_buffer_of(y, LEN);
  run_and_read(k_odd_launch_at(&kinds, cuv_for_num_elems(N), N, s, dx, XO * sizeof(float), dy,
                               YO * sizeof(float)),
               got, dy, sizeof got);
  for (size_t i = 0; i < LEN; i++) {
    float want = i >= YO && i < YO + N ? s * x[i - YO + XO] + y[i] : y[i];
    assert_true(fabsf(got[i] - want) <= 1e-4f * (1.0f + fabsf(want)));
  }
  /* An offset past the buffer is refused when the op is built. */
  cuv_op_t *op = k_odd_launch_at(&kinds, cuv_for_num_elems(N), N, s, dx, 0, dy, LEN * 4 + 4);
  assert_int_equal(cuv_op_error(op), CUV_ERANGE);
  assert_int_equal(cuv_sync(op, NULL), CUV_ERANGE);
  cuv_buffer_unref(dx);
  cuv_buffer_unref(dy);
}

/* A submission of a typed launch: its callback runs once, after the kernel's work. */
static void on_done(int status, cuv_output_t *out, void *arg) {
  int *calls = arg;
  calls[0]++;
  calls[1] = status;
}

static void test_submitted(void **state) {
  enum { N = 5000 };
  unsigned in[N], got[N], key = cuvt_random_u32();
  for (size_t i = 0; i < N; i++)
    in[i] = cuvt_random_u32();
  cuv_buffer_t *din = cuvt_buffer(sizeof in), *dout = cuvt_buffer(sizeof got);
  cuvt_upload(din, 0, in, sizeof in);
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  int calls[2] = {0, 1};
  assert_cuv_ok(cuv_submit(q, k_xor_launch(&kinds, cuv_for_num_elems(N), N, din, key, dout),
                           on_done, calls, NULL));
  while (calls[0] == 0) {
    assert_cuv_ok(cuv_queue_wait(q, -1));
    cuv_queue_drain(q);
  }
  assert_int_equal(calls[0], 1);
  assert_int_equal(calls[1], 0);
  cuvt_read(got, dout, 0, sizeof got);
  for (size_t i = 0; i < N; i++)
    assert_int_equal(got[i], in[i] ^ key);
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_buffer_unref(din);
  cuv_buffer_unref(dout);
}

/* Runs k_xor of `mod` once and checks it. */
static void check_module(const kinds_module_t *mod) {
  enum { N = 64 };
  unsigned in[N], got[N], key = cuvt_random_u32();
  for (size_t i = 0; i < N; i++)
    in[i] = cuvt_random_u32();
  cuv_buffer_t *din = cuvt_buffer(sizeof in), *dout = cuvt_buffer(sizeof got);
  cuvt_upload(din, 0, in, sizeof in);
  run_and_read(k_xor_launch(mod, cuv_for_num_elems(N), N, din, key, dout), got, dout, sizeof got);
  for (size_t i = 0; i < N; i++)
    assert_int_equal(got[i], in[i] ^ key);
  cuv_buffer_unref(din);
  cuv_buffer_unref(dout);
}

static void *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *size = (size_t)ftell(f);
  rewind(f);
  char *data = calloc(1, *size + 1); /* PTX is loaded NUL-terminated */
  assert_int_equal(fread(data, 1, *size, f), *size);
  fclose(f);
  *size += 1;
  return data;
}

static void test_loaders(void **state) {
  kinds_module_t from_file, from_data;
  assert_cuv_ok(kinds_module_load_file(&from_file, cuvt_device(), CUVT_KINDS_PTX_PATH));
  check_module(&from_file);
  size_t size;
  void *image = read_file(CUVT_KINDS_PTX_PATH, &size);
  assert_cuv_ok(kinds_module_load_data(&from_data, cuvt_device(), image, size));
  free(image);
  check_module(&from_data);
  kinds_module_destroy(&from_file);
  kinds_module_destroy(&from_file); /* cleared: harmless */
  kinds_module_destroy(NULL);
  assert_null(from_file.k_xor);
  kinds_module_destroy(&from_data);

  /* Failures leave the struct cleared; a launch through it is an error op. */
  kinds_module_t bad;
  memset(&bad, 0xff, sizeof bad);
  assert_int_equal(kinds_module_load_file(&bad, cuvt_device(), "/nonexistent/kinds.ptx"),
                   CUV_EIO);
  assert_null(bad.k_scalars);
  assert_null(bad.k_xor);
  assert_int_equal(kinds_module_load_file(NULL, cuvt_device(), CUVT_KINDS_PTX_PATH), CUV_EINVAL);
  assert_int_equal(kinds_module_load_file(&bad, NULL, CUVT_KINDS_PTX_PATH), CUV_EINVAL);
  assert_int_equal(kinds_module_load_data(&bad, cuvt_device(), NULL, 10), CUV_EINVAL);
  assert_int_equal(kinds_module_load(NULL, cuvt_device()), CUV_EINVAL);
  assert_int_equal(kinds_module_load(&bad, NULL), CUV_EINVAL);
  cuv_buffer_t *buf = cuvt_buffer(64);
  assert_int_equal(cuv_sync(k_xor_launch(&bad, cuv_for_num_elems(16), 16, buf, 1, buf), NULL),
                   CUV_EINVAL);
  assert_int_equal(cuv_sync(k_xor_launch(NULL, cuv_for_num_elems(16), 16, buf, 1, buf), NULL),
                   CUV_EINVAL);
  cuv_buffer_unref(buf);
}

static void test_for_num_elems(void **state) {
  struct {
    size_t n;
    unsigned block, grid;
  } cases[] = {{1, 256, 1},     {256, 256, 1},   {257, 256, 2},         {1000, 128, 8},
               {1024, 1024, 1}, {1025, 1024, 2}, {0, 256, 0},           {5, 0, 0},
               {(size_t)0x7fffffff * 64, 64, 0x7fffffff}, {(size_t)0x7fffffff * 64 + 1, 64, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cuv_launch_config_t c = cuv_for_num_elems_block(cases[i].n, cases[i].block);
    assert_int_equal(c.grid.x, cases[i].grid);
    assert_int_equal(c.grid.y * c.grid.z * c.block.y * c.block.z, 1);
    assert_int_equal(c.block.x, cases[i].block);
    assert_int_equal(c.shared_bytes, 0);
  }
  cuv_launch_config_t c = cuv_for_num_elems(1000);
  assert_int_equal(c.block.x, CUV_DEFAULT_BLOCK);
  assert_int_equal(c.grid.x, (1000 + CUV_DEFAULT_BLOCK - 1) / CUV_DEFAULT_BLOCK);
  /* A zero grid or block fails the launch when it is built. */
  cuv_buffer_t *buf = cuvt_buffer(64);
  cuv_op_t *zero_n = k_xor_launch(&kinds, cuv_for_num_elems(0), 0, buf, 1, buf);
  cuv_op_t *zero_block = k_xor_launch(&kinds, cuv_for_num_elems_block(16, 0), 16, buf, 1, buf);
  assert_int_equal(cuv_op_error(zero_n), CUV_EINVAL);
  assert_int_equal(cuv_sync(zero_n, NULL), CUV_EINVAL);
  assert_int_equal(cuv_sync(zero_block, NULL), CUV_EINVAL);
  cuv_buffer_unref(buf);
}

int main(void) {
  cuvt_register_kinds_twins();
  cuvt_init();
  int rc = kinds_module_load(&kinds, cuvt_device());
  if (rc != 0) {
    fprintf(stderr, "kinds_module_load: %s\n", cuv_strerror(rc));
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scalars),      cmocka_unit_test(test_vectors),
      cmocka_unit_test(test_structs),      cmocka_unit_test(test_twenty_parameters),
      cmocka_unit_test(test_offsets),      cmocka_unit_test(test_submitted),
      cmocka_unit_test(test_loaders),      cmocka_unit_test(test_for_num_elems),
  };
  rc = cuvt_run(tests);
  kinds_module_destroy(&kinds);
  return rc;
}
