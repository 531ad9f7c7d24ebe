/* Lazy ops as kernel arguments (as cuda-async passes lazy ops to its kernels): CUV_ARG_OP_* runs
 * the op first on the launch's stream and passes the buffer it outputs; the launch outputs that
 * buffer (or a tuple of them). Checked against host math on fresh random data: alone, several at
 * once, at an offset, built from seq, map, then and shared clones, and launches with op arguments
 * nested in seq, zip, fork and then. Misuse: an op whose output is no buffer fails with CUV_EARGS
 * when executed, and every op argument is consumed exactly once on every path (counted), also
 * when cuv_launch refuses the launch. */
#include <pthread.h>

#include "counted.h"

static atomic_int releases;

static unsigned random_n(void) { return 1 + cuvt_random_u32() % 5000; }

/* add_one(n, x): x[i] += 1, with x given as `arg`. */
static cuv_op_t *add_one(unsigned n, cuv_arg_t arg) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), arg};
  return cuv_launch(cuvt_kernel_ok("add_one"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 2);
}

/* The floats of the buffer an output holds. */
static float *floats_of(const cuv_output_t *out, unsigned n) {
  cuv_buffer_t *buf = cuv_output_buffer(out);
  assert_non_null(buf);
  assert_true(cuv_buffer_size(buf) >= n * sizeof(float));
  float *host = malloc(n * sizeof *host);
  cuvt_read(host, buf, 0, n * sizeof *host);
  return host;
}

static void expect_plus(const cuv_output_t *out, const float *base, float plus, unsigned n) {
  float *got = floats_of(out, n);
  for (unsigned i = 0; i < n; i++)
    assert_true(got[i] == base[i] + plus);
  free(got);
}

/* A buffer of n random integer floats, and its host copy. */
static cuv_buffer_t *random_floats(unsigned n, float **host) {
  *host = malloc(n * sizeof **host);
  cuvt_random_ints(*host, n);
  return cuvt_buffer_of(*host, n);
}

/* ---- alone ---- */

/* add_one over a dup of x: the output is the new buffer, x + 1; x itself is untouched. */
static void test_dup_as_argument(void **state) {
  unsigned n = random_n();
  float *host;
  cuv_buffer_t *x = random_floats(n, &host);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(add_one(n, CUV_ARG_OP_RW(cuv_dup(x))), &out));
  assert_ptr_not_equal(cuv_output_buffer(&out), x);
  expect_plus(&out, host, 1.0f, n);
  cuv_output_release(&out);
  float *still = malloc(n * sizeof *still);
  cuvt_read(still, x, 0, n * sizeof *still);
  cuvt_assert_floats_equal(still, host, n);
  cuv_buffer_unref(x);
  free(host);
  free(still);
}

/* saxpy(n, a, x, y) with x an iota and y ones: a tuple of both buffers, in argument order. */
static void test_several_op_arguments_make_a_tuple(void **state) {
  unsigned n = random_n();
  float a = (float)(int)(cuvt_random_u32() % 17) - 8.0f, start = (float)(cuvt_random_u32() % 100);
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a),
                      CUV_ARG_OP_READ(cuv_iota_f32(cuvt_device(), n, start, 1.0f)),
                      CUV_ARG_OP_RW(cuv_ones_f32(cuvt_device(), n))};
  cuv_output_t out;
  assert_cuv_ok(
      cuv_sync(cuv_launch(cuvt_kernel_ok("saxpy"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 4), &out));
  assert_null(cuv_output_buffer(&out));
  assert_null(cuv_tuple_get(&out, 2));
  float *x = floats_of(cuv_tuple_get(&out, 0), n), *y = floats_of(cuv_tuple_get(&out, 1), n);
  for (unsigned i = 0; i < n; i++) {
    assert_true(x[i] == start + (float)i);
    assert_true(y[i] == a * x[i] + 1.0f);
  }
  cuv_output_release(&out);
  free(x);
  free(y);
}

