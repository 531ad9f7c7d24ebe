/* Buffer helpers (cuda-async's api::zeros, ones and dup): cuv_fill8/16/32, cuv_zeros, cuv_ones_f32,
 * cuv_iota_u32/f32 and cuv_dup each output a new buffer of the right size whose contents match a
 * host reference, on fresh random sizes and values. New stream-ordered memory holds garbage (the
 * simulator fills it with 0xa5, as a driver's pool hands out what was freed), so a helper that
 * skipped its fill shows. Hazards: a dup is ordered after a slow writer of its source on another
 * stream, and another stream's reader of a helper's new buffer after the helper's fill. */
#include <math.h>

#include "counted.h"

/* Runs op and returns its output's buffer (a reference of the caller's) of `bytes` bytes. */
static cuv_buffer_t *run_helper(cuv_op_t *op, size_t bytes) {
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(op, &out));
  cuv_buffer_t *buf = cuv_output_buffer(&out);
  assert_non_null(buf);
  assert_int_equal(cuv_buffer_size(buf), bytes);
  cuv_buffer_ref(buf);
  cuv_output_release(&out);
  return buf;
}

/* The buffer's contents, in new host memory. */
static void *contents(cuv_buffer_t *buf) {
  void *host = malloc(cuv_buffer_size(buf));
  cuvt_read(host, buf, 0, cuv_buffer_size(buf));
  cuv_buffer_unref(buf);
  return host;
}

static size_t random_count(void) { return 1 + cuvt_random_u32() % 100000; }

static void test_fill_patterns(void **state) {
  size_t n8 = random_count(), n16 = random_count(), n32 = random_count();
  uint8_t v8 = (uint8_t)cuvt_random_u32();
  uint16_t v16 = (uint16_t)cuvt_random_u32();
  uint32_t v32 = cuvt_random_u32();
  uint8_t *b = contents(run_helper(cuv_fill8(cuvt_device(), n8, v8), n8));
  uint16_t *h = contents(run_helper(cuv_fill16(cuvt_device(), n16, v16), n16 * 2));
  uint32_t *w = contents(run_helper(cuv_fill32(cuvt_device(), n32, v32), n32 * 4));
  for (size_t i = 0; i < n8; i++)
    assert_int_equal(b[i], v8);
  for (size_t i = 0; i < n16; i++)
    assert_int_equal(h[i], v16);
  for (size_t i = 0; i < n32; i++)
    assert_int_equal(w[i], v32);
  free(b);
  free(h);
  free(w);
}

static void test_zeros_and_ones(void **state) {
  size_t bytes = random_count(), n = random_count();
  uint8_t *z = contents(run_helper(cuv_zeros(cuvt_device(), bytes), bytes));
  float *ones = contents(run_helper(cuv_ones_f32(cuvt_device(), n), n * sizeof(float)));
  for (size_t i = 0; i < bytes; i++)
    assert_int_equal(z[i], 0);
  for (size_t i = 0; i < n; i++)
    assert_true(ones[i] == 1.0f);
  free(z);
  free(ones);
}

/* u32 wraps modulo 2^32: a start near the top and a large step make it wrap within the run. */
static void test_iota_u32(void **state) {
  size_t n = random_count();
  uint32_t start = UINT32_MAX - cuvt_random_u32() % 1000, step = cuvt_random_u32();
  uint32_t *got = contents(run_helper(cuv_iota_u32(cuvt_device(), n, start, step), n * 4));
  for (size_t i = 0; i < n; i++)
    assert_int_equal(got[i], (uint32_t)(start + (uint32_t)i * step));
  free(got);
}

static void test_iota_f32(void **state) {
  size_t n = random_count();
  float start, step;
  cuvt_random_floats(&start, 1);
  cuvt_random_floats(&step, 1);
  float *got = contents(run_helper(cuv_iota_f32(cuvt_device(), n, start, step), n * 4));
  for (size_t i = 0; i < n; i++)
    assert_true(got[i] == (float)((double)start + (double)i * (double)step));
  free(got);
}

/* A copy of every byte, and a copy of its own: writing the source afterwards leaves it be. */
static void test_dup(void **state) {
  size_t bytes = random_count();
  uint8_t *host = malloc(bytes);
  for (size_t i = 0; i < bytes; i++)
    host[i] = (uint8_t)cuvt_random_u32();
  cuv_buffer_t *src = cuvt_buffer(bytes);
  cuvt_upload(src, 0, host, bytes);
  cuv_buffer_t *copy = run_helper(cuv_dup(src), bytes);
  assert_ptr_not_equal(cuv_buffer_ptr(copy), cuv_buffer_ptr(src));
  assert_cuv_ok(cuv_sync(cuv_memset8(src, 0, (uint8_t)(host[0] + 1), bytes), NULL));
  uint8_t *got = contents(copy);
  assert_memory_equal(got, host, bytes);
  cuv_buffer_unref(src);
  free(host);
  free(got);
}

