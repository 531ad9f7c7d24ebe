/* Cancelled submissions' then callbacks through the libuv bridge (include/cuv.h, cuv_cancel):
 * then(seq(fill, download), cb, closure) submitted and cancelled at once on the loop thread, 400
 * times, the closure freed in done: every cb ran before its done or never (a cb after done reads
 * freed memory, which ASan reports, and sees its done started, which the test counts), and each
 * done ran once, on the loop thread, with CUV_ECANCELED. And a then whose cb is running when the
 * loop cancels it: the loop goes on (a whole iteration passes with nothing delivered), and done
 * comes once cb returned. cb runs on a submitter thread (a then over a download waits for the
 * copy, so it never runs on the loop thread); run under ThreadSanitizer too. */
#include <time.h>

#include "counted.h"
#include "uvt.h"

#define M 256 /* words each round fills and reads back */
#define ROUNDS 400
#define BATCH 50 /* rounds per uv_run: each batch's dones before the next */

/* One round, outside its closure: read after the closure was freed. */
typedef struct record {
  atomic_int cb_calls, cb_returned;
  atomic_int cb_after_done; /* cb saw its done started */
  atomic_int data_bad;      /* cb saw other words than the round's fill */
  atomic_int dones;         /* done started */
  int done_calls, status;   /* the loop thread's */
  bool done_on_loop;
  atomic_int cb_running_at_done;
  atomic_int block, in_cb, go, waited_out; /* cb waits for go, after setting in_cb */
} record_t;

typedef struct closure {
  record_t *rec;
  cuv_buffer_t *buf;
  unsigned value; /* what the round's fill wrote: the host reference */
  uvt_loop_t *loop;
} closure_t;

static cuv_op_t *then_cb(cuv_output_t *input, void *arg) {
  closure_t *cl = arg;
  record_t *rec = cl->rec;
  atomic_fetch_add(&rec->cb_calls, 1); /* before the look at dones: done looks the other way */
  if (atomic_load(&rec->dones))
    atomic_fetch_add(&rec->cb_after_done, 1);
  if (atomic_load(&rec->block)) {
    atomic_store(&rec->in_cb, 1);
    if (!cuvt_wait_flag(&rec->go))
      atomic_store(&rec->waited_out, 1);
  }
  const unsigned *words = input->data;
  for (size_t i = 0; i < M; i++)
    if (!words || words[i] != cl->value) {
      atomic_fetch_add(&rec->data_bad, 1);
      break;
    }
  cuv_output_release(input);
  if (atomic_load(&rec->dones))
    atomic_fetch_add(&rec->cb_after_done, 1);
  atomic_fetch_add(&rec->cb_returned, 1); /* the last touch: done may run from here on */
  return cuv_value(NULL, NULL);
}

static void done_cb(int status, cuv_output_t *output, void *arg) {
  closure_t *cl = arg;
  record_t *rec = cl->rec;
  uv_thread_t self = uv_thread_self();
  atomic_fetch_add(&rec->dones, 1); /* before the look at cb: it looks the other way */
  if (atomic_load(&rec->cb_calls) != atomic_load(&rec->cb_returned))
    atomic_store(&rec->cb_running_at_done, 1);
  rec->status = status;
  rec->done_on_loop = uv_thread_equal(&self, &cl->loop->thread);
  rec->done_calls++;
  free(cl);
}

/* The round's op: fresh values filled, downloaded, checked by cb once they landed. */
static cuv_op_t *round_op(uvt_loop_t *l, record_t *rec, cuv_buffer_t *buf, closure_t **out) {
  closure_t *cl = malloc(sizeof *cl);
  assert_non_null(cl);
  *cl = (closure_t){rec, buf, cuvt_nonzero_u32(), l};
  *out = cl;
  cuv_op_t *first = cuv_seq(cuvt_fill_u32(buf, M, cl->value), cuv_download(buf, 0, M * 4));
  return cuv_then(first, then_cb, cl);
}

static void check_round(const record_t *rec, int round) {
  int calls = atomic_load(&rec->cb_calls);
  if (atomic_load(&rec->cb_after_done) || atomic_load(&rec->cb_running_at_done) ||
      atomic_load(&rec->data_bad) || calls > 1 || calls != atomic_load(&rec->cb_returned) ||
      rec->done_calls != 1 || rec->status != CUV_ECANCELED || !rec->done_on_loop ||
      atomic_load(&rec->waited_out))
    fail_msg("round %d: %d cbs (%d after done, %d returned, %d saw bad data), %d dones "
             "(status %d, on the loop %d, beside a cb %d)",
             round, calls, atomic_load(&rec->cb_after_done), atomic_load(&rec->cb_returned),
             atomic_load(&rec->data_bad), rec->done_calls, rec->status, rec->done_on_loop,
             atomic_load(&rec->cb_running_at_done));
}

