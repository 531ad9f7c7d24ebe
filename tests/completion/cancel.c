/* Cancellation by ticket through the public API: cancel right after submit, during a slow
 * kernel (the callback comes while the kernel is still held: at the next drain, not when the
 * work ends), after the work finished but before the drain, and after delivery (CUV_ENOENT). The
 * callback runs exactly once, with CUV_ECANCELED and no output; a second cancel finds nothing
 * (CUV_ENOENT); the GPU work still completes, and what it touches (the output included) retires
 * only after completion, in a later drain. Many cancels race
 * completions from four threads while a drainer thread delivers: every callback exactly once
 * with a status that matches whether a cancel was accepted. Run under ThreadSanitizer too. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "counted.h"
#include "gate.h"

#define N 4099
#define SLOW_MS 20

static void sleep_ms(unsigned ms) {
  struct timespec t = {0, (long)ms * 1000000L};
  nanosleep(&t, NULL);
}

/* What a done callback saw; recorded on the draining thread, asserted on the test thread. */
typedef struct seen {
  atomic_int calls;
  int status;
  int payload;      /* cuvt_payload of the output: INT32_MIN when there was none */
  void *data;
} seen_t;

static void record_done(int status, cuv_output_t *output, void *arg) {
  seen_t *s = arg;
  s->status = status;
  s->data = output ? output->data : NULL;
  s->payload = cuvt_payload(output);
  atomic_fetch_add(&s->calls, 1);
}

/* The work every single-submission case cancels: after `ms` milliseconds, buf[0..N) = value;
 * output: a counted value (payload). buf is untracked (CUV_HAZARD_NONE), so a later read on
 * another stream sees the fill only if it really completed before the callback. */
typedef struct work {
  cuv_queue_t *q;
  cuv_buffer_t *buf;
  unsigned value;
  int payload;
  atomic_int releases;
  seen_t seen;
  cuv_ticket_t ticket;
} work_t;

static void work_submit(work_t *w, unsigned ms) {
  w->value = cuvt_nonzero_u32();
  w->payload = (int)(cuvt_random_u32() % 1000000u);
  cuv_op_t *op = cuv_seq(cuv_seq(cuvt_sleep(ms), cuvt_fill_u32(w->buf, N, w->value)),
                         cuvt_counted_value(w->payload, &w->releases));
  w->ticket = 0;
  cuv_submit_opts_t opts = {.ticket = &w->ticket};
  assert_cuv_ok(cuv_submit(w->q, op, record_done, &w->seen, &opts));
  assert_true(w->ticket != 0);
}

/* The fill landed: read on a stream of the default policy, not ordered after the work by cuv. */
static void assert_filled(work_t *w) {
  unsigned *got = malloc(N * sizeof *got);
  assert_non_null(got);
  cuvt_read(got, w->buf, 0, N * sizeof *got);
  for (size_t i = 0; i < N; i++)
    if (got[i] != w->value)
      fail_msg("element %zu: got %u, want %u", i, got[i], w->value);
  free(got);
}

static void assert_cancelled_once(work_t *w) {
  cuvt_drain_until_retired(w->q);
  assert_int_equal(atomic_load(&w->seen.calls), 1);
  assert_int_equal(w->seen.status, CUV_ECANCELED);
  assert_null(w->seen.data); /* no output */
  assert_int_equal(atomic_load(&w->releases), 1); /* released once, by cuv, at retirement */
  assert_int_equal(cuv_cancel(w->q, w->ticket), CUV_ENOENT); /* delivered: gone */
}

static int setup(void **state) {
  work_t *w = calloc(1, sizeof *w);
  if (!w || cuv_queue_create(&w->q, NULL, NULL) != 0)
    return -1;
  if (cuv_buffer_create(&w->buf, cuvt_device(), N * sizeof(unsigned)) != 0 ||
      cuv_buffer_set_hazard_mode(w->buf, CUV_HAZARD_NONE) != 0)
    return -1;
  *state = w;
  return 0;
}

static int teardown(void **state) {
  work_t *w = *state;
  cuv_buffer_unref(w->buf);
  int rc = cuv_queue_destroy(w->q);
  free(w);
  return rc;
}

static void test_cancel_right_after_submit(void **state) {
  work_t *w = *state;
  for (int r = 0; r < 5; r++) {
    atomic_store(&w->seen.calls, 0);
    atomic_store(&w->releases, 0);
    work_submit(w, SLOW_MS);
    assert_cuv_ok(cuv_cancel(w->q, w->ticket));
    assert_int_equal(cuv_cancel(w->q, w->ticket), CUV_ENOENT); /* again: already cancelled */
    assert_int_equal(atomic_load(&w->seen.calls), 0); /* callbacks run only in the drain */
    cuvt_drain_until(w->q, &w->seen.calls, 1);
    assert_cancelled_once(w);
    assert_filled(w);
    assert_int_equal(cuv_queue_drain(w->q), 0);
  }
}

