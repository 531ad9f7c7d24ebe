/* Partitions (include/cuv/tensor.h): a tensor split into tiles as a kernel argument with an
 * access mode. The seed's saxpy over a [4, 4] partition of a 16 x 16 tensor and random others,
 * checked against the host; two writable partitions of one tensor in one launch accepted when
 * their elements are disjoint (however their bytes interleave) and refused with CUV_EARGS when
 * they share one; every misuse a clear negative code. */
#include <cuv/tensor.h>

#include "counted.h"
#include "test_kernels_launchers.h"

/* A new tensor of rows x cols floats holding `host`. */
static cuv_tensor_t *tensor_of(const float *host, size_t rows, size_t cols) {
  cuv_buffer_t *buf = cuvt_buffer_of(host, rows * cols);
  size_t shape[] = {rows, cols};
  cuv_tensor_t *t = NULL;
  assert_cuv_ok(cuv_tensor_create(&t, buf, 0, CUV_DTYPE_F32, shape, 2));
  cuv_buffer_unref(buf);
  return t;
}

static void read_tensor(float *dst, cuv_tensor_t *t) {
  assert_cuv_ok(cuv_sync(cuv_tensor_to_host_into(dst, cuv_tensor_bytes(t), t), NULL));
}

static cuv_tensor_t *slice2(const cuv_tensor_t *t, size_t r0, size_t c0, size_t rows, size_t cols) {
  size_t start[] = {r0, c0}, shape[] = {rows, cols};
  cuv_tensor_t *s = NULL;
  assert_cuv_ok(cuv_tensor_slice(&s, t, start, shape, 2));
  return s;
}

static cuv_partition_t partition2(cuv_tensor_t *t, size_t tr, size_t tc) {
  size_t tile[] = {tr, tc};
  cuv_partition_t p;
  assert_cuv_ok(cuv_tensor_partition(&p, t, tile, 2));
  return p;
}

/* y = a x + y over a partition of y, through tile_saxpy. */
static cuv_op_t *tile_saxpy(const cuv_partition_t *y, float a, const cuv_tensor_t *x) {
  unsigned ldx = (unsigned)cuv_tensor_stride(x, 0), ldy = (unsigned)cuv_tensor_stride(y->tensor, 0);
  cuv_targ_t args[] = {CUV_TARG_VALUE(ldx), CUV_TARG_VALUE(ldy), CUV_TARG_VALUE(a),
                       CUV_TARG_READ(x), CUV_TARG_PART(y, CUV_ARG_KIND_RW)};
  return cuv_tensor_launch(cuvt_kernel_ok("tile_saxpy"), cuv_partition_launch_config(y), args, 5);
}

static void test_partition_shape(void **state) {
  size_t tr = 1 + cuvt_random_u32() % 8, tc = 1 + cuvt_random_u32() % 8;
  size_t nr = 1 + cuvt_random_u32() % 8, nc = 1 + cuvt_random_u32() % 8;
  size_t shape[] = {tr * nr, tc * nc};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_tensor_zeros(cuvt_device(), CUV_DTYPE_F32, shape, 2), &out));
  cuv_partition_t p = partition2(cuv_output_tensor(&out), tr, tc);
  cuv_output_release(&out); /* the partition holds the tensor */
  assert_int_equal(p.tile[0], tr);
  assert_int_equal(p.tiles[1], nc);
  assert_int_equal(cuv_tensor_shape(p.tensor, 0), tr * nr);
  cuv_launch_config_t c = cuv_partition_launch_config(&p);
  assert_int_equal(c.grid.x, nc);
  assert_int_equal(c.grid.y, nr);
  assert_int_equal(c.grid.z, 1);
  assert_int_equal(c.block.x, tc);
  assert_int_equal(c.block.y, tr);
  assert_int_equal(c.block.z, 1);
  assert_int_equal(c.shared_bytes, 0);
  cuv_partition_release(&p);
  assert_null(p.tensor);
  cuv_partition_release(&p); /* cleared: ignored */
  cuv_partition_release(NULL);
  c = cuv_partition_launch_config(&p);
  assert_int_equal(c.grid.x + c.block.x, 0);
  assert_int_equal(cuv_partition_launch_config(NULL).grid.x, 0);
}

