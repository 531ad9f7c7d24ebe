/* The submission engine (lib/engine.c), through the public API, under whatever engine settings
 * the environment gives (tests/meson.build runs this file with the engine forced, idle-inline, off
 * and with a ring of 2): order and exactly-once delivery with several submitting threads and two
 * loops, which path made the driver calls, and close and cancel while work waits in the ring.
 * Callbacks and worker threads only record; the test thread asserts. */
#include <pthread.h>
#include <stdatomic.h>

#include "counted.h"
#include "uvt.h"

enum { THREADS = 4, LOOPS = 2 };

static unsigned per_thread(void) {
  const char *n = getenv("CUVT_ENGINE_N");
  return n && *n ? (unsigned)atoi(n) : 10000;
}

static cuv_config_t config(void) {
  cuv_config_t c;
  assert_cuv_ok(cuv_config_get(&c));
  return c;
}

/* ---- order and exactly-once: 4 threads into 2 loops ---- */

typedef struct loop_side {
  uvt_loop_t l;
  uv_async_t stop;
  uv_thread_t thread;
  atomic_bool open;
  atomic_uint expect, got;
} loop_side_t;

typedef struct submitter {
  pthread_t thread;
  unsigned index;
  cuv_stream_t *stream;
  cuv_buffer_t *cur, *log;
  loop_side_t *side;
  unsigned n;
  atomic_uint next_k;     /* the k the next callback must carry */
  atomic_uint misordered; /* callbacks that came out of submission order */
  atomic_uint failed;     /* callbacks with a status other than 0 */
  atomic_uint refused;    /* cuv_uv_submit calls that failed */
} submitter_t;

typedef struct tag {
  submitter_t *s;
  unsigned k;
} tag_t;

static loop_side_t sides[LOOPS];
static submitter_t subs[THREADS];

static void on_stop(uv_async_t *a) {
  loop_side_t *side = a->data;
  uv_close((uv_handle_t *)&side->stop, NULL);
  cuv_uv_close(side->l.bridge, uvt_on_close, &side->l);
}

static void loop_main(void *arg) {
  loop_side_t *side = arg;
  uv_loop_init(&side->l.loop);
  cuv_uv_open(&side->l.bridge, &side->l.loop);
  side->stop.data = side;
  uv_async_init(&side->l.loop, &side->stop, on_stop);
  atomic_store(&side->open, true);
  uv_run(&side->l.loop, UV_RUN_DEFAULT);
  uv_loop_close(&side->l.loop);
}

/* On a loop thread: checks that thread s's callbacks come in the order it submitted. */
static void ordered_done(int status, cuv_output_t *out, void *arg) {
  tag_t *t = arg;
  submitter_t *s = t->s;
  if (status != 0)
    atomic_fetch_add(&s->failed, 1);
  if (atomic_load(&s->next_k) != t->k)
    atomic_fetch_add(&s->misordered, 1);
  atomic_store(&s->next_k, t->k + 1);
  atomic_fetch_add(&s->side->got, 1);
  free(t);
}

/* Submission k copies the running value into log[k], then sets it to k + 1: log[k] == k for
 * every k proves the stream ran the thread's submissions in its order. */
static cuv_op_t *step(submitter_t *s, unsigned k) {
  cuv_op_t *copy = cuv_memcpy_dtod(s->log, (size_t)k * 4, s->cur, 0, 4);
  return cuv_seq(copy, cuvt_fill_u32(s->cur, 1, k + 1));
}

static void *submitter_main(void *arg) {
  submitter_t *s = arg;
  cuv_submit_opts_t opts = {.stream = s->stream};
  for (unsigned k = 0; k < s->n; k++) {
    tag_t *t = malloc(sizeof *t);
    *t = (tag_t){s, k};
    if (cuv_uv_submit(s->side->l.bridge, step(s, k), ordered_done, t, &opts) != 0) {
      atomic_fetch_add(&s->refused, 1);
      free(t);
    }
  }
  return NULL;
}

static void wait_all(void) {
  for (unsigned i = 0; i < LOOPS; i++)
    while (atomic_load(&sides[i].got) < atomic_load(&sides[i].expect))
      uv_sleep(1);
}

