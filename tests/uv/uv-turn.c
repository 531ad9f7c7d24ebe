/* The bridge's turn (include/cuv/uv.h, cuv_uv_set_turn): its arguments; a budget that spreads a
 * backlog of slow callbacks over several loop turns, each callback once, in completion order;
 * `after` run on the loop thread once after each turn that ran callbacks, never for a turn that
 * ran none, and after the last callback; the callbacks cuv_uv_close delivers followed by
 * `after` too; and work `after` submits polled for in the same turn (the idle handle stays
 * active), not left to a wake-up while the loop blocks. Run with a spin budget of 1 s
 * (tests/meson.build), so work stays young for the whole test. Callbacks only record; the test
 * asserts after uv_run returned. */
#include <time.h>

#include "counted.h"
#include "gate.h"
#include "uvt.h"

#define N 200
#define CALLBACK_NS 20000u /* each callback's time on the clock: 200 take 4 ms */
#define BUDGET_NS 200000u  /* so a turn takes about 10 of them */

typedef struct turns {
  uvt_loop_t *loop;
  int delivered;    /* callbacks so far */
  int afters;       /* `after` calls */
  int empty_afters; /* of them, with no callback since the last */
  int last_seen;    /* delivered at the last `after` */
  int max_per_turn; /* the most callbacks between two `after` calls */
  bool off_loop;    /* an `after` ran on another thread */
  int order_breaks; /* callbacks out of submission order (one stream) */
  int payloads[N];
} turns_t;

static turns_t T;

static uint64_t clock_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void slow_done(int status, cuv_output_t *output, void *arg) {
  uvt_call_t *c = arg;
  uvt_done(status, output, arg);
  if (T.delivered < N && c->payload != T.payloads[T.delivered])
    T.order_breaks++;
  T.delivered++;
  for (uint64_t start = clock_ns(); clock_ns() - start < CALLBACK_NS;)
    ;
}

static void after(cuv_uv_t *bridge, void *arg) {
  turns_t *t = arg;
  uv_thread_t self = uv_thread_self();
  assert_ptr_equal(bridge, t->loop->bridge);
  t->afters++;
  if (!uv_thread_equal(&self, &t->loop->thread))
    t->off_loop = true;
  int ran = t->delivered - t->last_seen;
  if (ran == 0)
    t->empty_afters++;
  if (ran > t->max_per_turn)
    t->max_per_turn = ran;
  t->last_seen = t->delivered;
}

static void test_arguments(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  cuv_uv_turn_t turn = {0};
  assert_int_equal(cuv_uv_set_turn(NULL, &turn), CUV_EINVAL);
  assert_int_equal(cuv_uv_set_turn(l.bridge, NULL), CUV_EINVAL);
  assert_cuv_ok(cuv_uv_set_turn(l.bridge, &turn)); /* the default budget, no `after` */
  uvt_call_t call = {.loop = &l};
  assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value(7), uvt_done, &call, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(call.calls, 1);
  assert_int_equal(call.payload, 7);
  uvt_release_outputs(&call, 1);
  uvt_close(&l);
}

/* N values on one stream, their callbacks slow: several turns, `after` once per turn. */
static void submit_all(uvt_loop_t *l, uvt_call_t *calls, cuv_stream_t *s) {
  cuv_submit_opts_t opts = {.stream = s};
  for (int i = 0; i < N; i++) {
    T.payloads[i] = (int)(cuvt_random_u32() & 0x3fffffff);
    calls[i] = (uvt_call_t){.loop = l};
    assert_cuv_ok(cuv_uv_submit(l->bridge, uvt_value(T.payloads[i]), slow_done, &calls[i], &opts));
  }
}

/* A loop whose bridge has the test's turn, with the N values submitted on a new stream *s. */
static void open_and_submit(uvt_loop_t *l, uvt_call_t *calls, cuv_stream_t **s) {
  uvt_open(l);
  T = (turns_t){.loop = l};
  cuv_uv_turn_t turn = {.budget_ns = BUDGET_NS, .after = after, .arg = &T};
  assert_cuv_ok(cuv_uv_set_turn(l->bridge, &turn));
  assert_cuv_ok(cuv_stream_create(s, cuvt_device()));
  submit_all(l, calls, *s);
}

