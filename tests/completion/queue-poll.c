/* cuv_queue_poll, an event loop's one look at its queue (include/cuv.h): its arguments, its
 * budget (0 delivers nothing; a short one delivers one slice of callbacks, cancellations as
 * completions, the rest waits for the next look), and what next_poll_ns says with young work in
 * flight and with none; 1 exactly while something is left, which the queue's descriptor
 * (cuv_queue_fd, read with poll(2)) shows. Run with the default spin budget, with 1 s (every
 * polled submission stays young for the whole test) and with 0 (nothing is ever young). */
#include <stdint.h>
#include <time.h>

#include "counted.h"

#define BACKLOG 100
#define SLICE 16         /* lib/queue_poll.c's POLL_SLICE: callbacks between looks at the clock */
#define CALLBACK_NS 2000 /* each backlog callback takes at least this long on the clock */

typedef struct seen {
  int calls;
  int status;
  int payload;
} seen_t;

static int calls_so_far;

static uint64_t clock_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void slow_done(int status, cuv_output_t *output, void *arg) {
  seen_t *s = arg;
  for (uint64_t start = clock_ns(); clock_ns() - start < CALLBACK_NS;)
    ;
  s->calls++;
  s->status = status;
  s->payload = cuvt_payload(output);
  calls_so_far++;
}

