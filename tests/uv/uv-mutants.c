/* What the libuv bridge's loop-thread machinery promises, each case written against a one-line bug
 * of uv/bridge.c that the other scenarios let through (tests/mutants/core.mut):
 * - the idle handle polls the completion flags itself (cuv_queue_poll) while loop-thread work is
 *   young, rather than wait for the reactor thread (bridge-idle-no-poll), and so it does for work
 *   other threads submitted, once the loop saw it (bridge-others-not-polled);
 * - the idle handle never keeps the loop alive: only work in flight does (bridge-idle-referenced);
 * - a close from inside a done callback waits for the rest of the drain running that callback:
 *   the other callbacks still run with their own results, then close_cb, once (the bridge
 *   finishes a close only from its own request's callback, never inside a drain; this case and
 *   CI's ASan pass catch the use after free should that ever change);
 * - a close waits for another thread's submission that counted itself in but has not reached the
 *   queue yet (queue-enter-not-counted);
 * - a bridge closed by its last callback still keeps the loop alive until its handles close
 *   (bridge-close-holds-nothing). */
#include <time.h>

#include "uvt.h"

/* Completions claimed by any path so far (cuv_stats' per-path counters). */
static uint64_t claimed(void) {
  cuv_stats_t s;
  cuv_stats(&s);
  return s.completed_spin + s.completed_reactor + s.completed_hostfn + s.completed_sync;
}

/* Waits (a watchdog, never an assertion on time) until `want` completions were claimed. */
static void wait_claimed(uint64_t want) {
  struct timespec ms = {0, 1000000L};
  for (int i = 0; claimed() < want; i++) {
    if (i > 60000)
      fail_msg("completions not claimed: %llu of %llu", (unsigned long long)claimed(),
               (unsigned long long)want);
    nanosleep(&ms, NULL);
  }
}

/* sleep_then_write with no flag: a kernel busy for `us` microseconds that writes nothing. */
static cuv_op_t *sleep_us(unsigned us) {
  unsigned long long ns = (unsigned long long)us * 1000ull;
  unsigned value = 0;
  cuv_deviceptr_t none = 0;
  cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(value), CUV_ARG_VALUE(none)};
  return cuv_launch(cuvt_kernel("sleep_then_write"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 3);
}

/* ---- the loop polls for its young work ---- */

/* A chain of loop-thread submissions, each made from the callback of the one before, each a
 * 300 us kernel then a value naming it. Why this shape: the bridge polls (cuv_queue_poll in its
 * idle handle) for loop-thread work while it is young, a window sized from the loop's recent
 * submit-to-callback times (1.5 times their average) when that is under CUV_UV_POLL_MAX_US:
 * meson runs this file with CUV_UV_POLL_MAX_US=1000000 (tests/meson.build), so a slow link on a
 * loaded machine (with the default 1 ms, one link past 666 us shrinks the window to the 20 us
 * spin budget, the reactor then sees the next one too, and the average stays up: runs of 0 of
 * 200 were seen on the 2-core simulator machine) does not stop the loop polling for the next.
 * After the first link the loop polls through a kernel unless it runs past 1.5 times the
 * average. The reactor thread scans flat out for only 200 us after its own last completion or
 * wake-up and then sleeps in steps growing to 20 us between scans, so when a kernel ends it is
 * mostly asleep. Each link is a race the loop often wins (the figure is printed: 50 to 190 of
 * 200 on that machine, under load); for the loop to win none of CHAIN, the reactor thread would
 * have to scan in the microseconds between a flag landing and the loop's next look, CHAIN times
 * in a row. Without the poll nothing in this process runs the reactor's scan off its thread, and
 * completed_polled stays exactly 0. */
#define CHAIN 200
#define CHAIN_KERNEL_US 300

typedef struct chain {
  uvt_loop_t *l;
  int calls, submitted;
  int bad_status, bad_payload, submit_rc;
  bool off_loop_thread;
} chain_t;

static void chain_done(int status, cuv_output_t *output, void *arg);

