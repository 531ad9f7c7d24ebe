/* A cancelled submission's user callbacks (include/cuv.h, cuv_cancel): from the cancel on, none
 * of its then, map and with_context callbacks or custom ops' execute starts, and its done waits
 * for one already running, so done is the last of the submission's callbacks and a closure they
 * share may be freed there. Each kind runs many rounds cancelled right after cuv_submit, the
 * closure freed in done (a callback after done reads freed memory, which ASan reports, and sees
 * its done started, which the test counts), and once with its callback blocking until the cancel
 * was made and a drain found nothing due: done comes once the callback returned, still without
 * waiting for the GPU (a gate holds the rest of the work). A shared op's callbacks serve every
 * clone: cancelling the clone that produces its value holds that clone's done back but refuses
 * none of them (a second then starts after the cancel) and fails no other clone. Run under
 * ThreadSanitizer too. */
#include <pthread.h>
#include <time.h>

#include "counted.h"
#include "gate.h"

#define M 256 /* words each round fills and reads back */
#define ROUNDS_THEN 400
#define ROUNDS_OTHER 100
#define BATCH 50 /* rounds between waits for retirement: bounds the work in flight */

enum kind { THEN, MAP, CONTEXT, CUSTOM, SHARED };

/* What one round's callbacks saw, outside its closure: read by the test after the closure went.
 * Written by the callbacks (submitter threads) and done (the draining thread), read after the
 * round retired. */
typedef struct record {
  atomic_int cb_calls;      /* callbacks that started */
  atomic_int cb_returned;
  atomic_int cb_after_done; /* callbacks that saw every done of the round started */
  atomic_int data_bad;      /* callbacks that saw other data than the round's fill */
  atomic_int dones;         /* done callbacks that started */
  atomic_int done_started[2]; /* per submission, as done_calls */
  atomic_int done_calls[2]; /* per submission: [0] the cancelled one, [1] a shared op's other */
  int status[2];
  atomic_int cb_running_at_done; /* a done started while a callback ran */
  atomic_int b_bad;         /* the other clone's output differs from the fill */
  atomic_int block;         /* the callback waits for go, after setting in_cb */
  atomic_int in_cb;
  atomic_int go;
  atomic_int waited_out;    /* the callback's watchdog ran out (a broken run, never expected) */
} record_t;

typedef struct closure closure_t;

/* A done callback's argument: the round's closure and which of its submissions it reports. */
typedef struct sub_ref {
  closure_t *cl;
  int which;
} sub_ref_t;

/* What the round's callbacks share; freed by its last done. */
struct closure {
  record_t *rec;
  cuv_buffer_t *buf;
  cuv_stream_t *streams[2]; /* a shared op's two submissions run on these */
  unsigned value; /* what the round's fill wrote: the host reference */
  int submissions;
  atomic_int owners;
  sub_ref_t refs[2];
};

static atomic_int drops; /* with_context arg_release and custom drop runs (they ignore arg) */

static void count_drop(void *arg) {
  (void)arg; /* arg is the closure: done may have freed it (a release function may run later) */
  atomic_fetch_add(&drops, 1);
}

static void cb_begin(closure_t *cl) {
  record_t *rec = cl->rec;
  atomic_fetch_add(&rec->cb_calls, 1); /* before the look at dones: done looks the other way */
  if (atomic_load(&rec->dones) >= cl->submissions)
    atomic_fetch_add(&rec->cb_after_done, 1);
  if (!atomic_load(&rec->block))
    return;
  atomic_store(&rec->in_cb, 1);
  if (!cuvt_wait_flag(&rec->go))
    atomic_store(&rec->waited_out, 1);
}

static void cb_end(closure_t *cl) {
  record_t *rec = cl->rec;
  if (atomic_load(&rec->dones) >= cl->submissions)
    atomic_fetch_add(&rec->cb_after_done, 1);
  atomic_fetch_add(&rec->cb_returned, 1); /* the last touch: done may run from here on */
}

static void check_words(closure_t *cl, const cuv_output_t *out) {
  const unsigned *words = out ? out->data : NULL;
  for (size_t i = 0; i < M; i++)
    if (!words || words[i] != cl->value) {
      atomic_fetch_add(&cl->rec->data_bad, 1);
      return;
    }
}

/* then: checks the downloaded words and returns a download of them (a shared op's value, or the
 * input of a second then). */
static cuv_op_t *then_cb(cuv_output_t *input, void *arg) {
  closure_t *cl = arg;
  cb_begin(cl);
  check_words(cl, input);
  cuv_output_release(input);
  cuv_op_t *next = cuv_download(cl->buf, 0, M * sizeof(unsigned));
  cb_end(cl);
  return next;
}

