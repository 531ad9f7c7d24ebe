/* cuv_cancel of a submission whose ticket the queue's index had no memory for (the test links
 * with --wrap=calloc and makes calloc fail around one cuv_submit): the submission is still
 * accepted, found by its ticket (on the queue's live list), cancelled once and called back once
 * with CUV_ECANCELED, beside one the index did take; the other's output is delivered. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>

#include <cmocka.h>

#include <cuv.h>

#include "calloc-fails.h"
#include "common.h"
#include "counted.h"

/* A counted value's output starts with its payload: cuvt_record_seen's `got` is the payload. */
static void submit(cuv_queue_t *q, int payload, atomic_int *releases, cuvt_seen_t *seen,
                   cuv_ticket_t *ticket) {
  cuv_submit_opts_t opts = {.ticket = ticket};
  assert_cuv_ok(
      cuv_submit(q, cuvt_counted_value(payload, releases), cuvt_record_seen, seen, &opts));
}

static void test_cancel_without_index_memory(void **state) {
  (void)state;
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  atomic_int releases = 0;
  cuvt_seen_t warm = {0}, listed = {0}, indexed = {0}, kept = {0};
  /* Everything a first submission starts (the device, its engine and streams) started here. */
  submit(q, 1, &releases, &warm, NULL);
  cuvt_drain_until_retired(q);
  assert_int_equal(warm.calls, 1);
  cuv_ticket_t t_listed = 0, t_indexed = 0, t_kept = 0;
  calloc_fails = true; /* the index's first table cannot be made */
  submit(q, 2, &releases, &listed, &t_listed);
  calloc_fails = false;
  submit(q, 3, &releases, &indexed, &t_indexed);
  int payload = (int)(cuvt_random_u32() % 1000000u);
  submit(q, payload, &releases, &kept, &t_kept);
  assert_true(t_listed && t_indexed && t_kept);
  assert_true(t_listed != t_indexed && t_indexed != t_kept && t_listed != t_kept);
  assert_cuv_ok(cuv_cancel(q, t_indexed));
  assert_cuv_ok(cuv_cancel(q, t_listed));
  assert_int_equal(cuv_cancel(q, t_listed), CUV_ENOENT);
  assert_int_equal(cuv_cancel(q, t_indexed), CUV_ENOENT);
  cuvt_drain_until_retired(q);
  assert_int_equal(listed.calls, 1);
  assert_int_equal(listed.status, CUV_ECANCELED);
  assert_int_equal(indexed.calls, 1);
  assert_int_equal(indexed.status, CUV_ECANCELED);
  assert_int_equal(kept.calls, 1);
  assert_cuv_ok(kept.status);
  assert_int_equal(kept.got, (unsigned)payload);
  assert_int_equal(cuv_cancel(q, t_kept), CUV_ENOENT); /* delivered: gone */
  assert_int_equal(atomic_load(&releases), 4);
  assert_cuv_ok(cuv_queue_destroy(q));
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cancel_without_index_memory),
  };
  return cuvt_run(tests);
}
