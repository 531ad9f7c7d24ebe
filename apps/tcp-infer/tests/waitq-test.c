/* tcp-infer-waitq-test: the queue of requests waiting to run (gpu/waitq.c) by itself, as cmocka
 * cases (TAP): the order of the priority levels and of arrival within one, a request put ahead
 * of its level (a replay at --isolate's front), taking requests out, the counts, and the timer
 * that hands the requests whose timeout passed to the queue's owner, on a libuv loop of its own.
 * No case depends on how long anything takes: the deadlines are long past or far away. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "cli.h"
#include "server.h"
#include "waitq.h"

#define N 8
#define HOUR_NS 3600000000000ull

typedef struct fixture {
  server_t srv;
  loop_t lp;
  waitq_t q;
  request_t req[N];
  request_t *expired[N]; /* in the order the owner got them */
  unsigned nexpired, done;
} fixture_t;

static fixture_t fx;

static void on_done(request_t *req) { fx.done++; }

/* The owner's answer: remembered, then the timeout's answer. */
static void on_expired(waitq_t *q, request_t *req) {
  assert_ptr_equal(q, &fx.q);
  assert_ptr_equal(q->owner, &fx);
  fx.expired[fx.nexpired++] = req;
  waitq_timed_out(&fx.lp, req);
}

static int setup(void **state) {
  memset(&fx, 0, sizeof fx);
  fx.srv.priority_levels = 3;
  fx.lp.srv = &fx.srv;
  assert_int_equal(uv_loop_init(&fx.lp.loop), 0);
  waitq_init(&fx.q, &fx.lp, on_expired, &fx);
  for (unsigned i = 0; i < N; i++)
    fx.req[i] = (request_t){.lp = &fx.lp, .done = on_done};
  return 0;
}

static int teardown(void **state) {
  waitq_close(&fx.q);
  uv_run(&fx.lp.loop, UV_RUN_DEFAULT); /* the close */
  assert_int_equal(uv_loop_close(&fx.lp.loop), 0);
  return 0;
}

/* Pushes request i at `priority`, ahead of its level or not. */
static void push(unsigned i, unsigned priority, bool ahead) {
  fx.req[i].priority = priority;
  if (ahead)
    waitq_push_ahead(&fx.q, &fx.req[i]);
  else
    waitq_push(&fx.q, &fx.req[i]);
  assert_int_equal(fx.req[i].state, REQ_WAITING);
}

/* The queue holds exactly these requests, in this order, and its counts say so. */
static void expect_queue(const unsigned *want, unsigned n) {
  assert_int_equal(fx.q.len, n);
  assert_int_equal(fx.lp.n.waiting, n);
  const request_t *req = waitq_first(&fx.q);
  for (unsigned k = 0; k < n; k++, req = req->next_wait) {
    assert_non_null(req);
    if (req != &fx.req[want[k]])
      fail_msg("place %u: request %td, not %u", k, req - fx.req, want[k]);
  }
  assert_null(req);
  assert_ptr_equal(fx.q.tail, n ? &fx.req[want[n - 1]] : NULL);
}

/* Levels 3, 2, default (3 of 3), 1, 2, 1: 1, 1, 2, 2, 3, default; popped in that order. */
static void test_levels(void **state) {
  static const unsigned prio[6] = {3, 2, 0, 1, 2, 1}, want[6] = {3, 5, 1, 4, 0, 2};
  for (unsigned i = 0; i < 6; i++)
    push(i, prio[i], false);
  expect_queue(want, 6);
  for (unsigned k = 0; k < 6; k++) {
    assert_ptr_equal(waitq_pop(&fx.q), &fx.req[want[k]]);
    assert_null(fx.req[want[k]].next_wait);
  }
  assert_null(waitq_pop(&fx.q));
  expect_queue(NULL, 0);
  assert_int_equal(fx.q.expiry_at, 0); /* no timeout asked: never armed */
}

/* Ahead of its level: before the others of that level, after the higher levels. */
static void test_ahead(void **state) {
  push(0, 1, false);
  push(1, 2, false);
  push(2, 3, false);
  push(3, 2, true);  /* before 1 */
  push(4, 1, true);  /* first of all */
  push(5, 0, true);  /* the default level, 3: before 2 */
  push(6, 2, false); /* after 1 */
  static const unsigned want[7] = {4, 0, 3, 1, 6, 5, 2};
  expect_queue(want, 7);
}

/* Out from the middle, the end and the head; one not in it: false, nothing changed. */
static void test_remove(void **state) {
  for (unsigned i = 0; i < 5; i++)
    push(i, 0, false);
  assert_true(waitq_remove(&fx.q, &fx.req[2]));
  assert_true(waitq_remove(&fx.q, &fx.req[4]));
  assert_true(waitq_remove(&fx.q, &fx.req[0]));
  assert_false(waitq_remove(&fx.q, &fx.req[2]));
  assert_false(waitq_remove(&fx.q, &fx.req[7]));
  static const unsigned left[2] = {1, 3};
  expect_queue(left, 2);
  push(5, 0, false); /* after the new tail */
  static const unsigned more[3] = {1, 3, 5};
  expect_queue(more, 3);
}

/* Two requests past their timeout, one without, one an hour away: the timer hands the two to the
 * owner, in queue order, each answered "Request timeout expired" and counted; the others stay,
 * the timer armed again for the one left with a timeout. */
static void test_timeouts(void **state) {
  uint64_t now = uv_hrtime();
  fx.req[0].deadline = now + HOUR_NS;
  fx.req[1].deadline = now - 1;
  fx.req[3].deadline = 1; /* long past */
  push(0, 0, false);
  push(1, 0, false);
  push(2, 2, false);
  push(3, 1, false);
  assert_int_equal(fx.q.expiry_at, 1); /* the earliest */
  uv_ref((uv_handle_t *)&fx.q.expiry); /* the test's loop has nothing else to keep it running */
  while (fx.nexpired < 2) /* not UV_RUN_ONCE: after the timers it would wait for the next */
    uv_run(&fx.lp.loop, UV_RUN_NOWAIT);
  assert_int_equal(fx.nexpired, 2);
  assert_ptr_equal(fx.expired[0], &fx.req[3]);
  assert_ptr_equal(fx.expired[1], &fx.req[1]);
  assert_int_equal(fx.done, 2);
  assert_int_equal(fx.lp.n.queue_timeouts, 2);
  for (unsigned k = 0; k < 2; k++) {
    const request_t *req = fx.expired[k];
    assert_true(req->timed_out && req->rejected);
    assert_int_equal(req->gpu_status, CUV_ECANCELED);
    assert_int_equal(strncmp(req->gpu_error, "Request timeout expired", 23), 0);
  }
  static const unsigned left[2] = {2, 0};
  expect_queue(left, 2);
  assert_false(fx.req[0].timed_out || fx.req[2].timed_out);
  assert_true(fx.q.expiry_at == fx.req[0].deadline);
  assert_true(waitq_past_timeout(&fx.req[1], now) && !waitq_past_timeout(&fx.req[0], now));
  assert_false(waitq_past_timeout(&fx.req[2], now)); /* none asked */
}

int main(int argc, char **argv) {
  cli_no_options(argc, argv, "the queue of waiting requests (gpu/waitq.c) as cmocka cases");
  const struct CMUnitTest cases[] = {
      cmocka_unit_test_setup_teardown(test_levels, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ahead, setup, teardown),
      cmocka_unit_test_setup_teardown(test_remove, setup, teardown),
      cmocka_unit_test_setup_teardown(test_timeouts, setup, teardown)};
  return cmocka_run_group_tests(cases, NULL, NULL);
}
