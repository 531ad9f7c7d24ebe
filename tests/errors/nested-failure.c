/* An op that fails at execution time deep inside combinators (zip inside seq inside fork inside
 * then, and other shapes): every output produced before the failure is released exactly once,
 * every op after it is dropped (its captured values released once, its function never called),
 * the error reported is the first one, and a submission's callback runs once.
 * tests/ops/combinators.c checks the same one level deep; lib/op.c (cuv__op_execute releases a
 * failed op's partial output), lib/combinators.c and lib/fork.c (drop what was not run) do it at
 * every level. */
#include "counted.h"

/* ---- ops that count: a with_context that fails or succeeds, and counts its calls and the
 * release of its argument ---- */

typedef struct probe {
  atomic_int calls;        /* the function ran */
  atomic_int arg_releases; /* its argument was released (run or dropped: exactly once) */
  atomic_int *releases;    /* the value it outputs, when it succeeds, counts here */
  int status;              /* < 0: fails with it */
  int payload;
} probe_t;

static void probe_release(void *arg) { atomic_fetch_add(&((probe_t *)arg)->arg_releases, 1); }

static cuv_op_t *probe_run(cuv_stream_t *stream, void *arg) {
  probe_t *p = arg;
  atomic_fetch_add(&p->calls, 1);
  return p->status < 0 ? cuv_fail(p->status) : cuvt_counted_value(p->payload, p->releases);
}

static cuv_op_t *probe_op(probe_t *p) { return cuv_with_context(probe_run, p, probe_release); }

static void assert_probe(probe_t *p, int calls) {
  assert_int_equal(atomic_load(&p->calls), calls);
  assert_int_equal(atomic_load(&p->arg_releases), 1);
}

/* A then stage that must never run (its first op failed). */
static cuv_op_t *never(cuv_output_t *input, void *arg) {
  atomic_fetch_add((atomic_int *)arg, 1);
  return cuv_value(NULL, NULL);
}

/* A then stage that runs and returns the op it was given. */
typedef struct returns {
  atomic_int calls;
  cuv_op_t *next;
} returns_t;

static cuv_op_t *return_next(cuv_output_t *input, void *arg) {
  returns_t *r = arg;
  atomic_fetch_add(&r->calls, 1);
  cuv_op_t *next = r->next;
  r->next = NULL;
  return next;
}

/* ---- shapes ---- */

/* then(fork([seq(zip([v1, FAIL]), v2), v3]), never): the zip's tuple holding v1 is released once
 * on its way up through seq, fork and then; v2 and v3 are dropped, released once; never runs. */
static void test_zip_in_seq_in_fork_in_then(void **state) {
  atomic_int releases = 0, never_calls = 0;
  probe_t fail = {.status = CUV_EIO};
  cuv_op_t *zipped[] = {cuvt_counted_value(1, &releases), probe_op(&fail)};
  cuv_op_t *branches[] = {cuv_seq(cuv_zip(zipped, 2), cuvt_counted_value(2, &releases)),
                          cuvt_counted_value(3, &releases)};
  cuv_output_t out = {.data = &out};
  assert_int_equal(cuv_sync(cuv_then(cuv_fork(branches, 2), never, &never_calls), &out),
                   CUV_EIO);
  assert_null(out.data);
  assert_int_equal(atomic_load(&never_calls), 0);
  assert_probe(&fail, 1);
  assert_int_equal(atomic_load(&releases), 3);
}

/* The same tree delivered through cuv_submit: the callback runs once, with the error and no
 * output, and every value is released once (the partial ones before the callback ran). */
typedef struct done_rec {
  atomic_int calls;
  int status;
  void *data;
  int releases_seen; /* releases counted when the callback ran */
  atomic_int *releases;
} done_rec_t;

static void record_done(int status, cuv_output_t *output, void *arg) {
  done_rec_t *d = arg;
  d->status = status;
  d->data = output->data;
  d->releases_seen = atomic_load(d->releases);
  atomic_fetch_add(&d->calls, 1);
}

static void test_nested_failure_through_submit(void **state) {
  atomic_int releases = 0, never_calls = 0;
  probe_t fail = {.status = CUV_EIO};
  cuv_buffer_t *buf = cuvt_buffer(1024 * sizeof(float));
  /* Real GPU work before the failure: a slow kernel and a download whose block is an output. */
  cuv_op_t *zipped[] = {cuvt_counted_value(1, &releases), cuvt_sleep(10),
                        cuv_download(buf, 0, 1024 * sizeof(float)), probe_op(&fail),
                        cuvt_counted_value(2, &releases)};
  cuv_op_t *branches[] = {cuvt_counted_value(3, &releases),
                          cuv_seq(cuv_zip(zipped, 5), cuvt_counted_value(4, &releases)),
                          cuvt_counted_value(5, &releases)};
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  done_rec_t done = {.releases = &releases};
  assert_cuv_ok(cuv_submit(q, cuv_then(cuv_fork(branches, 3), never, &never_calls), record_done,
                           &done, NULL));
  cuvt_drain_until(q, &done.calls, 1);
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_int_equal(atomic_load(&done.calls), 1);
  assert_int_equal(done.status, CUV_EIO);
  assert_null(done.data);
  assert_int_equal(done.releases_seen, 5);
  assert_int_equal(atomic_load(&releases), 5);
  assert_int_equal(atomic_load(&never_calls), 0);
  assert_probe(&fail, 1);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_buffer_unref(buf);
}

