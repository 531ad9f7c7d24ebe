/* Single ops through the public API: values, with_context, allocation, copies, sets, downloads
 * and kernel launches on fresh random data against host references, argument checking, and the
 * rule that every output is released exactly once. */
#include "counted.h"

#define N 5000 /* not a multiple of the block size: the kernels' bounds checks matter */

/* ---- value ---- */

static void test_value_output_released_once(void **state) {
  atomic_int releases = 0;
  int payload = (int)(cuvt_random_u32() % 100000);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuvt_counted_value(payload, &releases), &out));
  assert_int_equal(cuvt_payload(&out), payload);
  assert_int_equal(atomic_load(&releases), 0); /* handed to us, not released behind our back */
  cuv_output_release(&out);
  assert_int_equal(atomic_load(&releases), 1);
  cuv_output_release(&out); /* a cleared output: no second release */
  assert_int_equal(atomic_load(&releases), 1);

  /* A NULL out: the executor releases it; an op never executed: cuv_op_destroy releases it. */
  assert_cuv_ok(cuv_sync(cuvt_counted_value(1, &releases), NULL));
  assert_int_equal(atomic_load(&releases), 2);
  cuv_op_destroy(cuvt_counted_value(2, &releases));
  assert_int_equal(atomic_load(&releases), 3);
}

/* ---- with_context ---- */

typedef struct context_probe {
  atomic_int calls;
  atomic_int arg_releases;
  struct CUstream_st *seen; /* cuv_stream_handle of the stream fn was given */
  atomic_int value_releases;
  int payload;
  cuv_op_t *(*make)(cuv_stream_t *stream, struct context_probe *probe); /* NULL: a value */
  cuv_buffer_t *buf;
} context_probe_t;

static cuv_op_t *probe_fn(cuv_stream_t *stream, void *arg) {
  context_probe_t *probe = arg;
  atomic_fetch_add(&probe->calls, 1);
  probe->seen = cuv_stream_handle(stream);
  if (probe->make)
    return probe->make(stream, probe);
  return cuvt_counted_value(probe->payload, &probe->value_releases);
}

static void probe_arg_release(void *arg) {
  atomic_fetch_add(&((context_probe_t *)arg)->arg_releases, 1);
}

static void test_with_context_gets_executing_stream(void **state) {
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  context_probe_t probe = {.payload = (int)(cuvt_random_u32() % 1000)};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync_on(stream, cuv_with_context(probe_fn, &probe, probe_arg_release), &out));
  assert_int_equal(atomic_load(&probe.calls), 1);
  assert_ptr_equal(probe.seen, cuv_stream_handle(stream));
  assert_int_equal(cuvt_payload(&out), probe.payload);
  assert_int_equal(atomic_load(&probe.arg_releases), 1);
  cuv_output_release(&out);
  assert_int_equal(atomic_load(&probe.value_releases), 1);
  cuv_stream_destroy(stream);
}

static cuv_op_t *make_fill(cuv_stream_t *stream, context_probe_t *probe) {
  return cuvt_fill_u32(probe->buf, N, (unsigned)probe->payload);
}

/* The op fn returns is enqueued on the stream fn was given, like any other. */
static void test_with_context_returns_device_work(void **state) {
  context_probe_t probe = {.payload = (int)cuvt_nonzero_u32(), .make = make_fill};
  probe.buf = cuvt_buffer(N * sizeof(unsigned));
  assert_cuv_ok(cuv_sync(cuv_with_context(probe_fn, &probe, probe_arg_release), NULL));
  unsigned *got = malloc(N * sizeof *got);
  cuvt_read(got, probe.buf, 0, N * sizeof *got);
  for (size_t i = 0; i < N; i++)
    assert_int_equal(got[i], (unsigned)probe.payload);
  assert_int_equal(atomic_load(&probe.arg_releases), 1);
  free(got);
  cuv_buffer_unref(probe.buf);
}

static cuv_op_t *make_null(cuv_stream_t *stream, context_probe_t *probe) { return NULL; }

static cuv_op_t *make_fail(cuv_stream_t *stream, context_probe_t *probe) {
  return cuv_fail(CUV_ECUDA(801) /* CUDA_ERROR_NOT_SUPPORTED */);
}

