/* Handles and outputs dropped while the GPU still works on what they name (regressions of bugs
 * found while fuzzing, fuzz/README.md). Dropping a reference early must never free or reuse
 * memory the GPU may still use, and must never keep anything alive for good. */
#include "counted.h"

#define SLOW_MS 60
#define BYTES 4096

static cuv_op_t *slow(cuv_buffer_t *flag) { return cuvt_slow_write(SLOW_MS, 1, flag); }

/* A stream destroyed with cuv_enqueue_on work on it: the work held the stream, and only a later
 * use of the stream reaped it, so the stream, the work and its buffers stayed alive for good
 * (cuv_stats().in_flight never came back). Now the last handle waits for the work and frees all. */
static void test_stream_destroyed_with_enqueued_work(void **state) {
  cuv_stats_t before, after;
  cuv_stats(&before);
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  cuv_buffer_t *flag = cuvt_buffer(4);
  assert_cuv_ok(cuv_enqueue_on(stream, slow(flag), NULL));
  cuv_stream_destroy(stream);
  cuv_stats(&after);
  assert_int_equal(after.in_flight, before.in_flight);
  assert_int_equal(after.completed, before.completed + 1);
  unsigned value = 0;
  cuvt_read(&value, flag, 0, sizeof value);
  assert_int_equal(value, 1); /* the work had finished */
  cuv_buffer_unref(flag);
}

typedef struct drop {
  int calls, status;
} drop_t;

static void drop_done(int status, cuv_output_t *output, void *arg) {
  drop_t *d = arg;
  d->calls++;
  d->status = status;
}

/* Runs op asynchronously; while its slow kernel holds back the rest, a staged upload of BYTES of
 * 0x55 is built (its pinned block comes from the same pool as a download's), then op completes
 * and the upload runs. Returns the first byte the upload left in its buffer. */
static unsigned char upload_beside(cuv_op_t *op, int *op_status) {
  cuv_queue_t *queue;
  assert_cuv_ok(cuv_queue_create(&queue, NULL, NULL));
  drop_t d = {0};
  assert_cuv_ok(cuv_submit(queue, op, drop_done, &d, NULL));
  unsigned char pattern[BYTES];
  memset(pattern, 0x55, sizeof pattern);
  cuv_buffer_t *dst = cuvt_buffer(BYTES);
  cuv_op_t *upload = cuv_memcpy_htod(dst, 0, pattern, BYTES, CUV_COPY_STAGE);
  while (cuv_queue_pending(queue) > 0) {
    cuv_queue_wait(queue, -1);
    cuv_queue_drain(queue);
  }
  assert_cuv_ok(cuv_queue_destroy(queue));
  assert_int_equal(d.calls, 1);
  *op_status = d.status;
  assert_cuv_ok(cuv_sync(upload, NULL));
  unsigned char got[BYTES];
  cuvt_read(got, dst, 0, BYTES);
  cuv_buffer_unref(dst);
  for (size_t i = 1; i < BYTES; i++)
    assert_int_equal(got[i], got[0]);
  return got[0];
}

/* A download whose output cuv_seq drops at once, behind a slow kernel: its pinned block went
 * back to the staging pool while the copy into it was pending, the next staged upload took the
 * block, and the late copy overwrote the upload's data (0xAA uploaded instead of 0x55). */
static void test_download_dropped_by_seq(void **state) {
  cuv_buffer_t *flag = cuvt_buffer(4), *src = cuvt_buffer(BYTES);
  assert_cuv_ok(cuv_sync(cuv_memset8(src, 0, 0xAA, BYTES), NULL));
  cuv_op_t *op = cuv_seq(cuv_seq(slow(flag), cuv_download(src, 0, BYTES)), cuv_value(NULL, NULL));
  int status;
  assert_int_equal(upload_beside(op, &status), 0x55);
  assert_cuv_ok(status);
  cuv_buffer_unref(flag);
  cuv_buffer_unref(src);
}

static cuv_op_t *no_op(cuv_stream_t *stream, void *arg) { return NULL; }

/* The same when the execution fails after the download was enqueued: the failed op's output is
 * released at once, before the submission's completion is proven. */
static void test_download_dropped_by_failure(void **state) {
  cuv_buffer_t *flag = cuvt_buffer(4), *src = cuvt_buffer(BYTES);
  assert_cuv_ok(cuv_sync(cuv_memset8(src, 0, 0xAA, BYTES), NULL));
  cuv_op_t *items[] = {slow(flag), cuv_download(src, 0, BYTES),
                       cuv_with_context(no_op, NULL, NULL)};
  int status;
  assert_int_equal(upload_beside(cuv_zip(items, 3), &status), 0x55);
  assert_int_equal(status, CUV_EINVAL);
  cuv_buffer_unref(flag);
  cuv_buffer_unref(src);
}

/* cuv_enqueue_on hands the download's output over at once; releasing it before synchronizing
 * must not give its block away while the copy is pending either. */
static void test_download_released_before_synchronize(void **state) {
  cuv_buffer_t *flag = cuvt_buffer(4), *src = cuvt_buffer(BYTES), *dst = cuvt_buffer(BYTES);
  assert_cuv_ok(cuv_sync(cuv_memset8(src, 0, 0xAA, BYTES), NULL));
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  cuv_output_t out;
  assert_cuv_ok(cuv_enqueue_on(stream, cuv_seq(slow(flag), cuv_download(src, 0, BYTES)), &out));
  cuv_output_release(&out);
  unsigned char pattern[BYTES];
  memset(pattern, 0x55, sizeof pattern);
  cuv_op_t *upload = cuv_memcpy_htod(dst, 0, pattern, BYTES, CUV_COPY_STAGE);
  assert_cuv_ok(cuv_stream_synchronize(stream));
  assert_cuv_ok(cuv_sync(upload, NULL));
  unsigned char got[BYTES];
  cuvt_read(got, dst, 0, BYTES);
  assert_int_equal(got[0], 0x55);
  assert_int_equal(got[BYTES - 1], 0x55);
  cuv_stream_destroy(stream);
  cuv_buffer_unref(flag);
  cuv_buffer_unref(src);
  cuv_buffer_unref(dst);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stream_destroyed_with_enqueued_work),
      cmocka_unit_test(test_download_dropped_by_seq),
      cmocka_unit_test(test_download_dropped_by_failure),
      cmocka_unit_test(test_download_released_before_synchronize),
  };
  return cuvt_run(tests);
}
