/* The execution lock: executing an op from inside a then or with_context callback returns
 * CUV_EREENTRANT (and consumes the op) instead of racing streams or deadlocking; inside
 * cuv_then_unchecked it works. Callbacks record what they saw; the test thread asserts. */
#include "counted.h"

typedef struct inner_call {
  atomic_int calls;
  atomic_int releases; /* of the ops the callback tried to execute */
  int rc[4];
  int payload;
  cuv_buffer_t *buf;
  unsigned value;
} inner_call_t;

/* Tries each executor once from inside the callback. */
static void try_every_executor(inner_call_t *c) {
  cuv_stream_t *stream = NULL;
  cuv_policy_t *policy = NULL;
  cuv_device_policy(cuvt_device(), &policy);
  cuv_policy_next_stream(policy, NULL, &stream);
  cuv_output_t out = {0};
  c->rc[0] = cuv_sync(cuvt_counted_value(1, &c->releases), &out);
  c->rc[1] = cuv_sync_on(stream, cuvt_counted_value(2, &c->releases), &out);
  c->rc[2] = cuv_sync_policy(policy, cuvt_counted_value(3, &c->releases), &out);
  c->rc[3] = cuv_enqueue_on(stream, cuvt_counted_value(4, &c->releases), &out);
  cuv_output_release(&out);
}

static void assert_all_refused(inner_call_t *c) {
  assert_int_equal(atomic_load(&c->calls), 1);
  for (int i = 0; i < 4; i++)
    assert_int_equal(c->rc[i], CUV_EREENTRANT);
  assert_int_equal(atomic_load(&c->releases), 4); /* each refused op was consumed */
}

static cuv_op_t *executes_inside_then(cuv_output_t *input, void *arg) {
  inner_call_t *c = arg;
  atomic_fetch_add(&c->calls, 1);
  try_every_executor(c);
  return cuv_value(NULL, NULL);
}

static void test_sync_inside_then_is_refused(void **state) {
  inner_call_t c = {0};
  assert_cuv_ok(cuv_sync(cuv_then(cuv_value(NULL, NULL), executes_inside_then, &c), NULL));
  assert_all_refused(&c);
  /* The lock went with the callback: this thread executes again. */
  assert_cuv_ok(cuv_sync(cuv_value(NULL, NULL), NULL));
}

static cuv_op_t *executes_inside_context(cuv_stream_t *stream, void *arg) {
  inner_call_t *c = arg;
  atomic_fetch_add(&c->calls, 1);
  try_every_executor(c);
  return cuv_value(NULL, NULL);
}

static void test_sync_inside_with_context_is_refused(void **state) {
  inner_call_t c = {0};
  assert_cuv_ok(cuv_sync(cuv_with_context(executes_inside_context, &c, NULL), NULL));
  assert_all_refused(&c);
  assert_cuv_ok(cuv_sync(cuv_value(NULL, NULL), NULL));
}

/* Unchecked: a nested cuv_sync runs to completion (it waits for its own work only, so the outer
 * submission's pending work does not block it). */
static cuv_op_t *syncs_inside_unchecked(cuv_output_t *input, void *arg) {
  inner_call_t *c = arg;
  atomic_fetch_add(&c->calls, 1);
  cuv_output_t out = {0};
  c->rc[0] = cuv_sync(cuv_seq(cuvt_fill_u32(c->buf, 1, c->value), cuv_download(c->buf, 0, 4)),
                      &out);
  c->payload = c->rc[0] == 0 ? *(int *)out.data : 0;
  cuv_output_release(&out);
  return cuv_value(NULL, NULL);
}

static int executes_inside_map(cuv_output_t *value, void *arg) {
  inner_call_t *c = arg;
  atomic_fetch_add(&c->calls, 1);
  try_every_executor(c);
  return 0;
}

/* map runs under the lock like then (the seed's host combinators never execute ops). */
static void test_sync_inside_map_is_refused(void **state) {
  inner_call_t c = {0};
  assert_cuv_ok(cuv_sync(cuv_map(cuv_value(NULL, NULL), executes_inside_map, &c), NULL));
  assert_all_refused(&c);
  assert_cuv_ok(cuv_sync(cuv_value(NULL, NULL), NULL));
}

static void test_sync_inside_then_unchecked_works(void **state) {
  inner_call_t c = {.buf = cuvt_buffer(4), .value = cuvt_nonzero_u32()};
  assert_cuv_ok(cuv_sync(cuv_then_unchecked(cuv_value(NULL, NULL), syncs_inside_unchecked, &c),
                         NULL));
  assert_int_equal(atomic_load(&c.calls), 1);
  assert_cuv_ok(c.rc[0]);
  assert_int_equal((unsigned)c.payload, c.value);
  cuv_buffer_unref(c.buf);
}

/* Unchecked outside, checked inside: the inner then is locked, and leaving it unlocks again. */
static cuv_op_t *checked_inner(cuv_output_t *input, void *arg) {
  inner_call_t *c = arg;
  c->rc[1] = cuv_sync(cuvt_counted_value(5, &c->releases), NULL);
  return cuv_value(NULL, NULL);
}

static cuv_op_t *unchecked_outer(cuv_output_t *input, void *arg) {
  inner_call_t *c = arg;
  atomic_fetch_add(&c->calls, 1);
  c->rc[0] = cuv_sync(cuv_then(cuv_value(NULL, NULL), checked_inner, c), NULL);
  c->rc[2] = cuv_sync(cuvt_counted_value(6, &c->releases), NULL); /* unlocked again */
  return cuv_value(NULL, NULL);
}

static void test_nested_lock_depth(void **state) {
  inner_call_t c = {0};
  assert_cuv_ok(cuv_sync(cuv_then_unchecked(cuv_value(NULL, NULL), unchecked_outer, &c), NULL));
  assert_int_equal(atomic_load(&c.calls), 1);
  assert_cuv_ok(c.rc[0]);
  assert_int_equal(c.rc[1], CUV_EREENTRANT);
  assert_cuv_ok(c.rc[2]);
  assert_int_equal(atomic_load(&c.releases), 2);
}

/* A clone executed inside its own shared op's producer would wait for itself: refused. */
typedef struct self_clone {
  cuv_shared_t *sh;
  atomic_int calls;
  int rc;
} self_clone_t;

static cuv_op_t *clone_inside_producer(cuv_output_t *input, void *arg) {
  self_clone_t *s = arg;
  atomic_fetch_add(&s->calls, 1);
  s->rc = cuv_sync(cuv_shared_clone(s->sh), NULL);
  return cuv_value(NULL, NULL);
}

static void test_shared_clone_inside_its_producer(void **state) {
  self_clone_t s = {0};
  s.sh = cuv_shared(cuv_then_unchecked(cuv_value(NULL, NULL), clone_inside_producer, &s));
  assert_cuv_ok(cuv_sync(cuv_shared_clone(s.sh), NULL));
  assert_int_equal(atomic_load(&s.calls), 1);
  assert_int_equal(s.rc, CUV_EREENTRANT);
  assert_int_equal(cuv_shared_runs(s.sh), 1);
  cuv_shared_unref(s.sh);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sync_inside_then_is_refused),
      cmocka_unit_test(test_sync_inside_with_context_is_refused),
      cmocka_unit_test(test_sync_inside_map_is_refused),
      cmocka_unit_test(test_sync_inside_then_unchecked_works),
      cmocka_unit_test(test_nested_lock_depth),
      cmocka_unit_test(test_shared_clone_inside_its_producer),
  };
  return cuvt_run(tests);
}