static int chain_submit(chain_t *c) {
  int *v = malloc(sizeof *v);
  if (!v)
    abort();
  *v = c->submitted;
  int rc = cuv_uv_submit(c->l->bridge, cuv_seq(sleep_us(CHAIN_KERNEL_US), cuv_value(v, free)),
                         chain_done, c, NULL);
  if (rc == 0)
    c->submitted++;
  return rc;
}

static void chain_done(int status, cuv_output_t *output, void *arg) {
  chain_t *c = arg;
  uv_thread_t self = uv_thread_self();
  if (!uv_thread_equal(&self, &c->l->thread))
    c->off_loop_thread = true;
  if (status != 0)
    c->bad_status++;
  else if (!output->data || *(const int *)output->data != c->calls)
    c->bad_payload++; /* one at a time: the callbacks come in submission order */
  c->calls++;
  if (c->submitted < CHAIN) {
    int rc = chain_submit(c);
    if (rc != 0 && c->submit_rc == 0)
      c->submit_rc = rc;
  }
}

static void test_loop_polls_its_young_work(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  chain_t c = {.l = &l};
  cuv_stats_t before;
  cuv_stats(&before);
  assert_cuv_ok(chain_submit(&c));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  cuv_stats_t d = uvt_stats_delta(&before);
  print_message("# %llu of %d completions seen by the loop's polling, %llu by the reactor "
                "thread, %llu by host functions\n",
                (unsigned long long)d.completed_polled, CHAIN,
                (unsigned long long)(d.completed_reactor - d.completed_polled),
                (unsigned long long)d.completed_hostfn);
  assert_int_equal(c.submit_rc, 0);
  assert_int_equal(c.submitted, CHAIN);
  assert_int_equal(c.calls, CHAIN);
  assert_int_equal(c.bad_status, 0);
  assert_int_equal(c.bad_payload, 0);
  assert_false(c.off_loop_thread);
  assert_int_equal(cuv_uv_pending(l.bridge), 0);
  /* Polled completions are reactor-slot completions found by the loop thread. */
  assert_true(d.completed_polled <= d.completed_reactor);
  assert_true(d.completed_polled >= 1);
  uvt_close(&l);
}

/* Links submitted by another thread for the loop: a 2 ms kernel each, one submitted every
 * millisecond, so that when one ends the next is in flight and young. The loop, woken by a
 * completion, finds it so and polls for it and what follows as for its own work. The reactor
 * thread, which scans flat out for 200 us after a completion and then sleeps in steps of 20 us
 * and more, is mostly asleep when one ends. (Links submitted in pairs ended in pairs, with
 * nothing left in flight when the loop looked: on the GPU it never polled.) An async handle
 * keeps the loop alive until the last called back. Without the poll nothing in this process runs
 * the reactor's scan off its thread: completed_polled stays 0. The pace is a shape, not a timing
 * assertion. */
#define OTHER_CHAIN 100
#define OTHER_KERNEL_US 2000
#define OTHER_PACE_US 1000

typedef struct feeder_chain {
  uvt_loop_t *l;
  uv_async_t stop;
  atomic_int calls;
  int bad_status, bad_payload, submit_rc;
  bool seen[OTHER_CHAIN];
  bool off_loop_thread;
} feeder_chain_t;

static void feeder_chain_done(int status, cuv_output_t *output, void *arg) {
  feeder_chain_t *c = arg;
  uv_thread_t self = uv_thread_self();
  if (!uv_thread_equal(&self, &c->l->thread))
    c->off_loop_thread = true;
  int k = status == 0 && output->data ? *(const int *)output->data : -1;
  if (status != 0)
    c->bad_status++;
  else if (k < 0 || k >= OTHER_CHAIN || c->seen[k])
    c->bad_payload++; /* several in flight: in any order, each once */
  else
    c->seen[k] = true;
  atomic_fetch_add(&c->calls, 1);
}

