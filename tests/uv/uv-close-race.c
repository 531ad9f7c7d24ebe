/* Closing the libuv bridge while another thread keeps submitting (include/cuv/uv.h, Closing).
 * The program is the one the header's contract is written for: its submitter holds a lock of
 * the program's own around every cuv_uv_submit and stops once close_cb (which takes that lock)
 * has run. Round after round, the submitter must see only 0 or CUV_ECLOSED: CUV_ECLOSED for every
 * call made after it saw cuv_uv_close return, and for every call after the first refusal; every
 * accepted submission's callback runs exactly once, on the loop thread, with its own result (the
 * close cancels nothing), before close_cb; no refused one calls back; the loop closes empty.
 * Half the rounds close before uv_run, half from inside the running loop. Many short rounds,
 * bounded in time, so a regression shows in one run on a busy machine; run it under TSan and
 * ASan too (the bridge's own teardown racing the submitter is what they see). */
#include <pthread.h>
#include <sched.h>

#include "uvt.h"

#define ROUNDS 2000
#define BUDGET_NS (5ull * 1000000000ull) /* rounds stop early past it (sanitizers, busy hosts) */
#define RECORDS 1024       /* attempts of a round recorded one by one; later ones are tallied */
#define DEVICE_OPS 8       /* attempts 0, 2, ..., 14 run a kernel whose write is read back */
#define CLOSE_AFTER_MAX 12 /* the close comes after 1 to this many attempts */

typedef struct attempt {
  uvt_call_t call;  /* the callback's record (loop thread) */
  int expected;     /* the payload it carries */
  int rc;           /* cuv_uv_submit's answer */
  bool after_close; /* the submitter had seen cuv_uv_close return before this call */
} attempt_t;

typedef struct round {
  uvt_loop_t l;
  uv_mutex_t lock;         /* the program's: around each cuv_uv_submit, and taken by close_cb */
  bool gone;               /* under lock: close_cb ran, the bridge may be freed */
  atomic_bool closed;      /* cuv_uv_close has returned */
  atomic_uint attempts;    /* calls made so far */
  atomic_uint seen_closed; /* calls made after seeing `closed` */
  unsigned close_after;
  unsigned burst; /* calls between two yields of the submitter */
  uint64_t seed;
  cuv_buffer_t *bufs[DEVICE_OPS];
  uv_idle_t closer; /* the rounds that close from inside the running loop */
  attempt_t rec[RECORDS];
  int close_rc;
  /* Attempts past RECORDS (submitter thread, but for calls and seen: the loop thread's). */
  unsigned more_accepted, more_refused, more_other, late_accepted;
  uint64_t more_sent;
  unsigned more_calls, more_bad;
  uint64_t more_seen;
} round_t;

static uint32_t next_random(uint64_t *x) {
  *x ^= *x >> 12;
  *x ^= *x << 25;
  *x ^= *x >> 27;
  return (uint32_t)((*x * 2685821657736338717ull) >> 32);
}

/* Callback of the tallied attempts: counts, and sums the payloads it saw. */
static void tally_done(int status, cuv_output_t *output, void *arg) {
  round_t *r = arg;
  r->more_calls++;
  if (status != 0 || !output->data) {
    r->more_bad++;
    return;
  }
  int payload;
  memcpy(&payload, output->data, sizeof payload);
  r->more_seen += (uint64_t)payload;
}

static int submit_one(round_t *r, unsigned i, bool after_close, uint64_t *x) {
  int payload = (int)(next_random(x) >> 1);
  if (i >= RECORDS) {
    int rc = cuv_uv_submit(r->l.bridge, uvt_value(payload), tally_done, r, NULL);
    if (rc == 0)
      r->more_sent += (uint64_t)payload;
    r->more_accepted += rc == 0;
    r->more_refused += rc == CUV_ECLOSED;
    r->more_other += rc != 0 && rc != CUV_ECLOSED;
    return rc;
  }
  attempt_t *a = &r->rec[i];
  a->expected = payload;
  a->after_close = after_close;
  a->call.loop = &r->l;
  cuv_op_t *op = i < 2 * DEVICE_OPS && i % 2 == 0
                     ? uvt_slow_write_then_read(0, (unsigned)payload, r->bufs[i / 2])
                     : uvt_value(payload);
  a->rc = cuv_uv_submit(r->l.bridge, op, uvt_done, &a->call, NULL);
  return a->rc;
}

static void *submitter(void *arg) {
  round_t *r = arg;
  uint64_t x = r->seed;
  bool refused = false;
  for (unsigned i = 0;; i++) {
    uv_mutex_lock(&r->lock);
    if (r->gone) {
      uv_mutex_unlock(&r->lock);
      break;
    }
    bool after_close = atomic_load(&r->closed);
    int rc = submit_one(r, i, after_close, &x);
    if (i >= RECORDS && rc == 0 && (refused || after_close))
      r->late_accepted++;
    (void)cuv_uv_pending(r->l.bridge); /* any thread, closing or not */
    uv_mutex_unlock(&r->lock);
    refused = refused || rc != 0;
    if (after_close)
      atomic_fetch_add(&r->seen_closed, 1);
    atomic_fetch_add(&r->attempts, 1);
    /* Where the two threads share a core, the loop thread gets its turn every few calls (a
     * close to start, or to finish) rather than after a whole time slice of submissions. */
    if ((i + 1) % r->burst == 0)
      sched_yield();
  }
  return NULL;
}

