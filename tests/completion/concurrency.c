/* Work cuv puts on different streams really runs at the same time, proven with data, never with
 * timing: a wait_flag kernel (tests/kernels/test_kernels.cu) spins on a device flag until a
 * set_flag kernel on another stream writes it, and reports whether it saw the value or gave up
 * after its bound. The waiter is always enqueued before its setter, so if cuv put both on one
 * stream (or ordered one after the other with an event) the waiter would run alone and report a
 * time-out. The flag buffers are CUV_HAZARD_NONE: the kernels synchronize through them on
 * purpose, and hazard ordering of the setter after the reader would serialize them just the same.
 * tests/engine/conformance.c's test_streams_run_concurrently shows the driver (the simulator too)
 * runs streams concurrently; these show that cuv hands them the work so that it can. */
#include <stdatomic.h>

#include "counted.h"

/* What wait_flag writes to its result word. */
enum { FLAG_SEEN = 1, FLAG_TIMED_OUT = 2 };
/* The waiter's bound: keeps a serialized run from hanging, asserted on never. */
static const unsigned long long flag_timeout_ns = 5000000000ull; /* 5 s */

/* wait_flag on flags[k] for `value`, result into results[k]. */
static cuv_op_t *wait_op(cuv_buffer_t *flags, cuv_buffer_t *results, size_t k, unsigned value) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(flag_timeout_ns), CUV_ARG_VALUE(value),
                      CUV_ARG_READ_AT(flags, k * sizeof(unsigned)),
                      CUV_ARG_WRITE_AT(results, k * sizeof(unsigned))};
  return cuv_launch(cuvt_kernel("wait_flag"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 4);
}

static cuv_op_t *set_op(cuv_buffer_t *flags, size_t k, unsigned value) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(value),
                      CUV_ARG_WRITE_AT(flags, k * sizeof(unsigned))};
  return cuv_launch(cuvt_kernel("set_flag"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 2);
}

/* An untracked buffer of n words, zeroed. */
static cuv_buffer_t *words(size_t n) {
  cuv_buffer_t *buf = cuvt_buffer(n * sizeof(unsigned));
  assert_cuv_ok(cuv_buffer_set_hazard_mode(buf, CUV_HAZARD_NONE));
  assert_cuv_ok(cuv_sync(cuv_memset32(buf, 0, 0, n), NULL));
  return buf;
}

static void assert_seen(const unsigned *results, size_t n) {
  for (size_t k = 0; k < n; k++) {
    if (results[k] != FLAG_SEEN)
      print_error("waiter %zu: %s\n", k,
                  results[k] == FLAG_TIMED_OUT ? "timed out: its setter did not run beside it"
                                               : "did not run");
    assert_int_equal(results[k], FLAG_SEEN);
  }
}

/* cuv_fork over a policy of four streams: branch 0 waits for flag 0; branch k (1, 2) is a zip
 * that waits for flag k, then sets flag k-1; branch 3 sets flag 2. Branch 0 sees its flag only
 * while branches 0, 1 and 2 all run at once beside branch 3, so every branch must be on a stream
 * of its own and none may wait for another (a branch ordered after the executing stream's work,
 * branch 0 included, makes a waiter time out). A download behind the fork returns the results:
 * the join orders it after every branch. */
