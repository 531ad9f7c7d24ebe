/* Closing the libuv bridge: with work in flight (every pending callback still runs once, with its
 * own result, after its kernel finished, and only then close_cb), from inside a done callback,
 * twice, and with nothing in flight; submissions after close are refused without a callback.
 * Each scenario ends with uv_loop_close == 0: the bridge left no handle behind. */
#include "uvt.h"

#define SLOW_MS 150 /* long enough that the close surely starts while the kernels run */
#define SLOW 6

static void test_close_with_work_in_flight(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  uvt_call_t calls[SLOW] = {0};
  unsigned values[SLOW];
  for (size_t i = 0; i < SLOW; i++) {
    values[i] = cuvt_random_u32() | 1u; /* never 0, the value a fresh buffer may hold */
    cuv_buffer_t *buf = uvt_buffer(sizeof(unsigned));
    calls[i].loop = &l;
    assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_slow_write_then_read(SLOW_MS, values[i], buf),
                                uvt_done, &calls[i], NULL));
    cuv_buffer_unref(buf);
  }
  assert_cuv_ok(cuv_uv_close(l.bridge, uvt_on_close, &l));
  /* Closed: refused at once, the op consumed, no callback. */
  uvt_call_t late = {.loop = &l};
  assert_int_equal(cuv_uv_submit(l.bridge, uvt_value(7), uvt_done, &late, NULL), CUV_ECLOSED);
  assert_int_equal(cuv_uv_close(l.bridge, uvt_on_close, &l), CUV_ECLOSED);
  assert_int_equal(cuv_uv_pending(l.bridge), SLOW);

  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(calls, SLOW);
  for (size_t i = 0; i < SLOW; i++) {
    assert_int_equal((unsigned)calls[i].payload, values[i]); /* the kernel had finished */
    assert_true(calls[i].seq < l.close_seq);                   /* close_cb came last */
  }
  assert_int_equal(late.calls, 0);
  assert_int_equal(l.close_calls, 1);
  uvt_release_outputs(calls, SLOW);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* A done callback that submits more work and then closes its own bridge: the work it submitted
 * still runs, with its own results, then close_cb; a submission after the close is refused. */
typedef struct closer {
  uvt_loop_t *l;
  uvt_call_t calls[4];
  cuv_buffer_t *bufs[2];
  int submit_rc[2], close_rc, second_close_rc, submit_after_close_rc;
  unsigned pending_at_close;
} closer_t;

static void closing_done(int status, cuv_output_t *output, void *arg) {
  closer_t *c = arg;
  uvt_done(status, output, &c->calls[0]);
  for (int i = 0; i < 2; i++)
    c->submit_rc[i] = cuv_uv_submit(c->l->bridge,
                                     uvt_slow_write_then_read(SLOW_MS, 11u * (i + 1), c->bufs[i]),
                                     uvt_done, &c->calls[1 + i], NULL);
  c->pending_at_close = cuv_uv_pending(c->l->bridge);
  c->close_rc = cuv_uv_close(c->l->bridge, uvt_on_close, c->l);
  c->second_close_rc = cuv_uv_close(c->l->bridge, uvt_on_close, c->l);
  c->submit_after_close_rc =
      cuv_uv_submit(c->l->bridge, uvt_value(1), uvt_done, &c->calls[3], NULL);
}

