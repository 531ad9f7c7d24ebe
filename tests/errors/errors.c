/* Errors: constructors failing midway through a chain, failing kernel launches, and driver
 * failures injected at each stage of a submission (simulator only). Whatever fails, the error
 * is the executor's return, every output is released once, work already enqueued finishes before
 * its resources go, and the next submission works. */
#include <cuda.h>

#include "counted.h"

#define N 2048
#define SLOW_MS 20

/* Reads on a stream of its own, which no earlier work was enqueued on: only a finished writer
 * can have left its value there (a read on the writer's own stream would queue behind it). */
static unsigned read_u32(cuv_buffer_t *buf) {
  unsigned v = 0;
  cuv_stream_t *reader;
  assert_cuv_ok(cuv_stream_create(&reader, cuvt_device()));
  assert_cuv_ok(cuv_sync_on(reader, cuv_memcpy_dtoh(&v, buf, 0, sizeof v), NULL));
  cuv_stream_destroy(reader);
  return v;
}

static void clear_u32(cuv_buffer_t *buf) { cuvt_upload(buf, 0, &(unsigned){0}, sizeof(unsigned)); }

/* ---- failed constructors ---- */

/* Five device ops, the third built out of range: the chain carries ERANGE, and executing it
 * runs none of them (the data is unchanged). */
static void test_failed_constructor_in_device_chain(void **state) {
  float *x = malloc(N * sizeof *x), *got = malloc(N * sizeof *got);
  cuvt_random_ints(x, N);
  cuv_buffer_t *buf = cuvt_buffer_of(x, N);
  cuv_op_t *op = cuv_seq(cuvt_scale(buf, N, 2.0f), cuvt_add_one(buf, N));
  op = cuv_seq(op, cuv_memset32(buf, 4, 0, N)); /* one word past the end */
  op = cuv_seq(op, cuvt_add_one(buf, N));
  op = cuv_seq(op, cuv_download(buf, 0, N * sizeof *x));
  assert_int_equal(cuv_op_error(op), CUV_ERANGE);
  assert_int_equal(cuv_sync(op, NULL), CUV_ERANGE);
  cuvt_read(got, buf, 0, N * sizeof *got);
  cuvt_assert_floats_equal(got, x, N);
  cuv_buffer_unref(buf);
  free(x);
  free(got);
}

typedef struct late_failure {
  atomic_int calls;
  atomic_int releases;
} late_failure_t;

static cuv_op_t *fail_after_slow_write(cuv_output_t *input, void *arg) {
  late_failure_t *l = arg;
  atomic_fetch_add(&l->calls, 1);
  return cuv_memcpy_htod(NULL, 0, NULL, 0, 0); /* fails: no buffer */
}

static cuv_op_t *never_called(cuv_output_t *input, void *arg) {
  atomic_fetch_add(&((late_failure_t *)arg)->calls, 100);
  return cuv_value(NULL, NULL);
}

/* A then stage failing after a slow kernel was enqueued: cuv_sync returns the stage's error only
 * once the kernel has finished (the flag it wrote is there at once). */
static void test_failure_after_enqueued_work(void **state) {
  late_failure_t l = {0};
  cuv_buffer_t *flag = cuvt_buffer(4);
  clear_u32(flag);
  unsigned value = cuvt_nonzero_u32();
  cuv_op_t *ops[] = {cuvt_counted_value(1, &l.releases), cuvt_slow_write(SLOW_MS, value, flag)};
  cuv_op_t *op = cuv_then(cuv_zip(ops, 2), fail_after_slow_write, &l);
  op = cuv_then(op, never_called, &l);
  op = cuv_seq(op, cuvt_counted_value(2, &l.releases));
  assert_int_equal(cuv_sync(op, NULL), CUV_EINVAL);
  assert_int_equal(atomic_load(&l.calls), 1);
  assert_int_equal(atomic_load(&l.releases), 2);
  assert_int_equal(read_u32(flag), value);
  cuv_buffer_unref(flag);
}

/* ---- failing launches ---- */

static cuv_op_t *empty_launch(void) {
  return cuv_launch(cuvt_kernel_ok("empty_kernel"), CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 0);
}