static void test_order_threads_loops(void **state) {
  unsigned n = per_thread();
  cuv_stats_t before = cuvt_stats();
  cuv_stream_t *streams[2];
  for (int i = 0; i < 2; i++)
    assert_cuv_ok(cuv_stream_create(&streams[i], cuvt_device()));
  for (unsigned i = 0; i < LOOPS; i++) {
    memset(&sides[i], 0, sizeof sides[i]);
    atomic_store(&sides[i].expect, n * (THREADS / LOOPS));
    assert_int_equal(uv_thread_create(&sides[i].thread, loop_main, &sides[i]),
                     0);
    while (!atomic_load(&sides[i].open))
      uv_sleep(1);
  }
  for (unsigned t = 0; t < THREADS; t++) {
    submitter_t *s = &subs[t];
    memset(s, 0, sizeof *s);
    *s = (submitter_t){.index = t, .stream = streams[t % 2], .side = &sides[t % LOOPS], .n = n};
    s->cur = cuvt_buffer(4);
    s->log = cuvt_buffer((size_t)n * 4);
    assert_cuv_ok(cuv_sync(cuv_memset32(s->cur, 0, 0, 1), NULL));
  }
  for (unsigned t = 0; t < THREADS; t++)
    assert_int_equal(pthread_create(&subs[t].thread, NULL, submitter_main, &subs[t]), 0);
  for (unsigned t = 0; t < THREADS; t++)
    pthread_join(subs[t].thread, NULL);
  wait_all();
  for (unsigned i = 0; i < LOOPS; i++) {
    uv_async_send(&sides[i].stop);
    uv_thread_join(&sides[i].thread);
    assert_int_equal(sides[i].l.close_calls, 1);
    assert_int_equal(atomic_load(&sides[i].got), n * (THREADS / LOOPS)); /* none twice */
  }
  unsigned *log = malloc((size_t)n * 4);
  for (unsigned t = 0; t < THREADS; t++) {
    submitter_t *s = &subs[t];
    assert_int_equal(atomic_load(&s->refused), 0);
    assert_int_equal(atomic_load(&s->failed), 0);
    assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(log, s->log, 0, (size_t)n * 4), NULL));
    for (unsigned k = 0; k < n; k++)
      if (log[k] != k)
        fail_msg("thread %u: submission %u saw %u before it, not %u", t, k, log[k], k);
    cuv_buffer_unref(s->cur);
    cuv_buffer_unref(s->log);
    /* One stream, one loop: its completions are delivered in the order they were submitted. */
    assert_int_equal(atomic_load(&s->misordered), 0);
  }
  free(log);
  for (int i = 0; i < 2; i++)
    cuv_stream_destroy(streams[i]);
  cuv_stats_t now = cuvt_stats();
  uint64_t inline_n = now.engine_inline - before.engine_inline;
  uint64_t queued = now.engine_queued - before.engine_queued;
  uint64_t helped = now.engine_helped - before.engine_helped;
  cuv_config_t c = config();
  print_message("# %u x %u submissions: %llu inline, %llu queued, %llu helped\n", THREADS, n,
                (unsigned long long)inline_n, (unsigned long long)queued,
                (unsigned long long)helped);
  bool engine = c.submit_threads > 0 && c.submit_inline != CUV_SUBMIT_INLINE_ALWAYS;
  if (!engine)
    assert_int_equal(queued + helped, 0);
  if (engine && c.submit_inline == CUV_SUBMIT_INLINE_NEVER)
    assert_true(queued + helped >= (uint64_t)THREADS * n); /* the executor's syncs aside */
  if (engine && c.submit_ring == 2)
    assert_true(helped > 0); /* 40,000 pushes into 2 slots: some found it full */
}

/* ---- which path: one submission at a time on an idle stream, then a burst ---- */

static atomic_int counted_calls;

static atomic_int counted_failures;

static void count_done(int status, cuv_output_t *out, void *arg) {
  atomic_fetch_add(status == 0 ? &counted_calls : &counted_failures, 1);
  if (status != 0)
    fprintf(stderr, "status %d\n", status);
}