static void feeder_chain_thread(void *arg) {
  feeder_chain_t *c = arg;
  struct timespec us = {0, 1000L}, pace = {0, OTHER_PACE_US * 1000L};
  for (int k = 0; k < OTHER_CHAIN && c->submit_rc == 0; k++) {
    int *v = malloc(sizeof *v);
    if (!v)
      abort();
    *v = k;
    c->submit_rc = cuv_uv_submit(c->l->bridge, cuv_seq(sleep_us(OTHER_KERNEL_US),
                                                       cuv_value(v, free)),
                                 feeder_chain_done, c, NULL);
    nanosleep(&pace, NULL);
  }
  for (int i = 0; c->submit_rc == 0 && atomic_load(&c->calls) < OTHER_CHAIN; i++) {
    if (i > 20000000) /* a watchdog, not a timing assertion */
      abort();
    nanosleep(&us, NULL);
  }
  uv_async_send(&c->stop);
}

static void feeder_chain_stop(uv_async_t *handle) { uv_close((uv_handle_t *)handle, NULL); }

static void test_loop_polls_young_work_of_other_threads(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  feeder_chain_t c = {.l = &l};
  assert_int_equal(uv_async_init(&l.loop, &c.stop, feeder_chain_stop), 0);
  cuv_stats_t before;
  cuv_stats(&before);
  uv_thread_t thread;
  assert_int_equal(uv_thread_create(&thread, feeder_chain_thread, &c), 0);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_thread_join(&thread), 0);
  cuv_stats_t d = uvt_stats_delta(&before);
  print_message("# %llu of %d completions of another thread's links seen by the loop's polling\n",
                (unsigned long long)d.completed_polled, OTHER_CHAIN);
  assert_int_equal(c.submit_rc, 0);
  assert_int_equal(atomic_load(&c.calls), OTHER_CHAIN);
  assert_int_equal(c.bad_status, 0);
  assert_int_equal(c.bad_payload, 0);
  assert_false(c.off_loop_thread);
  assert_true(d.completed_polled <= d.completed_reactor);
  assert_true(d.completed_polled >= 1);
  uvt_close(&l);
}

/* ---- the idle handle holds no reference ---- */

/* A loop-thread submission that cuv_submit refuses (an error op) was counted in and started the
 * idle handle polling before cuv_submit refused it; counted out again, nothing is in flight, and
 * the loop must have nothing keeping it alive: the idle handle, still active until its next run,
 * is unreferenced. uv_loop_alive is the loop's own answer to "would uv_run go on". */
static void test_refused_submission_leaves_loop_free(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  assert_true(uv_loop_alive(&l.loop));                  /* busy until the loop first looks */
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0); /* it looked: nothing in flight */
  assert_false(uv_loop_alive(&l.loop));

  for (int i = 0; i < 2; i++) {
    uvt_call_t call = {.loop = &l};
    /* cuv_alloc of 0 bytes is an error op carrying CUV_EINVAL (tests/README.md, Bad input). */
    assert_int_equal(cuv_uv_submit(l.bridge, cuv_alloc(cuvt_device(), 0), uvt_done, &call, NULL),
                     CUV_EINVAL);
    assert_int_equal(cuv_uv_pending(l.bridge), 0);
    assert_false(uv_loop_alive(&l.loop));
    assert_int_equal(uv_run(&l.loop, UV_RUN_NOWAIT), 0);
    assert_false(uv_loop_alive(&l.loop));
    assert_int_equal(call.calls, 0); /* refused: no callback */
  }

  /* The bridge still works, and lets the loop go once its work is done. */
  uvt_call_t ok = {.loop = &l};
  assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value(3), uvt_done, &ok, NULL));
  assert_true(uv_loop_alive(&l.loop));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(&ok, 1);
  assert_int_equal(ok.payload, 3);
  assert_false(uv_loop_alive(&l.loop));
  uvt_release_outputs(&ok, 1);
  uvt_close(&l);
}

/* ---- a close from inside a drain ---- */

/* MANY submissions finished before the loop runs, so one drain runs all their callbacks; the
 * first of them closes the bridge. The close must wait for that drain: every other callback
 * still runs once with its own value, then close_cb, once. (Finishing inside the drain would
 * free the bridge under the drain that is still running: under AddressSanitizer a use after
 * free.) */