static void on_close(cuv_uv_t *bridge, void *arg) {
  round_t *r = arg;
  uv_mutex_lock(&r->lock);
  r->gone = true; /* from here on the program may free the bridge: nobody submits */
  uvt_on_close(bridge, &r->l);
  uv_mutex_unlock(&r->lock);
}

static void close_bridge(round_t *r) {
  r->close_rc = cuv_uv_close(r->l.bridge, on_close, r);
  atomic_store(&r->closed, true);
}

static void wait_attempts(round_t *r, unsigned n) {
  while (atomic_load(&r->attempts) < n)
    sched_yield();
}

/* Closes from inside the running loop, once the submitter made its first attempts. */
static void on_closer(uv_idle_t *idle) {
  round_t *r = idle->data;
  if (atomic_load(&r->attempts) < r->close_after)
    return;
  close_bridge(r);
  uv_close((uv_handle_t *)idle, NULL);
}

typedef struct totals {
  unsigned rounds, accepted, refused, after_close, tallied;
} totals_t;

static void check_round(round_t *r, totals_t *t) {
  unsigned n = atomic_load(&r->attempts), recorded = n < RECORDS ? n : RECORDS;
  bool refused = false;
  assert_cuv_ok(r->close_rc);
  assert_int_equal(r->l.close_calls, 1);
  assert_true(n >= r->close_after);
  for (unsigned i = 0; i < recorded; i++) {
    attempt_t *a = &r->rec[i];
    if (a->rc != 0 && a->rc != CUV_ECLOSED)
      print_error("round %u attempt %u: %d (%s)\n", t->rounds, i, a->rc, cuv_err_name(a->rc));
    assert_true(a->rc == 0 || a->rc == CUV_ECLOSED);
    if (i < r->close_after)
      assert_int_equal(a->rc, 0); /* it returned before cuv_uv_close was called */
    if (a->after_close || refused)
      assert_int_equal(a->rc, CUV_ECLOSED); /* refused from the close on, and for good */
    refused = a->rc != 0;
    if (a->rc == 0) {
      uvt_assert_all_ok(&a->call, 1);
      assert_int_equal(a->call.payload, a->expected);
      assert_true(a->call.seq < r->l.close_seq); /* before close_cb */
      t->accepted++;
    } else {
      assert_int_equal(a->call.calls, 0);
      t->refused++;
    }
  }
  for (unsigned i = 0; i < recorded; i++)
    cuv_output_release(&r->rec[i].call.out);
  assert_int_equal(r->more_other, 0);
  assert_int_equal(r->late_accepted, 0);
  assert_int_equal(r->more_calls, r->more_accepted);
  assert_int_equal(r->more_bad, 0);
  assert_true(r->more_seen == r->more_sent);
  t->accepted += r->more_accepted;
  t->refused += r->more_refused;
  t->tallied += n - recorded;
  t->after_close += atomic_load(&r->seen_closed);
  assert_int_equal(uv_loop_close(&r->l.loop), 0);
}

static void run_round(round_t *r, totals_t *t, cuv_buffer_t *const *bufs) {
  memset(r, 0, sizeof *r);
  uvt_open(&r->l);
  assert_int_equal(uv_mutex_init(&r->lock), 0);
  memcpy(r->bufs, bufs, sizeof r->bufs);
  r->seed = ((uint64_t)cuvt_random_u32() << 32 | cuvt_random_u32()) | 1u;
  r->close_after = 1 + cuvt_random_u32() % CLOSE_AFTER_MAX;
  r->burst = 1u << cuvt_random_u32() % 7;
  bool in_loop = t->rounds % 2 == 1;
  if (in_loop) {
    r->closer.data = r;
    assert_int_equal(uv_idle_init(&r->l.loop, &r->closer), 0);
    assert_int_equal(uv_idle_start(&r->closer, on_closer), 0);
  }
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, submitter, r), 0);
  if (!in_loop) {
    wait_attempts(r, r->close_after);
    close_bridge(r);
    while (atomic_load(&r->seen_closed) == 0) /* one call surely after the close */
      sched_yield();
  }
  assert_int_equal(uv_run(&r->l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);
  check_round(r, t);
  uv_mutex_destroy(&r->lock);
  t->rounds++;
}

static void test_submit_from_thread_while_closing(void **state) {
  round_t *r = calloc(1, sizeof *r);
  assert_non_null(r);
  cuv_buffer_t *bufs[DEVICE_OPS];
  for (size_t i = 0; i < DEVICE_OPS; i++)
    bufs[i] = uvt_buffer(sizeof(unsigned));
  (void)cuvt_kernel("sleep_then_write"); /* loaded before the first round's threads */
  totals_t t = {0};
  uint64_t start = uv_hrtime();
  while (t.rounds < ROUNDS && (t.rounds == 0 || uv_hrtime() - start < BUDGET_NS))
    run_round(r, &t, bufs);
  print_message("# %u rounds: %u accepted, %u refused (%u after the close was seen), "
                "%u tallied\n",
                t.rounds, t.accepted, t.refused, t.after_close, t.tallied);
  /* Every round accepted what was submitted before its close, and every other round made a
   * call after the close before the loop ran. */
  assert_true(t.accepted >= t.rounds);
  assert_true(t.after_close >= t.rounds / 2);
  for (size_t i = 0; i < DEVICE_OPS; i++)
    cuv_buffer_unref(bufs[i]);
  free(r);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_submit_from_thread_while_closing),
  };
  return cuvt_run(tests);
}