/* Four dimensions: the two leading ones fold into z. */
static void test_partition_folds_leading_dims(void **state) {
  size_t shape[] = {6, 4, 8, 2}, tile[] = {2, 2, 4, 1};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_tensor_zeros(cuvt_device(), CUV_DTYPE_U8, shape, 4), &out));
  cuv_partition_t p;
  assert_cuv_ok(cuv_tensor_partition(&p, cuv_output_tensor(&out), tile, 4));
  cuv_launch_config_t c = cuv_partition_launch_config(&p);
  assert_true(c.grid.x == 2 && c.grid.y == 2 && c.grid.z == 3 * 2);
  assert_true(c.block.x == 1 && c.block.y == 4 && c.block.z == 2 * 2);
  cuv_partition_release(&p);
  cuv_output_release(&out);
}

static void test_partition_refused(void **state) {
  size_t shape[] = {16, 12}, tile[] = {4, 4}, bad[] = {5, 4}, zero[] = {0, 4};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_tensor_zeros(cuvt_device(), CUV_DTYPE_F32, shape, 2), &out));
  cuv_tensor_t *t = cuv_output_tensor(&out);
  cuv_partition_t p;
  assert_int_equal(cuv_tensor_partition(NULL, t, tile, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_partition(&p, NULL, tile, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_partition(&p, t, NULL, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_partition(&p, t, tile, 1), CUV_EINVAL);
  assert_int_equal(cuv_tensor_partition(&p, t, bad, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_partition(&p, t, zero, 2), CUV_EINVAL);
  cuv_output_release(&out);
}

/* The seed's example: z = zeros(16, 16); x = ones(16, 16); saxpy(z.partition([4, 4]), 2, x). */
static void test_seed_saxpy(void **state) {
  size_t shape[] = {16, 16};
  cuv_output_t zo, xo;
  assert_cuv_ok(cuv_sync(cuv_tensor_zeros(cuvt_device(), CUV_DTYPE_F32, shape, 2), &zo));
  assert_cuv_ok(cuv_sync(cuv_tensor_ones(cuvt_device(), CUV_DTYPE_F32, shape, 2), &xo));
  cuv_tensor_t *z = cuv_output_tensor(&zo), *x = cuv_output_tensor(&xo);
  cuv_partition_t p = partition2(z, 4, 4);
  assert_cuv_ok(cuv_sync(tile_saxpy(&p, 2.0f, x), NULL));
  float got[256];
  read_tensor(got, z); /* the borrowed form: z holds the result */
  for (size_t i = 0; i < 256; i++)
    assert_true(got[i] == 2.0f);
  cuv_partition_release(&p);
  cuv_output_release(&zo);
  cuv_output_release(&xo);
}

/* Random shapes and data, over a sub-tensor of y: only its elements change. The partition and
 * tensors are released before the op runs (it holds the buffers). */
static void test_saxpy_random_subtensor(void **state) {
  size_t tr = 1 + cuvt_random_u32() % 8, tc = 1 + cuvt_random_u32() % 16;
  size_t nr = 1 + cuvt_random_u32() % 6, nc = 1 + cuvt_random_u32() % 6;
  size_t rows = tr * nr, cols = tc * nc, r0 = cuvt_random_u32() % 5, c0 = cuvt_random_u32() % 5;
  size_t yr = rows + r0 + cuvt_random_u32() % 3, yc = cols + c0 + cuvt_random_u32() % 3;
  float *x = malloc(rows * cols * 4), *y = malloc(yr * yc * 4), *want = malloc(yr * yc * 4);
  float *got = malloc(yr * yc * 4), a;
  cuvt_random_ints(x, rows * cols);
  cuvt_random_ints(y, yr * yc);
  cuvt_random_ints(&a, 1);
  memcpy(want, y, yr * yc * 4);
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++)
      want[(r0 + r) * yc + c0 + c] = a * x[r * cols + c] + y[(r0 + r) * yc + c0 + c];
  cuv_tensor_t *tx = tensor_of(x, rows, cols), *ty = tensor_of(y, yr, yc);
  cuv_tensor_t *sub = slice2(ty, r0, c0, rows, cols);
  cuv_partition_t p = partition2(sub, tr, tc);
  cuv_op_t *op = tile_saxpy(&p, a, tx);
  cuv_partition_release(&p);
  cuv_tensor_unref(sub);
  cuv_tensor_unref(tx);
  assert_cuv_ok(cuv_sync(op, NULL));
  read_tensor(got, ty);
  cuvt_assert_floats_equal(got, want, yr * yc);
  cuv_tensor_unref(ty);
  free(x);
  free(y);
  free(want);
  free(got);
}

/* tile_set2 over partitions of two slices of one tensor: y0 = a, y1 = b. */
static int set2(cuv_tensor_t *s0, cuv_tensor_t *s1, float a, float b) {
  cuv_partition_t p0 = partition2(s0, 2, 2), p1 = partition2(s1, 2, 2);
  unsigned ld = (unsigned)cuv_tensor_stride(s0, 0);
  cuv_targ_t args[] = {CUV_TARG_VALUE(ld), CUV_TARG_VALUE(a),
                       CUV_TARG_PART(&p0, CUV_ARG_KIND_WRITE), CUV_TARG_VALUE(b),
                       CUV_TARG_PART(&p1, CUV_ARG_KIND_WRITE)};
  cuv_op_t *op =
      cuv_tensor_launch(cuvt_kernel_ok("tile_set2"), cuv_partition_launch_config(&p0), args, 5);
  cuv_partition_release(&p0);
  cuv_partition_release(&p1);
  int rc = cuv_op_error(op);
  int ran = cuv_sync(op, NULL);
  assert_int_equal(ran, rc);
  return rc;
}

/* Left and right halves: the rows interleave in memory, the elements are disjoint. */
static void test_disjoint_writable_partitions(void **state) {
  enum { R = 8, C = 16 };
  float host[R * C], got[R * C], a, b;
  cuvt_random_ints(host, R * C);
  cuvt_random_ints(&a, 1);
  cuvt_random_ints(&b, 1);
  cuv_tensor_t *t = tensor_of(host, R, C);
  cuv_tensor_t *left = slice2(t, 0, 0, R, C / 2), *right = slice2(t, 0, C / 2, R, C / 2);
  assert_cuv_ok(set2(left, right, a, b));
  read_tensor(got, t);
  for (size_t r = 0; r < R; r++)
    for (size_t c = 0; c < C; c++)
      assert_true(got[r * C + c] == (c < C / 2 ? a : b));
  /* top and bottom halves too */
  cuv_tensor_t *top = slice2(t, 0, 0, R / 2, C), *bottom = slice2(t, R / 2, 0, R / 2, C);
  assert_cuv_ok(set2(bottom, top, a, b));
  read_tensor(got, t);
  for (size_t i = 0; i < R * C; i++)
    assert_true(got[i] == (i < R * C / 2 ? b : a));
  cuv_tensor_t *views[] = {t, left, right, top, bottom};
  for (size_t i = 0; i < 5; i++)
    cuv_tensor_unref(views[i]);
}

/* Overlapping slices, one tensor named twice, and a reshaped view over the same bytes: refused
 * before anything runs, the tensor untouched. */
static void test_overlapping_writable_partitions(void **state) {
  enum { R = 8, C = 16 };
  float host[R * C], got[R * C];
  cuvt_random_ints(host, R * C);
  cuv_tensor_t *t = tensor_of(host, R, C);
  cuv_tensor_t *a = slice2(t, 0, 0, R, C / 2 + 2), *b = slice2(t, 0, C / 2, R, C / 2);
  assert_int_equal(set2(a, b, 1.0f, 2.0f), CUV_EARGS);
  cuv_tensor_t *c = slice2(t, 2, 2, 4, 4), *d = slice2(t, 4, 4, 4, 4);
  assert_int_equal(set2(c, d, 1.0f, 2.0f), CUV_EARGS); /* one corner element in common */
  assert_int_equal(set2(b, b, 1.0f, 2.0f), CUV_EARGS);
  size_t shape[] = {R * 2, C / 2};
  cuv_tensor_t *r = NULL;
  assert_cuv_ok(cuv_tensor_reshape(&r, t, shape, 2));
  cuv_tensor_t *rs = slice2(r, 0, 0, 2, C / 2); /* the bytes of t's first row */
  cuv_tensor_t *first = slice2(t, 0, 0, 2, C / 2);
  assert_int_equal(set2(rs, first, 1.0f, 2.0f), CUV_EARGS);
  read_tensor(got, t);
  cuvt_assert_floats_equal(got, host, R * C);
  cuv_tensor_t *views[] = {t, a, b, c, d, r, rs, first};
  for (size_t i = 0; i < 8; i++)
    cuv_tensor_unref(views[i]);
}

/* A read may overlap a write (in place: y = a y + y), and a self-overlapping view is readable but
 * never writable. */
static void test_read_overlap_and_broadcast(void **state) {
  enum { N = 8 };
  float host[N * N], got[N * N], want[N * N];
  cuvt_random_ints(host, N * N);
  cuv_tensor_t *t = tensor_of(host, N, N);
  cuv_partition_t p = partition2(t, 4, 4);
  assert_cuv_ok(cuv_sync(tile_saxpy(&p, 3.0f, t), NULL));
  read_tensor(got, t);
  for (size_t i = 0; i < N * N; i++)
    want[i] = 3.0f * host[i] + host[i];
  cuvt_assert_floats_equal(got, want, N * N);
  size_t shape[] = {N, N}, strides[] = {1, 1};
  cuv_tensor_t *wrap = NULL;
  assert_cuv_ok(
      cuv_tensor_create_strided(&wrap, cuv_tensor_buffer(t), 0, CUV_DTYPE_F32, shape, strides, 2));
  cuv_partition_t pw = partition2(wrap, 4, 4);
  assert_int_equal(cuv_sync(tile_saxpy(&pw, 1.0f, t), NULL), CUV_EARGS);
  unsigned ld = N;
  float one = 1.0f;
  cuv_targ_t read_wrap[] = {CUV_TARG_VALUE(ld), CUV_TARG_VALUE(ld), CUV_TARG_VALUE(one),
                            CUV_TARG_READ(wrap), CUV_TARG_PART(&p, CUV_ARG_KIND_RW)};
  cuv_op_t *ok = cuv_tensor_launch(cuvt_kernel_ok("tile_saxpy"), cuv_partition_launch_config(&p),
                                   read_wrap, 5);
  assert_cuv_ok(cuv_op_error(ok));
  cuv_op_destroy(ok);
  cuv_partition_release(&pw);
  cuv_partition_release(&p);
  cuv_tensor_unref(wrap);
  cuv_tensor_unref(t);
}

static void test_launch_refused(void **state) {
  size_t shape[] = {4, 4};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_tensor_zeros(cuvt_device(), CUV_DTYPE_F32, shape, 2), &out));
  cuv_tensor_t *t = cuv_output_tensor(&out);
  cuv_partition_t p = partition2(t, 2, 2), cleared = {0};
  cuv_kernel_t *k = cuvt_kernel_ok("tile_saxpy");
  cuv_launch_config_t c = cuv_partition_launch_config(&p);
  unsigned u = 4;
  float f = 1.0f;
  cuv_targ_t good[] = {CUV_TARG_VALUE(u), CUV_TARG_VALUE(u), CUV_TARG_VALUE(f), CUV_TARG_READ(t),
                       CUV_TARG_PART(&p, CUV_ARG_KIND_RW)};
  cuv_targ_t args[5];
  struct {
    size_t at;
    cuv_targ_t arg;
    int want;
  } cases[] = {
      {3, CUV_TARG_READ(NULL), CUV_EINVAL},
      {4, CUV_TARG_PART(NULL, CUV_ARG_KIND_RW), CUV_EINVAL},
      {4, CUV_TARG_PART(&cleared, CUV_ARG_KIND_RW), CUV_EINVAL},
      {4, CUV_TARG_PART(&p, CUV_ARG_KIND_SCALAR), CUV_EINVAL},
      {4, CUV_TARG_PART(&p, (enum cuv_arg_kind)42), CUV_EINVAL},
      {0, {(enum cuv_targ_kind)9, CUV_ARG_KIND_READ, t, NULL, NULL, 0, NULL}, CUV_EINVAL},
      {0, {CUV_TARG_SCALAR, CUV_ARG_KIND_SCALAR, NULL, NULL, NULL, 4, NULL}, CUV_EINVAL},
      {0, {CUV_TARG_SCALAR, CUV_ARG_KIND_SCALAR, NULL, NULL, &u, 0, NULL}, CUV_EINVAL},
      {3, CUV_TARG_WRITE(t), CUV_EARGS}, /* writes the partition's elements too */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(args, good, sizeof args);
    args[cases[i].at] = cases[i].arg;
    cuv_op_t *op = cuv_tensor_launch(k, c, args, 5);
    assert_int_equal(cuv_op_error(op), cases[i].want);
    cuv_op_destroy(op);
  }
  cuv_op_t *no_kernel = cuv_tensor_launch(NULL, c, good, 5);
  assert_int_equal(cuv_op_error(no_kernel), CUV_EINVAL);
  cuv_op_destroy(no_kernel);
  assert_int_equal(cuv_sync(cuv_tensor_launch(k, c, NULL, 5), NULL), CUV_EINVAL);
  cuv_launch_config_t zero = {{0, 0, 0}, {0, 0, 0}, 0};
  assert_int_equal(cuv_sync(cuv_tensor_launch(k, zero, good, 5), NULL), CUV_EINVAL);
  cuv_partition_release(&p);
  cuv_output_release(&out);
}