/* The callback does not wait for the work: a gate holds the kernel until after it ran. */
static void test_cancel_during_slow_kernel(void **state) {
  work_t *w = *state;
  cuvt_gate_t g;
  cuvt_gate_init(&g);
  w->value = cuvt_nonzero_u32();
  cuv_op_t *op = cuv_seq(cuv_seq(cuvt_gate_wait(&g), cuvt_fill_u32(w->buf, N, w->value)),
                         cuvt_counted_value(7, &w->releases));
  cuv_submit_opts_t opts = {.ticket = &w->ticket};
  atomic_store(&w->seen.calls, 0);
  atomic_store(&w->releases, 0);
  assert_cuv_ok(cuv_submit(w->q, op, record_done, &w->seen, &opts));
  sleep_ms(SLOW_MS); /* most likely enqueued and held by now; either way not finished */
  assert_cuv_ok(cuv_cancel(w->q, w->ticket));
  cuvt_drain_until(w->q, &w->seen.calls, 1); /* with the gate still closed */
  assert_int_equal(w->seen.status, CUV_ECANCELED);
  assert_int_equal(atomic_load(&w->releases), 0); /* the output waits for the work */
  assert_int_equal(cuv_queue_pending(w->q), 1);   /* and so does the submission */
  cuvt_gate_open(&g);
  assert_cancelled_once(w);
  assert_filled(w);
  cuvt_gate_close(&g);
}

/* Finished (its completion is in the queue) but not drained: a cancel still wins. */
static void test_cancel_after_finish_before_drain(void **state) {
  work_t *w = *state;
  work_submit(w, 1);
  for (int spins = 0; cuv_queue_wait(w->q, 1000) != 0; spins++)
    if (spins > 120)
      fail_msg("work did not finish");
  assert_cuv_ok(cuv_cancel(w->q, w->ticket));
  assert_int_equal(cuv_queue_drain(w->q), 1);
  assert_cancelled_once(w);
  assert_filled(w);
}

static void test_cancel_after_delivery(void **state) {
  work_t *w = *state;
  work_submit(w, 1);
  cuvt_drain_until(w->q, &w->seen.calls, 1);
  assert_cuv_ok(w->seen.status);
  assert_int_equal(w->seen.payload, w->payload); /* delivered with its output */
  assert_int_equal(atomic_load(&w->releases), 1);
  assert_int_equal(cuv_cancel(w->q, w->ticket), CUV_ENOENT);
  assert_filled(w);
}

/* A submission whose execution failed reports CUV_ECANCELED when cancelled, not its error. */
static cuv_op_t *then_fails(cuv_output_t *input, void *arg) {
  return cuv_launch(NULL, CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 0); /* an op carrying CUV_EINVAL */
}

static void test_cancel_failed_submission(void **state) {
  work_t *w = *state;
  seen_t failed = {0}, cancelled = {0};
  cuv_op_t *op1 = cuv_then(cuvt_sleep(1), then_fails, NULL);
  cuv_op_t *op2 = cuv_then(cuvt_sleep(1), then_fails, NULL);
  cuv_ticket_t t1 = 0, t2 = 0;
  cuv_submit_opts_t o1 = {.ticket = &t1}, o2 = {.ticket = &t2};
  assert_cuv_ok(cuv_submit(w->q, op1, record_done, &failed, &o1));
  assert_cuv_ok(cuv_submit(w->q, op2, record_done, &cancelled, &o2));
  assert_true(t1 != t2);
  assert_cuv_ok(cuv_cancel(w->q, t2));
  cuvt_drain_until(w->q, &cancelled.calls, 1);
  cuvt_drain_until(w->q, &failed.calls, 1);
  assert_int_equal(failed.status, CUV_EINVAL);
  assert_int_equal(cancelled.status, CUV_ECANCELED);
  assert_int_equal(atomic_load(&failed.calls), 1);
  assert_int_equal(atomic_load(&cancelled.calls), 1);
  cuvt_drain_until_retired(w->q);
  assert_int_equal(atomic_load(&cancelled.calls), 1); /* and not again when its work retired */
}