static int map_cb(cuv_output_t *value, void *arg) {
  closure_t *cl = arg;
  cb_begin(cl);
  check_words(cl, value);
  cb_end(cl);
  return 0;
}

/* In a shared op, the first callback of its making: on the cancelled submission's stream it
 * must not run once that submission's done started (a cancelled clone does not make the value:
 * the other one does, on its own stream). */
static cuv_op_t *context_cb(cuv_stream_t *stream, void *arg) {
  closure_t *cl = arg;
  cb_begin(cl);
  if (stream == cl->streams[0] && atomic_load(&cl->rec->done_started[0]))
    atomic_fetch_add(&cl->rec->cb_after_done, 1);
  cb_end(cl);
  return cuv_value(NULL, NULL);
}

static int custom_cb(cuv_custom_ctx_t *ctx, cuv_output_t *out, void *arg) {
  closure_t *cl = arg;
  cb_begin(cl);
  cb_end(cl);
  return 0;
}

static void done_cb(int status, cuv_output_t *output, void *arg) {
  sub_ref_t *ref = arg;
  closure_t *cl = ref->cl;
  record_t *rec = cl->rec;
  atomic_fetch_add(&rec->done_started[ref->which], 1);
  atomic_fetch_add(&rec->dones, 1); /* before the look at the callbacks: they look the other way */
  if (atomic_load(&rec->cb_calls) != atomic_load(&rec->cb_returned))
    atomic_store(&rec->cb_running_at_done, 1);
  rec->status[ref->which] = status;
  if (ref->which == 1) { /* the shared op's other clone: its output is the value */
    const unsigned *words = status == 0 && output ? output->data : NULL;
    for (size_t i = 0; i < M; i++)
      if (!words || words[i] != cl->value) {
        atomic_store(&rec->b_bad, 1);
        break;
      }
  }
  atomic_fetch_add(&rec->done_calls[ref->which], 1);
  if (atomic_fetch_sub(&cl->owners, 1) == 1)
    free(cl);
}

/* The round's fill of fresh values and the download of them: a then or map over it runs once the
 * copy landed. */
static cuv_op_t *fill_read(closure_t *cl) {
  return cuv_seq(cuvt_fill_u32(cl->buf, M, cl->value), cuv_download(cl->buf, 0, M * 4));
}

/* The round's submissions: [0] the one cancelled, [1] a shared op's other clone (or NULL). */
static void round_ops(enum kind kind, closure_t *cl, cuv_op_t **ops) {
  cuv_access_t read = CUV_ACCESS_READ(cl->buf);
  cuv_shared_t *sh;
  ops[1] = NULL;
  switch (kind) {
  case THEN: ops[0] = cuv_then(fill_read(cl), then_cb, cl); break;
  case MAP: ops[0] = cuv_map(fill_read(cl), map_cb, cl); break;
  case CONTEXT: ops[0] = cuv_seq(fill_read(cl), cuv_with_context(context_cb, cl, count_drop));
    break;
  case CUSTOM: ops[0] = cuv_seq(fill_read(cl), cuv_custom(custom_cb, cl, count_drop, &read, 1));
    break;
  case SHARED: /* three callbacks: the later ones start after a cancel during the first */
    sh = cuv_shared(cuv_then(
        cuv_then(cuv_seq(cuv_with_context(context_cb, cl, NULL), fill_read(cl)), then_cb, cl),
        then_cb, cl));
    ops[0] = cuv_shared_clone(sh);
    ops[1] = cuv_shared_clone(sh);
    cuv_shared_unref(sh); /* the clones hold it */
    break;
  }
}

static closure_t *closure_new(record_t *rec, cuv_buffer_t *buf, cuv_stream_t *const *streams,
                              enum kind kind) {
  closure_t *cl = calloc(1, sizeof *cl);
  assert_non_null(cl);
  cl->rec = rec;
  cl->buf = buf;
  cl->streams[0] = streams[0];
  cl->streams[1] = streams[1];
  cl->value = cuvt_nonzero_u32();
  cl->submissions = kind == SHARED ? 2 : 1;
  atomic_init(&cl->owners, cl->submissions);
  for (int i = 0; i < 2; i++)
    cl->refs[i] = (sub_ref_t){cl, i};
  return cl;
}