static void test_paths(void **state) {
  enum { SINGLE = 20, BURST = 200 };
  cuv_config_t c = config();
  bool engine = c.submit_threads > 0 && c.submit_inline != CUV_SUBMIT_INLINE_ALWAYS;
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  cuv_buffer_t *buf = cuvt_buffer(4);
  cuv_submit_opts_t opts = {.stream = stream};
  atomic_store(&counted_calls, 0);
  cuv_stats_t before = cuvt_stats();
  for (int i = 0; i < SINGLE; i++) {
    assert_cuv_ok(cuv_submit(q, cuvt_fill_u32(buf, 1, (unsigned)i), count_done, NULL, &opts));
    cuvt_drain_until(q, &counted_calls, i + 1);
  }
  cuv_stats_t now = cuvt_stats();
  uint64_t inline_n = now.engine_inline - before.engine_inline;
  uint64_t queued = now.engine_queued - before.engine_queued;
  if (engine && c.submit_inline == CUV_SUBMIT_INLINE_NEVER) {
    assert_int_equal(queued, SINGLE);
    assert_int_equal(inline_n, 0);
  } else {
    /* The engine is idle and the stream empty before each: the submitting thread enqueues. */
    assert_int_equal(inline_n, SINGLE);
    assert_int_equal(queued, 0);
  }
  before = now;
  for (int i = 0; i < BURST; i++)
    assert_cuv_ok(cuv_submit(q, cuvt_fill_u32(buf, 1, (unsigned)i), count_done, NULL, &opts));
  cuvt_drain_until(q, &counted_calls, SINGLE + BURST);
  now = cuvt_stats();
  inline_n = now.engine_inline - before.engine_inline;
  queued = now.engine_queued - before.engine_queued;
  uint64_t helped = now.engine_helped - before.engine_helped;
  assert_int_equal(inline_n + queued + helped, BURST);
  if (engine)
    assert_true(queued + helped > 0); /* the stream was busy with the burst's own work */
  else
    assert_int_equal(queued + helped, 0);
  unsigned last = 0;
  assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(&last, buf, 0, 4), NULL));
  assert_int_equal(last, BURST - 1); /* the burst's last fill ran last */
  cuv_buffer_unref(buf);
  cuv_stream_destroy(stream);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* ---- close and cancel with work waiting in the ring ---- */

typedef struct blocker {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool open, entered;
} blocker_t;

static blocker_t blocker = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};

/* Runs where the job's driver calls are made, and holds that thread until the test opens it: the
 * jobs pushed meanwhile wait (in the ring, or claimed and waiting for it: its touches are unknown,
 * so every later job is ordered after it). */
static cuv_op_t *block_here(cuv_stream_t *stream, void *arg) {
  pthread_mutex_lock(&blocker.lock);
  blocker.entered = true;
  pthread_cond_broadcast(&blocker.cond);
  while (!blocker.open)
    pthread_cond_wait(&blocker.cond, &blocker.lock);
  pthread_mutex_unlock(&blocker.lock);
  return cuv_value(NULL, NULL);
}

typedef struct record {
  int calls, status;
} record_t;

static void record_done(int status, cuv_output_t *out, void *arg) {
  record_t *r = arg;
  r->calls++;
  r->status = status;
}

static void close_cb(cuv_uv_t *bridge, void *arg) { (*(int *)arg)++; }

/* Submits the blocking op on stream and returns once a thread runs it (and is held there). */
static void block_engine(uvt_loop_t *l, cuv_stream_t *stream, record_t *first) {
  blocker.open = blocker.entered = false;
  cuv_submit_opts_t opts = {.stream = stream};
  assert_cuv_ok(cuv_uv_submit(l->bridge, cuv_with_context(block_here, NULL, NULL), record_done,
                              first, &opts));
  pthread_mutex_lock(&blocker.lock);
  while (!blocker.entered)
    pthread_cond_wait(&blocker.cond, &blocker.lock);
  pthread_mutex_unlock(&blocker.lock);
}

static void unblock_engine(void) {
  pthread_mutex_lock(&blocker.lock);
  blocker.open = true;
  pthread_cond_broadcast(&blocker.cond);
  pthread_mutex_unlock(&blocker.lock);
}


/* A queue with many submissions in flight belongs to a busy owner (a loop thread): the engine
 * takes its jobs, however idle it is and however empty each stream (lib/submit.c: at most 4 in
 * flight run on the submitting thread). Each of 16 submissions goes to a stream of its own, so
 * only the queue's count can keep them off this thread. */