/* docs/ops.md's example, cuda-async's first: saxpy over ones and zeros made on the launch's
 * stream. */
static void test_readme_example(void **state) {
  unsigned n = random_n();
  float a = (float)(int)(cuvt_random_u32() % 1001) - 500.0f;
  cuv_device_t *dev = cuvt_device();
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_OP_READ(cuv_ones_f32(dev, n)),
                      CUV_ARG_OP_RW(cuv_zeros(dev, n * sizeof(float)))};
  cuv_output_t out;
  int rc = cuv_sync(
      cuv_launch(cuvt_kernel_ok("saxpy"), CUV_DIM1((n + 255) / 256), CUV_DIM1(256), 0, args, 4),
      &out);
  assert_cuv_ok(rc);
  float *y = floats_of(cuv_tuple_get(&out, 1), n);
  for (unsigned i = 0; i < n; i++)
    assert_true(y[i] == a);
  cuv_output_release(&out);
  free(y);
}

/* An op argument at an offset: the kernel gets the new buffer's pointer + offset; past the buffer
 * is CUV_ERANGE when the launch runs (its size is known only then). */
static void test_op_argument_at_an_offset(void **state) {
  unsigned n = random_n(), skip = cuvt_random_u32() % n;
  cuv_arg_t arg = CUV_ARG_OP_RW(cuv_zeros(cuvt_device(), n * sizeof(float)));
  arg.offset = skip * sizeof(float);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(add_one(n - skip, arg), &out));
  float *got = floats_of(&out, n);
  for (unsigned i = 0; i < n; i++)
    assert_true(got[i] == (i < skip ? 0.0f : 1.0f));
  cuv_output_release(&out);
  free(got);
  cuv_arg_t past = CUV_ARG_OP_RW(cuv_zeros(cuvt_device(), 64));
  past.offset = 68;
  cuv_op_t *op = add_one(1, past);
  assert_int_equal(cuv_op_error(op), 0);
  assert_int_equal(cuv_sync(op, NULL), CUV_ERANGE);
  cuv_arg_t too_long = CUV_ARG_OP_RW(cuv_zeros(cuvt_device(), 64));
  too_long.length = 65;
  assert_int_equal(cuv_sync(add_one(1, too_long), NULL), CUV_ERANGE);
}

/* ---- op arguments built from combinators ---- */

static int map_keep(cuv_output_t *value, void *arg) { return 0; }

/* then: passes its input buffer on as it is (a cuv_value of the output it took). */
static cuv_op_t *pass_on(cuv_output_t *input, void *arg) {
  cuv_output_t taken = cuv_output_take(input);
  return cuv_value(taken.data, taken.release);
}

static void test_op_arguments_from_combinators(void **state) {
  unsigned n = random_n();
  float *host;
  cuv_buffer_t *x = random_floats(n, &host);
  cuv_shared_t *shared = cuv_shared(cuv_dup(x));
  cuv_op_t *args[] = {
      cuv_seq(cuv_memset8(x, 0, 0, 0), cuv_dup(x)),
      cuv_map(cuv_dup(x), map_keep, NULL),
      cuv_then(cuv_dup(x), pass_on, NULL),
      cuv_shared_clone(shared),
  };
  for (size_t k = 0; k < 4; k++) {
    cuv_output_t out;
    assert_cuv_ok(cuv_sync(add_one(n, CUV_ARG_OP_RW(args[k])), &out));
    expect_plus(&out, host, 1.0f, n);
    cuv_output_release(&out);
  }
  /* The shared op ran once: a second clone sees the first launch's result, x + 1. */
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(add_one(n, CUV_ARG_OP_RW(cuv_shared_clone(shared))), &out));
  expect_plus(&out, host, 2.0f, n);
  assert_int_equal(cuv_shared_runs(shared), 1);
  cuv_output_release(&out);
  cuv_shared_unref(shared);
  cuv_buffer_unref(x);
  free(host);
}

/* ---- launches with op arguments nested in combinators ---- */