#define MANY 6

typedef struct drain_closer {
  uvt_loop_t *l;
  uvt_call_t calls[MANY];
  unsigned pending_seen[MANY]; /* cuv_uv_pending inside each callback, in the order they ran */
  int ran, close_rc, closed_by;
} drain_closer_t;

typedef struct drain_arg {
  drain_closer_t *d;
  int index;
} drain_arg_t;

static void close_in_drain_done(int status, cuv_output_t *output, void *arg) {
  drain_arg_t *a = arg;
  drain_closer_t *d = a->d;
  uvt_done(status, output, &d->calls[a->index]);
  d->pending_seen[d->ran++] = cuv_uv_pending(d->l->bridge);
  if (d->ran == 1) {
    d->closed_by = a->index;
    d->close_rc = cuv_uv_close(d->l->bridge, uvt_on_close, d->l);
  }
}

static void test_close_inside_a_drain_of_many(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  drain_closer_t d = {.l = &l, .closed_by = -1};
  drain_arg_t args[MANY];
  uint64_t base = claimed();
  for (int i = 0; i < MANY; i++) {
    d.calls[i].loop = &l;
    args[i] = (drain_arg_t){&d, i};
    assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value(100 + i), close_in_drain_done, &args[i],
                                NULL));
  }
  /* All finished (claimed) before the loop runs: its first look drains them together. */
  wait_claimed(base + MANY);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(d.ran, MANY);
  assert_int_equal(d.close_rc, 0);
  assert_true(d.closed_by >= 0);
  uvt_assert_all_ok(d.calls, MANY);
  for (int i = 0; i < MANY; i++) {
    assert_int_equal(d.calls[i].payload, 100 + i);         /* its own result */
    assert_true(d.calls[i].seq < l.close_seq);             /* close_cb after every callback */
    assert_int_equal(d.pending_seen[i], (unsigned)(MANY - 1 - i)); /* each counted out once */
  }
  assert_int_equal(l.close_calls, 1);
  uvt_release_outputs(d.calls, MANY);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* ---- a submission between counting itself in and reaching the queue ---- */

/* Another thread's cuv_uv_submit counts itself in (in flight) before cuv_submit reaches the
 * queue (cuv_queue_pending counts it only once accepted). In between, cuv_submit asks the
 * policy for a stream: a policy of the test's own holds the submitting thread there, on a
 * semaphore, while the loop thread closes the bridge and runs the loop once. The bridge must not
 * finish (destroy its queue, close its handles, free itself) under that submission: it waits for
 * it, which is then accepted (the queue's closed check came before) and delivered, before
 * close_cb (bridge-close-with-work-in-flight: finishing on an empty queue alone frees the queue
 * and the bridge that the held thread goes on to use). */
typedef struct held_policy {
  cuv_stream_t *stream;
  uv_sem_t entered, release;
  int asked;
} held_policy_t;

static int held_next_stream(void *state, const cuv_op_t *op, cuv_stream_t **stream) {
  held_policy_t *h = state;
  (void)op;
  h->asked++; /* the submitting thread only; read after the join */
  uv_sem_post(&h->entered);
  uv_sem_wait(&h->release);
  *stream = h->stream;
  return 0;
}

static cuv_device_t *held_device(void *state) {
  (void)state;
  return cuvt_device();
}

static void held_destroy(void *state) { (void)state; }

typedef struct held_submitter {
  uvt_loop_t *l;
  cuv_policy_t *policy;
  uvt_call_t call;
  int rc;
} held_submitter_t;

static void held_submit(void *arg) {
  held_submitter_t *s = arg;
  cuv_submit_opts_t opts = {.policy = s->policy};
  s->rc = cuv_uv_submit(s->l->bridge, uvt_value(7), uvt_done, &s->call, &opts);
}

