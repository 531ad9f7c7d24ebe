/* Typed tensors (include/cuv/tensor.h): views over buffers with an element type, a shape and
 * strides, reference counted with their buffer; zeros, ones, dup, reshape and to_host as lazy
 * ops, checked against host references on fresh random shapes and data; every misuse a clear
 * negative code. */
#include <cuv/tensor.h>

#include "counted.h"

/* A random shape of ndim dimensions, each 1..max. */
static void random_shape(size_t *shape, size_t ndim, size_t max) {
  for (size_t i = 0; i < ndim; i++)
    shape[i] = 1 + cuvt_random_u32() % max;
}

static size_t product(const size_t *shape, size_t ndim) {
  size_t n = 1;
  for (size_t i = 0; i < ndim; i++)
    n *= shape[i];
  return n;
}

/* Runs op, which outputs a tensor, and returns a reference of the caller's on it. */
static cuv_tensor_t *run_tensor(cuv_op_t *op) {
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(op, &out));
  cuv_tensor_t *t = cuv_output_tensor(&out);
  assert_non_null(t);
  cuv_tensor_ref(t);
  cuv_output_release(&out);
  return t;
}

/* The tensor's elements, through cuv_tensor_to_host, in new host memory. */
static void *elements(cuv_tensor_t *t) {
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_tensor_to_host(t), &out));
  void *copy = malloc(cuv_tensor_bytes(t));
  memcpy(copy, out.data, cuv_tensor_bytes(t));
  cuv_output_release(&out);
  return copy;
}

static void test_dtype_sizes(void **state) {
  const size_t want[CUV_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1, 4, 4, 8, 8};
  for (int d = 0; d < CUV_DTYPE_COUNT; d++)
    assert_int_equal(cuv_dtype_size((cuv_dtype_t)d), want[d]);
  assert_int_equal(cuv_dtype_size(CUV_DTYPE_COUNT), 0);
  assert_int_equal(cuv_dtype_size((cuv_dtype_t)-1), 0);
}

static void test_create_and_shape(void **state) {
  size_t ndim = 1 + cuvt_random_u32() % CUV_TENSOR_MAX_DIMS, shape[CUV_TENSOR_MAX_DIMS];
  random_shape(shape, ndim, 3);
  size_t n = product(shape, ndim), pad = 4 * (cuvt_random_u32() % 8);
  cuv_buffer_t *buf = cuvt_buffer(pad + n * 4);
  cuv_tensor_t *t = NULL;
  assert_cuv_ok(cuv_tensor_create(&t, buf, pad, CUV_DTYPE_F32, shape, ndim));
  assert_int_equal(cuv_tensor_dtype(t), CUV_DTYPE_F32);
  assert_int_equal(cuv_tensor_ndim(t), ndim);
  assert_int_equal(cuv_tensor_numel(t), n);
  assert_int_equal(cuv_tensor_bytes(t), n * 4);
  assert_true(cuv_tensor_is_contiguous(t));
  assert_ptr_equal(cuv_tensor_buffer(t), buf);
  assert_int_equal(cuv_tensor_offset(t), pad);
  assert_true(cuv_tensor_ptr(t) == cuv_buffer_ptr(buf) + pad);
  size_t stride = 1;
  for (size_t i = ndim; i-- > 0;) {
    assert_int_equal(cuv_tensor_shape(t, i), shape[i]);
    assert_int_equal(cuv_tensor_stride(t, i), stride);
    stride *= shape[i];
  }
  assert_int_equal(cuv_tensor_shape(t, ndim), 0);
  assert_int_equal(cuv_tensor_stride(t, ndim), 0);
  cuv_tensor_unref(t);
  cuv_buffer_unref(buf);
}

