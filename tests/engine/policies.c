/* Scheduling policies: round-robin, single stream (also over a wrapped CUstream), least-loaded,
 * a custom policy through cuv_policy_create, the device default, and the executors that take a
 * policy or a stream (cuv_sync_policy, cuv_enqueue_on + cuv_stream_synchronize). Which stream an
 * op ran on is observed from inside it, with a with_context fn. */
#include "counted.h"

#define N 4000
#define SLOW_MS 20

static cuv_op_t *note_stream(cuv_stream_t *stream, void *arg) {
  *(struct CUstream_st **)arg = cuv_stream_handle(stream);
  return cuv_value(NULL, NULL);
}

/* The CUstream an op executed through `policy` ran on. */
static struct CUstream_st *stream_used(cuv_policy_t *policy) {
  struct CUstream_st *seen = NULL;
  assert_cuv_ok(cuv_sync_policy(policy, cuv_with_context(note_stream, &seen, NULL), NULL));
  assert_non_null(seen);
  return seen;
}

/* saxpy on fresh data through `policy`, checked against the host. */
static void check_saxpy_through(cuv_policy_t *policy) {
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  cuvt_random_ints(x, N);
  cuvt_random_ints(y, N);
  float a = (float)(int)(cuvt_random_u32() % 9) - 4.0f;
  unsigned n = N;
  cuv_buffer_t *dx = cuvt_buffer_of(x, N), *dy = cuvt_buffer_of(y, N);
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_READ(dx), CUV_ARG_RW(dy)};
  cuv_op_t *op = cuv_seq(cuv_launch(cuvt_kernel_ok("saxpy"), CUVT_GRID(N), CUVT_BLOCK, 0, args, 4),
                         cuv_download(dy, 0, N * sizeof *y));
  cuv_output_t out;
  assert_cuv_ok(cuv_sync_policy(policy, op, &out));
  const float *got = out.data;
  for (size_t i = 0; i < N; i++)
    assert_true(got[i] == a * x[i] + y[i]);
  cuv_output_release(&out);
  cuv_buffer_unref(dx);
  cuv_buffer_unref(dy);
  free(x);
  free(y);
}

/* ---- round-robin ---- */

static void assert_cycles_over_four(struct CUstream_st *const *seen) {
  for (int i = 0; i < 4; i++) {
    assert_ptr_equal(seen[i + 4], seen[i]);
    for (int j = 0; j < i; j++)
      assert_ptr_not_equal(seen[i], seen[j]);
  }
}

static void test_round_robin_cycles_over_its_streams(void **state) {
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_policy_round_robin(&policy, cuvt_device(), 4));
  assert_ptr_equal(cuv_policy_device(policy), cuvt_device());
  struct CUstream_st *picked[8], *ran[8];
  for (int i = 0; i < 8; i++) {
    cuv_stream_t *s;
    assert_cuv_ok(cuv_policy_next_stream(policy, NULL, &s));
    assert_ptr_equal(cuv_stream_device(s), cuvt_device());
    picked[i] = cuv_stream_handle(s);
  }
  assert_cycles_over_four(picked);
  for (int i = 0; i < 8; i++)
    ran[i] = stream_used(policy); /* what executors pick is what the policy says */
  assert_cycles_over_four(ran);
  check_saxpy_through(policy);
  cuv_policy_destroy(policy);
}

/* The device's default is a round-robin over four streams, one object per device. */
static void test_device_default_policy(void **state) {
  cuv_policy_t *a, *b;
  assert_cuv_ok(cuv_device_policy(cuvt_device(), &a));
  assert_cuv_ok(cuv_device_policy(cuvt_device(), &b));
  assert_ptr_equal(a, b);
  struct CUstream_st *ran[8];
  for (int i = 0; i < 8; i++)
    ran[i] = stream_used(a);
  assert_cycles_over_four(ran);
  assert_int_equal(cuv_device_policy(NULL, &a), CUV_EINVAL);
}

/* ---- single stream, also an application's own ---- */