static void test_close_waits_for_a_submission_not_yet_queued(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  held_policy_t h = {0};
  assert_int_equal(uv_sem_init(&h.entered, 0), 0);
  assert_int_equal(uv_sem_init(&h.release, 0), 0);
  assert_cuv_ok(cuv_stream_create(&h.stream, cuvt_device()));
  static const cuv_policy_ops_t ops = {held_next_stream, held_device, held_destroy};
  held_submitter_t s = {.l = &l, .call = {.loop = &l}, .rc = 1};
  assert_cuv_ok(cuv_policy_create(&s.policy, &ops, &h));
  uv_thread_t submitter;
  assert_int_equal(uv_thread_create(&submitter, held_submit, &s), 0);
  uv_sem_wait(&h.entered); /* in flight, not yet on the queue */
  assert_int_equal(cuv_uv_pending(l.bridge), 1);
  assert_cuv_ok(cuv_uv_close(l.bridge, uvt_on_close, &l));
  /* One iteration: close callbacks of handles closed so far would run in it. */
  uv_run(&l.loop, UV_RUN_NOWAIT);
  if (l.close_calls != 0)
    /* The bridge is gone under the held thread: it is left held (releasing it would use the
     * freed queue); the process ends with this run. */
    fail_msg("the bridge finished closing with a submission in flight (close_cb ran %d times)",
             l.close_calls);
  uv_sem_post(&h.release);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_thread_join(&submitter), 0);
  assert_int_equal(s.rc, 0);
  assert_int_equal(h.asked, 1);
  uvt_assert_all_ok(&s.call, 1);
  assert_int_equal(s.call.payload, 7);
  assert_int_equal(l.close_calls, 1);
  assert_true(s.call.seq < l.close_seq);
  uvt_release_outputs(&s.call, 1);
  assert_int_equal(uv_loop_close(&l.loop), 0);
  cuv_policy_destroy(s.policy);
  cuv_stream_destroy(h.stream);
  uv_sem_destroy(&h.entered);
  uv_sem_destroy(&h.release);
}

/* ---- a closing bridge keeps its loop alive ---- */

/* The last callback in flight closes the bridge: nothing is in flight any more (it was counted
 * out before it ran) and the handles cannot close yet (it runs inside a drain), so only the
 * close's request (a uv_work_t) says that the loop must keep running until close_cb. The loop has
 * no other handle: uv_loop_alive, read in the callback right after cuv_uv_close, must still be
 * true (bridge-close-holds-nothing: nothing keeps it, and the loop reads dead). */
typedef struct last_closer {
  uvt_loop_t *l;
  uvt_call_t call;
  int close_rc;
  unsigned pending_seen;
  int alive_after;
} last_closer_t;

static void close_as_last_done(int status, cuv_output_t *output, void *arg) {
  last_closer_t *c = arg;
  uvt_done(status, output, &c->call);
  c->pending_seen = cuv_uv_pending(c->l->bridge);
  c->close_rc = cuv_uv_close(c->l->bridge, uvt_on_close, c->l);
  c->alive_after = uv_loop_alive(&c->l->loop);
}

static void test_closing_bridge_keeps_loop_alive(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  last_closer_t c = {.l = &l, .call = {.loop = &l}, .close_rc = 1};
  assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value(11), close_as_last_done, &c, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(&c.call, 1);
  assert_int_equal(c.call.payload, 11);
  assert_int_equal(c.close_rc, 0);
  assert_int_equal(c.pending_seen, 0);
  assert_true(c.alive_after != 0);  /* closing: alive until the handles are closed */
  assert_int_equal(l.close_calls, 1);
  assert_true(c.call.seq < l.close_seq);
  uvt_release_outputs(&c.call, 1);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loop_polls_its_young_work),
      cmocka_unit_test(test_loop_polls_young_work_of_other_threads),
      cmocka_unit_test(test_refused_submission_leaves_loop_free),
      cmocka_unit_test(test_close_inside_a_drain_of_many),
      cmocka_unit_test(test_closing_bridge_keeps_loop_alive),
      /* Last: against its bug it fails leaving a thread held. */
      cmocka_unit_test(test_close_waits_for_a_submission_not_yet_queued),
  };
  return cuvt_run(tests);
}
