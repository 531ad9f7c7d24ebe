/* cuv_queue's notify hook (lib/queue.c): called once per empty-to-non-empty transition of the
 * queue's finished list, never while it is non-empty, whatever the number of completions that
 * pile up before a drain. Counted with a hook across batches (fill, drain, fill again):
 * - after a batch's completions were all claimed (cuv_stats' per-path counters, which
 *   lib/completion.c bumps just before pushing, on the one reactor thread that pushes them in
 *   turn) and one is visible (cuv_queue_wait), exactly one notify happened since the last drain;
 * - over the whole run, notifies equal the drains that found work: each such drain emptied the
 *   list, and the first completion after it is the one transition that notifies. That holds
 *   whatever the timing, so the test never depends on it. */
#include <time.h>

#include "counted.h"

#define BATCH 6

typedef struct hook {
  atomic_int notifies;
  cuv_queue_t *queue; /* the queue the hook must be called with */
  atomic_int wrong_queue;
} hook_t;

static void on_notify(cuv_queue_t *queue, void *arg) {
  hook_t *h = arg;
  if (queue != h->queue)
    atomic_fetch_add(&h->wrong_queue, 1);
  atomic_fetch_add(&h->notifies, 1);
}

static void count_done(int status, cuv_output_t *output, void *arg) {
  if (status == 0)
    atomic_fetch_add((atomic_int *)arg, 1);
}

/* Completions claimed by any path so far. */
static uint64_t claimed(void) {
  cuv_stats_t s = cuvt_stats();
  return s.completed_spin + s.completed_reactor + s.completed_hostfn + s.completed_sync;
}

static void sleep_ms(unsigned ms) {
  struct timespec t = {0, (long)ms * 1000000L};
  nanosleep(&t, NULL);
}

/* Waits (a watchdog, never an assertion on time) until `want` completions were claimed. */
static void wait_claimed(uint64_t want) {
  for (int i = 0; claimed() < want; i++) {
    if (i > 60000)
      fail_msg("completions not claimed: %llu of %llu", (unsigned long long)claimed(),
               (unsigned long long)want);
    sleep_ms(1);
  }
}

/* Drains until `want` callbacks ran in all; returns how many drains found work. */
static int drain_all(cuv_queue_t *q, atomic_int *calls, int want) {
  int with_work = 0;
  for (int spins = 0; atomic_load(calls) < want; spins++) {
    int rc = cuv_queue_wait(q, 1000);
    assert_true(rc == 0 || rc == CUV_EBUSY);
    int ran = cuv_queue_drain(q);
    assert_true(ran >= 0);
    with_work += ran > 0;
    if (spins > 120)
      fail_msg("callbacks did not arrive: %d of %d", atomic_load(calls), want);
  }
  return with_work;
}

static void test_one_notify_per_transition(void **state) {
  hook_t hook = {0};
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, on_notify, &hook));
  hook.queue = q;
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  cuv_submit_opts_t opts = {.stream = s, .flags = CUV_SUBMIT_NO_SPIN};
  atomic_int calls = 0;
  int drains_with_work = 0;
  assert_int_equal(atomic_load(&hook.notifies), 0); /* nothing finished: no notify */
  for (int batch = 0; batch < 3; batch++) {
    int notified = atomic_load(&hook.notifies);
    uint64_t base = claimed();
    /* A slow kernel first, so the batch finishes together behind it. */
    assert_cuv_ok(cuv_submit(cuvt_sleep(10), q, count_done, &calls, &opts));
    for (int i = 1; i < BATCH; i++)
      assert_cuv_ok(cuv_submit(cuv_value(NULL, NULL), q, count_done, &calls, &opts));
    wait_claimed(base + BATCH);
    assert_cuv_ok(cuv_queue_wait(q, -1)); /* at least one is in the list */
    assert_int_equal(atomic_load(&hook.notifies) - notified, 1);
    drains_with_work += drain_all(q, &calls, (batch + 1) * BATCH);
    assert_int_equal(atomic_load(&hook.notifies), drains_with_work);
    assert_int_equal(cuv_queue_drain(q), 0); /* empty now: a drain of nothing notifies nothing */
    assert_int_equal(atomic_load(&hook.notifies), drains_with_work);
  }
  /* One at a time, each drained before the next: one notify each. */
  for (int i = 0; i < 4; i++) {
    int before = atomic_load(&calls);
    assert_cuv_ok(cuv_submit(cuv_value(NULL, NULL), q, count_done, &calls, &opts));
    drains_with_work += drain_all(q, &calls, before + 1);
    assert_int_equal(atomic_load(&hook.notifies), drains_with_work);
  }
  assert_int_equal(atomic_load(&calls), 3 * BATCH + 4);
  assert_int_equal(atomic_load(&hook.wrong_queue), 0);
  assert_cuv_ok(cuv_stream_synchronize(s));
  cuv_stream_destroy(s);
  assert_cuv_ok(cuv_queue_destroy(q));
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_notify_per_transition),
  };
  return cuvt_run(tests);
}