static void test_busy_owner_hands_off(void **state) {
  enum { STREAMS = 16, INLINE_MAX = 4 };
  cuv_config_t c = config();
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_stream_t *streams[STREAMS];
  cuv_buffer_t *bufs[STREAMS];
  for (int i = 0; i < STREAMS; i++) {
    assert_cuv_ok(cuv_stream_create(&streams[i], cuvt_device()));
    bufs[i] = cuvt_buffer(4);
  }
  atomic_store(&counted_calls, 0);
  cuv_stats_t before = cuvt_stats();
  for (int i = 0; i < STREAMS; i++) {
    cuv_submit_opts_t opts = {.stream = streams[i]};
    assert_cuv_ok(cuv_submit(q, cuvt_fill_u32(bufs[i], 1, (unsigned)i), count_done, NULL, &opts));
  }
  cuvt_drain_until(q, &counted_calls, STREAMS);
  cuv_stats_t now = cuvt_stats();
  uint64_t inline_n = now.engine_inline - before.engine_inline;
  if (c.submit_threads > 0 && c.submit_inline == CUV_SUBMIT_INLINE_IDLE)
    assert_true(inline_n <= INLINE_MAX);
  for (int i = 0; i < STREAMS; i++) {
    unsigned got = 0;
    assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(&got, bufs[i], 0, 4), NULL));
    assert_int_equal(got, (unsigned)i);
    cuv_buffer_unref(bufs[i]);
    cuv_stream_destroy(streams[i]);
  }
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* A thread that submits without spinning (a loop: CUV_SUBMIT_NO_SPIN) more often than its own
 * enqueueing takes, with others of its queue in flight, hands its jobs to the engine even where
 * each could run here: an idle engine, a stream per job and few in flight per queue (lib/submit.c).
 * Each job's custom op is busy for SLOW_US in its execute; a warm-up of jobs alone in their queue,
 * spaced by 2 ms (each run here), teaches the thread that cost, then a burst back to back, 4 per
 * queue (at most INLINE_PENDING_MAX in flight), must hand some over: without the rule all of it
 * runs here. */
enum { SLOW_US = 30 };

/* Busy for SLOW_US (a sleep would overshoot by a varying amount: the durations the rule compares
 * are to be alike). */
static int slow_execute(cuv_custom_ctx_t *ctx, cuv_output_t *out, void *arg) {
  (void)ctx;
  (void)out;
  (void)arg;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do
    clock_gettime(CLOCK_MONOTONIC, &t);
  while ((t.tv_sec - t0.tv_sec) * 1000000000ll + (t.tv_nsec - t0.tv_nsec) < SLOW_US * 1000ll);
  return 0;
}

static void test_busy_nospin_thread_hands_off(void **state) {
  enum { WARM = 8, BURST = 16, PER_QUEUE = 4, QUEUES = BURST / PER_QUEUE };
  cuv_config_t c = config();
  cuv_queue_t *queues[QUEUES];
  cuv_stream_t *streams[BURST];
  for (int i = 0; i < QUEUES; i++)
    assert_cuv_ok(cuv_queue_create(&queues[i], NULL, NULL));
  for (int i = 0; i < BURST; i++)
    assert_cuv_ok(cuv_stream_create(&streams[i], cuvt_device()));
  atomic_store(&counted_calls, 0);
  atomic_store(&counted_failures, 0);
  cuv_stats_t before = cuvt_stats();
  for (int i = 0; i < WARM; i++) {
    cuv_submit_opts_t opts = {.stream = streams[0], .flags = CUV_SUBMIT_NO_SPIN};
    assert_cuv_ok(cuv_submit(queues[0], cuv_custom(slow_execute, NULL, NULL, NULL, 0),
                             count_done, NULL, &opts));
    cuvt_drain_until(queues[0], &counted_calls, i + 1);
    usleep(2000);
  }
  cuv_stats_t warm = cuvt_stats();
  for (int i = 0; i < BURST; i++) {
    cuv_submit_opts_t opts = {.stream = streams[i], .flags = CUV_SUBMIT_NO_SPIN};
    cuv_op_t *op = cuv_custom(slow_execute, NULL, NULL, NULL, 0);
    assert_cuv_ok(cuv_submit(queues[i / PER_QUEUE], op, count_done, NULL, &opts));
  }
  for (int i = 0; i < QUEUES; i++)
    cuvt_drain_until(queues[i], &counted_calls, WARM + (i + 1) * PER_QUEUE);
  cuv_stats_t now = cuvt_stats();
  assert_int_equal(atomic_load(&counted_calls), WARM + BURST);
  assert_int_equal(atomic_load(&counted_failures), 0);
  uint64_t warm_inline = warm.engine_inline - before.engine_inline;
  uint64_t burst_inline = now.engine_inline - warm.engine_inline;
  uint64_t burst_queued = now.engine_queued - warm.engine_queued;
  print_message("# warm-up: %llu of %d here; burst: %llu here, %llu handed over\n",
                (unsigned long long)warm_inline, WARM, (unsigned long long)burst_inline,
                (unsigned long long)burst_queued);
  if (c.submit_threads > 0 && c.submit_inline == CUV_SUBMIT_INLINE_IDLE) {
    assert_int_equal(warm_inline, WARM);
    assert_true(burst_queued >= 1);
  }
  for (int i = 0; i < QUEUES; i++)
    assert_cuv_ok(cuv_queue_destroy(queues[i]));
  for (int i = 0; i < BURST; i++)
    cuv_stream_destroy(streams[i]);
}