/* The generated launchers over tensors (cuv-launchers): saxpy_launch_tensors on fresh random
 * data against the host; a tensor of another element type than the kernel's pointer is
 * CUV_EARGS, and two writable tensors sharing an element too. */
static void test_generated_tensor_launchers(void **state) {
  test_kernels_module_t m;
  assert_cuv_ok(test_kernels_module_load(&m, cuvt_device()));
  unsigned n = 1 + cuvt_random_u32() % 5000;
  float *x = malloc(n * 4), *y = malloc(n * 4), *want = malloc(n * 4), a;
  cuvt_random_ints(x, n);
  cuvt_random_ints(y, n);
  cuvt_random_ints(&a, 1);
  for (unsigned i = 0; i < n; i++)
    want[i] = a * x[i] + y[i];
  cuv_tensor_t *tx = tensor_of(x, 1, n), *ty = tensor_of(y, 1, n);
  assert_cuv_ok(
      cuv_sync(saxpy_launch_tensors(&m, cuv_for_num_elems(n), n, a, CUV_IN(tx), CUV_IN(ty)), NULL));
  read_tensor(y, ty);
  cuvt_assert_floats_equal(y, want, n);
  size_t shape[] = {n};
  cuv_tensor_t *as_u32 = NULL;
  assert_cuv_ok(cuv_tensor_create(&as_u32, cuv_tensor_buffer(tx), 0, CUV_DTYPE_U32, shape, 1));
  cuv_launch_config_t c = cuv_for_num_elems(n);
  assert_int_equal(cuv_sync(saxpy_launch_tensors(&m, c, n, a, CUV_IN(as_u32), CUV_IN(ty)), NULL),
                   CUV_EARGS);
  assert_int_equal(cuv_sync(saxpy_launch_tensors(NULL, c, n, a, CUV_IN(tx), CUV_IN(ty)), NULL),
                   CUV_EINVAL);
  assert_int_equal(cuv_sync(saxpy_launch_tensors(&m, c, n, a, CUV_IN(NULL), CUV_IN(ty)), NULL),
                   CUV_EINVAL);
  /* tile_set2 writes two tensors: overlapping slices of one are refused */
  float grid[64] = {0}, one = 1.0f;
  cuv_tensor_t *t = tensor_of(grid, 8, 8), *top = slice2(t, 0, 0, 5, 8),
               *low = slice2(t, 4, 0, 4, 8);
  cuv_partition_t p = partition2(low, 2, 2);
  assert_int_equal(cuv_sync(tile_set2_launch_tensors(&m, cuv_partition_launch_config(&p), 8, one,
                                                     CUV_IN(top), one, CUV_IN(low)),
                            NULL),
                   CUV_EARGS);
  cuv_tensor_t *views[] = {tx, ty, as_u32, t, top, low};
  for (size_t i = 0; i < 6; i++)
    cuv_tensor_unref(views[i]);
  cuv_partition_release(&p);
  test_kernels_module_destroy(&m);
  free(x);
  free(y);
  free(want);
}