static void test_done_callback_closes_own_bridge(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  closer_t c = {.l = &l};
  for (size_t i = 0; i < 4; i++)
    c.calls[i].loop = &l;
  c.bufs[0] = uvt_buffer(sizeof(unsigned));
  c.bufs[1] = uvt_buffer(sizeof(unsigned));
  assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value(42), closing_done, &c, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(c.submit_rc[0], 0);
  assert_int_equal(c.submit_rc[1], 0);
  assert_int_equal(c.pending_at_close, 2);
  assert_int_equal(c.close_rc, 0);
  assert_int_equal(c.second_close_rc, CUV_ECLOSED);
  assert_int_equal(c.submit_after_close_rc, CUV_ECLOSED);
  uvt_assert_all_ok(c.calls, 3);
  assert_int_equal(c.calls[0].payload, 42);
  assert_int_equal(c.calls[1].payload, 11);
  assert_int_equal(c.calls[2].payload, 22);
  assert_int_equal(c.calls[3].calls, 0);
  assert_int_equal(l.close_calls, 1);
  for (size_t i = 0; i < 3; i++)
    assert_true(c.calls[i].seq < l.close_seq);
  uvt_release_outputs(c.calls, 3);
  cuv_buffer_unref(c.bufs[0]);
  cuv_buffer_unref(c.bufs[1]);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* The last callback closes the bridge: nothing is left in flight, so the close completes from the
 * very wake that ran the callback. */
static void last_closes(int status, cuv_output_t *output, void *arg) {
  closer_t *c = arg; /* only calls[0], pending_at_close and close_rc are used */
  uvt_done(status, output, &c->calls[0]);
  c->pending_at_close = cuv_uv_pending(c->l->bridge);
  c->close_rc = cuv_uv_close(c->l->bridge, uvt_on_close, c->l);
}

static void test_last_callback_closes(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  closer_t c = {.l = &l};
  c.calls[0].loop = &l;
  assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value(5), last_closes, &c, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(c.calls, 1);
  assert_int_equal(c.close_rc, 0);
  assert_int_equal(c.pending_at_close, 0);
  assert_int_equal(l.close_calls, 1);
  uvt_release_outputs(c.calls, 1);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* Opening and closing with nothing ever submitted, before and after the loop ran. */
static void test_close_idle_bridge(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  uvt_close(&l);

  uvt_open(&l);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0); /* an idle bridge does not hold it */
  uvt_close(&l);

  assert_int_equal(cuv_uv_open(NULL, &l.loop), CUV_EINVAL);
  cuv_uv_t *b;
  assert_int_equal(cuv_uv_open(&b, NULL), CUV_EINVAL);
  assert_int_equal(cuv_uv_close(NULL, NULL, NULL), CUV_EINVAL);
}

/* Close without a close_cb, with work in flight; the loop still runs every callback. */
static void test_close_without_callback(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  uvt_call_t calls[3] = {0};
  for (size_t i = 0; i < 3; i++) {
    calls[i].loop = &l;
    assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value((int)i), uvt_done, &calls[i], NULL));
  }
  assert_cuv_ok(cuv_uv_close(l.bridge, NULL, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(calls, 3);
  uvt_release_outputs(calls, 3);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* Closing while the bridge's loop also serves a timer: the close waits for the GPU without
 * blocking the loop, which goes on running the timer until the slow callback came. */
typedef struct ticker {
  uv_timer_t timer;
  int ticks;
  uvt_call_t *slow;
} ticker_t;

static void on_tick(uv_timer_t *t) {
  ticker_t *k = t->data;
  k->ticks++;
  if (k->slow->calls)
    uv_close((uv_handle_t *)t, NULL);
}

static void test_close_keeps_loop_serving(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  uvt_call_t slow = {.loop = &l};
  cuv_buffer_t *buf = uvt_buffer(sizeof(unsigned));
  assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_slow_write_then_read(SLOW_MS, 9, buf), uvt_done,
                              &slow, NULL));
  cuv_buffer_unref(buf);
  ticker_t k = {.slow = &slow};
  k.timer.data = &k;
  assert_int_equal(uv_timer_init(&l.loop, &k.timer), 0);
  assert_int_equal(uv_timer_start(&k.timer, on_tick, 1, 1), 0);
  assert_cuv_ok(cuv_uv_close(l.bridge, uvt_on_close, &l));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(&slow, 1);
  assert_int_equal(slow.payload, 9);
  print_message("# %d timer ticks while closing\n", k.ticks);
  assert_true(k.ticks >= 1);
  assert_int_equal(l.close_calls, 1);
  uvt_release_outputs(&slow, 1);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* Cancelling through the bridge: the callback still runs once, on the loop thread, with
 * CUV_ECANCELED and no output, after the slow kernel finished; a second cancel finds nothing. */
static void test_cancel_through_bridge(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  cuv_buffer_t *buf = uvt_buffer(sizeof(unsigned));
  uvt_call_t call = {.loop = &l};
  cuv_ticket_t ticket = 0;
  cuv_submit_opts_t opts = {.ticket = &ticket};
  assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_slow_write_then_read(50, 7, buf), uvt_done, &call,
                              &opts));
  assert_true(ticket != 0);
  assert_cuv_ok(cuv_uv_cancel(l.bridge, ticket));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(call.calls, 1);
  assert_true(call.on_loop_thread);
  assert_int_equal(call.status, CUV_ECANCELED);
  assert_int_equal(cuv_uv_cancel(l.bridge, ticket), CUV_ENOENT);
  assert_int_equal(cuv_uv_cancel(NULL, ticket), CUV_EINVAL);
  /* The kernel still ran to the end: its write is there. */
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_download(buf, 0, sizeof(unsigned)), &out));
  assert_int_equal(*(unsigned *)out.data, 7);
  cuv_output_release(&out);
  cuv_buffer_unref(buf);
  uvt_close(&l);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_close_with_work_in_flight),
      cmocka_unit_test(test_done_callback_closes_own_bridge),
      cmocka_unit_test(test_last_callback_closes),
      cmocka_unit_test(test_close_idle_bridge),
      cmocka_unit_test(test_close_without_callback),
      cmocka_unit_test(test_close_keeps_loop_serving),
      cmocka_unit_test(test_cancel_through_bridge),
  };
  return cuvt_run(tests);
}