static void test_single_stream(void **state) {
  cuv_stream_t *stream;
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  assert_cuv_ok(cuv_policy_single(&policy, stream));
  for (int i = 0; i < 4; i++)
    assert_ptr_equal(stream_used(policy), cuv_stream_handle(stream));
  check_saxpy_through(policy);
  cuv_policy_destroy(policy);
  cuv_stream_destroy(stream);
  assert_int_equal(cuv_policy_single(&policy, NULL), CUV_EINVAL);
}

/* A CUstream cuv did not create (here: created through cuv, then wrapped by its raw handle, as
 * an application would wrap its own or cuBLAS's). cuv uses it and never destroys it. */
static void test_single_wrapped_stream(void **state) {
  cuv_stream_t *owner, *wrapped;
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_stream_create(&owner, cuvt_device()));
  struct CUstream_st *raw = cuv_stream_handle(owner);
  assert_cuv_ok(cuv_stream_wrap(&wrapped, cuvt_device(), raw));
  assert_ptr_equal(cuv_stream_handle(wrapped), raw);
  assert_ptr_equal(cuv_stream_device(wrapped), cuvt_device());
  assert_cuv_ok(cuv_policy_single(&policy, wrapped));
  for (int i = 0; i < 4; i++)
    assert_ptr_equal(stream_used(policy), raw);
  check_saxpy_through(policy);
  cuv_policy_destroy(policy);
  cuv_stream_destroy(wrapped);
  /* The raw stream is still alive: work runs on it through its owner. */
  struct CUstream_st *seen = NULL;
  assert_cuv_ok(cuv_sync_on(owner, cuv_with_context(note_stream, &seen, NULL), NULL));
  assert_ptr_equal(seen, raw);
  assert_cuv_ok(cuv_stream_synchronize(owner));
  cuv_stream_destroy(owner);
}

/* ---- least-loaded ---- */

/* One stream is made busy with enqueue_on work, which stays in flight until the stream is
 * synchronized (cuv reaps it then), so the policy must steer around it. */
static void test_least_loaded_avoids_a_busy_stream(void **state) {
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_policy_least_loaded(&policy, cuvt_device(), 4));
  cuv_stream_t *busy;
  assert_cuv_ok(cuv_policy_next_stream(policy, NULL, &busy));
  assert_int_equal(cuv_stream_in_flight(busy), 0);
  cuv_buffer_t *flag = cuvt_buffer(4);
  unsigned value = cuvt_nonzero_u32();
  assert_cuv_ok(cuv_enqueue_on(busy, cuvt_slow_write(SLOW_MS, value, flag), NULL));
  assert_int_equal(cuv_stream_in_flight(busy), 1);
  for (int i = 0; i < 8; i++) {
    cuv_stream_t *s;
    assert_cuv_ok(cuv_policy_next_stream(policy, NULL, &s));
    assert_ptr_not_equal(s, busy);
    assert_int_equal(cuv_stream_in_flight(s), 0);
  }
  assert_ptr_not_equal(stream_used(policy), cuv_stream_handle(busy));
  assert_cuv_ok(cuv_stream_synchronize(busy));
  assert_int_equal(cuv_stream_in_flight(busy), 0);
  unsigned got = 0;
  cuvt_read(&got, flag, 0, 4);
  assert_int_equal(got, value);
  check_saxpy_through(policy);
  cuv_buffer_unref(flag);
  cuv_policy_destroy(policy);
}

/* ---- a custom policy ---- */

typedef struct custom {
  cuv_stream_t *stream;
  atomic_int picks;
  atomic_int destroyed;
  const cuv_op_t *last_op;
  int fail;        /* next_stream returns this when nonzero */
  bool no_stream;  /* next_stream "succeeds" without a stream */
} custom_t;

static int custom_next(void *state, const cuv_op_t *op, cuv_stream_t **out) {
  custom_t *c = state;
  atomic_fetch_add(&c->picks, 1);
  c->last_op = op;
  if (c->fail)
    return c->fail;
  *out = c->no_stream ? NULL : c->stream;
  return 0;
}

static cuv_device_t *custom_device(void *state) {
  return cuv_stream_device(((custom_t *)state)->stream);
}

static void custom_destroy(void *state) { atomic_fetch_add(&((custom_t *)state)->destroyed, 1); }