/* What the op-argument tests share: the module, n random integral floats x as tensor tx, a
 * random a, the configuration for n elements, room for n results. */
typedef struct op_fixture {
  test_kernels_module_t m;
  unsigned n;
  size_t shape[1];
  float *x, *got, a;
  cuv_tensor_t *tx;
  cuv_launch_config_t c;
} op_fixture_t;

static void op_fixture_setup(op_fixture_t *f) {
  assert_cuv_ok(test_kernels_module_load(&f->m, cuvt_device()));
  f->n = 1 + cuvt_random_u32() % 5000;
  f->shape[0] = f->n;
  f->x = malloc(f->n * 4);
  f->got = malloc(f->n * 4);
  cuvt_random_ints(f->x, f->n);
  cuvt_random_ints(&f->a, 1);
  f->tx = tensor_of(f->x, 1, f->n);
  f->c = cuv_for_num_elems(f->n);
}

static void op_fixture_teardown(op_fixture_t *f) {
  cuv_tensor_unref(f->tx);
  test_kernels_module_destroy(&f->m);
  free(f->x);
  free(f->got);
}

/* Ops producing tensors as arguments (CUV_IN_OP, CUV_TARG_OP): they run first, the launch uses
 * their tensors, and its output is the tensor (one op) or a tuple of them (several). */