/* A with_context callback reports its own error through cuv_fail; the chain returns it. */
static void test_with_context_reports_its_error(void **state) {
  context_probe_t probe = {.make = make_fail};
  cuv_op_t *chain = cuv_seq(cuv_with_context(probe_fn, &probe, probe_arg_release),
                            cuv_value(NULL, NULL));
  assert_int_equal(cuv_sync(chain, NULL), CUV_ECUDA(801) /* CUDA_ERROR_NOT_SUPPORTED */);
  assert_int_equal(atomic_load(&probe.calls), 1);
  assert_int_equal(atomic_load(&probe.arg_releases), 1);
  cuv_op_t *op = cuv_fail(0); /* not an error: refused as an invalid argument */
  assert_int_equal(cuv_op_error(op), CUV_EINVAL);
  cuv_op_destroy(op);
}

static void test_with_context_arg_released_once_on_every_path(void **state) {
  context_probe_t dropped = {0};
  cuv_op_destroy(cuv_with_context(probe_fn, &dropped, probe_arg_release));
  assert_int_equal(atomic_load(&dropped.calls), 0);
  assert_int_equal(atomic_load(&dropped.arg_releases), 1);

  context_probe_t failing = {.make = make_null};
  assert_int_equal(cuv_sync(cuv_with_context(probe_fn, &failing, probe_arg_release), NULL),
                   CUV_EINVAL);
  assert_int_equal(atomic_load(&failing.calls), 1);
  assert_int_equal(atomic_load(&failing.arg_releases), 1);

  context_probe_t no_fn = {0};
  cuv_op_t *op = cuv_with_context(NULL, &no_fn, probe_arg_release);
  assert_int_equal(cuv_op_error(op), CUV_EINVAL);
  assert_int_equal(atomic_load(&no_fn.arg_releases), 1);
  cuv_op_destroy(op);
  assert_int_equal(atomic_load(&no_fn.arg_releases), 1);
}

/* ---- allocation ---- */

static void test_buffer_create(void **state) {
  size_t bytes = 1 + cuvt_random_u32() % 100000;
  cuv_buffer_t *buf = cuvt_buffer(bytes);
  assert_int_equal(cuv_buffer_size(buf), bytes);
  assert_ptr_equal(cuv_buffer_device(buf), cuvt_device());
  assert_true(cuv_buffer_ptr(buf) != 0);
  assert_ptr_equal(cuv_buffer_ref(buf), buf);
  cuv_buffer_unref(buf);
  cuv_buffer_unref(buf);
  assert_int_equal(cuv_buffer_create(&buf, cuvt_device(), 0), CUV_EINVAL);
  assert_int_equal(cuv_buffer_create(NULL, cuvt_device(), 16), CUV_EINVAL);
  assert_int_equal(cuv_buffer_create(&buf, NULL, 16), CUV_EINVAL);
}

typedef struct alloc_use {
  float host[N];
  float factor;
  atomic_int calls;
  size_t seen_size;
} alloc_use_t;

/* Receives the freshly allocated buffer and uses it, then frees it, all in the same submission:
 * upload, scale, download, free. The download is item 2 of the tuple. */
static cuv_op_t *use_then_free(cuv_output_t *input, void *arg) {
  alloc_use_t *u = arg;
  atomic_fetch_add(&u->calls, 1);
  cuv_buffer_t *buf = input->data;
  u->seen_size = cuv_buffer_size(buf);
  cuv_op_t *ops[] = {
      cuv_memcpy_htod(buf, 0, u->host, sizeof u->host, CUV_COPY_STAGE),
      cuvt_scale(buf, N, u->factor),
      cuv_download(buf, 0, sizeof u->host),
      cuv_free(cuv_buffer_ref(buf)), /* free consumes a reference of its own */
  };
  return cuv_zip(ops, 4);
}

static void test_alloc_use_free_stream_ordered(void **state) {
  alloc_use_t *u = calloc(1, sizeof *u);
  cuvt_random_ints(u->host, N);
  u->factor = (float)(int)(cuvt_random_u32() % 7) - 3.0f;
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_then(cuv_alloc(cuvt_device(), sizeof u->host), use_then_free, u),
                         &out));
  assert_int_equal(atomic_load(&u->calls), 1);
  assert_int_equal(u->seen_size, sizeof u->host);
  cuv_output_t *download = cuv_tuple_get(&out, 2);
  assert_non_null(download);
  const float *got = download->data;
  for (size_t i = 0; i < N; i++)
    assert_true(got[i] == u->host[i] * u->factor);
  cuv_output_release(&out);
  free(u);

  /* The allocation op alone outputs a buffer of that size, released with the output. */
  assert_cuv_ok(cuv_sync(cuv_alloc(cuvt_device(), 4096), &out));
  assert_int_equal(cuv_buffer_size(out.data), 4096);
  cuv_output_release(&out);
}