static void test_custom_policy(void **state) {
  custom_t c = {0};
  assert_cuv_ok(cuv_stream_create(&c.stream, cuvt_device()));
  const cuv_policy_ops_t ops = {custom_next, custom_device, custom_destroy};
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_policy_create(&policy, &ops, &c));
  assert_ptr_equal(cuv_policy_device(policy), cuvt_device());

  assert_ptr_equal(stream_used(policy), cuv_stream_handle(c.stream));
  assert_int_equal(atomic_load(&c.picks), 1); /* one pick per execution */
  assert_non_null(c.last_op);                 /* it is shown the op it places */
  check_saxpy_through(policy);

  atomic_int releases = 0;
  c.fail = CUV_EBUSY; /* a policy's error is the executor's, and the op is consumed */
  assert_int_equal(cuv_sync_policy(policy, cuvt_counted_value(1, &releases), NULL), CUV_EBUSY);
  c.fail = 0;
  c.no_stream = true; /* success without a stream is not accepted */
  cuv_stream_t *s;
  assert_int_equal(cuv_policy_next_stream(policy, NULL, &s), CUV_EINVAL);
  assert_int_equal(cuv_sync_policy(policy, cuvt_counted_value(2, &releases), NULL), CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 2);

  assert_int_equal(atomic_load(&c.destroyed), 0);
  cuv_policy_destroy(policy);
  assert_int_equal(atomic_load(&c.destroyed), 1);
  cuv_stream_destroy(c.stream);

  const cuv_policy_ops_t incomplete = {NULL, custom_device, NULL};
  assert_int_equal(cuv_policy_create(&policy, &incomplete, &c), CUV_EINVAL);
  assert_int_equal(cuv_policy_create(&policy, NULL, &c), CUV_EINVAL);
  assert_int_equal(cuv_policy_create(NULL, &ops, &c), CUV_EINVAL);
}

/* ---- enqueue_on: the caller synchronizes ---- */

static void test_enqueue_on_then_stream_synchronize(void **state) {
  float *x = malloc(N * sizeof *x), *host = malloc(N * sizeof *host);
  cuvt_random_ints(x, N);
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  cuv_buffer_t *buf = cuvt_buffer(N * sizeof *x);
  cuv_output_t downloaded;
  /* A slow kernel first, so the later ops are certainly still pending when enqueued. */
  cuv_buffer_t *flag = cuvt_buffer(4);
  assert_cuv_ok(cuv_enqueue_on(stream, cuvt_slow_write(SLOW_MS, 1, flag), NULL));
  assert_cuv_ok(cuv_enqueue_on(stream, cuv_memcpy_htod(buf, 0, x, N * sizeof *x, CUV_COPY_STAGE),
                               NULL));
  assert_cuv_ok(cuv_enqueue_on(stream, cuvt_scale(buf, N, -2.0f), NULL));
  assert_cuv_ok(cuv_enqueue_on(stream, cuv_download(buf, 0, N * sizeof *x), &downloaded));
  assert_cuv_ok(cuv_enqueue_on(stream, cuv_memcpy_dtoh(host, buf, 0, N * sizeof *x), NULL));
  cuv_buffer_unref(buf); /* the enqueued work holds it */
  cuv_buffer_unref(flag);
  assert_cuv_ok(cuv_stream_synchronize(stream));
  assert_int_equal(cuv_stream_in_flight(stream), 0);
  const float *got = downloaded.data;
  for (size_t i = 0; i < N; i++) {
    assert_true(got[i] == x[i] * -2.0f);
    assert_true(host[i] == x[i] * -2.0f);
  }
  cuv_output_release(&downloaded);
  cuv_stream_destroy(stream);
  free(x);
  free(host);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_robin_cycles_over_its_streams),
      cmocka_unit_test(test_device_default_policy),
      cmocka_unit_test(test_single_stream),
      cmocka_unit_test(test_single_wrapped_stream),
      cmocka_unit_test(test_least_loaded_avoids_a_busy_stream),
      cmocka_unit_test(test_custom_policy),
      cmocka_unit_test(test_enqueue_on_then_stream_synchronize),
  };
  return cuvt_run(tests);
}