static void test_op_arguments(void **state) {
  op_fixture_t f;
  op_fixture_setup(&f);
  const test_kernels_module_t *m = &f.m;
  unsigned n = f.n;
  const size_t *shape = f.shape;
  float *x = f.x, *got = f.got, a = f.a;
  cuv_tensor_t *tx = f.tx;
  cuv_launch_config_t c = f.c;
  cuv_device_t *dev = cuvt_device();
  cuv_output_t out;
  /* y = a x + zeros: the launch gives back the zeros' tensor, now holding a x */
  cuv_op_t *zeros = cuv_tensor_zeros(dev, CUV_DTYPE_F32, shape, 1);
  assert_cuv_ok(cuv_sync(saxpy_launch_tensors(m, c, n, a, CUV_IN(tx), CUV_IN_OP(zeros)), &out));
  cuv_tensor_t *y = cuv_output_tensor(&out);
  assert_non_null(y);
  read_tensor(got, y);
  for (unsigned i = 0; i < n; i++)
    assert_true(got[i] == a * x[i]);
  cuv_output_release(&out);
  /* both from ops: ones and zeros, a tuple back in argument order */
  cuv_op_t *ones = cuv_tensor_ones(dev, CUV_DTYPE_F32, shape, 1);
  zeros = cuv_tensor_zeros(dev, CUV_DTYPE_F32, shape, 1);
  assert_cuv_ok(
      cuv_sync(saxpy_launch_tensors(m, c, n, a, CUV_IN_OP(ones), CUV_IN_OP(zeros)), &out));
  cuv_tensor_t *t0 = cuv_output_tensor(cuv_tuple_get(&out, 0));
  cuv_tensor_t *t1 = cuv_output_tensor(cuv_tuple_get(&out, 1));
  assert_true(t0 && t1 && t0 != t1);
  read_tensor(got, t0);
  for (unsigned i = 0; i < n; i++)
    assert_true(got[i] == 1.0f);
  read_tensor(got, t1);
  for (unsigned i = 0; i < n; i++)
    assert_true(got[i] == a);
  cuv_output_release(&out);
  /* an op whose output is no tensor, an error op, and failures that drop the ops: each op's
   * value released exactly once */
  atomic_int releases = 0;
  assert_int_equal(cuv_sync(saxpy_launch_tensors(m, c, n, a, CUV_IN(tx),
                                                 CUV_IN_OP(cuvt_counted_value(1, &releases))),
                            NULL),
                   CUV_EARGS);
  assert_int_equal(atomic_load(&releases), 1);
  assert_int_equal(
      cuv_sync(saxpy_launch_tensors(m, c, n, a, CUV_IN(tx), CUV_IN_OP(cuv_fail(CUV_ENOMEM))), NULL),
      CUV_ENOMEM);
  assert_int_equal(cuv_sync(saxpy_launch_tensors(NULL, c, n, a, CUV_IN(tx),
                                                 CUV_IN_OP(cuvt_counted_value(2, &releases))),
                            NULL),
                   CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 2);
  cuv_targ_t bad[] = {CUV_TARG_VALUE(n), CUV_TARG_VALUE(a),
                      CUV_TARG_OP(cuvt_counted_value(3, &releases), CUV_ARG_KIND_READ),
                      CUV_TARG_OP(NULL, CUV_ARG_KIND_RW)};
  assert_int_equal(cuv_sync(cuv_tensor_launch(m->saxpy, c, bad, 4), NULL), CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 3);
  cuv_op_destroy(cuv_tensor_launch(
      m->saxpy, c,
      (cuv_targ_t[]){CUV_TARG_VALUE(n), CUV_TARG_VALUE(a), CUV_TARG_READ(tx),
                     CUV_TARG_OP(cuvt_counted_value(4, &releases), CUV_ARG_KIND_RW)},
      4));
  assert_int_equal(atomic_load(&releases), 4); /* dropped unexecuted */
  op_fixture_teardown(&f);
}

