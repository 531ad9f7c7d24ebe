/* Late writes against reused timeline words. cuv's reactor (lib/reactor.c) completes a
 * submission when its stream's word reached the submission's number, or when the probe finds the
 * stream idle twice while the word lags; the stream, once destroyed, gives its word back to the
 * pool, and the next stream created takes it. If a write lands later than the stream looked idle,
 * it lands on a word that may already belong to another stream: the numbering, which continues
 * from the word's last number instead of starting again, keeps it from completing the new owner's
 * submission before its work (model/timeline.pml checks the protocol). Here the simulator delays
 * every write (cuv_sim_set_write_delay_us) past the probe's two looks, each round runs on a stream
 * of its own, destroyed when its callback came (the pool hands out the word given back last), and
 * each submission is a slow kernel that writes a fresh random value, then a download of it: a
 * submission completed early hands its callback a download that has not happened. The simulator
 * counts late writes that landed while a later write to the same word was queued
 * (cuv_sim_stale_writes), so the test also proves the case it is about really happened. On the
 * GPU (no delay to set) the same workload checks results only. Every callback is counted. */
#include <stdlib.h>

#include "counted.h"

/* The delay exceeds the probe's two looks (about 2 ms apart) and the drain and re-submit that
 * follow, and stays below the next submission's kernel, so an old write lands while the next
 * one's is still queued. Bounds of the scenario, not assertions about time. */
#define WRITE_DELAY_US 30000u
#define KERNEL_MS 60u
/* Rounds until this many stale landings were seen (sim), at most MAX_ROUNDS. */
#define WANT_STALE 3ul
#define MAX_ROUNDS 60
#define GPU_ROUNDS 8

/* The slow writer, then a download of what it wrote. */
static cuv_op_t *slow_write_then_read(cuv_buffer_t *buf, unsigned value) {
  return cuv_seq(cuvt_slow_write(KERNEL_MS, value, buf), cuv_download(buf, 0, sizeof(unsigned)));
}

static void wait_calls(cuv_queue_t *q, const cuvt_seen_t *seen, size_t n) {
  for (;;) {
    int done = 1;
    for (size_t i = 0; i < n; i++)
      done = done && seen[i].calls > 0;
    if (done)
      return;
    int rc = cuv_queue_wait(q, 10000);
    assert_true(rc == 0 || rc == CUV_EBUSY);
    cuv_queue_drain(q);
  }
}

/* One submission at a time on a fresh stream, each submitted as soon as the previous callback ran
 * and its stream was destroyed: the previous one's late write is in flight while the next stream
 * arms the same word. */
static void test_late_writes_on_reused_word(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(sizeof(unsigned));
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuvt_seen_t *seen = calloc(MAX_ROUNDS, sizeof *seen);
  unsigned *want = calloc(MAX_ROUNDS, sizeof *want);
  assert_non_null(seen);
  assert_non_null(want);
  unsigned long stale_before = cuvt_is_sim() ? cuv_sim_stale_writes() : 0;
  cuv_stats_t before;
  cuv_stats(&before);

  size_t rounds = 0;
  while (rounds < (cuvt_is_sim() ? MAX_ROUNDS : GPU_ROUNDS)) {
    want[rounds] = cuvt_nonzero_u32();
    cuv_stream_t *stream;
    assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
    cuv_submit_opts_t opts = {.stream = stream, .flags = CUV_SUBMIT_NO_SPIN};
    assert_cuv_ok(cuv_submit(q, slow_write_then_read(buf, want[rounds]), cuvt_record_seen,
                             &seen[rounds], &opts));
    wait_calls(q, &seen[rounds], 1);
    cuv_stream_destroy(stream); /* its word goes back to the pool, its write still to land */
    rounds++;
    if (cuvt_is_sim() && cuv_sim_stale_writes() - stale_before >= WANT_STALE)
      break;
  }
  /* A callback that came twice would be here by now (the last round's own work is done). */
  assert_int_equal(cuv_queue_drain(q), 0);

  for (size_t r = 0; r < rounds; r++) {
    assert_int_equal(seen[r].calls, 1);
    assert_cuv_ok(seen[r].status);
    if (seen[r].got != want[r])
      print_error("round %zu completed before its kernel wrote: got %u, want %u\n", r,
                  seen[r].got, want[r]);
    assert_int_equal(seen[r].got, want[r]);
  }
  if (cuvt_is_sim()) {
    unsigned long stale = cuv_sim_stale_writes() - stale_before;
    print_message("# %zu rounds, %lu late writes landed on a reused word\n", rounds, stale);
    assert_true(stale >= WANT_STALE); /* else the scenario under test never happened */
  }
  cuv_stats_t after;
  cuv_stats(&after);
  assert_true(after.completed_reactor > before.completed_reactor);
  assert_int_equal(cuv_queue_pending(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  free(seen);
  free(want);
  cuv_buffer_unref(buf);
}

/* Bursts over the four streams of a policy, several submissions on each stream's word at once,
 * while late writes of earlier bursts land. Each writes its own buffer. */
static void test_bursts_mixed_paths(void **state) {
  enum { BURST = 8, BURSTS = 4 };
  cuv_buffer_t *bufs[BURST];
  for (size_t i = 0; i < BURST; i++)
    bufs[i] = cuvt_buffer(sizeof(unsigned));
  cuv_policy_t *policy = NULL;
  assert_cuv_ok(cuv_policy_round_robin(&policy, cuvt_device(), 4));
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));

  for (size_t b = 0; b < BURSTS; b++) {
    cuvt_seen_t seen[BURST] = {{0}};
    unsigned want[BURST];
    for (size_t i = 0; i < BURST; i++) {
      want[i] = cuvt_nonzero_u32();
      cuv_submit_opts_t opts = {.policy = policy};
      assert_cuv_ok(cuv_submit(q, slow_write_then_read(bufs[i], want[i]), cuvt_record_seen,
                               &seen[i], &opts));
    }
    wait_calls(q, seen, BURST);
    for (size_t i = 0; i < BURST; i++) {
      assert_int_equal(seen[i].calls, 1);
      assert_cuv_ok(seen[i].status);
      assert_int_equal(seen[i].got, want[i]);
    }
  }
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_int_equal(cuv_queue_pending(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_policy_destroy(policy);
  for (size_t i = 0; i < BURST; i++)
    cuv_buffer_unref(bufs[i]);
}

int main(void) {
  cuvt_init();
  if (cuvt_is_sim())
    cuv_sim_set_write_delay_us(WRITE_DELAY_US);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_late_writes_on_reused_word),
      cmocka_unit_test(test_bursts_mixed_paths),
  };
  return cuvt_run(tests);
}
