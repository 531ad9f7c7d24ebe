/* A submitter thread whose driver call blocks (lib/engine.c, park and watch): the jobs pushed
 * behind it, one at a time, are claimed by another submitter, although the blocked thread counts
 * as busy (back soon) and a push behind a busy thread wakes nobody once a parked thread keeps
 * watch. A custom op whose execute waits for the test stands for the blocked call (a launch
 * behind a full launch queue, on the GPU): it returns only after every job behind it ran, so
 * before the watch those jobs waited for it, and the test's watchdog fired.
 * Run with the engine forced (CUV_SUBMIT_INLINE=never): every job goes through the ring.
 * Callbacks and execute only record; the test thread asserts. */
#include <stdatomic.h>

#include "counted.h"

#define BEHIND 20 /* jobs pushed behind the blocked one, each after the previous one's callback */
#define WORDS 256

typedef struct blocked {
  atomic_int started;  /* execute began */
  atomic_int released; /* the test let it return */
  atomic_int gave_up;  /* its watchdog fired: the jobs behind it never ran */
} blocked_t;

static int blocked_execute(cuv_custom_ctx_t *ctx, cuv_output_t *out, void *arg) {
  (void)ctx;
  (void)out;
  blocked_t *b = arg;
  atomic_store(&b->started, 1);
  if (!cuvt_wait_flag(&b->released))
    atomic_store(&b->gave_up, 1);
  return 0;
}

static void counted_done(int status, cuv_output_t *out, void *arg) {
  (void)out;
  cuvt_seen_t *seen = arg;
  seen->calls++;
  seen->status = status;
}

static void test_jobs_behind_a_blocked_submitter_run(void **state) {
  (void)state;
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_stream_t *blocked_stream = NULL, *other = NULL;
  assert_cuv_ok(cuv_stream_create(&blocked_stream, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&other, cuvt_device()));

  blocked_t b = {0};
  cuvt_seen_t blocked_seen = {0};
  cuv_submit_opts_t on_blocked = {.stream = blocked_stream, .flags = CUV_SUBMIT_NO_SPIN};
  assert_cuv_ok(cuv_submit(q, cuv_custom(blocked_execute, &b, NULL, NULL, 0), counted_done,
                           &blocked_seen, &on_blocked));
  assert_true(cuvt_wait_flag(&b.started));

  /* One job at a time: each finds the blocked thread busy and nothing else queued. */
  cuv_buffer_t *bufs[BEHIND];
  unsigned values[BEHIND];
  cuvt_seen_t seen[BEHIND] = {0};
  atomic_int calls = 0;
  cuv_submit_opts_t on_other = {.stream = other, .flags = CUV_SUBMIT_NO_SPIN};
  for (int i = 0; i < BEHIND; i++) {
    bufs[i] = cuvt_buffer(WORDS * 4);
    values[i] = cuvt_nonzero_u32();
    assert_cuv_ok(cuv_submit(q, cuvt_fill_u32(bufs[i], WORDS, values[i]), counted_done, &seen[i],
                             &on_other));
    while (seen[i].calls == 0 && !atomic_load(&b.gave_up)) {
      int rc = cuv_queue_wait(q, 100);
      assert_true(rc == 0 || rc == CUV_EBUSY);
      cuv_queue_drain(q);
    }
    assert_false(atomic_load(&b.gave_up)); /* job i waited for the blocked thread */
    atomic_fetch_add(&calls, 1);
  }
  assert_int_equal(blocked_seen.calls, 0); /* it was still blocked all along */
  atomic_store(&b.released, 1);
  cuvt_drain_until_retired(q);

  assert_int_equal(blocked_seen.calls, 1);
  assert_int_equal(blocked_seen.status, 0);
  assert_int_equal(atomic_load(&calls), BEHIND);
  uint32_t want[WORDS];
  for (int i = 0; i < BEHIND; i++) {
    assert_int_equal(seen[i].calls, 1);
    assert_int_equal(seen[i].status, 0);
    for (int w = 0; w < WORDS; w++)
      want[w] = values[i];
    cuvt_expect_words(bufs[i], want, WORDS);
    cuv_buffer_unref(bufs[i]);
  }
  cuv_stream_destroy(blocked_stream);
  cuv_stream_destroy(other);
  assert_cuv_ok(cuv_queue_destroy(q));
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_jobs_behind_a_blocked_submitter_run),
  };
  return cuvt_run(tests);
}