static void test_cancel_unknown_tickets(void **state) {
  work_t *w = *state;
  assert_int_equal(cuv_cancel(NULL, 1), CUV_EINVAL);
  assert_int_equal(cuv_cancel(w->q, 0), CUV_ENOENT);
  assert_int_equal(cuv_cancel(w->q, UINT64_MAX), CUV_ENOENT);
  /* A ticket names a submission of its own queue only. */
  cuv_queue_t *other;
  assert_cuv_ok(cuv_queue_create(&other, NULL, NULL));
  seen_t seen = {0};
  cuv_ticket_t t = 0;
  cuv_submit_opts_t opts = {.ticket = &t};
  assert_cuv_ok(cuv_submit(other, cuvt_sleep(SLOW_MS), record_done, &seen, &opts));
  assert_int_equal(cuv_queue_pending(w->q), 0);
  assert_int_equal(cuv_cancel(w->q, t), CUV_ENOENT);
  cuvt_drain_until(other, &seen.calls, 1);
  assert_cuv_ok(seen.status); /* not cancelled by the wrong queue's call */
  assert_cuv_ok(cuv_queue_destroy(other));
}

/* Many in flight, every other one with a ticket (the queue's ticket index grows and shifts
 * entries back as cancels remove them in random order): each ticketed one is cancelled once and
 * called back once with CUV_ECANCELED; the others, which cuv_cancel cannot name, deliver their
 * outputs. */
#define MANY 2000
static void test_cancel_many_in_random_order(void **state) {
  work_t *w = *state;
  static seen_t seen[MANY];
  static cuv_ticket_t tickets[MANY];
  static int payload[MANY];
  static size_t order[MANY / 2];
  atomic_int releases = 0;
  memset(seen, 0, sizeof seen);
  for (size_t i = 0; i < MANY; i++) {
    payload[i] = (int)(cuvt_random_u32() % 1000000u);
    tickets[i] = 0;
    cuv_submit_opts_t opts = {.ticket = i % 2 ? NULL : &tickets[i]};
    assert_cuv_ok(cuv_submit(w->q, cuvt_counted_value(payload[i], &releases), record_done,
                             &seen[i], &opts));
  }
  for (size_t k = 0; k < MANY / 2; k++)
    order[k] = 2 * k;
  for (size_t k = MANY / 2 - 1; k > 0; k--) { /* a random order */
    size_t j = cuvt_random_u32() % (k + 1), t = order[k];
    order[k] = order[j];
    order[j] = t;
  }
  for (size_t k = 0; k < MANY / 2; k++) /* before any drain: every one is still cancellable */
    assert_cuv_ok(cuv_cancel(w->q, tickets[order[k]]));
  for (size_t k = 0; k < MANY / 2; k++)
    assert_int_equal(cuv_cancel(w->q, tickets[order[k]]), CUV_ENOENT);
  cuvt_drain_until_retired(w->q);
  for (size_t i = 0; i < MANY; i++) {
    assert_int_equal(atomic_load(&seen[i].calls), 1);
    if (i % 2 == 0) {
      assert_int_equal(seen[i].status, CUV_ECANCELED);
    } else {
      assert_cuv_ok(seen[i].status);
      assert_int_equal(seen[i].payload, payload[i]);
    }
  }
  assert_int_equal(atomic_load(&releases), MANY);
}

/* ---- resources retire only after completion ---- */

/* A slow kernel writes a buffer whose last user reference is dropped right after submit, and the
 * submission is cancelled: the write lands (a copy behind it shows it), the memory is freed only
 * when the drain retires the submission, and stats count it in flight until then. */
static void test_released_buffer_retires_after_completion(void **state) {
  work_t *w = *state;
  for (int r = 0; r < 3; r++) {
    cuv_stats_t before = cuvt_stats();
    unsigned long frees = cuvt_is_sim() ? cuv_sim_calls("cuMemFree") : 0;
    cuv_buffer_t *tmp = cuvt_buffer(N * sizeof(unsigned));
    unsigned value = cuvt_nonzero_u32();
    atomic_int releases = 0;
    seen_t seen = {0};
    cuv_ticket_t ticket = 0;
    cuv_op_t *ops[] = {cuvt_sleep(SLOW_MS), cuvt_fill_u32(tmp, N, value),
                       cuv_memcpy_dtod(w->buf, 0, tmp, 0, N * sizeof(unsigned)),
                       cuvt_counted_value(1, &releases)};
    cuv_submit_opts_t opts = {.ticket = &ticket};
    assert_cuv_ok(cuv_submit(w->q, cuv_zip(ops, 4), record_done, &seen, &opts));
    cuv_buffer_unref(tmp); /* the user's last reference */
    assert_cuv_ok(cuv_cancel(w->q, ticket));
    /* Retirement happens in the drain (on this thread), so until then nothing was freed. */
    assert_int_equal(cuvt_stats().in_flight, before.in_flight + 1);
    if (cuvt_is_sim())
      assert_int_equal(cuv_sim_calls("cuMemFree"), frees);
    cuvt_drain_until(w->q, &seen.calls, 1);
    assert_int_equal(seen.status, CUV_ECANCELED);
    assert_null(seen.data);
    cuvt_drain_until_retired(w->q);
    assert_int_equal(atomic_load(&releases), 1);
    assert_int_equal(cuvt_stats().in_flight, before.in_flight);
    if (cuvt_is_sim())
      assert_int_equal(cuv_sim_calls("cuMemFree"), frees + 1);
    w->value = value; /* the copy behind the write shows it landed */
    assert_filled(w);
  }
}