/* Several threads submitting side by side make their own driver calls, busy or not: the busy
 * rule of test_busy_nospin_thread_hands_off holds only for a thread that submits alone (lib/
 * engine.c shared()). Two threads each run that test's warm-up and burst at once; a job handed
 * over is told by its trace (ran_here false). Without the exception each burst hands at least one
 * over, every round; with it a round hands none over unless a thread stalled for longer than the
 * engine's shared window between the two threads' pushes, so some round of ROUNDS must hand
 * none over (a loaded machine may stall one round, never all). */
enum { SIDE_WARM = 8, SIDE_BURST = 16, SIDE_PER_QUEUE = 4, SIDE_QUEUES = 4, SIDE_ROUNDS = 6 };

typedef struct side_thread {
  pthread_t thread;
  pthread_barrier_t *start;
  cuv_queue_t *queues[SIDE_QUEUES];
  cuv_stream_t *streams[SIDE_BURST];
  atomic_int calls, failures;
  unsigned handed_over; /* of the burst, read by the test thread after the join */
} side_thread_t;

static void side_done(int status, cuv_output_t *out, void *arg) {
  (void)out;
  side_thread_t *t = arg;
  atomic_fetch_add(status == 0 ? &t->calls : &t->failures, 1);
}

static void side_drain(side_thread_t *t, cuv_queue_t *q, int calls) {
  while (atomic_load(&t->calls) + atomic_load(&t->failures) < calls)
    cuv_queue_drain(q);
}

static void side_submit(side_thread_t *t, int queue, int stream, cuv_trace_t *trace) {
  cuv_submit_opts_t opts = {.stream = t->streams[stream], .flags = CUV_SUBMIT_NO_SPIN,
                            .trace = trace};
  assert_cuv_ok(cuv_submit(t->queues[queue], cuv_custom(slow_execute, NULL, NULL, NULL, 0),
                           side_done, t, &opts));
}

static void *side_main(void *arg) {
  side_thread_t *t = arg;
  cuv_trace_t traces[SIDE_BURST];
  pthread_barrier_wait(t->start);
  for (int i = 0; i < SIDE_WARM; i++) { /* alone in its queue: run here, the cost learnt */
    side_submit(t, 0, 0, NULL);
    side_drain(t, t->queues[0], i + 1);
    usleep(2000);
  }
  pthread_barrier_wait(t->start);
  for (int i = 0; i < SIDE_BURST; i++)
    side_submit(t, i / SIDE_PER_QUEUE, i, &traces[i]);
  for (int i = 0; i < SIDE_QUEUES; i++)
    side_drain(t, t->queues[i], SIDE_WARM + (i + 1) * SIDE_PER_QUEUE);
  t->handed_over = 0;
  for (int i = 0; i < SIDE_BURST; i++)
    t->handed_over += !traces[i].ran_here;
  return NULL;
}

