/* Collectives from a libuv loop (the bridge, include/cuv/uv.h): communicators created by ops
 * submitted on the loop, completing like any submission, and collectives submitted from their
 * callbacks, checked against the host's sums. The ranks of one group created as separate
 * submissions all complete: no thread waits for a creation (tests/meson.build runs this file also
 * with one submitter thread, and with none, when the loop thread itself makes every call: a
 * creation that blocked its thread would never let the other ranks join). Suite sim on 4
 * simulated devices; suite gpu on every GPU (up to 8), skipped below 2. */
#include <pthread.h>
#include <time.h>

#include "uvt.h"

#define MAXD 8

static int ndev;
static cuv_device_t *devs[MAXD];

/* A float sum over every rank: inputs uploaded, the expected result, buffers per rank. */
typedef struct sums {
  size_t count;
  float *want;
  cuv_buffer_t *buf[MAXD];
} sums_t;

static void sums_init(sums_t *s, size_t count) {
  s->count = count;
  s->want = calloc(count, sizeof(float));
  float *in = malloc(count * sizeof(float));
  for (int r = 0; r < ndev; r++) {
    for (size_t i = 0; i < count; i++) {
      in[i] = (float)((int)(cuvt_random_u32() % 2001) - 1000);
      s->want[i] += in[i];
    }
    assert_cuv_ok(cuv_buffer_create(&s->buf[r], devs[r], count * sizeof(float)));
    assert_cuv_ok(cuv_sync(cuv_memcpy_htod(s->buf[r], 0, in, count * sizeof(float), 0), NULL));
  }
  free(in);
}

static void sums_check(sums_t *s) {
  float *out = malloc(s->count * sizeof(float));
  for (int r = 0; r < ndev; r++) {
    assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(out, s->buf[r], 0, s->count * sizeof(float)), NULL));
    assert_memory_equal(out, s->want, s->count * sizeof(float));
    cuv_buffer_unref(s->buf[r]);
  }
  free(out);
  free(s->want);
}

/* ---- one communicator of every device ---- */

typedef struct flow {
  uvt_loop_t *loop;
  sums_t *sums;
  cuv_comm_t *comm;
  uvt_call_t created, reduced;
  int submit_status;
} flow_t;

static void reduced(int status, cuv_output_t *output, void *arg) {
  flow_t *f = arg;
  uvt_done(status, output, &f->reduced);
}

/* The creation's callback, on the loop thread: the communicator, then the all-reduce on it. */
static void created(int status, cuv_output_t *output, void *arg) {
  flow_t *f = arg;
  uvt_done(status, output, &f->created);
  if (status != 0)
    return;
  f->comm = cuv_output_take(&f->created.out).data;
  f->submit_status = cuv_uv_submit(f->loop->bridge,
                                    cuv_comm_all_reduce(f->comm, NULL, f->sums->buf,
                                                        f->sums->count, CUV_NCCL_FLOAT32,
                                                        CUV_NCCL_SUM),
                                    reduced, f, NULL);
}