static void test_then_cancelled_at_once(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  cuv_buffer_t *buf = uvt_buffer(M * sizeof(unsigned));
  record_t *recs = calloc(ROUNDS, sizeof *recs);
  assert_non_null(recs);
  for (int r = 0; r < ROUNDS; r++) {
    closure_t *cl;
    cuv_op_t *op = round_op(&l, &recs[r], buf, &cl);
    cuv_ticket_t ticket = 0;
    cuv_submit_opts_t opts = {.ticket = &ticket};
    assert_cuv_ok(cuv_uv_submit(l.bridge, op, done_cb, cl, &opts));
    assert_cuv_ok(cuv_uv_cancel(l.bridge, ticket));
    if (r % BATCH == BATCH - 1)
      assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0); /* the batch's dones ran */
  }
  uvt_close(&l); /* and every cancelled submission's work retired */
  int ran = 0;
  for (int r = 0; r < ROUNDS; r++) {
    check_round(&recs[r], r);
    ran += atomic_load(&recs[r].cb_calls);
  }
  print_message("# %d of %d callbacks ran before their cancel\n", ran, ROUNDS);
  free(recs);
  cuv_buffer_unref(buf);
}

/* The loop's side of the running case: a timer looks every millisecond for cb running, then
 * cancels; a check handle started there runs at the end of that iteration, after its poll phase,
 * where a due cancellation would have been delivered, and only then lets cb return (an idle
 * handle started with it keeps that poll from blocking: nothing else wakes the loop then). */
typedef struct canceller {
  uv_timer_t timer;
  uv_check_t check;
  uv_idle_t idle;
  cuv_uv_t *bridge;
  record_t *rec;
  cuv_ticket_t ticket;
  int cancel_rc;
  int dones_at_go;
  int closed;
} canceller_t;

static void on_closed(uv_handle_t *handle) { ((canceller_t *)handle->data)->closed++; }

static void on_check(uv_check_t *handle) {
  canceller_t *c = handle->data;
  c->dones_at_go = atomic_load(&c->rec->dones);
  atomic_store(&c->rec->go, 1);
  uv_close((uv_handle_t *)&c->check, on_closed);
  uv_close((uv_handle_t *)&c->idle, on_closed);
  uv_close((uv_handle_t *)&c->timer, on_closed);
}

static void on_idle(uv_idle_t *handle) { (void)handle; }

static void on_timer(uv_timer_t *handle) {
  canceller_t *c = handle->data;
  if (!atomic_load(&c->rec->in_cb))
    return;
  c->cancel_rc = cuv_uv_cancel(c->bridge, c->ticket);
  uv_timer_stop(&c->timer);
  uv_check_start(&c->check, on_check);
  uv_idle_start(&c->idle, on_idle);
}

static void test_then_cancelled_while_running(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  cuv_buffer_t *buf = uvt_buffer(M * sizeof(unsigned));
  record_t *rec = calloc(1, sizeof *rec);
  assert_non_null(rec);
  atomic_store(&rec->block, 1);
  closure_t *cl;
  cuv_op_t *op = round_op(&l, rec, buf, &cl);
  canceller_t c = {.bridge = l.bridge, .rec = rec, .cancel_rc = -1, .dones_at_go = -1};
  cuv_submit_opts_t opts = {.ticket = &c.ticket};
  assert_cuv_ok(cuv_uv_submit(l.bridge, op, done_cb, cl, &opts));
  assert_int_equal(uv_timer_init(&l.loop, &c.timer), 0);
  assert_int_equal(uv_check_init(&l.loop, &c.check), 0);
  assert_int_equal(uv_idle_init(&l.loop, &c.idle), 0);
  c.timer.data = c.check.data = c.idle.data = &c;
  assert_int_equal(uv_timer_start(&c.timer, on_timer, 1, 1), 0);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(c.closed, 3);
  assert_cuv_ok(c.cancel_rc);
  assert_int_equal(c.dones_at_go, 0); /* nothing delivered while cb ran */
  uvt_close(&l);
  check_round(rec, 0);
  assert_int_equal(atomic_load(&rec->cb_calls), 1);
  free(rec);
  cuv_buffer_unref(buf);
}

int main(void) {
  cuvt_init();
  (void)cuvt_kernel_ok("fill_u32"); /* loaded before any thread starts */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_then_cancelled_at_once),
      cmocka_unit_test(test_then_cancelled_while_running),
  };
  return cuvt_run(tests);
}