/* ---- copies ---- */

static void test_htod_staged_copies_when_built(void **state) {
  float *src = malloc(N * sizeof *src), *want = malloc(N * sizeof *want);
  float *got = malloc(N * sizeof *got);
  cuvt_random_ints(src, N);
  memcpy(want, src, N * sizeof *src);
  cuv_buffer_t *buf = cuvt_buffer(N * sizeof *src);
  cuv_op_t *op = cuv_memcpy_htod(buf, 0, src, N * sizeof *src, CUV_COPY_STAGE);
  /* Staging took the data when the op was built: scribbling now must not reach the device. */
  memset(src, 0xAB, N * sizeof *src);
  assert_cuv_ok(cuv_sync(op, NULL));
  cuvt_read(got, buf, 0, N * sizeof *got);
  cuvt_assert_floats_equal(got, want, N);
  cuv_buffer_unref(buf);
  free(src);
  free(want);
  free(got);
}

static void test_htod_borrowed_and_dtoh(void **state) {
  float *src = malloc(N * sizeof *src), *got = malloc(N * sizeof *got);
  cuvt_random_ints(src, N);
  cuv_buffer_t *buf = cuvt_buffer(N * sizeof *src);
  /* One submission: borrowed upload, then download into our memory. */
  assert_cuv_ok(cuv_sync(cuv_seq(cuv_memcpy_htod(buf, 0, src, N * sizeof *src, CUV_COPY_BORROW),
                                 cuv_memcpy_dtoh(got, buf, 0, N * sizeof *got)),
                         NULL));
  cuvt_assert_floats_equal(got, src, N);
  cuv_buffer_unref(buf);
  free(src);
  free(got);
}

static void test_dtod_sub_ranges(void **state) {
  float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *got = malloc(N * sizeof *got);
  cuvt_random_ints(a, N);
  cuvt_random_ints(b, N);
  cuv_buffer_t *da = cuvt_buffer_of(a, N), *db = cuvt_buffer_of(b, N);
  size_t count = 1 + cuvt_random_u32() % (N / 2);
  size_t src_at = cuvt_random_u32() % (N - count), dst_at = cuvt_random_u32() % (N - count);
  assert_cuv_ok(cuv_sync(cuv_memcpy_dtod(db, dst_at * 4, da, src_at * 4, count * 4), NULL));
  memcpy(b + dst_at, a + src_at, count * 4); /* the host reference */
  cuvt_read(got, db, 0, N * sizeof *got);
  cuvt_assert_floats_equal(got, b, N);
  cuvt_read(got, da, 0, N * sizeof *got); /* the source is untouched */
  cuvt_assert_floats_equal(got, a, N);
  cuv_buffer_unref(da);
  cuv_buffer_unref(db);
  free(a);
  free(b);
  free(got);
}

static void test_memset8_16_32_sub_ranges(void **state) {
  enum { WORDS = 4096 };
  uint32_t *want = malloc(WORDS * 4), *got = malloc(WORDS * 4);
  for (size_t i = 0; i < WORDS; i++)
    want[i] = cuvt_random_u32();
  cuv_buffer_t *buf = cuvt_buffer(WORDS * 4);
  cuvt_upload(buf, 0, want, WORDS * 4);

  uint8_t byte = (uint8_t)cuvt_random_u32();
  size_t at8 = cuvt_random_u32() % 1000, n8 = 1 + cuvt_random_u32() % 3000;
  uint32_t word = cuvt_random_u32();
  size_t at32 = cuvt_random_u32() % 2000, n32 = 1 + cuvt_random_u32() % 2000;
  uint16_t half = (uint16_t)cuvt_random_u32();
  size_t at16 = cuvt_random_u32() % 3000, n16 = 1 + cuvt_random_u32() % 3000;
  assert_cuv_ok(cuv_sync(cuv_seq(cuv_seq(cuv_memset8(buf, at8, byte, n8),
                                         cuv_memset32(buf, at32 * 4, word, n32)),
                                 cuv_memset16(buf, at16 * 2, half, n16)),
                         NULL));
  memset((uint8_t *)want + at8, byte, n8);
  for (size_t i = at32; i < at32 + n32; i++)
    want[i] = word;
  for (size_t i = at16; i < at16 + n16; i++)
    memcpy((uint8_t *)want + i * 2, &half, 2);
  cuvt_read(got, buf, 0, WORDS * 4);
  assert_memory_equal(got, want, WORDS * 4);
  cuv_buffer_unref(buf);
  free(want);
  free(got);
}