/* The helpers' outputs through seq and zip: each buffer comes out of a tuple whole. */
static void test_helpers_in_a_zip(void **state) {
  size_t n = random_count();
  uint32_t v = cuvt_random_u32();
  cuv_op_t *iota = cuv_seq(cuv_zeros(cuvt_device(), 8), cuv_iota_u32(cuvt_device(), n, v, 1));
  cuv_op_t *ops[] = {cuv_fill32(cuvt_device(), n, v), iota};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_zip(ops, 2), &out));
  cuv_buffer_t *fill = cuv_output_buffer(cuv_tuple_get(&out, 0));
  cuv_buffer_t *counting = cuv_output_buffer(cuv_tuple_get(&out, 1));
  assert_non_null(fill);
  assert_non_null(counting);
  assert_null(cuv_output_buffer(&out)); /* the tuple is not a buffer */
  uint32_t *a = contents(cuv_buffer_ref(fill)), *b = contents(cuv_buffer_ref(counting));
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(a[i], v);
    assert_int_equal(b[i], v + (uint32_t)i);
  }
  cuv_output_release(&out);
  free(a);
  free(b);
}

#define SLOW_MS 20

/* dup on stream b of a buffer a slow copy on stream a is writing: it copies what was written. */
static void test_dup_ordered_after_writer(void **state) {
  size_t n = 1 + cuvt_random_u32() % 8192;
  float *data = malloc(n * sizeof *data);
  cuvt_random_ints(data, n);
  cuv_buffer_t *src = cuvt_buffer_of(data, n), *buf = cuvt_buffer(n * sizeof *data);
  assert_cuv_ok(cuv_sync(cuv_memset32(buf, 0, 0, n), NULL));
  cuv_stream_t *a, *b;
  assert_cuv_ok(cuv_stream_create(&a, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&b, cuvt_device()));
  uint64_t waits = cuvt_waits_inserted();
  assert_cuv_ok(cuv_enqueue_on(a, cuv_seq(cuvt_sleep(SLOW_MS), cuvt_copy_f32(buf, src, n)), NULL));
  cuv_output_t out;
  assert_cuv_ok(cuv_sync_on(b, cuv_dup(buf), &out));
  assert_true(cuvt_waits_inserted() > waits);
  float *got = contents(cuv_buffer_ref(cuv_output_buffer(&out)));
  cuvt_assert_floats_equal(got, data, n);
  cuv_output_release(&out);
  assert_cuv_ok(cuv_stream_synchronize(a));
  cuv_stream_destroy(a);
  cuv_stream_destroy(b);
  cuv_buffer_unref(src);
  cuv_buffer_unref(buf);
  free(data);
  free(got);
}

/* A helper whose fill waits behind a slow kernel on stream a: a reader of its new buffer on
 * stream b waits for the fill (the submission holds the buffer as written), and so sees the
 * pattern, not the garbage of new memory. */
static void test_new_buffer_ordered_for_readers(void **state) {
  size_t n = random_count();
  uint32_t v = cuvt_random_u32();
  cuv_stream_t *a, *b;
  assert_cuv_ok(cuv_stream_create(&a, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&b, cuvt_device()));
  cuv_output_t made, read;
  uint64_t waits = cuvt_waits_inserted();
  assert_cuv_ok(
      cuv_enqueue_on(a, cuv_seq(cuvt_sleep(SLOW_MS), cuv_fill32(cuvt_device(), n, v)), &made));
  cuv_buffer_t *buf = cuv_output_buffer(&made);
  assert_non_null(buf);
  assert_cuv_ok(cuv_sync_on(b, cuv_download(buf, 0, n * 4), &read));
  assert_true(cuvt_waits_inserted() > waits);
  const uint32_t *got = read.data;
  for (size_t i = 0; i < n; i++)
    assert_int_equal(got[i], v);
  cuv_output_release(&read);
  cuv_output_release(&made);
  assert_cuv_ok(cuv_stream_synchronize(a));
  cuv_stream_destroy(a);
  cuv_stream_destroy(b);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fill_patterns),
      cmocka_unit_test(test_zeros_and_ones),
      cmocka_unit_test(test_iota_u32),
      cmocka_unit_test(test_iota_f32),
      cmocka_unit_test(test_dup),
      cmocka_unit_test(test_helpers_in_a_zip),
      cmocka_unit_test(test_dup_ordered_after_writer),
      cmocka_unit_test(test_new_buffer_ordered_for_readers),
  };
  return cuvt_run(tests);
}
