/* Handles and outputs dropped while the GPU still works on what they name (regressions of bugs
 * found while fuzzing, fuzz/README.md). Dropping a reference early must never free or reuse
 * memory the GPU may still use, and must never keep anything alive for good. */
#include "counted.h"

#define SLOW_MS 60

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
  assert_cuv_ok(cuv_enqueue_on(slow(flag), stream, NULL));
  cuv_stream_destroy(stream);
  cuv_stats(&after);
  assert_int_equal(after.in_flight, before.in_flight);
  assert_int_equal(after.completed, before.completed + 1);
  unsigned value = 0;
  cuvt_read(&value, flag, 0, sizeof value);
  assert_int_equal(value, 1); /* the work had finished */
  cuv_buffer_unref(flag);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stream_destroyed_with_enqueued_work),
  };
  return cuvt_run(tests);
}