static void test_create_refused(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(64);
  cuv_tensor_t *t = NULL;
  size_t shape[CUV_TENSOR_MAX_DIMS + 1] = {4, 4}, ones[CUV_TENSOR_MAX_DIMS + 1];
  for (size_t i = 0; i <= CUV_TENSOR_MAX_DIMS; i++)
    ones[i] = 1;
  size_t zero_dim[] = {4, 0}, strides[] = {4, 1}, zero_stride[] = {0, 1};
  assert_int_equal(cuv_tensor_create(NULL, buf, 0, CUV_DTYPE_F32, shape, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_create(&t, NULL, 0, CUV_DTYPE_F32, shape, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_create(&t, buf, 0, CUV_DTYPE_F32, NULL, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_create(&t, buf, 0, CUV_DTYPE_F32, shape, 0), CUV_EINVAL);
  assert_int_equal(cuv_tensor_create(&t, buf, 0, CUV_DTYPE_F32, ones, CUV_TENSOR_MAX_DIMS + 1),
                   CUV_EINVAL);
  assert_int_equal(cuv_tensor_create(&t, buf, 0, CUV_DTYPE_COUNT, shape, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_create(&t, buf, 0, CUV_DTYPE_F32, zero_dim, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_create(&t, buf, 2, CUV_DTYPE_F32, shape, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_create(&t, buf, 4, CUV_DTYPE_F32, shape, 2), CUV_ERANGE);
  assert_int_equal(cuv_tensor_create(&t, buf, 0, CUV_DTYPE_F64, shape, 2), CUV_ERANGE);
  assert_int_equal(cuv_tensor_create_strided(&t, buf, 0, CUV_DTYPE_F32, shape, NULL, 2),
                   CUV_EINVAL);
  assert_int_equal(cuv_tensor_create_strided(&t, buf, 0, CUV_DTYPE_F32, shape, zero_stride, 2),
                   CUV_EINVAL);
  size_t huge[] = {SIZE_MAX / 2, 4};
  assert_int_equal(cuv_tensor_create(&t, buf, 0, CUV_DTYPE_F32, huge, 2), CUV_EINVAL);
  assert_null(t);
  assert_cuv_ok(cuv_tensor_create_strided(&t, buf, 0, CUV_DTYPE_F32, shape, strides, 2));
  cuv_tensor_unref(t);
  /* the getters on NULL */
  assert_int_equal(cuv_tensor_dtype(NULL), CUV_DTYPE_COUNT);
  assert_int_equal(cuv_tensor_ndim(NULL) + cuv_tensor_numel(NULL) + cuv_tensor_bytes(NULL), 0);
  assert_false(cuv_tensor_is_contiguous(NULL));
  assert_null(cuv_tensor_buffer(NULL));
  assert_null(cuv_tensor_ref(NULL));
  assert_true(cuv_tensor_ptr(NULL) == 0 && cuv_tensor_offset(NULL) == 0);
  assert_null(cuv_output_tensor(NULL));
  cuv_tensor_unref(NULL);
  cuv_buffer_unref(buf);
}

/* The tensor holds its buffer: the caller's buffer reference may go first. */
static void test_tensor_holds_its_buffer(void **state) {
  enum { N = 1000 };
  float host[N], got[N];
  cuvt_random_floats(host, N);
  cuv_buffer_t *buf = cuvt_buffer_of(host, N);
  size_t shape[] = {10, 100};
  cuv_tensor_t *t = NULL, *view = NULL;
  assert_cuv_ok(cuv_tensor_create(&t, buf, 0, CUV_DTYPE_F32, shape, 2));
  cuv_buffer_unref(buf);
  assert_ptr_equal(cuv_tensor_ref(t), t);
  view = t;
  cuv_tensor_unref(t); /* the second reference keeps it */
  assert_cuv_ok(cuv_sync(cuv_tensor_to_host_into(got, sizeof got, view), NULL));
  cuvt_assert_floats_equal(got, host, N);
  cuv_tensor_unref(view);
}

/* The bits of one in each type, as the host writes them. */
static void host_one(cuv_dtype_t dtype, unsigned char *out) {
  float f = 1.0f;
  double d = 1.0;
  uint64_t u = 1;
  uint16_t h = 0x3c00, bf = 0x3f80;
  switch (dtype) {
  case CUV_DTYPE_F32: memcpy(out, &f, 4); break;
  case CUV_DTYPE_F64: memcpy(out, &d, 8); break;
  case CUV_DTYPE_F16: memcpy(out, &h, 2); break;
  case CUV_DTYPE_BF16: memcpy(out, &bf, 2); break;
  default: /* little-endian integers */ memcpy(out, &u, cuv_dtype_size(dtype));
  }
}

static void test_zeros_and_ones_every_type(void **state) {
  for (int d = 0; d < CUV_DTYPE_COUNT; d++) {
    cuv_dtype_t dtype = (cuv_dtype_t)d;
    size_t ndim = 1 + cuvt_random_u32() % 4, shape[4], esize = cuv_dtype_size(dtype);
    random_shape(shape, ndim, 40);
    size_t n = product(shape, ndim);
    cuv_tensor_t *z = run_tensor(cuv_tensor_zeros(cuvt_device(), dtype, shape, ndim));
    cuv_tensor_t *o = run_tensor(cuv_tensor_ones(cuvt_device(), dtype, shape, ndim));
    for (cuv_tensor_t **tp = (cuv_tensor_t *[]){z, o, NULL}; *tp; tp++) {
      assert_int_equal(cuv_tensor_dtype(*tp), dtype);
      assert_int_equal(cuv_tensor_ndim(*tp), ndim);
      assert_int_equal(cuv_tensor_numel(*tp), n);
      assert_int_equal(cuv_buffer_size(cuv_tensor_buffer(*tp)), n * esize);
      assert_true(cuv_tensor_is_contiguous(*tp));
    }
    unsigned char *zb = elements(z), *ob = elements(o), one[8], zero[8] = {0};
    host_one(dtype, one);
    for (size_t i = 0; i < n; i++) {
      assert_memory_equal(zb + i * esize, zero, esize);
      assert_memory_equal(ob + i * esize, one, esize);
    }
    free(zb);
    free(ob);
    cuv_tensor_unref(z);
    cuv_tensor_unref(o);
  }
}

static void test_lazy_constructors_refused(void **state) {
  size_t shape[] = {4, 4}, zero_dim[] = {4, 0};
  cuv_device_t *dev = cuvt_device();
  cuv_op_t *bad[] = {
      cuv_tensor_zeros(NULL, CUV_DTYPE_F32, shape, 2),
      cuv_tensor_zeros(dev, CUV_DTYPE_COUNT, shape, 2),
      cuv_tensor_zeros(dev, CUV_DTYPE_F32, NULL, 2),
      cuv_tensor_zeros(dev, CUV_DTYPE_F32, shape, 0),
      cuv_tensor_ones(dev, CUV_DTYPE_F64, zero_dim, 2),
      cuv_tensor_ones(dev, CUV_DTYPE_F32, shape, CUV_TENSOR_MAX_DIMS + 1),
      cuv_tensor_dup(NULL),
      cuv_tensor_to_host(NULL),
      cuv_tensor_to_host_into(NULL, 0, NULL),
      cuv_tensor_reshape_op(NULL, shape, 2),
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(cuv_op_error(bad[i]), CUV_EINVAL);
    assert_int_equal(cuv_sync(bad[i], NULL), CUV_EINVAL);
  }
  /* a bad shape for reshape_op drops the op it was given */
  cuv_op_t *op = cuv_tensor_reshape_op(cuv_tensor_zeros(dev, CUV_DTYPE_F32, shape, 2), zero_dim, 2);
  assert_int_equal(cuv_sync(op, NULL), CUV_EINVAL);
}

/* dup copies the view's own elements (a row range from inside a bigger buffer), into a new
 * buffer that later writes to the source do not reach. */
static void test_dup(void **state) {
  size_t rows = 2 + cuvt_random_u32() % 30, cols = 1 + cuvt_random_u32() % 50;
  size_t n = rows * cols, r0 = cuvt_random_u32() % (rows - 1);
  size_t nrows = 1 + cuvt_random_u32() % (rows - r0);
  float *host = malloc(n * 4), *changed = malloc(n * 4);
  cuvt_random_floats(host, n);
  cuvt_random_floats(changed, n);
  cuv_buffer_t *buf = cuvt_buffer_of(host, n);
  size_t shape[] = {rows, cols}, start[] = {r0, 0}, part[] = {nrows, cols};
  cuv_tensor_t *t = NULL, *rowsv = NULL;
  assert_cuv_ok(cuv_tensor_create(&t, buf, 0, CUV_DTYPE_F32, shape, 2));
  assert_cuv_ok(cuv_tensor_slice(&rowsv, t, start, part, 2));
  assert_true(cuv_tensor_is_contiguous(rowsv));
  cuv_tensor_t *copy = run_tensor(cuv_tensor_dup(rowsv));
  assert_ptr_not_equal(cuv_tensor_buffer(copy), buf);
  assert_int_equal(cuv_tensor_shape(copy, 0), nrows);
  assert_int_equal(cuv_tensor_shape(copy, 1), cols);
  cuvt_upload(buf, 0, changed, n * 4);
  float *got = elements(copy);
  cuvt_assert_floats_equal(got, host + r0 * cols, nrows * cols);
  free(got);
  cuv_tensor_unref(copy);
  cuv_tensor_unref(rowsv);
  cuv_tensor_unref(t);
  cuv_buffer_unref(buf);
  free(host);
  free(changed);
}

/* A column range is not contiguous: dup, to_host and reshape refuse it. */
static void test_not_contiguous_refused(void **state) {
  size_t shape[] = {8, 8}, start[] = {0, 2}, cols[] = {8, 4}, flat[] = {32};
  cuv_tensor_t *t = run_tensor(cuv_tensor_zeros(cuvt_device(), CUV_DTYPE_F32, shape, 2));
  cuv_tensor_t *v = NULL, *r = NULL;
  assert_cuv_ok(cuv_tensor_slice(&v, t, start, cols, 2));
  assert_false(cuv_tensor_is_contiguous(v));
  assert_int_equal(cuv_tensor_stride(v, 0), 8);
  assert_true(cuv_tensor_ptr(v) == cuv_tensor_ptr(t) + 8);
  assert_int_equal(cuv_tensor_reshape(&r, v, flat, 1), CUV_ENOTSUP);
  assert_int_equal(cuv_sync(cuv_tensor_dup(v), NULL), CUV_ENOTSUP);
  assert_int_equal(cuv_sync(cuv_tensor_to_host(v), NULL), CUV_ENOTSUP);
  float host[32];
  assert_int_equal(cuv_sync(cuv_tensor_to_host_into(host, sizeof host, v), NULL), CUV_ENOTSUP);
  assert_int_equal(cuv_sync(cuv_tensor_to_host_into(host, 4, t), NULL), CUV_EINVAL);
  size_t past[] = {0, 6}, at[] = {9, 0}, zero[] = {8, 0};
  assert_int_equal(cuv_tensor_slice(&r, t, past, cols, 2), CUV_ERANGE);
  assert_int_equal(cuv_tensor_slice(&r, t, at, cols, 2), CUV_ERANGE);
  assert_int_equal(cuv_tensor_slice(&r, t, start, zero, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_slice(&r, t, start, cols, 1), CUV_EINVAL);
  assert_int_equal(cuv_tensor_slice(NULL, t, start, cols, 2), CUV_EINVAL);
  assert_null(r);
  cuv_tensor_unref(v);
  cuv_tensor_unref(t);
}

static void test_reshape(void **state) {
  enum { R = 6, C = 10 };
  float host[R * C], got[R * C];
  cuvt_random_floats(host, R * C);
  cuv_buffer_t *buf = cuvt_buffer_of(host, R * C);
  size_t shape[] = {R, C}, three[] = {3, 2, C}, wrong[] = {7, C};
  cuv_tensor_t *t = NULL, *r = NULL;
  assert_cuv_ok(cuv_tensor_create(&t, buf, 0, CUV_DTYPE_F32, shape, 2));
  assert_int_equal(cuv_tensor_reshape(&r, t, wrong, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_reshape(&r, t, NULL, 2), CUV_EINVAL);
  assert_int_equal(cuv_tensor_reshape(NULL, t, three, 3), CUV_EINVAL);
  assert_int_equal(cuv_tensor_reshape(&r, NULL, three, 3), CUV_EINVAL);
  assert_cuv_ok(cuv_tensor_reshape(&r, t, three, 3));
  assert_int_equal(cuv_tensor_ndim(r), 3);
  assert_int_equal(cuv_tensor_stride(r, 0), 2 * C);
  assert_int_equal(cuv_tensor_stride(r, 1), C);
  assert_true(cuv_tensor_ptr(r) == cuv_tensor_ptr(t));
  cuv_buffer_unref(buf);
  cuv_tensor_unref(t);
  assert_cuv_ok(cuv_sync(cuv_tensor_to_host_into(got, sizeof got, r), NULL));
  cuvt_assert_floats_equal(got, host, R * C);
  cuv_tensor_unref(r);
}

/* reshape_op: the lazy form, over an op producing a tensor; an op producing anything else fails
 * with CUV_EARGS, a count that differs with CUV_EINVAL, when they run. */
static void test_reshape_op(void **state) {
  size_t shape[] = {4, 6}, flat[] = {24}, wrong[] = {25};
  cuv_device_t *dev = cuvt_device();
  cuv_tensor_t *t =
      run_tensor(cuv_tensor_reshape_op(cuv_tensor_ones(dev, CUV_DTYPE_F32, shape, 2), flat, 1));
  assert_int_equal(cuv_tensor_ndim(t), 1);
  assert_int_equal(cuv_tensor_shape(t, 0), 24);
  float *got = elements(t);
  for (size_t i = 0; i < 24; i++)
    assert_true(got[i] == 1.0f);
  free(got);
  cuv_tensor_unref(t);
  assert_int_equal(cuv_sync(cuv_tensor_reshape_op(cuv_alloc(dev, 96), flat, 1), NULL), CUV_EARGS);
  assert_int_equal(
      cuv_sync(cuv_tensor_reshape_op(cuv_tensor_zeros(dev, CUV_DTYPE_F32, shape, 2), wrong, 1),
               NULL),
      CUV_EINVAL);
}

/* Tensor ops dropped unexecuted release what they hold; a cuv_value made with
 * cuv_tensor_output_release is a tensor output, one with another release function is not. */
static void test_tensor_value_and_drop(void **state) {
  size_t shape[] = {3, 3};
  cuv_op_destroy(cuv_tensor_zeros(cuvt_device(), CUV_DTYPE_F32, shape, 2));
  cuv_op_destroy(
      cuv_tensor_reshape_op(cuv_tensor_ones(cuvt_device(), CUV_DTYPE_U8, shape, 2), shape, 2));
  cuv_tensor_t *t = run_tensor(cuv_tensor_zeros(cuvt_device(), CUV_DTYPE_F32, shape, 2));
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_value(cuv_tensor_ref(t), cuv_tensor_output_release), &out));
  assert_ptr_equal(cuv_output_tensor(&out), t);
  cuv_output_release(&out);
  cuv_output_t not_tensor = {t, free, t};
  assert_null(cuv_output_tensor(&not_tensor));
  cuv_tensor_unref(t);
}

typedef struct counted_done {
  atomic_int calls, *all;
  int status;
  float sum;
  size_t n;
} counted_done_t;

static void sum_done(int status, cuv_output_t *output, void *arg) {
  counted_done_t *c = arg;
  c->status = status;
  const float *x = status == 0 ? output->data : NULL;
  for (size_t i = 0; x && i < c->n; i++)
    c->sum += x[i];
  atomic_fetch_add(&c->calls, 1);
  atomic_fetch_add(c->all, 1);
}

/* Submitted through a queue: to_host of tensors of ones whose references are dropped at once
 * (the submissions hold the buffers), each callback counted exactly once. */
static void test_submitted_to_host(void **state) {
  enum { SUBMISSIONS = 4 };
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  counted_done_t done[SUBMISSIONS];
  atomic_int all = 0;
  for (int i = 0; i < SUBMISSIONS; i++) {
    size_t shape[] = {1 + cuvt_random_u32() % 64, 1 + cuvt_random_u32() % 64};
    cuv_tensor_t *t = run_tensor(cuv_tensor_ones(cuvt_device(), CUV_DTYPE_F32, shape, 2));
    done[i] = (counted_done_t){0, &all, 1, 0.0f, shape[0] * shape[1]};
    assert_cuv_ok(cuv_submit(q, cuv_tensor_to_host(t), sum_done, &done[i], NULL));
    cuv_tensor_unref(t);
  }
  cuvt_drain_until(q, &all, SUBMISSIONS);
  cuvt_drain_until_retired(q);
  assert_int_equal(atomic_load(&all), SUBMISSIONS);
  for (int i = 0; i < SUBMISSIONS; i++) {
    assert_int_equal(atomic_load(&done[i].calls), 1);
    assert_int_equal(done[i].status, 0);
    assert_true(done[i].sum == (float)done[i].n);
  }
  assert_cuv_ok(cuv_queue_destroy(q));
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtype_sizes),
      cmocka_unit_test(test_create_and_shape),
      cmocka_unit_test(test_create_refused),
      cmocka_unit_test(test_tensor_holds_its_buffer),
      cmocka_unit_test(test_zeros_and_ones_every_type),
      cmocka_unit_test(test_lazy_constructors_refused),
      cmocka_unit_test(test_dup),
      cmocka_unit_test(test_not_contiguous_refused),
      cmocka_unit_test(test_reshape),
      cmocka_unit_test(test_reshape_op),
      cmocka_unit_test(test_tensor_value_and_drop),
      cmocka_unit_test(test_submitted_to_host),
  };
  return cuvt_run(tests);
}