static void test_fork_branches_overlap(void **state) {
  enum { BRANCHES = 4, WAITERS = BRANCHES - 1 };
  cuv_buffer_t *flags = words(WAITERS), *results = words(WAITERS);
  unsigned values[WAITERS];
  for (size_t k = 0; k < WAITERS; k++)
    values[k] = cuvt_nonzero_u32();
  cuv_policy_t *policy = NULL;
  assert_cuv_ok(cuv_policy_round_robin(&policy, cuvt_device(), BRANCHES));

  cuv_op_t *branches[BRANCHES];
  for (size_t k = 0; k < BRANCHES; k++) {
    cuv_op_t *steps[2];
    size_t n = 0;
    if (k < WAITERS)
      steps[n++] = wait_op(flags, results, k, values[k]);
    if (k > 0)
      steps[n++] = set_op(flags, k - 1, values[k - 1]);
    branches[k] = n == 1 ? steps[0] : cuv_zip(steps, n);
  }
  cuv_op_t *op = cuv_seq(cuv_fork(branches, BRANCHES),
                         cuv_zip((cuv_op_t *[]){cuv_download(results, 0, WAITERS * 4),
                                                cuv_download(flags, 0, WAITERS * 4)},
                                 2));
  cuv_output_t out = {0};
  assert_cuv_ok(cuv_sync_policy(policy, op, &out));

  const unsigned *got = cuv_tuple_get(&out, 0)->data;
  const unsigned *flags_after = cuv_tuple_get(&out, 1)->data;
  assert_seen(got, WAITERS);
  for (size_t k = 0; k < WAITERS; k++)
    assert_int_equal(flags_after[k], values[k]);
  cuv_output_release(&out);
  cuv_policy_destroy(policy);
  cuv_buffer_unref(flags);
  cuv_buffer_unref(results);
}

/* What a done callback saw: recorded on the draining thread (this one), asserted after. */
typedef struct seen {
  int calls;
  int status;
  unsigned result; /* the downloaded result word, when the output had one */
} seen_t;

static void record_waiter(int status, cuv_output_t *output, void *arg) {
  seen_t *s = arg;
  s->calls++;
  s->status = status;
  s->result = status == 0 && output && output->data ? *(const unsigned *)output->data : 0;
}

static void record_setter(int status, cuv_output_t *output, void *arg) {
  seen_t *s = arg;
  s->calls++;
  s->status = status;
}

/* Two cuv_submit calls through one round-robin policy of two streams: the first waits for a flag
 * (and downloads its result), the second sets it. They complete only if the policy gave them
 * different streams and nothing ordered the second after the first. Repeated with fresh values,
 * each round on its own flag, every callback counted. */
static void test_submits_overlap(void **state) {
  enum { ROUNDS = 4 };
  cuv_buffer_t *flags = words(ROUNDS), *results = words(ROUNDS);
  cuv_policy_t *policy = NULL;
  assert_cuv_ok(cuv_policy_round_robin(&policy, cuvt_device(), 2));
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  seen_t waiter[ROUNDS] = {{0}}, setter[ROUNDS] = {{0}};
  int calls = 0;

  for (size_t r = 0; r < ROUNDS; r++) {
    unsigned value = cuvt_nonzero_u32();
    cuv_submit_opts_t opts = {.policy = policy};
    cuv_op_t *wait = cuv_seq(wait_op(flags, results, r, value),
                             cuv_download(results, r * sizeof(unsigned), sizeof(unsigned)));
    assert_cuv_ok(cuv_submit(q, wait, record_waiter, &waiter[r], &opts));
    assert_cuv_ok(cuv_submit(q, set_op(flags, r, value), record_setter, &setter[r], &opts));
    while (waiter[r].calls + setter[r].calls < 2) {
      int rc = cuv_queue_wait(q, 10000);
      assert_true(rc == 0 || rc == CUV_EBUSY);
      calls += cuv_queue_drain(q);
    }
    assert_int_equal(waiter[r].calls, 1);
    assert_int_equal(setter[r].calls, 1);
    assert_cuv_ok(waiter[r].status);
    assert_cuv_ok(setter[r].status);
    assert_seen(&waiter[r].result, 1);
  }
  assert_int_equal(calls, 2 * ROUNDS);
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_int_equal(cuv_queue_pending(q), 0);
  for (size_t r = 0; r < ROUNDS; r++) {
    assert_int_equal(waiter[r].calls, 1);
    assert_int_equal(setter[r].calls, 1);
  }
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_policy_destroy(policy);
  cuv_buffer_unref(flags);
  cuv_buffer_unref(results);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fork_branches_overlap),
      cmocka_unit_test(test_submits_overlap),
  };
  return cuvt_run(tests);
}