static void test_busy_threads_side_by_side_run_here(void **state) {
  cuv_config_t c = config();
  if (c.submit_threads == 0 || c.submit_inline != CUV_SUBMIT_INLINE_IDLE) {
    print_message("# not this configuration's case\n");
    return;
  }
  side_thread_t pair[2];
  pthread_barrier_t start;
  int clean_rounds = 0;
  for (int round = 0; round < SIDE_ROUNDS; round++) {
    assert_int_equal(pthread_barrier_init(&start, NULL, 2), 0);
    for (int s = 0; s < 2; s++) {
      side_thread_t *t = &pair[s];
      *t = (side_thread_t){.start = &start};
      for (int i = 0; i < SIDE_QUEUES; i++)
        assert_cuv_ok(cuv_queue_create(&t->queues[i], NULL, NULL));
      for (int i = 0; i < SIDE_BURST; i++)
        assert_cuv_ok(cuv_stream_create(&t->streams[i], cuvt_device()));
      assert_int_equal(pthread_create(&t->thread, NULL, side_main, t), 0);
    }
    unsigned handed = 0;
    for (int s = 0; s < 2; s++) {
      side_thread_t *t = &pair[s];
      assert_int_equal(pthread_join(t->thread, NULL), 0);
      assert_int_equal(atomic_load(&t->calls), SIDE_WARM + SIDE_BURST);
      assert_int_equal(atomic_load(&t->failures), 0);
      handed += t->handed_over;
      for (int i = 0; i < SIDE_QUEUES; i++)
        assert_cuv_ok(cuv_queue_destroy(t->queues[i]));
      for (int i = 0; i < SIDE_BURST; i++)
        cuv_stream_destroy(t->streams[i]);
    }
    pthread_barrier_destroy(&start);
    print_message("# round %d: %u of %d handed over\n", round, handed, 2 * SIDE_BURST);
    clean_rounds += handed == 0;
  }
  assert_true(clean_rounds >= 1);
}

/* A submission alone in its queue runs here, however soon after the previous one it comes: a
 * thread that waits for each submission before the next (a latency-bound loop) is not busy, even
 * when the work finished sooner than its enqueueing took (lib/submit.c busy_without_spin). A
 * warm-up teaches the thread the SLOW_US cost; then each job is submitted as soon as the one
 * before was drained, which here is sooner than that cost when nothing GPU-side waits. */
static void test_lone_nospin_submission_runs_here(void **state) {
  enum { WARM = 4, CHAIN = 12 };
  cuv_config_t c = config();
  cuv_queue_t *q;
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  atomic_store(&counted_calls, 0);
  atomic_store(&counted_failures, 0);
  cuv_submit_opts_t opts = {.stream = stream, .flags = CUV_SUBMIT_NO_SPIN};
  cuv_stats_t chained = {0};
  for (int i = 0; i < WARM + CHAIN; i++) {
    if (i == WARM) /* counted from here: the warm-up's first may meet a submitter still busy */
      chained = cuvt_stats();
    assert_cuv_ok(cuv_submit(q, cuv_custom(slow_execute, NULL, NULL, NULL, 0), count_done, NULL,
                             &opts));
    cuvt_drain_until(q, &counted_calls, i + 1);
    if (i < WARM)
      usleep(2000);
  }
  cuv_stats_t now = cuvt_stats();
  assert_int_equal(atomic_load(&counted_calls), WARM + CHAIN);
  assert_int_equal(atomic_load(&counted_failures), 0);
  if (c.submit_threads > 0 && c.submit_inline == CUV_SUBMIT_INLINE_IDLE)
    assert_int_equal(now.engine_inline - chained.engine_inline, CHAIN);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_stream_destroy(stream);
}

/* Only a forced engine keeps work in the ring behind a blocked submitter; with a ring smaller
 * than the work, the pushing thread itself would run queued jobs, which wait for the blocked one
 * (the test thread, which alone can open it). */
static bool can_queue(unsigned jobs) {
  cuv_config_t c = config();
  bool can = c.submit_threads > 0 && c.submit_inline == CUV_SUBMIT_INLINE_NEVER &&
             c.submit_ring >= 2 * jobs;
  if (!can)
    print_message("# not this configuration's case\n");
  return can;
}