static void test_created_on_the_loop(void **state) {
  (void)state;
  uvt_loop_t l;
  sums_t s;
  sums_init(&s, 1 + cuvt_random_u32() % 5000);
  uvt_open(&l);
  flow_t f = {.loop = &l, .sums = &s};
  f.created.loop = f.reduced.loop = &l;
  assert_cuv_ok(cuv_uv_submit(l.bridge, cuv_comm_init_all(devs, (size_t)ndev), created, &f, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(&f.created, 1);
  assert_cuv_ok(f.submit_status);
  uvt_assert_all_ok(&f.reduced, 1);
  uvt_close(&l);
  sums_check(&s);
  cuv_comm_unref(f.comm);
}

/* ---- a creation whose NCCL init is slow ---- */

#define SLOW_TICKS 3          /* the loop's timer ticks seen while the init waits, then released */
#define WATCHDOG_MS 10000     /* a last resort that fails the test instead of hanging it */

typedef struct slow_init {
  flow_t flow;
  uv_timer_t timer;
  unsigned waiting_before; /* cuv_sim_nccl_inits_waiting() before the creation */
  int ticks_while_held;
  uint64_t release_seq; /* uvt_seq() at the loop's release */
  bool probe_sent;
  uvt_call_t probe; /* a then, submitted while the init waits: it runs on a submitter thread */
  atomic_bool released_by_loop, released_by_watchdog, finished;
} slow_init_t;

/* The probe's function, on whichever thread executes thens (a submitter, or with none the loop's
 * own): the value plus one. */
static cuv_op_t *probe_next(cuv_output_t *input, void *arg) {
  (void)arg;
  return uvt_value(*(int *)input->data + 1);
}

/* On the loop thread: while cuv's init thread waits inside NCCL's init, sends the probe, counts
 * the ticks, lets the init end after SLOW_TICKS once the probe came back, and stops once the
 * all-reduce came back. */
static void slow_tick(uv_timer_t *timer) {
  slow_init_t *s = timer->data;
  bool in_init = cuv_sim_nccl_inits_waiting() > s->waiting_before;
  if (in_init && !s->probe_sent) {
    s->probe_sent = true;
    s->probe.status = cuv_uv_submit(s->flow.loop->bridge, cuv_then(uvt_value(41), probe_next, NULL),
                                    uvt_done, &s->probe, NULL);
  }
  if (in_init && !atomic_load(&s->released_by_loop) && s->probe.calls &&
      ++s->ticks_while_held == SLOW_TICKS) {
    atomic_store(&s->released_by_loop, true);
    s->release_seq = uvt_seq();
    cuv_sim_nccl_hold_inits(0);
  }
  if (s->flow.reduced.calls)
    uv_close((uv_handle_t *)timer, NULL);
}

/* Lets the init end if the loop never could (its thread blocked in the init), marking it. */
static void *slow_watchdog(void *arg) {
  slow_init_t *s = arg;
  for (int ms = 0; ms < WATCHDOG_MS && !atomic_load(&s->finished); ms += 10)
    nanosleep(&(struct timespec){0, 10000000L}, NULL);
  if (!atomic_load(&s->finished)) {
    atomic_store(&s->released_by_watchdog, true);
    cuv_sim_nccl_hold_inits(0);
  }
  return NULL;
}

/* The simulator holds NCCL's init until the loop's timer has run SLOW_TICKS times while the init
 * waited, after a then submitted meanwhile came back: the loop goes on running its timers, and the
 * submitters their work, while a communicator is created (tests/meson.build runs this file also
 * with one submitter thread, which must not be the one that waits, and with none: the loop thread
 * then executes the creation itself). The creation completes only after the release, and the
 * first all-reduce sums right. */
static void test_loop_runs_while_initializing(void **state) {
  (void)state;
  if (!cuv_driver_is_sim())
    skip(); /* the hold is the simulator's */
  uvt_loop_t l;
  sums_t sums;
  sums_init(&sums, 1 + cuvt_random_u32() % 5000);
  uvt_open(&l);
  slow_init_t s = {.flow = {.loop = &l, .sums = &sums}};
  s.flow.created.loop = s.flow.reduced.loop = s.probe.loop = &l;
  s.waiting_before = cuv_sim_nccl_inits_waiting();
  assert_int_equal(uv_timer_init(&l.loop, &s.timer), 0);
  s.timer.data = &s;
  assert_int_equal(uv_timer_start(&s.timer, slow_tick, 1, 1), 0);
  pthread_t watchdog;
  assert_int_equal(pthread_create(&watchdog, NULL, slow_watchdog, &s), 0);
  cuv_sim_nccl_hold_inits(1);
  assert_cuv_ok(cuv_uv_submit(l.bridge, cuv_comm_init_all(devs, (size_t)ndev), created, &s.flow,
                              NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  atomic_store(&s.finished, true);
  assert_int_equal(pthread_join(watchdog, NULL), 0);
  assert_false(atomic_load(&s.released_by_watchdog));
  assert_true(atomic_load(&s.released_by_loop));
  assert_int_equal(s.ticks_while_held, SLOW_TICKS);
  uvt_assert_all_ok(&s.probe, 1);
  assert_int_equal(s.probe.payload, 42);
  assert_true(s.probe.seq < s.release_seq); /* it ran while the init was held */
  uvt_release_outputs(&s.probe, 1);
  assert_true(s.flow.created.seq > s.release_seq); /* completed only once the init ended */
  uvt_assert_all_ok(&s.flow.created, 1);
  assert_cuv_ok(s.flow.submit_status);
  uvt_assert_all_ok(&s.flow.reduced, 1);
  uvt_close(&l);
  sums_check(&sums);
  cuv_comm_unref(s.flow.comm);
}

/* ---- a then over the creation, in one submission ---- */

typedef struct chained {
  sums_t *sums;
  int status_seen; /* the communicator's status in the then callback (a submitter thread) */
  uvt_call_t done;
} chained_t;

/* Runs once the creation completed: the communicator it gives is ready, not being created. */
static cuv_op_t *reduce_after(cuv_output_t *input, void *arg) {
  chained_t *c = arg;
  cuv_comm_t *comm = input->data;
  c->status_seen = cuv_comm_status(comm);
  return cuv_comm_all_reduce(comm, NULL, c->sums->buf, c->sums->count, CUV_NCCL_FLOAT32,
                             CUV_NCCL_SUM);
}

static void chained_done(int status, cuv_output_t *output, void *arg) {
  chained_t *c = arg;
  uvt_done(status, output, &c->done);
}

static void test_then_over_creation(void **state) {
  (void)state;
  uvt_loop_t l;
  sums_t s;
  sums_init(&s, 1 + cuvt_random_u32() % 5000);
  uvt_open(&l);
  chained_t c = {.sums = &s, .status_seen = 1};
  c.done.loop = &l;
  cuv_op_t *op = cuv_then(cuv_comm_init_all(devs, (size_t)ndev), reduce_after, &c);
  assert_cuv_ok(cuv_uv_submit(l.bridge, op, chained_done, &c, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(&c.done, 1);
  assert_int_equal(c.status_seen, 0);
  uvt_close(&l);
  sums_check(&s);
}

/* ---- one communicator per rank ---- */

typedef struct rank_flow {
  uvt_loop_t *loop;
  sums_t *sums;
  int rank;
  cuv_comm_t *comm;
  uvt_call_t created, reduced;
  int *ready; /* ranks created so far: the last one's callback starts every all-reduce */
  struct rank_flow *all;
} rank_flow_t;

static void rank_reduced(int status, cuv_output_t *output, void *arg) {
  rank_flow_t *f = arg;
  uvt_done(status, output, &f->reduced);
}

static void rank_created(int status, cuv_output_t *output, void *arg) {
  rank_flow_t *f = arg;
  uvt_done(status, output, &f->created);
  if (status != 0)
    return;
  f->comm = cuv_output_take(&f->created.out).data;
  if (++*f->ready < ndev)
    return;
  for (int r = 0; r < ndev; r++) { /* each rank's part of the group, a submission each */
    rank_flow_t *g = &f->all[r];
    cuv_op_t *op = cuv_comm_all_reduce(g->comm, NULL, &g->sums->buf[r], g->sums->count,
                                       CUV_NCCL_FLOAT32, CUV_NCCL_SUM);
    if (cuv_uv_submit(g->loop->bridge, op, rank_reduced, g, NULL) != 0)
      g->reduced.status = CUV_EINVAL; /* seen after uv_run: no callback */
  }
}

static void test_ranks_on_the_loop(void **state) {
  (void)state;
  uvt_loop_t l;
  sums_t s;
  cuv_nccl_id_t id;
  rank_flow_t f[MAXD];
  int ready = 0;
  sums_init(&s, 1 + cuvt_random_u32() % 5000);
  assert_cuv_ok(cuv_nccl_unique_id(&id));
  uvt_open(&l);
  for (int r = 0; r < ndev; r++) {
    f[r] = (rank_flow_t){.loop = &l, .sums = &s, .rank = r, .ready = &ready, .all = f};
    f[r].created.loop = f[r].reduced.loop = &l;
    assert_cuv_ok(cuv_uv_submit(l.bridge, cuv_comm_init_rank(devs[r], &id, r, ndev), rank_created,
                                &f[r], NULL));
  }
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  for (int r = 0; r < ndev; r++) {
    uvt_assert_all_ok(&f[r].created, 1);
    uvt_assert_all_ok(&f[r].reduced, 1);
  }
  uvt_close(&l);
  sums_check(&s);
  for (int r = 0; r < ndev; r++)
    cuv_comm_unref(f[r].comm);
}

int main(void) {
  cuv_sim_set_device_count(4); /* the simulator only: a GPU machine has what it has */
  cuvt_init();
  int count = 0;
  if (cuv_device_count(&count) != 0 || count < 2) {
    printf("1..0 # SKIP fewer than 2 devices\n");
    return 77;
  }
  ndev = count < MAXD ? count : MAXD;
  for (int r = 0; r < ndev; r++)
    if (cuv_device_open(&devs[r], r) != 0)
      return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loop_runs_while_initializing),
      cmocka_unit_test(test_created_on_the_loop),
      cmocka_unit_test(test_ranks_on_the_loop),
      cmocka_unit_test(test_then_over_creation),
  };
  int rc = cuvt_run(tests);
  for (int r = 0; r < ndev; r++)
    cuv_device_unref(devs[r]);
  return rc;
}