static void test_download_output(void **state) {
  float *host = malloc(N * sizeof *host);
  cuvt_random_ints(host, N);
  cuv_buffer_t *buf = cuvt_buffer_of(host, N);
  size_t at = cuvt_random_u32() % (N / 2), count = 1 + cuvt_random_u32() % (N / 2);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_download(buf, at * 4, count * 4), &out));
  assert_non_null(out.data);
  cuvt_assert_floats_equal(out.data, host + at, count);
  cuv_output_release(&out);
  assert_null(out.data);
  cuv_buffer_unref(buf);
  free(host);
}

/* ---- kernel launches against host references ---- */

static void test_launch_saxpy(void **state) {
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *got = malloc(N * sizeof *got);
  cuvt_random_ints(x, N);
  cuvt_random_ints(y, N);
  float a = (float)(int)(cuvt_random_u32() % 17) - 8.0f;
  unsigned n = N;
  cuv_buffer_t *dx = cuvt_buffer_of(x, N), *dy = cuvt_buffer_of(y, N);
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_READ(dx), CUV_ARG_RW(dy)};
  assert_cuv_ok(cuv_sync(cuv_launch(cuvt_kernel_ok("saxpy"), CUVT_GRID(N), CUVT_BLOCK, 0, args, 4),
                         NULL));
  for (size_t i = 0; i < N; i++)
    y[i] = a * x[i] + y[i];
  cuvt_read(got, dy, 0, N * sizeof *got);
  cuvt_assert_floats_equal(got, y, N);
  cuv_buffer_unref(dx);
  cuv_buffer_unref(dy);
  free(x);
  free(y);
  free(got);
}

static void test_launch_fill_u32(void **state) {
  unsigned value = cuvt_random_u32(), n = 1 + cuvt_random_u32() % (N - 1);
  unsigned *got = malloc(N * sizeof *got);
  cuv_buffer_t *buf = cuvt_buffer(N * sizeof *got);
  /* Zero all, fill the first n: the tail proves the kernel stops at n. */
  assert_cuv_ok(cuv_sync(cuv_seq(cuv_memset32(buf, 0, 0, N), cuvt_fill_u32(buf, n, value)), NULL));
  cuvt_read(got, buf, 0, N * sizeof *got);
  for (size_t i = 0; i < N; i++)
    assert_int_equal(got[i], i < n ? value : 0u);
  cuv_buffer_unref(buf);
  free(got);
}

static void test_launch_scale(void **state) {
  float *x = malloc(N * sizeof *x), *got = malloc(N * sizeof *got);
  cuvt_random_ints(x, N);
  float factor = (float)(int)(cuvt_random_u32() % 9) - 4.0f;
  cuv_buffer_t *buf = cuvt_buffer_of(x, N);
  assert_cuv_ok(cuv_sync(cuvt_scale(buf, N, factor), NULL));
  for (size_t i = 0; i < N; i++)
    x[i] *= factor;
  cuvt_read(got, buf, 0, N * sizeof *got);
  cuvt_assert_floats_equal(got, x, N);
  cuv_buffer_unref(buf);
  free(x);
  free(got);
}

static void test_launch_sum_reduce(void **state) {
  float *x = malloc(N * sizeof *x);
  cuvt_random_ints(x, N);
  double want = 0; /* integers below 2^24 in magnitude: the float sum is exact in any order */
  for (size_t i = 0; i < N; i++)
    want += x[i];
  cuv_buffer_t *in = cuvt_buffer_of(x, N), *sum = cuvt_buffer(sizeof(float));
  unsigned n = N;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_READ(in), CUV_ARG_RW(sum)};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_seq(cuv_seq(cuv_memset32(sum, 0, 0, 1),
                                         cuv_launch(cuvt_kernel_ok("sum_reduce"), CUV_DIM1(4),
                                                    CUVT_BLOCK, 0, args, 3)),
                                 cuv_download(sum, 0, sizeof(float))),
                         &out));
  assert_true(*(float *)out.data == (float)want);
  cuv_output_release(&out);
  cuv_buffer_unref(in);
  cuv_buffer_unref(sum);
  free(x);
}