static void test_close_cancel_queued(void **state) {
  enum { QUEUED = 64 };
  if (!can_queue(QUEUED))
    return;
  uvt_loop_t l;
  uvt_open(&l);
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  cuv_buffer_t *buf = cuvt_buffer(QUEUED * 4);
  record_t first = {0}, rec[QUEUED] = {{0}};
  block_engine(&l, stream, &first);
  cuv_ticket_t tickets[QUEUED];
  unsigned values[QUEUED];
  for (int i = 0; i < QUEUED; i++) {
    values[i] = cuvt_nonzero_u32();
    cuv_submit_opts_t o = {.stream = stream, .ticket = &tickets[i]};
    cuv_op_t *op = cuv_seq(cuv_memset32(buf, (size_t)i * 4, values[i], 1), cuv_value(NULL, NULL));
    assert_cuv_ok(cuv_uv_submit(l.bridge, op, record_done, &rec[i], &o));
  }
  for (int i = 0; i < QUEUED; i += 2)
    assert_cuv_ok(cuv_uv_cancel(l.bridge, tickets[i]));
  int closed = 0;
  assert_cuv_ok(cuv_uv_close(l.bridge, close_cb, &closed)); /* with all of it still queued */
  unblock_engine();
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(closed, 1);
  assert_int_equal(uv_loop_close(&l.loop), 0);
  assert_int_equal(first.calls, 1);
  assert_int_equal(first.status, 0);
  unsigned got[QUEUED];
  assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(got, buf, 0, sizeof got), NULL));
  for (int i = 0; i < QUEUED; i++) {
    assert_int_equal(rec[i].calls, 1);
    assert_int_equal(rec[i].status, i % 2 == 0 ? CUV_ECANCELED : 0);
    assert_int_equal(got[i], values[i]); /* cancelled or not, accepted work ran */
  }
  cuv_buffer_unref(buf);
  cuv_stream_destroy(stream);
}

/* ---- a fault with work waiting in the ring ---- */

/* Last: the fault kills the device's context for the rest of the process. A blocked submitter
 * holds QUEUED submissions in the ring behind a faulting kernel; once it opens, the kernel
 * faults and every submission still gets its callback exactly once: the ones behind the fault
 * with the fault (or, raced by the reactor's probe, a driver error), none with success after
 * it on its stream. */
static void test_fault_with_queued_work(void **state) {
  enum { QUEUED = 32 };
  if (!can_queue(QUEUED))
    return;
  uvt_loop_t l;
  uvt_open(&l);
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  cuv_buffer_t *buf = cuvt_buffer(QUEUED * 4);
  record_t first = {0}, faulting = {0}, rec[QUEUED] = {{0}};
  cuv_submit_opts_t opts = {.stream = stream};
  block_engine(&l, stream, &first);
  unsigned long long bad = 0x10; /* the GPU's first page is never mapped */
  cuv_arg_t args[] = {CUV_ARG_VALUE(bad)};
  cuv_op_t *fault =
      cuv_launch(cuvt_kernel("fault_kernel"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 1);
  assert_cuv_ok(cuv_uv_submit(l.bridge, fault, record_done, &faulting, &opts));
  for (int i = 0; i < QUEUED; i++)
    assert_cuv_ok(cuv_uv_submit(l.bridge, cuv_memset32(buf, (size_t)i * 4, 1, 1), record_done,
                                &rec[i], &opts));
  cuv_stats_t before = cuvt_stats();
  unblock_engine();
  int closed = 0;
  assert_cuv_ok(cuv_uv_close(l.bridge, close_cb, &closed));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(closed, 1);
  assert_int_equal(uv_loop_close(&l.loop), 0);
  assert_int_equal(first.calls, 1);
  assert_int_equal(faulting.calls, 1);
  assert_true(cuv_status_is_fault(faulting.status));
  for (int i = 0; i < QUEUED; i++) {
    assert_int_equal(rec[i].calls, 1);
    if (rec[i].status == 0)
      fail_msg("submission %d behind the fault on its stream succeeded", i);
    assert_true(CUV_IS_ECUDA(rec[i].status));
  }
  cuv_stats_t now = cuvt_stats();
  assert_true(now.faults - before.faults >= 1 + QUEUED);
  print_message("# %d queued behind a fault: all failed, each once\n", QUEUED);
  (void)buf; /* leaked with the dead context, as cuv does with what the GPU may still touch */
  (void)stream;
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_paths),
      cmocka_unit_test(test_busy_owner_hands_off),
      cmocka_unit_test(test_busy_nospin_thread_hands_off),
      cmocka_unit_test(test_lone_nospin_submission_runs_here),
      cmocka_unit_test(test_busy_threads_side_by_side_run_here),
      cmocka_unit_test(test_close_cancel_queued),
      cmocka_unit_test(test_order_threads_loops),
      cmocka_unit_test(test_fault_with_queued_work), /* last: the context dies */
  };
  return cuvt_run(tests);
}