/* fork([v1, FAIL(EIO), then-never-called probe, v4]): a branch other than the first fails; the
 * branches after it never run (their functions not called, their arguments released once), the
 * ones before are released with the partial tuple, and the error is the branch's. */
static void test_fork_branch_failure_stops_later_branches(void **state) {
  atomic_int releases = 0;
  probe_t fail = {.status = CUV_EIO};
  probe_t later = {.releases = &releases, .payload = 9};
  cuv_op_t *branches[] = {cuvt_counted_value(1, &releases), probe_op(&fail), probe_op(&later),
                          cuvt_counted_value(4, &releases)};
  cuv_op_t *outer[] = {cuvt_counted_value(0, &releases), cuv_fork(branches, 4)};
  assert_int_equal(cuv_sync(cuv_zip(outer, 2), NULL), CUV_EIO);
  assert_probe(&fail, 1);
  assert_probe(&later, 0);
  assert_int_equal(atomic_load(&releases), 3); /* v0, v1, v4; the later probe made none */
}

/* Two failures in one zip inside a seq inside a then's returned op: the first is reported, the
 * second never runs, and everything is released once. */
static void test_first_error_wins_in_then_returned_op(void **state) {
  atomic_int releases = 0;
  probe_t first = {.status = CUV_ENOTFOUND};
  probe_t second = {.status = CUV_EIO};
  cuv_op_t *zipped[] = {cuvt_counted_value(1, &releases), probe_op(&first), probe_op(&second),
                        cuvt_counted_value(2, &releases)};
  returns_t stage = {.next = cuv_seq(cuv_zip(zipped, 4), cuvt_counted_value(3, &releases))};
  cuv_output_t out;
  int rc = cuv_sync(cuv_then(cuvt_counted_value(0, &releases), return_next, &stage), &out);
  assert_int_equal(rc, CUV_ENOTFOUND);
  assert_null(out.data);
  assert_int_equal(atomic_load(&stage.calls), 1);
  assert_probe(&first, 1);
  assert_probe(&second, 0);
  assert_int_equal(atomic_load(&releases), 4);
}

/* A map failing inside a fork branch inside a zip: the value the map received is released once
 * (the map's failure releases it), the zip's earlier item once, the later item once. */
static int fail_map(cuv_output_t *value, void *arg) {
  atomic_fetch_add((atomic_int *)arg, 1);
  return CUV_ENOTSUP;
}

static void test_map_failure_in_fork_in_zip(void **state) {
  atomic_int releases = 0, map_calls = 0;
  cuv_op_t *branches[] = {cuvt_counted_value(1, &releases),
                          cuv_map(cuvt_counted_value(2, &releases), fail_map, &map_calls)};
  cuv_op_t *zipped[] = {cuvt_counted_value(0, &releases), cuv_fork(branches, 2),
                        cuvt_counted_value(3, &releases)};
  assert_int_equal(cuv_sync(cuv_zip(zipped, 3), NULL), CUV_ENOTSUP);
  assert_int_equal(atomic_load(&map_calls), 1);
  assert_int_equal(atomic_load(&releases), 4);
}

/* then(then(zip([v1, FAIL]), never), never) on a given stream and through cuv_enqueue_on: the
 * partial output is released at each level, neither stage runs, and the stream is left with
 * nothing in flight once synchronized. */
static void test_then_of_then_on_enqueue(void **state) {
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  atomic_int releases = 0, never_calls = 0;
  probe_t fail = {.status = CUV_EIO};
  cuv_op_t *zipped[] = {cuvt_counted_value(1, &releases), cuvt_sleep(5), probe_op(&fail)};
  cuv_op_t *op = cuv_then(cuv_then(cuv_zip(zipped, 3), never, &never_calls), never, &never_calls);
  cuv_output_t out;
  assert_int_equal(cuv_enqueue_on(s, op, &out), CUV_EIO);
  assert_null(out.data);
  assert_int_equal(atomic_load(&releases), 1);
  assert_int_equal(atomic_load(&never_calls), 0);
  assert_probe(&fail, 1);
  assert_cuv_ok(cuv_stream_synchronize(s));
  assert_int_equal(cuv_stream_in_flight(s), 0);
  cuv_stream_destroy(s);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_zip_in_seq_in_fork_in_then),
      cmocka_unit_test(test_nested_failure_through_submit),
      cmocka_unit_test(test_fork_branch_failure_stops_later_branches),
      cmocka_unit_test(test_first_error_wins_in_then_returned_op),
      cmocka_unit_test(test_map_failure_in_fork_in_zip),
      cmocka_unit_test(test_then_of_then_on_enqueue),
  };
  return cuvt_run(tests);
}
