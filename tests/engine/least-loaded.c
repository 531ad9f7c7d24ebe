/* cuv_policy_least_loaded (lib/policy.c): the stream with the fewest submissions in flight, and
 * among streams of equal load the first one in scan order from where round-robin would start, so
 * ties rotate over the pool (each call advances the start by one). A submission counts in flight
 * from its execution until it is retired, which for cuv_submit is when its queue is drained, so
 * the tests set loads exactly by submitting and not draining: nothing here depends on when the
 * GPU finishes. */
#include "counted.h"

#define POOL 4

typedef struct done_count {
  atomic_int calls;
  atomic_int failures;
} done_count_t;

static void count_done(int status, cuv_output_t *output, void *arg) {
  done_count_t *d = arg;
  if (status != 0)
    atomic_fetch_add(&d->failures, 1);
  atomic_fetch_add(&d->calls, 1);
}

/* The pool's scan order as idle picks give it: order[j] is the pick j calls after this one. */
static void learn_order(cuv_policy_t *policy, cuv_stream_t **order) {
  for (int j = 0; j < POOL; j++) {
    assert_cuv_ok(cuv_policy_next_stream(policy, NULL, &order[j]));
    assert_int_equal(cuv_stream_in_flight(order[j]), 0);
    for (int k = 0; k < j; k++)
      assert_ptr_not_equal(order[k], order[j]); /* a tie goes round, not to one stream */
  }
}

/* Idle streams tie: the picks go round the pool in one fixed order, each stream once per round. */
static void test_ties_rotate_over_the_pool(void **state) {
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_policy_least_loaded(&policy, cuvt_device(), POOL));
  cuv_stream_t *order[POOL];
  learn_order(policy, order);
  for (int m = 0; m < 3 * POOL; m++) {
    cuv_stream_t *s;
    assert_cuv_ok(cuv_policy_next_stream(policy, NULL, &s));
    assert_ptr_equal(s, order[m % POOL]);
  }
  cuv_policy_destroy(policy);
}

/* With one stream busy, the pick that would have landed on it takes the next stream in scan
 * order (the first of the tied idle ones from there), the others are unchanged; once the busy
 * stream is drained, the rotation is the plain one again. */
static void test_busy_stream_passes_its_turn_on(void **state) {
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_policy_least_loaded(&policy, cuvt_device(), POOL));
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_stream_t *order[POOL];
  learn_order(policy, order);
  done_count_t done = {0};
  cuv_submit_opts_t on_busy = {.stream = order[1]}; /* a stream, not the policy: no pick */
  assert_cuv_ok(cuv_submit(q, cuvt_sleep(1), count_done, &done, &on_busy));
  assert_int_equal(cuv_stream_in_flight(order[1]), 1); /* until drained */
  for (int m = 0; m < 2 * POOL; m++) {
    cuv_stream_t *s;
    assert_cuv_ok(cuv_policy_next_stream(policy, NULL, &s));
    assert_ptr_equal(s, order[m % POOL == 1 ? 2 : m % POOL]);
  }
  cuvt_drain_until(q, &done.calls, 1);
  assert_int_equal(atomic_load(&done.failures), 0);
  assert_int_equal(cuv_stream_in_flight(order[1]), 0);
  for (int m = 0; m < POOL; m++) {
    cuv_stream_t *s;
    assert_cuv_ok(cuv_policy_next_stream(policy, NULL, &s));
    assert_ptr_equal(s, order[m]);
  }
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_policy_destroy(policy);
}

/* Submissions through the policy spread evenly: from loads (3, 0, 0, 0), nine more make every
 * stream carry exactly 3; one more goes to the stream whose turn it is. Every callback runs
 * once. */
static void test_submissions_spread_by_load(void **state) {
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_policy_least_loaded(&policy, cuvt_device(), POOL));
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_stream_t *order[POOL];
  learn_order(policy, order);
  done_count_t done = {0};
  cuv_submit_opts_t on_first = {.stream = order[0]};
  for (int i = 0; i < 3; i++)
    assert_cuv_ok(cuv_submit(q, cuv_value(NULL, NULL), count_done, &done, &on_first));
  cuv_submit_opts_t through = {.policy = policy};
  for (int i = 0; i < 9; i++)
    assert_cuv_ok(cuv_submit(q, cuv_value(NULL, NULL), count_done, &done, &through));
  for (int j = 0; j < POOL; j++)
    assert_int_equal(cuv_stream_in_flight(order[j]), 3);
  /* Picks so far: POOL to learn, 9 submissions: the next scan starts at order[9 % POOL]. */
  assert_cuv_ok(cuv_submit(q, cuv_value(NULL, NULL), count_done, &done, &through));
  for (int j = 0; j < POOL; j++)
    assert_int_equal(cuv_stream_in_flight(order[j]), j == 9 % POOL ? 4 : 3);
  cuvt_drain_until(q, &done.calls, 13);
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_int_equal(atomic_load(&done.calls), 13);
  assert_int_equal(atomic_load(&done.failures), 0);
  for (int j = 0; j < POOL; j++)
    assert_int_equal(cuv_stream_in_flight(order[j]), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_policy_destroy(policy);
}

/* A pool of one: every pick is its stream, loaded or not. */
static void test_pool_of_one(void **state) {
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_policy_least_loaded(&policy, cuvt_device(), 1));
  cuv_stream_t *only, *s;
  assert_cuv_ok(cuv_policy_next_stream(policy, NULL, &only));
  assert_cuv_ok(cuv_enqueue_on(only, cuv_value(NULL, NULL), NULL));
  assert_cuv_ok(cuv_policy_next_stream(policy, NULL, &s));
  assert_ptr_equal(s, only);
  assert_cuv_ok(cuv_stream_synchronize(only));
  cuv_policy_destroy(policy);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ties_rotate_over_the_pool),
      cmocka_unit_test(test_busy_stream_passes_its_turn_on),
      cmocka_unit_test(test_submissions_spread_by_load),
      cmocka_unit_test(test_pool_of_one),
  };
  return cuvt_run(tests);
}