/* What every round of every kind must show once retired. */
static void check_round(enum kind kind, const record_t *rec, int round) {
  int calls = atomic_load(&rec->cb_calls);
  if (atomic_load(&rec->cb_after_done) || atomic_load(&rec->data_bad) ||
      calls > (kind == SHARED ? 3 : 1) ||
      calls != atomic_load(&rec->cb_returned) || atomic_load(&rec->done_calls[0]) != 1 ||
      rec->status[0] != CUV_ECANCELED || atomic_load(&rec->waited_out))
    fail_msg("round %d: %d callbacks (%d after done, %d returned, %d saw bad data), %d dones, "
             "status %d", round, calls, atomic_load(&rec->cb_after_done),
             atomic_load(&rec->cb_returned), atomic_load(&rec->data_bad),
             atomic_load(&rec->done_calls[0]), rec->status[0]);
  if (kind != SHARED && atomic_load(&rec->cb_running_at_done))
    fail_msg("round %d: done ran while its callback did", round);
  if (kind == SHARED) { /* the other clone made or got the value, once */
    assert_int_equal(calls, 3);
    assert_int_equal(atomic_load(&rec->done_calls[1]), 1);
    assert_cuv_ok(rec->status[1]);
    assert_int_equal(atomic_load(&rec->b_bad), 0);
  }
}

/* The streams of a round's two submissions: a shared op's callbacks tell by them which one is
 * making its value. */
static void streams_create(cuv_stream_t **streams) {
  for (int i = 0; i < 2; i++)
    assert_cuv_ok(cuv_stream_create(&streams[i], cuvt_device()));
}

static void streams_destroy(cuv_stream_t **streams) {
  for (int i = 0; i < 2; i++)
    cuv_stream_destroy(streams[i]);
}

/* ---- cancelled right after submitting ---- */

/* Rounds cancelled right after cuv_submit, or every other one after a pause of up to 0.3 ms (the
 * variety is for the race, not asserted on). */
static void cancel_at_once(enum kind kind, int rounds) {
  record_t *recs = calloc((size_t)rounds, sizeof *recs);
  assert_non_null(recs);
  cuv_buffer_t *buf = cuvt_buffer(M * sizeof(unsigned));
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_stream_t *streams[2];
  streams_create(streams);
  atomic_store(&drops, 0);
  int ran = 0;
  for (int r = 0; r < rounds; r++) {
    closure_t *cl = closure_new(&recs[r], buf, streams, kind);
    cuv_op_t *ops[2];
    round_ops(kind, cl, ops);
    cuv_ticket_t ticket = 0;
    cuv_submit_opts_t opts = {.stream = streams[0], .ticket = &ticket};
    assert_cuv_ok(cuv_submit(q, ops[0], done_cb, &cl->refs[0], &opts));
    if (r % 2) { /* every other cancel a little later: it may meet the callback running */
      struct timespec pause = {0, (long)(cuvt_random_u32() % 300u) * 1000L};
      nanosleep(&pause, NULL);
    }
    assert_cuv_ok(cuv_cancel(q, ticket));
    cuv_submit_opts_t other = {.stream = streams[1]};
    if (ops[1])
      assert_cuv_ok(cuv_submit(q, ops[1], done_cb, &cl->refs[1], &other));
    cuvt_drain_until(q, &recs[r].done_calls[0], 1); /* due at once, or after a running callback */
    if (r % BATCH == BATCH - 1 || r == rounds - 1)
      cuvt_drain_until_retired(q);
  }
  for (int r = 0; r < rounds; r++) {
    check_round(kind, &recs[r], r);
    ran += atomic_load(&recs[r].cb_calls);
  }
  if (kind == SHARED)
    print_message("# %d callbacks of %d shared ops\n", ran, rounds);
  else
    print_message("# %d of %d callbacks ran before their cancel\n", ran, rounds);
  if (kind == CONTEXT) /* arg_release runs once, whether fn ran or not */
    assert_int_equal(atomic_load(&drops), rounds);
  if (kind == CUSTOM) /* exactly one of execute and drop */
    assert_int_equal(atomic_load(&drops) + ran, rounds);
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  streams_destroy(streams);
  cuv_buffer_unref(buf);
  free(recs);
}

static void test_then_cancelled_at_once(void **state) { cancel_at_once(THEN, ROUNDS_THEN); }
static void test_map_cancelled_at_once(void **state) { cancel_at_once(MAP, ROUNDS_OTHER); }
static void test_context_cancelled_at_once(void **state) { cancel_at_once(CONTEXT, ROUNDS_OTHER); }
static void test_custom_cancelled_at_once(void **state) { cancel_at_once(CUSTOM, ROUNDS_OTHER); }
static void test_shared_cancelled_at_once(void **state) { cancel_at_once(SHARED, ROUNDS_OTHER); }