/* then: another launch on the buffer it receives, as cuda-async's .then(|buf| kernel(buf)). */
static cuv_op_t *add_one_again(cuv_output_t *input, void *arg) {
  return add_one(*(unsigned *)arg, CUV_ARG_OP_RW(pass_on(input, NULL)));
}

static void test_nested_in_seq_zip_fork_then(void **state) {
  unsigned n = random_n();
  float *host;
  cuv_buffer_t *x = random_floats(n, &host);
  cuv_output_t out;
  /* seq: its output is the launch's buffer. */
  assert_cuv_ok(
      cuv_sync(cuv_seq(cuv_memset8(x, 0, 0, 0), add_one(n, CUV_ARG_OP_RW(cuv_dup(x)))), &out));
  expect_plus(&out, host, 1.0f, n);
  cuv_output_release(&out);
  /* then: the buffer goes through two launches. */
  assert_cuv_ok(cuv_sync(cuv_then(add_one(n, CUV_ARG_OP_RW(cuv_dup(x))), add_one_again, &n), &out));
  expect_plus(&out, host, 2.0f, n);
  cuv_output_release(&out);
  /* zip and fork: a tuple of each launch's buffer. */
  for (int fork = 0; fork < 2; fork++) {
    cuv_op_t *ops[] = {add_one(n, CUV_ARG_OP_RW(cuv_dup(x))),
                       cuv_then(add_one(n, CUV_ARG_OP_RW(cuv_dup(x))), add_one_again, &n)};
    assert_cuv_ok(cuv_sync(fork ? cuv_fork(ops, 2) : cuv_zip(ops, 2), &out));
    expect_plus(cuv_tuple_get(&out, 0), host, 1.0f, n);
    expect_plus(cuv_tuple_get(&out, 1), host, 2.0f, n);
    cuv_output_release(&out);
  }
  cuv_buffer_unref(x);
  free(host);
}

/* A map over a launch whose op argument copies to the host first (a slow kernel's value,
 * downloaded into a host buffer): the map sees the value landed, and, as for any map over a copy
 * to the host, runs on a thread that may wait (a submitter thread when there are any). */
typedef struct landed {
  cuv_host_buffer_t *host;
  unsigned value;
  pthread_t thread;
  atomic_int calls;
} landed_t;

static int record_landed(cuv_output_t *value, void *arg) {
  landed_t *l = arg;
  memcpy(&l->value, cuv_host_buffer_data(l->host), sizeof l->value);
  l->thread = pthread_self();
  atomic_fetch_add(&l->calls, 1);
  return 0;
}

static void count_done(int status, cuv_output_t *output, void *arg) {
  *(int *)arg = status == 0 && cuv_output_buffer(output) ? 1 : status;
}

static void test_map_over_launch_sees_op_argument_download(void **state) {
  cuv_config_t config;
  assert_cuv_ok(cuv_config_get(&config));
  cuv_buffer_t *flag = cuvt_buffer(sizeof(unsigned));
  landed_t seen = {0};
  assert_cuv_ok(cuv_host_buffer_create(&seen.host, cuvt_device(), sizeof(unsigned)));
  memset(cuv_host_buffer_data(seen.host), 0, sizeof(unsigned));
  unsigned value = cuvt_random_u32() | 1u;
  cuv_op_t *landing = cuv_seq(cuvt_slow_write(40, value, flag),
                              cuv_download_into(seen.host, 0, flag, 0, sizeof value));
  cuv_op_t *launch = add_one(16, CUV_ARG_OP_RW(cuv_seq(landing, cuv_zeros(cuvt_device(), 64))));
  cuv_queue_t *queue;
  assert_cuv_ok(cuv_queue_create(&queue, NULL, NULL));
  int done = 0;
  assert_cuv_ok(cuv_submit(queue, cuv_map(launch, record_landed, &seen), count_done, &done, NULL));
  while (cuv_queue_pending(queue) > 0) {
    cuv_queue_wait(queue, -1);
    cuv_queue_drain(queue);
  }
  assert_int_equal(done, 1);
  assert_int_equal(atomic_load(&seen.calls), 1);
  assert_int_equal(seen.value, value);
  assert_int_equal(pthread_equal(seen.thread, pthread_self()) != 0, config.submit_threads == 0);
  assert_cuv_ok(cuv_queue_destroy(queue));
  cuv_host_buffer_unref(seen.host);
  cuv_buffer_unref(flag);
}

