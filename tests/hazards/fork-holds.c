/* A fork branch that runs on another stream of the policy is part of the submission: the stream
 * is held and counted in flight (cuv_stream_in_flight, which least-loaded policies read) until
 * the whole submission is proven complete, exactly like the executing stream. A gate
 * (tests/gate.h) keeps the branch running while the counts are looked at, so nothing here
 * depends on timing; the same fork runs through a round-robin and a least-loaded policy. */
#include "gate.h"

enum { STREAMS = 2 };

typedef int (*pool_fn)(cuv_policy_t **, cuv_device_t *, unsigned);

static void fork_counts_branch_stream(pool_fn make) {
  cuvt_gate_t g;
  cuvt_gate_init(&g);
  cuv_policy_t *p;
  assert_cuv_ok(make(&p, cuvt_device(), STREAMS));
  /* The policy's streams, in turn (nothing is in flight: least-loaded ties rotate the same way);
   * after STREAMS picks the rotation is back where it started. */
  cuv_stream_t *s[STREAMS];
  for (int i = 0; i < STREAMS; i++)
    assert_cuv_ok(cuv_policy_next_stream(p, NULL, &s[i]));
  assert_ptr_not_equal(s[0], s[1]);

  enum { N = 1000 };
  float host[N], want[N];
  cuvt_random_ints(host, N);
  for (size_t i = 0; i < N; i++)
    want[i] = host[i] + 1.0f;
  cuv_buffer_t *buf = cuvt_buffer_of(host, N);

  /* Branch 0 on the executing stream, branch 1 (the gated one) on the other stream. */
  cuv_op_t *branches[] = {cuvt_add_one(buf, N), cuvt_gate_wait(&g)};
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuvt_seen_t seen = {0};
  cuv_submit_opts_t opts = {.policy = p, .flags = CUV_SUBMIT_NO_SPIN};
  assert_cuv_ok(cuv_submit(q, cuv_fork(branches, 2), cuvt_record_seen, &seen, &opts));

  /* Both streams carry the one submission while the branch is held. */
  assert_int_equal(cuv_stream_in_flight(s[0]), 1);
  assert_int_equal(cuv_stream_in_flight(s[1]), 1);
  if (make == cuv_policy_least_loaded) {
    /* Equal loads: the choice rotates over both, as with nothing in flight. */
    cuv_stream_t *next[STREAMS];
    for (int i = 0; i < STREAMS; i++)
      assert_cuv_ok(cuv_policy_next_stream(p, NULL, &next[i]));
    assert_ptr_not_equal(next[0], next[1]);
  }
  /* Dropping the policy (its references on both streams) leaves them to the submission. */
  cuv_policy_destroy(p);
  assert_int_equal(cuv_stream_in_flight(s[0]), 1);
  assert_int_equal(cuv_stream_in_flight(s[1]), 1);

  cuvt_gate_open(&g);
  for (int spins = 0; seen.calls < 1; spins++) { /* the callback runs in this drain */
    int rc = cuv_queue_wait(q, 1000);
    assert_true(rc == 0 || rc == CUV_EBUSY);
    cuv_queue_drain(q);
    if (spins > 120) /* a watchdog, not a timing assertion */
      fail_msg("the fork's callback did not arrive");
  }
  assert_int_equal(seen.calls, 1);
  assert_cuv_ok(seen.status);
  assert_int_equal(cuvt_stats().in_flight, 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  float got[N];
  cuvt_read(got, buf, 0, sizeof got);
  cuvt_assert_floats_equal(got, want, N);
  cuv_buffer_unref(buf);
  cuvt_gate_close(&g);
}

static void test_round_robin_fork(void **state) {
  fork_counts_branch_stream(cuv_policy_round_robin);
}

static void test_least_loaded_fork(void **state) {
  fork_counts_branch_stream(cuv_policy_least_loaded);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_robin_fork),
      cmocka_unit_test(test_least_loaded_fork),
  };
  return cuvt_run(tests);
}