static void test_launch_failure_is_a_cuda_error(void **state) {
  assert_int_equal(cuv_sync(cuv_launch(cuvt_kernel_ok("empty_kernel"), CUV_DIM1(0), CUV_DIM1(1),
                                       0, NULL, 0),
                            NULL),
                   CUV_EINVAL);
  if (!cuvt_is_sim())
    skip(); /* the rest injects a driver failure */
  cuv_sim_fail("cuLaunchKernel", 1, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  int rc = cuv_sync(empty_launch(), NULL);
  cuv_sim_fail_clear(); /* before any assert: a failed assert must not leave the rule behind */
  assert_int_equal(rc, CUV_ECUDA(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES));
  assert_true(CUV_IS_ECUDA(rc));
  assert_int_equal(cuv_cuda_result(rc), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  assert_string_equal(cuv_err_name(rc), "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
  assert_non_null(cuv_strerror(rc));
  assert_cuv_ok(cuv_sync(empty_launch(), NULL));
}

/* ---- driver failures injected at each stage ---- */

/* One submission that reaches every stage: a slow write, an allocation, an upload, a fork whose
 * second branch is slow too (a launch per branch, an order and a join event each way), two
 * downloads, and counted values on both ends. */
typedef struct pipeline {
  float x[N];
  cuv_buffer_t *data, *other, *flag, *flag2;
  unsigned v, v2, w;
  atomic_int releases;
} pipeline_t;

static void pipeline_setup(pipeline_t *p) {
  cuvt_random_ints(p->x, N);
  p->data = cuvt_buffer(N * 4);
  p->other = cuvt_buffer(N * 4);
  p->flag = cuvt_buffer(4);
  p->flag2 = cuvt_buffer(4);
}

static void pipeline_teardown(pipeline_t *p) {
  cuv_buffer_unref(p->data);
  cuv_buffer_unref(p->other);
  cuv_buffer_unref(p->flag);
  cuv_buffer_unref(p->flag2);
}

/* Fresh values, flags cleared, and the op; built before any failure is injected. */
static cuv_op_t *pipeline_op(pipeline_t *p) {
  clear_u32(p->flag);
  clear_u32(p->flag2);
  p->v = cuvt_nonzero_u32();
  p->v2 = cuvt_nonzero_u32();
  p->w = cuvt_random_u32();
  atomic_store(&p->releases, 0);
  cuv_op_t *branches[] = {
      cuvt_scale(p->data, N, 2.0f),
      cuv_seq(cuvt_slow_write(SLOW_MS, p->v2, p->flag2), cuvt_fill_u32(p->other, N, p->w)),
  };
  cuv_op_t *items[] = {
      cuvt_counted_value(1, &p->releases),
      cuvt_slow_write(SLOW_MS, p->v, p->flag),                  /* cuLaunchKernel #1 */
      cuv_alloc(cuvt_device(), 4096),                           /* cuMemAllocAsync #1 */
      cuv_memcpy_htod(p->data, 0, p->x, N * 4, CUV_COPY_STAGE), /* cuMemcpyHtoDAsync #1 */
      cuv_fork(branches, 2), /* launch #2 on the executing stream; branch 1: order event
                                (record #1, wait #1), launches #3 #4, join (record #2, wait #2) */
      cuv_download(p->data, 0, N * 4),
      cuv_download(p->other, 0, N * 4),
      cuvt_counted_value(2, &p->releases),
  };
  return cuv_zip(items, 8);
}

static void pipeline_check_success(pipeline_t *p, cuv_output_t *out) {
  assert_int_equal(cuvt_payload(cuv_tuple_get(out, 0)), 1);
  assert_int_equal(cuv_buffer_size(cuv_tuple_get(out, 2)->data), 4096);
  const float *data = cuv_tuple_get(out, 5)->data;
  const unsigned *other = cuv_tuple_get(out, 6)->data;
  for (size_t i = 0; i < N; i++) {
    assert_true(data[i] == p->x[i] * 2.0f);
    assert_int_equal(other[i], p->w);
  }
  assert_int_equal(cuvt_payload(cuv_tuple_get(out, 7)), 2);
  assert_int_equal(read_u32(p->flag), p->v);
  assert_int_equal(read_u32(p->flag2), p->v2);
  cuv_output_release(out);
  assert_int_equal(atomic_load(&p->releases), 2);
}

typedef struct injection {
  const char *entry;
  unsigned nth;         /* which call of the entry point, counted from the injection */
  CUresult result;
  bool slow_branch_ran; /* the fork's slow branch was enqueued before the failure */
} injection_t;

static void test_injected_failure(void **state) {
  const injection_t *inj = *state;
  if (!cuvt_is_sim())
    skip();
  pipeline_t *p = calloc(1, sizeof *p);
  pipeline_setup(p);
  cuv_op_t *op = pipeline_op(p);
  cuv_sim_fail(inj->entry, inj->nth, (int)inj->result);
  cuv_output_t out = {0};
  int rc = cuv_sync(op, &out);
  cuv_sim_fail_clear();
  assert_int_equal(rc, CUV_ECUDA(inj->result));
  assert_null(out.data);
  assert_int_equal(atomic_load(&p->releases), 2); /* delivered nowhere, released once each */
  /* Work enqueued before the failure finished before cuv_sync returned: its flag is there. */
  assert_int_equal(read_u32(p->flag), p->v);
  assert_int_equal(read_u32(p->flag2), inj->slow_branch_ran ? p->v2 : 0u);

  /* The runtime, the buffers and the kernels serve the next submission. */
  assert_cuv_ok(cuv_sync(pipeline_op(p), &out));
  pipeline_check_success(p, &out);
  pipeline_teardown(p);
  free(p);
}

static const injection_t injections[] = {
    {"cuMemAllocAsync", 1, CUDA_ERROR_OUT_OF_MEMORY, false},
    {"cuMemcpyHtoDAsync", 1, CUDA_ERROR_INVALID_VALUE, false},
    {"cuLaunchKernel", 2, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, false},
    {"cuEventRecord", 1, CUDA_ERROR_INVALID_HANDLE, false},
    {"cuStreamWaitEvent", 1, CUDA_ERROR_INVALID_HANDLE, false},
    {"cuEventRecord", 2, CUDA_ERROR_INVALID_VALUE, true},
    {"cuStreamWaitEvent", 2, CUDA_ERROR_INVALID_VALUE, true},
};

/* The same pipeline succeeds with nothing injected (the baseline of the cases above). */
static void test_pipeline_without_failures(void **state) {
  pipeline_t *p = calloc(1, sizeof *p);
  pipeline_setup(p);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(pipeline_op(p), &out));
  pipeline_check_success(p, &out);
  pipeline_teardown(p);
  free(p);
}

/* The event cuv_sync records behind the work to learn its completion fails: cuv may fall back
 * to another proof or report the error, but it may not return before the work is done. */
/* Which statuses mean a dead context: the sticky device faults, nothing else. */
static void test_fault_statuses(void **state) {
  (void)state;
  const int sticky[] = {700, 719, 715, 716, 718, 710, 702, 214};
  for (size_t i = 0; i < sizeof sticky / sizeof sticky[0]; i++)
    assert_true(cuv_status_is_fault(CUV_ECUDA(sticky[i])));
  const int not_sticky[] = {0, CUV_EINVAL, CUV_ENOMEM, CUV_EBUSY, CUV_ECANCELED, CUV_ECUDA(1),
                            CUV_ECUDA(2), CUV_ECUDA(600), CUV_ECUDA(201)};
  for (size_t i = 0; i < sizeof not_sticky / sizeof not_sticky[0]; i++)
    assert_false(cuv_status_is_fault(not_sticky[i]));
}

static void test_completion_event_failure_never_returns_early(void **state) {
  if (!cuvt_is_sim())
    skip();
  cuv_buffer_t *flag = cuvt_buffer(4);
  clear_u32(flag);
  unsigned value = cuvt_nonzero_u32();
  cuv_op_t *op = cuv_seq(cuvt_slow_write(SLOW_MS, value, flag), cuv_download(flag, 0, 4));
  cuv_sim_fail("cuEventRecord", 1, CUDA_ERROR_INVALID_HANDLE);
  cuv_output_t out = {0};
  int rc = cuv_sync(op, &out);
  cuv_sim_fail_clear();
  assert_true(rc == 0 || rc == CUV_ECUDA(CUDA_ERROR_INVALID_HANDLE));
  if (rc == 0)
    assert_int_equal(*(unsigned *)out.data, value);
  cuv_output_release(&out);
  assert_int_equal(read_u32(flag), value);
  cuv_buffer_unref(flag);
}

/* A then over a download waits until the copy landed before its callback runs (include/cuv.h,
 * then). When that wait fails (its event record is refused here), the callback never runs, the
 * op fails with the wait's error, and what the first op output (a counted value behind the
 * download) is released once: the then owns it, as it would hand it to the callback. */
static cuv_op_t *count_then(cuv_output_t *input, void *arg) {
  atomic_fetch_add((atomic_int *)arg, 1);
  cuv_output_release(input);
  return cuv_value(NULL, NULL);
}

static cuv_op_t *then_over_download(cuv_buffer_t *flag, unsigned value, atomic_int *releases,
                                    atomic_int *calls) {
  cuv_op_t *first = cuv_seq(cuv_seq(cuv_memset32(flag, 0, value, 1), cuv_download(flag, 0, 4)),
                            cuvt_counted_value(5, releases));
  return cuv_then(first, count_then, calls);
}

static void test_then_wait_failure_releases_input(void **state) {
  if (!cuvt_is_sim())
    skip();
  cuv_buffer_t *flag = cuvt_buffer(4);
  clear_u32(flag);
  unsigned value = cuvt_nonzero_u32();
  atomic_int releases = 0, calls = 0;
  cuv_op_t *op = then_over_download(flag, value, &releases, &calls);
  cuv_sim_fail("cuEventRecord", 1, CUDA_ERROR_INVALID_HANDLE); /* the wait point's record */
  cuv_output_t out = {0};
  int rc = cuv_sync(op, &out);
  cuv_sim_fail_clear();
  assert_int_equal(rc, CUV_ECUDA(CUDA_ERROR_INVALID_HANDLE));
  assert_null(out.data);
  assert_int_equal(atomic_load(&calls), 0);
  assert_int_equal(atomic_load(&releases), 1);
  assert_int_equal(read_u32(flag), value); /* what was enqueued finished before cuv_sync returned */

  /* Without the failure: the callback runs once and releases its input itself. */
  value = cuvt_nonzero_u32();
  atomic_store(&releases, 0);
  assert_cuv_ok(cuv_sync(then_over_download(flag, value, &releases, &calls), NULL));
  assert_int_equal(atomic_load(&calls), 1);
  assert_int_equal(atomic_load(&releases), 1);
  assert_int_equal(read_u32(flag), value);
  cuv_buffer_unref(flag);
}

/* cuv_enqueue_on whose completion event cannot be recorded waits for the work itself and fails
 * with the record's error: it then hands out no output, and releases the one the op made once. */
static void test_enqueue_record_failure_leaves_no_output(void **state) {
  if (!cuvt_is_sim())
    skip();
  cuv_buffer_t *flag = cuvt_buffer(4);
  clear_u32(flag);
  unsigned value = cuvt_nonzero_u32();
  atomic_int releases = 0;
  cuv_op_t *op = cuv_seq(cuv_memset32(flag, 0, value, 1), cuvt_counted_value(5, &releases));
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  cuv_sim_fail("cuEventRecord", 1, CUDA_ERROR_INVALID_HANDLE); /* the completion's record */
  cuv_output_t out = {(void *)1, NULL, NULL};
  int rc = cuv_enqueue_on(stream, op, &out);
  cuv_sim_fail_clear();
  assert_int_equal(rc, CUV_ECUDA(CUDA_ERROR_INVALID_HANDLE));
  assert_null(out.data);
  assert_null(out.release);
  assert_int_equal(atomic_load(&releases), 1);
  assert_int_equal(read_u32(flag), value); /* it waited for the work it could not record */
  cuv_stream_destroy(stream);
  cuv_buffer_unref(flag);
}

#define INJECTION_TEST(i, name)                                                                   \
  { name, test_injected_failure, NULL, NULL, (void *)&injections[i] }

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failed_constructor_in_device_chain),
      cmocka_unit_test(test_failure_after_enqueued_work),
      cmocka_unit_test(test_launch_failure_is_a_cuda_error),
      cmocka_unit_test(test_pipeline_without_failures),
      cmocka_unit_test(test_enqueue_record_failure_leaves_no_output),
      cmocka_unit_test(test_fault_statuses),
      INJECTION_TEST(0, "injected_cuMemAllocAsync"),
      INJECTION_TEST(1, "injected_cuMemcpyHtoDAsync"),
      INJECTION_TEST(2, "injected_cuLaunchKernel"),
      INJECTION_TEST(3, "injected_cuEventRecord_fork_order"),
      INJECTION_TEST(4, "injected_cuStreamWaitEvent_fork_order"),
      INJECTION_TEST(5, "injected_cuEventRecord_fork_join"),
      INJECTION_TEST(6, "injected_cuStreamWaitEvent_fork_join"),
      cmocka_unit_test(test_completion_event_failure_never_returns_early),
      cmocka_unit_test(test_then_wait_failure_releases_input),
  };
  return cuvt_run(tests);
}