/* ---- misuse ---- */

/* Outputs that are no buffer: a host value, unit, a tuple. The launch fails when it runs, with
 * the value released once. */
static void test_non_buffer_output_fails(void **state) {
  cuv_buffer_t *x = cuvt_buffer(64);
  cuv_op_t *pair[] = {cuv_zeros(cuvt_device(), 64), cuv_zeros(cuvt_device(), 64)};
  cuv_op_t *wrong[] = {cuvt_counted_value(1, &releases), cuv_memset8(x, 0, 0, 64),
                       cuv_zip(pair, 2)};
  atomic_store(&releases, 0);
  for (size_t k = 0; k < 3; k++) {
    cuv_op_t *op = add_one(16, CUV_ARG_OP_RW(wrong[k]));
    assert_int_equal(cuv_op_error(op), 0); /* the output is known only when it ran */
    assert_int_equal(cuv_sync(op, NULL), CUV_EARGS);
  }
  assert_int_equal(atomic_load(&releases), 1);
  /* The second of two: the first's buffer is released with the failed launch. */
  cuv_arg_t args[] = {CUV_ARG_VALUE((unsigned){16}), CUV_ARG_VALUE((float){2.0f}),
                      CUV_ARG_OP_READ(cuv_zeros(cuvt_device(), 64)),
                      CUV_ARG_OP_RW(cuvt_counted_value(2, &releases))};
  cuv_output_t out = {(void *)1, NULL, NULL};
  assert_int_equal(
      cuv_sync(cuv_launch(cuvt_kernel_ok("saxpy"), CUV_DIM1(1), CUVT_BLOCK, 0, args, 4), &out),
      CUV_EARGS);
  assert_null(out.data);
  assert_int_equal(atomic_load(&releases), 2);
  cuv_buffer_unref(x);
}

/* cuv_launch refusing the launch still consumes its op arguments, each once. */
static void test_op_arguments_consumed_on_every_path(void **state) {
  unsigned n = 16;
  cuv_buffer_t *x = cuvt_buffer(64);
  atomic_store(&releases, 0);
  cuv_arg_t one[] = {CUV_ARG_VALUE(n), CUV_ARG_OP_RW(cuvt_counted_value(1, &releases))};
  assert_int_equal(cuv_sync(cuv_launch(NULL, CUV_DIM1(1), CUVT_BLOCK, 0, one, 2), NULL),
                   CUV_EINVAL);
  cuv_arg_t bad_scalar[] = {CUV_ARG_SCALAR(NULL, 4),
                            CUV_ARG_OP_RW(cuvt_counted_value(1, &releases))};
  assert_int_equal(
      cuv_sync(cuv_launch(cuvt_kernel_ok("add_one"), CUV_DIM1(1), CUVT_BLOCK, 0, bad_scalar, 2),
               NULL),
      CUV_EINVAL);
  /* An op and a buffer in one argument, or an op in a scalar: refused, the op consumed. */
  cuv_arg_t both = CUV_ARG_OP_RW(cuvt_counted_value(1, &releases));
  both.buffer = x;
  assert_int_equal(cuv_sync(add_one(n, both), NULL), CUV_EINVAL);
  cuv_arg_t scalar_op = CUV_ARG_VALUE(n);
  scalar_op.op = cuvt_counted_value(1, &releases);
  cuv_arg_t in_scalar[] = {scalar_op, CUV_ARG_RW(x)};
  assert_int_equal(
      cuv_sync(cuv_launch(cuvt_kernel_ok("add_one"), CUV_DIM1(1), CUVT_BLOCK, 0, in_scalar, 2),
               NULL),
      CUV_EINVAL);
  /* An error op as an argument: the launch carries its error. */
  assert_int_equal(cuv_sync(add_one(n, CUV_ARG_OP_RW(cuv_zeros(cuvt_device(), 0))), NULL),
                   CUV_EINVAL);
  /* The same op twice: refused, released once. */
  cuv_op_t *twice = cuvt_counted_value(1, &releases);
  cuv_arg_t dup_args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE((float){1.0f}), CUV_ARG_OP_READ(twice),
                          CUV_ARG_OP_RW(twice)};
  assert_int_equal(
      cuv_sync(cuv_launch(cuvt_kernel_ok("saxpy"), CUV_DIM1(1), CUVT_BLOCK, 0, dup_args, 4), NULL),
      CUV_ECONSUMED);
  /* Built and dropped: released with the launch. */
  cuv_op_destroy(add_one(n, CUV_ARG_OP_RW(cuvt_counted_value(1, &releases))));
  assert_int_equal(atomic_load(&releases), 6);
  /* Held by a combinator already: refused, and it stays with that owner, which still runs it. */
  cuv_op_t *held = cuvt_counted_value(1, &releases);
  cuv_op_t *owner = cuv_seq(held, cuv_value(NULL, NULL));
  assert_int_equal(cuv_sync(add_one(n, CUV_ARG_OP_RW(held)), NULL), CUV_ECONSUMED);
  assert_int_equal(atomic_load(&releases), 6);
  assert_cuv_ok(cuv_sync(owner, NULL));
  assert_int_equal(atomic_load(&releases), 7);
  cuv_buffer_unref(x);
}