static void assert_turns(const uvt_call_t *calls) {
  for (int i = 0; i < N; i++) {
    assert_int_equal(calls[i].calls, 1);
    assert_int_equal(calls[i].status, 0);
    assert_true(calls[i].on_loop_thread);
  }
  assert_int_equal(T.delivered, N);
  assert_int_equal(T.order_breaks, 0);
  assert_false(T.off_loop);
  assert_int_equal(T.empty_afters, 0);
  assert_int_equal(T.last_seen, N); /* `after` followed the last callback */
}

static void test_budget_and_after(void **state) {
  (void)state;
  uvt_loop_t l;
  cuv_stream_t *s;
  static uvt_call_t calls[N];
  open_and_submit(&l, calls, &s);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_turns(calls);
  /* 4 ms of callbacks in turns of about 0.2 ms (a slice of 16 may overrun it): several turns */
  assert_true(T.afters >= 4);
  assert_true(T.max_per_turn < N);
  uvt_release_outputs(calls, N);
  cuv_stream_destroy(s);
  uvt_close(&l);
}

/* What is in flight at cuv_uv_close is delivered by the close, and `after` follows it. */
static void test_after_on_close(void **state) {
  (void)state;
  uvt_loop_t l;
  cuv_stream_t *s;
  static uvt_call_t calls[N];
  open_and_submit(&l, calls, &s);
  assert_cuv_ok(cuv_uv_close(l.bridge, uvt_on_close, &l));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(l.close_calls, 1);
  assert_turns(calls);
  assert_true(T.afters >= 1);
  uvt_release_outputs(calls, N);
  assert_int_equal(uv_loop_close(&l.loop), 0);
  cuv_stream_destroy(s);
}

/* ---- work that `after` submits ---- */

typedef struct resubmit {
  uvt_loop_t *loop;
  cuvt_gate_t gate;
  uvt_call_t first, gated;
  int afters;
  bool looked;      /* the prepare handle looked after `after` submitted */
  bool idle_active; /* and found the bridge's idle handle active */
  uv_prepare_t prepare;
} resubmit_t;

static void after_submits(cuv_uv_t *bridge, void *arg) {
  resubmit_t *r = arg;
  if (r->afters++ == 0)
    r->gated.status = cuv_uv_submit(bridge, cuvt_gate_wait(&r->gate), uvt_done, &r->gated, NULL);
}

static void find_active_idle(uv_handle_t *handle, void *arg) {
  if (handle->type == UV_IDLE && uv_is_active(handle))
    *(bool *)arg = true;
}

/* Runs after the idle handles in each iteration, before the poll for I/O: the first one after
 * `after` submitted notes whether the loop will poll (the bridge's idle handle is active). */
static void on_prepare(uv_prepare_t *prepare) {
  resubmit_t *r = prepare->data;
  if (r->afters == 0 || r->looked)
    return;
  r->looked = true;
  uv_walk(prepare->loop, find_active_idle, &r->idle_active);
  cuvt_gate_open(&r->gate);
  uv_close((uv_handle_t *)prepare, NULL);
}

static void test_after_submits_polled(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  static resubmit_t r;
  r = (resubmit_t){.loop = &l, .first.loop = &l, .gated.loop = &l};
  cuvt_gate_init(&r.gate);
  cuv_uv_turn_t turn = {.after = after_submits, .arg = &r};
  assert_cuv_ok(cuv_uv_set_turn(l.bridge, &turn));
  assert_int_equal(uv_prepare_init(&l.loop, &r.prepare), 0);
  r.prepare.data = &r;
  assert_int_equal(uv_prepare_start(&r.prepare, on_prepare), 0);
  uv_unref((uv_handle_t *)&r.prepare);
  assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value(5), uvt_done, &r.first, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(r.first.calls, 1);
  assert_cuv_ok(r.gated.status);
  assert_int_equal(r.gated.calls, 1);
  assert_cuv_ok(r.gated.status);
  assert_true(r.looked);
  assert_true(r.idle_active); /* the gated work, young, is polled for: the loop does not block */
  assert_int_equal(r.afters, 2);
  uvt_release_outputs(&r.first, 1);
  uvt_release_outputs(&r.gated, 1);
  cuvt_gate_close(&r.gate);
  uvt_close(&l);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arguments),
      cmocka_unit_test(test_budget_and_after),
      cmocka_unit_test(test_after_on_close),
      cmocka_unit_test(test_after_submits_polled),
  };
  return cuvt_run(tests);
}