/* ---- holds go before the callback ---- */

typedef struct at_callback {
  atomic_int calls;
  uint64_t in_flight;
  unsigned long frees;
} at_callback_t;

static void record_at_callback(int status, cuv_output_t *output, void *arg) {
  at_callback_t *a = arg;
  a->in_flight = cuvt_stats().in_flight;
  a->frees = cuvt_is_sim() ? cuv_sim_calls("cuMemFree") : 0;
  atomic_fetch_add(&a->calls, 1);
}

/* The seed's order: what the work held is released before its callback runs, so the callback
 * sees nothing in flight, and a buffer whose last reference the work held is freed already. */
static void test_holds_released_before_callback(void **state) {
  work_t *w = *state;
  cuv_stats_t before = cuvt_stats();
  unsigned long frees = cuvt_is_sim() ? cuv_sim_calls("cuMemFree") : 0;
  cuv_buffer_t *tmp = cuvt_buffer(N * sizeof(unsigned));
  at_callback_t seen = {0};
  assert_cuv_ok(cuv_submit(w->q, cuvt_fill_u32(tmp, N, cuvt_nonzero_u32()), record_at_callback,
                           &seen, NULL));
  cuv_buffer_unref(tmp); /* the work holds the last reference */
  cuvt_drain_until(w->q, &seen.calls, 1);
  assert_int_equal(seen.in_flight, before.in_flight);
  if (cuvt_is_sim())
    assert_int_equal(seen.frees, frees + 1);
}

/* ---- many cancels racing completions ---- */

#define THREADS 4
#define PER_THREAD 300
#define TOTAL (THREADS * PER_THREAD)
#define M 64 /* elements of each thread's buffer */

typedef struct race {
  cuv_queue_t *q;
  cuv_buffer_t *bufs[THREADS];
  atomic_int releases;
  atomic_int drained;
  int watchdog_fired;       /* written by the drainer */
  int submit_rc[TOTAL];     /* written by the submitting thread of the item */
  int cancel_accepted[TOTAL];
  int cancel_refused[TOTAL];
  atomic_int calls[TOTAL];  /* written by the drainer (callbacks) */
  int status[TOTAL];
  int payload[TOTAL];
  void *data[TOTAL];
} race_t;

typedef struct race_item {
  race_t *race;
  int idx;
} race_item_t;

static race_item_t items[TOTAL];

static void race_done(int status, cuv_output_t *output, void *arg) {
  race_item_t *it = arg;
  race_t *r = it->race;
  r->status[it->idx] = status;
  r->data[it->idx] = output->data;
  r->payload[it->idx] = cuvt_payload(output);
  atomic_fetch_add(&r->calls[it->idx], 1);
}

typedef struct submitter {
  race_t *race;
  int thread;
  pthread_t id;
} submitter_t;

/* Submits PER_THREAD fills of this thread's buffer (value idx + 1) and cancels a random subset:
 * sometimes the one just submitted, sometimes an earlier one (which may have been delivered). */