/* A NULL queue is refused and next_poll_ns left alone; a NULL next_poll_ns is allowed. */
static void test_arguments(void **state) {
  (void)state;
  uint64_t next = 12345;
  assert_int_equal(cuv_queue_poll(NULL, 1000, &next), CUV_EINVAL);
  assert_int_equal(cuv_queue_poll(NULL, 0, NULL), CUV_EINVAL);
  assert_true(next == 12345);
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  assert_int_equal(cuv_queue_poll(q, 1000, NULL), 0);
  assert_int_equal(cuv_queue_poll(q, 0, &next), 0);
  assert_true(next == 0); /* nothing in flight, nothing to deliver: block */
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* BACKLOG host values, each with its payload, waited for until all are queued (the queue's
 * pending count is not enough: it counts the queued ones too; the stats' completions are). */
static void submit_backlog(cuv_queue_t *q, seen_t *seen, int *payloads, atomic_int *releases) {
  cuv_submit_opts_t opts = {.flags = CUV_SUBMIT_NO_SPIN};
  for (int i = 0; i < BACKLOG; i++) {
    payloads[i] = (int)(cuvt_random_u32() & 0x3fffffff);
    assert_cuv_ok(cuv_submit(q, cuvt_counted_value(payloads[i], releases), slow_done, &seen[i],
                             &opts));
  }
}

/* A new queue, its descriptor in *fd, with the backlog submitted into it. */
static cuv_queue_t *backlog_queue(seen_t *seen, int *payloads, atomic_int *releases, int *fd) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  assert_cuv_ok(cuv_queue_fd(q, fd));
  calls_so_far = 0;
  submit_backlog(q, seen, payloads, releases);
  return q;
}

/* Budget 0 delivers nothing, whatever waits; a 1 ns budget delivers one slice (the callbacks
 * take longer than the budget, so the clock is past it at the first look), each once; a
 * next_poll_ns of 1 means more waits to be delivered (the descriptor is readable for it). */
static void test_budget_slices_the_backlog(void **state) {
  (void)state;
  seen_t seen[BACKLOG] = {0};
  int payloads[BACKLOG], fd;
  atomic_int releases = 0;
  cuv_queue_t *q = backlog_queue(seen, payloads, &releases, &fd);
  while (!cuvt_readable(fd, 0))
    assert_true(cuv_queue_wait(q, 1000) == 0 || cuvt_readable(fd, 0));
  uint64_t next = 0;
  assert_int_equal(cuv_queue_poll(q, 0, &next), 0);
  assert_int_equal(calls_so_far, 0);
  assert_true(next == 1); /* something to deliver: look again at once */
  int delivered = 0, looks = 0;
  while (delivered < BACKLOG) {
    int ran = cuv_queue_poll(q, 1, &next);
    assert_true(ran >= 0 && ran <= SLICE);
    assert_int_equal(calls_so_far, delivered + ran);
    if (next == 1)
      assert_true(cuvt_readable(fd, 0)); /* only this thread drains: it still waits */
    delivered += ran;
    looks++;
    if (ran == 0)
      assert_true(cuv_queue_wait(q, 1000) == 0 || cuvt_readable(fd, 0));
  }
  for (int i = 0; i < BACKLOG; i++) {
    assert_int_equal(seen[i].calls, 1);
    assert_int_equal(seen[i].status, 0);
    assert_int_equal(seen[i].payload, payloads[i]);
  }
  assert_true(looks >= BACKLOG / SLICE);
  assert_int_equal(cuv_queue_poll(q, UINT64_MAX, &next), 0);
  assert_true(next == 0);
  assert_false(cuvt_readable(fd, 0));
  assert_int_equal(atomic_load(&releases), BACKLOG);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* Cancellations are sliced as completions are: BACKLOG slow submissions cancelled at once are
 * delivered at most a slice per look under a 1 ns budget, each once with CUV_ECANCELED; their
 * work still retires later (pending reaches 0, every output released). */
static void test_budget_slices_cancellations(void **state) {
  (void)state;
  seen_t seen[BACKLOG] = {0};
  cuv_ticket_t tickets[BACKLOG];
  atomic_int releases = 0;
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  calls_so_far = 0;
  for (int i = 0; i < BACKLOG; i++) {
    cuv_submit_opts_t opts = {.flags = CUV_SUBMIT_NO_SPIN, .ticket = &tickets[i]};
    cuv_op_t *op = cuv_seq(cuvt_sleep(50), cuvt_counted_value(i, &releases));
    assert_cuv_ok(cuv_submit(q, op, slow_done, &seen[i], &opts));
  }
  for (int i = 0; i < BACKLOG; i++)
    assert_cuv_ok(cuv_cancel(q, tickets[i]));
  int delivered = 0;
  while (delivered < BACKLOG) {
    int ran = cuv_queue_poll(q, 1, NULL);
    assert_true(ran >= 1 && ran <= SLICE); /* all are due now: none waits for the work */
    delivered += ran;
    assert_int_equal(calls_so_far, delivered);
  }
  for (int i = 0; i < BACKLOG; i++) {
    assert_int_equal(seen[i].calls, 1);
    assert_int_equal(seen[i].status, CUV_ECANCELED);
  }
  while (cuv_queue_pending(q) > 0)
    if (cuv_queue_wait(q, 1000) == 0)
      assert_int_equal(cuv_queue_poll(q, UINT64_MAX, NULL), 0); /* retirements: no callback */
  assert_int_equal(calls_so_far, BACKLOG);
  assert_int_equal(atomic_load(&releases), BACKLOG);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* A large budget delivers everything done in one call and counts it. */
static void test_budget_delivers_all(void **state) {
  (void)state;
  seen_t seen[BACKLOG] = {0};
  int payloads[BACKLOG], fd;
  atomic_int releases = 0;
  cuv_queue_t *q = backlog_queue(seen, payloads, &releases, &fd);
  int delivered = 0;
  while (delivered < BACKLOG) {
    assert_true(cuv_queue_wait(q, 1000) == 0 || cuvt_readable(fd, 0) ||
                cuv_queue_pending(q) == 0);
    int ran = cuv_queue_poll(q, UINT64_MAX, NULL);
    assert_int_equal(calls_so_far, delivered + ran);
    delivered += ran;
  }
  for (int i = 0; i < BACKLOG; i++)
    assert_true(seen[i].calls == 1 && seen[i].payload == payloads[i]);
  assert_int_equal(cuv_queue_pending(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
}

static void count_done(int status, cuv_output_t *output, void *arg) {
  seen_t *s = arg;
  s->calls++;
  s->status = status;
  s->payload = cuvt_payload(output);
}

/* One 1 ms kernel. On a queue its owner polls (a look with budget 0 first), it is young while in
 * flight when the spin budget is 1 s: next_poll_ns is above 1 and within the budget (the test's
 * margin: a 1 ms kernel and a few looks against 1 s), or 1 when it finished during the look after
 * the delivery, and then the next look delivers it. With the default budget it is young only for
 * the queue's poll window, which may have passed by the first look. With spin budget 0, or on a
 * queue never polled before the submission, nothing is young: next_poll_ns is only ever 0 or 1.
 * Once it was delivered, next_poll_ns is 0. */
static void young_or_not(bool polled_first) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  if (polled_first)
    assert_int_equal(cuv_queue_poll(q, 0, NULL), 0);
  seen_t seen = {0};
  atomic_int releases = 0;
  int payload = (int)(cuvt_random_u32() & 0xffff);
  cuv_submit_opts_t opts = {.flags = CUV_SUBMIT_NO_SPIN};
  assert_cuv_ok(cuv_submit(q, cuv_seq(cuvt_sleep(1), cuvt_counted_value(payload, &releases)),
                           count_done, &seen, &opts));
  /* Timed (polled first, a spin budget): young for at most the longest poll window. */
  cuv_config_t c;
  assert_cuv_ok(cuv_config_get(&c));
  bool timed = polled_first && c.spin_budget_us > 0;
  uint64_t window_ns = 1000ull * (c.spin_budget_us > c.uv_poll_max_us ? c.spin_budget_us
                                                                      : c.uv_poll_max_us);
  bool young = timed && c.spin_budget_us == 1000000;
  uint64_t next = 0, most = 0;
  int looks = 0;
  bool left = false; /* the look before said something is left to deliver */
  while (seen.calls == 0) {
    int ran = cuv_queue_poll(q, 1000000, &next);
    assert_true(ran == 0 || ran == 1);
    if (left) /* what was left is delivered by the next look */
      assert_int_equal(ran, 1);
    /* Young: above 1 and within the budget, or 1 when the work finished during the look, after
     * its delivery (then the next look must deliver it). */
    if (seen.calls == 0 && young)
      assert_true(next >= 1 && next <= 1000000000u);
    if (!timed)
      assert_true(next <= 1);
    else /* a default budget's window may have passed before the first look, or not */
      assert_true(next <= window_ns);
    left = seen.calls == 0 && next == 1;
    most = next > most ? next : most;
    looks++;
  }
  assert_int_equal(seen.status, 0);
  assert_int_equal(seen.payload, payload);
  assert_int_equal(cuv_queue_poll(q, 1000000, &next), 0);
  assert_true(next == 0);
  assert_int_equal(atomic_load(&releases), 1);
  print_message("# %s queue: %d looks, the largest next_poll_ns %llu\n",
                polled_first ? "polled" : "unpolled", looks, (unsigned long long)most);
  assert_cuv_ok(cuv_queue_destroy(q));
}

static void test_next_poll_with_young_work(void **state) {
  (void)state;
  young_or_not(true);
}

static void test_next_poll_without_young_work(void **state) {
  (void)state;
  young_or_not(false);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arguments),
      cmocka_unit_test(test_budget_slices_the_backlog),
      cmocka_unit_test(test_budget_slices_cancellations),
      cmocka_unit_test(test_budget_delivers_all),
      cmocka_unit_test(test_next_poll_with_young_work),
      cmocka_unit_test(test_next_poll_without_young_work),
  };
  return cuvt_run(tests);
}