/* ---- argument checking ---- */

/* Count and sizes are checked where the driver reports them (CUDA 12.4+ and the simulator). */
static void test_launch_argument_count_and_size(void **state) {
  cuv_kernel_t *saxpy = cuvt_kernel_ok("saxpy");
  size_t count;
  int rc = cuv_kernel_param_count(saxpy, &count);
  if (rc == CUV_ENOTSUP)
    skip();
  assert_cuv_ok(rc);
  assert_int_equal(count, 4);
  cuv_buffer_t *buf = cuvt_buffer(64);
  unsigned n = 16;
  float a = 2.0f;
  double wide = 2.0;
  cuv_arg_t three[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_READ(buf)};
  cuv_op_t *op = cuv_launch(saxpy, CUV_DIM1(1), CUVT_BLOCK, 0, three, 3);
  assert_int_equal(cuv_op_error(op), CUV_EARGS);
  assert_int_equal(cuv_sync(op, NULL), CUV_EARGS); /* executing reports the same error */
  cuv_arg_t wrong_size[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(wide), CUV_ARG_READ(buf),
                            CUV_ARG_RW(buf)};
  op = cuv_launch(saxpy, CUV_DIM1(1), CUVT_BLOCK, 0, wrong_size, 4);
  assert_int_equal(cuv_op_error(op), CUV_EARGS);
  cuv_op_destroy(op);
  assert_int_equal(cuv_kernel_param_count(NULL, &count), CUV_EINVAL);
  cuv_buffer_unref(buf);
}

static void expect_error(cuv_op_t *op, int error) {
  assert_int_equal(cuv_op_error(op), error);
  assert_int_equal(cuv_sync(op, NULL), error);
}

static void test_out_of_range_offsets(void **state) {
  enum { BYTES = 256 };
  cuv_buffer_t *a = cuvt_buffer(BYTES), *b = cuvt_buffer(BYTES);
  char host[2 * BYTES] = {0};
  expect_error(cuv_memcpy_htod(a, 1, host, BYTES, 0), CUV_ERANGE);
  expect_error(cuv_memcpy_htod(a, BYTES + 1, host, 0, 0), CUV_ERANGE);
  expect_error(cuv_memcpy_dtoh(host, a, BYTES - 3, 4), CUV_ERANGE);
  expect_error(cuv_memcpy_dtod(a, 0, b, 8, BYTES), CUV_ERANGE);
  expect_error(cuv_memcpy_dtod(a, 8, b, 0, BYTES), CUV_ERANGE);
  expect_error(cuv_memcpy_dtod(a, SIZE_MAX, b, 0, 2), CUV_ERANGE); /* offset + size overflows */
  expect_error(cuv_memset8(a, BYTES, 1, 1), CUV_ERANGE);
  expect_error(cuv_memset32(a, 4, 7, BYTES / 4), CUV_ERANGE);
  expect_error(cuv_download(a, 1, BYTES), CUV_ERANGE);
  unsigned n = 1, value = 1;
  cuv_arg_t past_end = CUV_ARG_WRITE_AT(a, BYTES + 4);
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(value), past_end};
  expect_error(cuv_launch(cuvt_kernel_ok("fill_u32"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 3),
               CUV_ERANGE);
  /* The edges themselves are in range. */
  assert_cuv_ok(cuv_sync(cuv_memcpy_htod(a, BYTES, host, 0, 0), NULL));
  assert_cuv_ok(cuv_sync(cuv_memcpy_dtod(a, 0, b, 0, BYTES), NULL));
  cuv_buffer_unref(a);
  cuv_buffer_unref(b);
}