static void *submitter_main(void *arg) {
  submitter_t *s = arg;
  race_t *r = s->race;
  cuv_ticket_t tickets[PER_THREAD];
  for (int i = 0; i < PER_THREAD; i++) {
    int idx = s->thread * PER_THREAD + i;
    items[idx] = (race_item_t){r, idx};
    cuv_op_t *op = cuv_seq(cuvt_fill_u32(r->bufs[s->thread], M, (unsigned)idx + 1u),
                           cuvt_counted_value(idx, &r->releases));
    cuv_submit_opts_t opts = {.ticket = &tickets[i]};
    r->submit_rc[idx] = cuv_submit(r->q, op, race_done, &items[idx], &opts);
    if (r->submit_rc[idx] != 0)
      continue;
    uint32_t dice = cuvt_random_u32();
    if (dice % 3 == 0) /* a third of the time: the one just submitted */
      dice = (uint32_t)i;
    else if (dice % 3 == 1) /* a third: a random earlier one */
      dice = (uint32_t)(dice / 3 % (uint32_t)(i + 1));
    else
      continue;
    int target = s->thread * PER_THREAD + (int)dice;
    int rc = cuv_cancel(r->q, tickets[dice]);
    if (rc == 0)
      r->cancel_accepted[target]++;
    else if (rc == CUV_ENOENT)
      r->cancel_refused[target]++;
    else
      r->cancel_refused[target] = -1000; /* an unexpected status: fails the test later */
  }
  return NULL;
}

/* Waits and drains until every submission was delivered and retired (a cancelled one is called
 * back before its work finished), or a minute without progress. */
static void *drainer_main(void *arg) {
  race_t *r = arg;
  int idle = 0;
  while (atomic_load(&r->drained) < TOTAL || cuv_queue_pending(r->q) > 0) {
    int rc = cuv_queue_wait(r->q, 100);
    int ran = cuv_queue_drain(r->q);
    if (ran > 0) {
      atomic_fetch_add(&r->drained, ran);
      idle = 0;
    } else if (rc == CUV_EBUSY && ++idle > 600) {
      r->watchdog_fired = 1;
      break;
    }
  }
  return NULL;
}

static void test_cancels_race_completions(void **state) {
  race_t *r = calloc(1, sizeof *r);
  assert_non_null(r);
  assert_cuv_ok(cuv_queue_create(&r->q, NULL, NULL));
  for (int t = 0; t < THREADS; t++)
    r->bufs[t] = cuvt_buffer(M * sizeof(unsigned));
  (void)cuvt_kernel_ok("fill_u32"); /* loaded before the threads start */
  pthread_t drainer;
  submitter_t subs[THREADS];
  assert_int_equal(pthread_create(&drainer, NULL, drainer_main, r), 0);
  for (int t = 0; t < THREADS; t++) {
    subs[t] = (submitter_t){r, t, 0};
    assert_int_equal(pthread_create(&subs[t].id, NULL, submitter_main, &subs[t]), 0);
  }
  for (int t = 0; t < THREADS; t++)
    pthread_join(subs[t].id, NULL);
  pthread_join(drainer, NULL);

  assert_false(r->watchdog_fired);
  int cancelled = 0, completed = 0;
  for (int i = 0; i < TOTAL; i++) {
    assert_cuv_ok(r->submit_rc[i]);
    assert_true(r->cancel_refused[i] >= 0);
    if (atomic_load(&r->calls[i]) != 1)
      fail_msg("submission %d: %d callbacks", i, atomic_load(&r->calls[i]));
    if (r->cancel_accepted[i] > 0) { /* some cancel reached it before its delivery */
      assert_int_equal(r->status[i], CUV_ECANCELED);
      assert_null(r->data[i]);
      cancelled++;
    } else { /* never cancelled, or only after it was taken for delivery */
      assert_int_equal(r->status[i], 0);
      assert_int_equal(r->payload[i], i);
      completed++;
    }
  }
  print_message("# %d cancelled, %d completed\n", cancelled, completed);
  assert_int_equal(cancelled + completed, TOTAL);
  assert_int_equal(atomic_load(&r->drained), TOTAL);
  assert_int_equal(atomic_load(&r->releases), TOTAL);
  assert_int_equal(cuv_queue_pending(r->q), 0);
  /* Cancelled or not, every fill ran, in submission order per buffer (hazard ordering): each
   * buffer holds its thread's last value. */
  unsigned got[M];
  for (int t = 0; t < THREADS; t++) {
    cuvt_read(got, r->bufs[t], 0, sizeof got);
    for (int i = 0; i < M; i++)
      assert_int_equal(got[i], (unsigned)(t * PER_THREAD + PER_THREAD));
    cuv_buffer_unref(r->bufs[t]);
  }
  assert_cuv_ok(cuv_queue_destroy(r->q));
  free(r);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_cancel_right_after_submit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_during_slow_kernel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_after_finish_before_drain, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_after_delivery, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_failed_submission, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_unknown_tickets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_many_in_random_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_holds_released_before_callback, setup, teardown),
      cmocka_unit_test_setup_teardown(test_released_buffer_retires_after_completion, setup,
                                      teardown),
      cmocka_unit_test(test_cancels_race_completions),
  };
  return cuvt_run(tests);
}