typedef struct typed_done {
  atomic_int calls;
  int status;
} typed_done_t;

static void typed_done(int status, cuv_output_t *output, void *arg) {
  typed_done_t *d = arg;
  (void)output;
  d->status = status;
  atomic_fetch_add(&d->calls, 1);
}

/* Submits op and waits for its one callback: the status it got. */
static int submitted_status(cuv_op_t *op) {
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  typed_done_t done = {0, 1};
  assert_cuv_ok(cuv_submit(q, op, typed_done, &done, NULL));
  cuvt_drain_until(q, &done.calls, 1);
  cuvt_drain_until_retired(q);
  assert_int_equal(atomic_load(&done.calls), 1);
  assert_cuv_ok(cuv_queue_destroy(q));
  return done.status;
}

/* An op argument's tensor has the parameter's element type (cuv_tensor_typed_op, which the
 * generated launchers apply to every CUV_IN_OP): another type fails the launch with CUV_EARGS,
 * its callback once, and the wrong tensor is released; the right type still launches. */
static void test_op_argument_types(void **state) {
  op_fixture_t f;
  op_fixture_setup(&f);
  const test_kernels_module_t *m = &f.m;
  unsigned n = f.n;
  const size_t *shape = f.shape;
  float *x = f.x, *got = f.got, a = f.a;
  cuv_tensor_t *tx = f.tx;
  cuv_launch_config_t c = f.c;
  cuv_device_t *dev = cuvt_device();
  static const cuv_dtype_t others[] = {CUV_DTYPE_U32, CUV_DTYPE_I32, CUV_DTYPE_F64, CUV_DTYPE_U8};
  cuv_dtype_t wrong = others[cuvt_random_u32() % 4];
  assert_int_equal(submitted_status(saxpy_launch_tensors(
                       m, c, n, a, CUV_IN(tx), CUV_IN_OP(cuv_tensor_zeros(dev, wrong, shape, 1)))),
                   CUV_EARGS);
  assert_int_equal(submitted_status(saxpy_launch_tensors(
                       m, c, n, a, CUV_IN_OP(cuv_tensor_ones(dev, wrong, shape, 1)),
                       CUV_IN_OP(cuv_tensor_zeros(dev, CUV_DTYPE_F32, shape, 1)))),
                   CUV_EARGS);
  /* reshaped to the right shape but of the wrong type: still refused */
  assert_int_equal(
      submitted_status(saxpy_launch_tensors(
          m, c, n, a, CUV_IN(tx),
          CUV_IN_OP(cuv_tensor_reshape_op(cuv_tensor_zeros(dev, wrong, shape, 1), shape, 1)))),
      CUV_EARGS);
  /* the right type: y = a x + 0 */
  cuv_output_t out;
  assert_cuv_ok(
      cuv_sync(saxpy_launch_tensors(m, c, n, a, CUV_IN(tx),
                                    CUV_IN_OP(cuv_tensor_zeros(dev, CUV_DTYPE_F32, shape, 1))),
               &out));
  read_tensor(got, cuv_output_tensor(&out));
  for (unsigned i = 0; i < n; i++)
    assert_true(got[i] == a * x[i]);
  cuv_output_release(&out);
  /* directly: passes the tensor through, refuses another type, no tensor, and bad arguments,
   * each op's value released exactly once */
  assert_cuv_ok(cuv_sync(cuv_tensor_typed_op(cuv_tensor_zeros(dev, wrong, shape, 1), wrong), &out));
  assert_int_equal(cuv_tensor_dtype(cuv_output_tensor(&out)), wrong);
  assert_int_equal(cuv_tensor_numel(cuv_output_tensor(&out)), n);
  cuv_output_release(&out);
  atomic_int releases = 0;
  assert_int_equal(
      submitted_status(cuv_tensor_typed_op(cuvt_counted_value(1, &releases), CUV_DTYPE_F32)),
      CUV_EARGS);
  assert_int_equal(atomic_load(&releases), 1);
  assert_int_equal(
      cuv_sync(cuv_tensor_typed_op(cuvt_counted_value(2, &releases), CUV_DTYPE_COUNT), NULL),
      CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 2);
  assert_int_equal(cuv_sync(cuv_tensor_typed_op(NULL, CUV_DTYPE_F32), NULL), CUV_EINVAL);
  assert_int_equal(cuv_sync(cuv_tensor_typed_op(cuv_fail(CUV_ENOMEM), CUV_DTYPE_F32), NULL),
                   CUV_ENOMEM);
  op_fixture_teardown(&f);
}