static void test_null_arguments(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(64);
  char host[64];
  unsigned n = 1;
  cuv_arg_t no_buffer[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(n), CUV_ARG_WRITE(NULL)};
  cuv_arg_t no_scalar[] = {CUV_ARG_SCALAR(NULL, 4), CUV_ARG_VALUE(n), CUV_ARG_WRITE(buf)};
  cuv_kernel_t *fill = cuvt_kernel_ok("fill_u32");
  expect_error(cuv_launch(NULL, CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 0), CUV_EINVAL);
  expect_error(cuv_launch(fill, CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 3), CUV_EINVAL);
  expect_error(cuv_launch(fill, CUV_DIM1(1), CUV_DIM1(1), 0, no_buffer, 3), CUV_EINVAL);
  expect_error(cuv_launch(fill, CUV_DIM1(1), CUV_DIM1(1), 0, no_scalar, 3), CUV_EINVAL);
  expect_error(cuv_memcpy_htod(NULL, 0, host, 4, 0), CUV_EINVAL);
  expect_error(cuv_memcpy_htod(buf, 0, NULL, 4, 0), CUV_EINVAL);
  expect_error(cuv_memcpy_htod(buf, 0, host, 4, 7), CUV_EINVAL); /* unknown flag */
  expect_error(cuv_memcpy_dtoh(NULL, buf, 0, 4), CUV_EINVAL);
  expect_error(cuv_memcpy_dtoh(host, NULL, 0, 4), CUV_EINVAL);
  expect_error(cuv_memcpy_dtod(NULL, 0, buf, 0, 4), CUV_EINVAL);
  expect_error(cuv_memcpy_dtod(buf, 0, NULL, 0, 4), CUV_EINVAL);
  expect_error(cuv_memset8(NULL, 0, 0, 4), CUV_EINVAL);
  expect_error(cuv_memset32(NULL, 0, 0, 1), CUV_EINVAL);
  expect_error(cuv_memset32(buf, 2, 0, 1), CUV_EINVAL); /* misaligned */
  expect_error(cuv_download(NULL, 0, 4), CUV_EINVAL);
  expect_error(cuv_download(buf, 0, 0), CUV_EINVAL);
  expect_error(cuv_alloc(NULL, 64), CUV_EINVAL);
  expect_error(cuv_alloc(cuvt_device(), 0), CUV_EINVAL);
  expect_error(cuv_free(NULL), CUV_EINVAL);
  assert_int_equal(cuv_sync(NULL, NULL), CUV_EINVAL);
  assert_int_equal(cuv_op_error(NULL), CUV_EINVAL);
  cuv_op_destroy(NULL); /* ignored */

  /* An executor refusing its arguments still consumes the op. */
  atomic_int releases = 0;
  assert_int_equal(cuv_sync_on(NULL, cuvt_counted_value(1, &releases), NULL), CUV_EINVAL);
  assert_int_equal(cuv_sync_policy(NULL, cuvt_counted_value(2, &releases), NULL), CUV_EINVAL);
  assert_int_equal(cuv_enqueue_on(NULL, cuvt_counted_value(3, &releases), NULL), CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 3);
  cuv_buffer_unref(buf);
}

/* grid or block 0 fails when the launch is built, not when the driver sees it. */
static void test_launch_empty_grid(void **state) {
  cuv_kernel_t *empty = cuvt_kernel_ok("empty_kernel");
  expect_error(cuv_launch(empty, CUV_DIM1(0), CUV_DIM1(1), 0, NULL, 0), CUV_EINVAL);
  expect_error(cuv_launch(empty, CUV_DIM3(1, 0, 1), CUV_DIM1(1), 0, NULL, 0), CUV_EINVAL);
  expect_error(cuv_launch(empty, CUV_DIM1(1), CUV_DIM3(1, 1, 0), 0, NULL, 0), CUV_EINVAL);
  assert_cuv_ok(cuv_sync(cuv_launch(empty, CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 0), NULL));
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_value_output_released_once),
      cmocka_unit_test(test_with_context_gets_executing_stream),
      cmocka_unit_test(test_with_context_returns_device_work),
      cmocka_unit_test(test_with_context_arg_released_once_on_every_path),
      cmocka_unit_test(test_with_context_reports_its_error),
      cmocka_unit_test(test_buffer_create),
      cmocka_unit_test(test_alloc_use_free_stream_ordered),
      cmocka_unit_test(test_htod_staged_copies_when_built),
      cmocka_unit_test(test_htod_borrowed_and_dtoh),
      cmocka_unit_test(test_dtod_sub_ranges),
      cmocka_unit_test(test_memset8_16_32_sub_ranges),
      cmocka_unit_test(test_download_output),
      cmocka_unit_test(test_launch_saxpy),
      cmocka_unit_test(test_launch_fill_u32),
      cmocka_unit_test(test_launch_scale),
      cmocka_unit_test(test_launch_sum_reduce),
      cmocka_unit_test(test_launch_argument_count_and_size),
      cmocka_unit_test(test_out_of_range_offsets),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_launch_empty_grid),
  };
  return cuvt_run(tests);
}