/* An op argument giving a buffer another writable argument names: refused when it ran (unique
 * storage), accepted with CUV_ARG_MAY_ALIAS. */
static void test_op_argument_aliasing_a_buffer_argument(void **state) {
  unsigned n = random_n(), a = cuvt_random_u32(), b = cuvt_random_u32();
  for (int alias = 0; alias < 2; alias++) {
    cuv_output_t made;
    assert_cuv_ok(cuv_sync(cuv_zeros(cuvt_device(), n * 4), &made));
    cuv_buffer_t *x = cuv_buffer_ref(cuv_output_buffer(&made));
    cuv_output_t taken = cuv_output_take(&made);
    cuv_arg_t mine = CUV_ARG_OP_WRITE(cuv_value(taken.data, taken.release)); /* outputs x */
    cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), alias ? CUV_ARG_MAY_ALIAS(mine) : mine,
                        CUV_ARG_VALUE(b), CUV_ARG_WRITE(x)};
    cuv_op_t *op = cuv_launch(cuvt_kernel_ok("fill_two_u32"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 5);
    assert_int_equal(cuv_op_error(op), 0);
    cuv_output_t out;
    assert_int_equal(cuv_sync(op, &out), alias ? 0 : CUV_EARGS);
    uint32_t *got = malloc(n * 4);
    cuvt_read(got, x, 0, n * 4);
    for (unsigned i = 0; i < n; i++)
      assert_int_equal(got[i], alias ? b : 0u); /* refused: nothing ran */
    free(got);
    cuv_output_release(&out);
    cuv_buffer_unref(x);
  }
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dup_as_argument),
      cmocka_unit_test(test_several_op_arguments_make_a_tuple),
      cmocka_unit_test(test_readme_example),
      cmocka_unit_test(test_op_argument_at_an_offset),
      cmocka_unit_test(test_op_arguments_from_combinators),
      cmocka_unit_test(test_nested_in_seq_zip_fork_then),
      cmocka_unit_test(test_map_over_launch_sees_op_argument_download),
      cmocka_unit_test(test_non_buffer_output_fails),
      cmocka_unit_test(test_op_arguments_consumed_on_every_path),
      cmocka_unit_test(test_op_argument_aliasing_a_buffer_argument),
  };
  return cuvt_run(tests);
}
