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
    assert_cuv_ok(cuv_submit(q, cuvt_sleep(10), count_done, &calls, &opts));
    for (int i = 1; i < BATCH; i++)
      assert_cuv_ok(cuv_submit(q, cuv_value(NULL, NULL), count_done, &calls, &opts));
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
    assert_cuv_ok(cuv_submit(q, cuv_value(NULL, NULL), count_done, &calls, &opts));
    drains_with_work += drain_all(q, &calls, before + 1);
    assert_int_equal(atomic_load(&hook.notifies), drains_with_work);
  }
  assert_int_equal(atomic_load(&calls), 3 * BATCH + 4);
  assert_int_equal(atomic_load(&hook.wrong_queue), 0);
  assert_cuv_ok(cuv_stream_synchronize(s));
  cuv_stream_destroy(s);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* Finished submissions wait in the list in the order they finished, and one drain runs their
 * callbacks in that order (cuv_submit's contract). Each submission is made only once the one
 * before was claimed, so the finishing order is the submission order, whatever the stream or the
 * slot: with CUV_SUBMIT_NO_SPIN every submission is completed by the reactor thread, which pushes
 * one submission (under its scan lock) before it claims the next; and each starts with a 2 ms
 * kernel, so even a completion taking another path could not overtake the push before it. None
 * is drained until all were claimed: the first drain holds them all (or all but a last one still
 * being pushed), and a list that ran them newest first would show here. */
#define ORDERED 6

typedef struct order {
  int payloads[ORDERED];
  atomic_int calls;
} order_t;

static void record_order(int status, cuv_output_t *output, void *arg) {
  order_t *o = arg;
  int i = atomic_fetch_add(&o->calls, 1);
  if (i < ORDERED)
    o->payloads[i] = status == 0 ? cuvt_payload(output) : status;
}

static void test_drain_runs_in_finishing_order(void **state) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  cuv_submit_opts_t opts = {.stream = s, .flags = CUV_SUBMIT_NO_SPIN};
  order_t o = {0};
  atomic_int releases = 0;
  for (int i = 0; i < ORDERED; i++) {
    uint64_t base = claimed();
    assert_cuv_ok(cuv_submit(q, cuv_seq(cuvt_sleep(2), cuvt_counted_value(i, &releases)),
                             record_order, &o, &opts));
    wait_claimed(base + 1);
  }
  assert_int_equal(atomic_load(&o.calls), 0); /* nothing runs before a drain */
  assert_cuv_ok(cuv_queue_wait(q, -1));
  int first = cuv_queue_drain(q);
  print_message("# the first drain ran %d of %d\n", first, ORDERED);
  assert_true(first >= ORDERED - 1);
  cuvt_drain_until(q, &o.calls, ORDERED);
  assert_int_equal(atomic_load(&o.calls), ORDERED);
  for (int i = 0; i < ORDERED; i++) {
    if (o.payloads[i] != i)
      print_error("callback %d ran for submission %d\n", i, o.payloads[i]);
    assert_int_equal(o.payloads[i], i);
  }
  assert_int_equal(atomic_load(&releases), ORDERED); /* each output released once */
  assert_cuv_ok(cuv_stream_synchronize(s));
  cuv_stream_destroy(s);
  assert_cuv_ok(cuv_queue_destroy(q));
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_notify_per_transition),
      cmocka_unit_test(test_drain_runs_in_finishing_order),
  };
  return cuvt_run(tests);
}