/* cuv_tensor_launch_args directly (the generated launchers' path): the tensor slots written from
 * the tensors, saxpy checked against the host; a wrong element type, a slot past the arguments or
 * on a scalar, a missing tensor and every NULL refused. */
static void test_launch_args_direct(void **state) {
  op_fixture_t f;
  op_fixture_setup(&f);
  unsigned n = f.n;
  float *x = f.x, *y = malloc(n * 4), a = f.a;
  cuvt_random_ints(y, n);
  cuv_tensor_t *tx = f.tx, *ty = tensor_of(y, 1, n);
  cuv_launch_config_t c = f.c;
  const cuv_tensor_t *const tensors[] = {tx, ty};
#define SLOT(i, access, type) {i, CUV_ARG_KIND_##access, CUV_DTYPE_##type}
  static const cuv_tensor_slot_t f32[] = {SLOT(2, READ, F32), SLOT(3, RW, F32)};
  static const cuv_tensor_slot_t u32[] = {SLOT(2, READ, F32), SLOT(3, RW, U32)};
  static const cuv_tensor_slot_t past[] = {SLOT(2, READ, F32), SLOT(4, RW, F32)};
  static const cuv_tensor_slot_t scalar[] = {SLOT(2, SCALAR, F32), SLOT(3, RW, F32)};
#undef SLOT
  /* the tensor slots hold garbage: cuv_tensor_launch_args writes them whole */
#define SAXPY_ARGS                                                                                 \
  {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_VALUE(n), CUV_ARG_VALUE(a)}
  cuv_arg_t args[] = SAXPY_ARGS;
  assert_cuv_ok(cuv_sync(cuv_tensor_launch_args(f.m.saxpy, c, args, 4, tensors, f32, 2), NULL));
  cuv_arg_t again[] = SAXPY_ARGS;
  assert_cuv_ok(cuv_sync(cuv_tensor_launch_args(f.m.saxpy, c, again, 4, tensors, f32, 2), NULL));
  read_tensor(f.got, ty);
  for (unsigned i = 0; i < n; i++)
    assert_true(f.got[i] == a * x[i] + (a * x[i] + y[i])); /* two launches: y + 2 a x */
  cuv_arg_t bad[] = SAXPY_ARGS;
  assert_int_equal(cuv_sync(cuv_tensor_launch_args(f.m.saxpy, c, bad, 4, tensors, u32, 2), NULL),
                   CUV_EARGS);
  const struct {
    cuv_kernel_t *kernel;
    cuv_arg_t *args;
    const cuv_tensor_t *const *tensors;
    const cuv_tensor_slot_t *slots;
  } refused[] = {{NULL, bad, tensors, f32},    {f.m.saxpy, NULL, tensors, f32},
                 {f.m.saxpy, bad, NULL, f32},  {f.m.saxpy, bad, tensors, NULL},
                 {f.m.saxpy, bad, tensors, past}, {f.m.saxpy, bad, tensors, scalar}};
  for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
    cuv_arg_t fresh[] = SAXPY_ARGS;
    cuv_arg_t *given = refused[k].args ? fresh : NULL;
    assert_int_equal(cuv_sync(cuv_tensor_launch_args(refused[k].kernel, c, given, 4,
                                                     refused[k].tensors, refused[k].slots, 2),
                              NULL),
                     CUV_EINVAL);
  }
  const cuv_tensor_t *const missing[] = {tx, NULL};
  cuv_arg_t none[] = SAXPY_ARGS;
  assert_int_equal(cuv_sync(cuv_tensor_launch_args(f.m.saxpy, c, none, 4, missing, f32, 2), NULL),
                   CUV_EINVAL);
#undef SAXPY_ARGS
  cuv_tensor_unref(ty);
  free(y);
  op_fixture_teardown(&f);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_partition_shape),
      cmocka_unit_test(test_partition_folds_leading_dims),
      cmocka_unit_test(test_partition_refused),
      cmocka_unit_test(test_seed_saxpy),
      cmocka_unit_test(test_saxpy_random_subtensor),
      cmocka_unit_test(test_disjoint_writable_partitions),
      cmocka_unit_test(test_overlapping_writable_partitions),
      cmocka_unit_test(test_read_overlap_and_broadcast),
      cmocka_unit_test(test_launch_refused),
      cmocka_unit_test(test_generated_tensor_launchers),
      cmocka_unit_test(test_op_arguments),
      cmocka_unit_test(test_op_argument_types),
      cmocka_unit_test(test_launch_args_direct),
  };
  return cuvt_run(tests);
}