/* ---- cancelled while the callback runs ---- */

/* Submits from a thread of its own: the job may run inline there and block in the callback. */
typedef struct submitter {
  cuv_queue_t *q;
  cuv_op_t *op;
  closure_t *cl;
  cuv_ticket_t ticket;
  int rc;
} submitter_t;

static void *submitter_main(void *arg) {
  submitter_t *s = arg;
  cuv_submit_opts_t opts = {.stream = s->cl->streams[0], .ticket = &s->ticket};
  s->rc = cuv_submit(s->q, s->op, done_cb, &s->cl->refs[0], &opts);
  return NULL;
}

/* The callback blocks until the test cancelled its submission and drained: the drain finds
 * nothing due (done waits for the callback), and done comes once the callback returned, while a
 * gate still holds the rest of the submission's work. */
static void cancel_while_running(enum kind kind) {
  record_t *rec = calloc(1, sizeof *rec);
  assert_non_null(rec);
  atomic_store(&rec->block, 1);
  cuv_buffer_t *buf = cuvt_buffer(M * sizeof(unsigned));
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  atomic_store(&drops, 0);
  cuvt_gate_t g;
  cuvt_gate_init(&g);
  cuv_stream_t *streams[2];
  streams_create(streams);
  closure_t *cl = closure_new(rec, buf, streams, kind);
  cuv_op_t *ops[2];
  round_ops(kind, cl, ops);
  submitter_t s = {q, cuv_seq(ops[0], cuvt_gate_wait(&g)), cl, 0, -1};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, submitter_main, &s), 0);
  if (!cuvt_wait_flag(&rec->in_cb))
    fail_msg("the callback never started");
  cuv_submit_opts_t other = {.stream = streams[1]};
  if (ops[1]) /* the other clone, submitted while the first one's submission makes the value */
    assert_cuv_ok(cuv_submit(q, ops[1], done_cb, &cl->refs[1], &other));
  int cancelled = cuv_cancel(q, s.ticket);
  int drained = cuv_queue_drain(q);
  int dones = atomic_load(&rec->dones);
  atomic_store(&rec->go, 1); /* before any assert: a failed one must not leave the thread blocked */
  assert_cuv_ok(cancelled);
  assert_int_equal(drained, 0); /* not due while the callback runs */
  assert_int_equal(dones, 0);
  cuvt_drain_until(q, &rec->done_calls[0], 1); /* with the gate closed */
  pthread_join(thread, NULL);
  assert_cuv_ok(s.rc);
  assert_true(cuv_queue_pending(q) > 0); /* the cancelled work is still held */
  cuvt_gate_open(&g);
  cuvt_drain_until_retired(q);
  cuvt_gate_close(&g);
  check_round(kind, rec, 0);
  assert_int_equal(atomic_load(&rec->cb_calls), kind == SHARED ? 3 : 1);
  assert_int_equal(atomic_load(&rec->cb_running_at_done), 0);
  assert_int_equal(atomic_load(&drops), kind == CONTEXT ? 1 : 0); /* custom: execute ran */
  assert_cuv_ok(cuv_queue_destroy(q));
  streams_destroy(streams);
  cuv_buffer_unref(buf);
  free(rec);
}

static void test_then_cancelled_while_running(void **state) { cancel_while_running(THEN); }
static void test_map_cancelled_while_running(void **state) { cancel_while_running(MAP); }
static void test_context_cancelled_while_running(void **state) { cancel_while_running(CONTEXT); }
static void test_custom_cancelled_while_running(void **state) { cancel_while_running(CUSTOM); }
static void test_shared_cancelled_while_running(void **state) { cancel_while_running(SHARED); }

int main(void) {
  cuvt_init();
  (void)cuvt_kernel_ok("fill_u32"); /* loaded before any thread starts */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_then_cancelled_at_once),
      cmocka_unit_test(test_map_cancelled_at_once),
      cmocka_unit_test(test_context_cancelled_at_once),
      cmocka_unit_test(test_custom_cancelled_at_once),
      cmocka_unit_test(test_shared_cancelled_at_once),
      cmocka_unit_test(test_then_cancelled_while_running),
      cmocka_unit_test(test_map_cancelled_while_running),
      cmocka_unit_test(test_context_cancelled_while_running),
      cmocka_unit_test(test_custom_cancelled_while_running),
      cmocka_unit_test(test_shared_cancelled_while_running),
  };
  return cuvt_run(tests);
}
