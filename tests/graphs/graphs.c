/* CUDA graphs through the public API: a multi-kernel chain captured once and replayed many times
 * with new inputs copied in through cuv_graph_update, checked against a host reference after
 * every replay; the captured work does not run at capture time; capture failures (a failed
 * constructor, an op failing midway, a driver failure) return the error, leave no capture open
 * and leak nothing; nested execution inside the captured op is refused; a launch op outlives
 * cuv_graph_unref; replays submitted into a cuv_queue are checked in their callbacks. */
#include <cuda.h>

#include "graph-chain.h"

#define REPLAYS 50

/* Downloads y on `stream` (NULL: a stream of the default policy) and compares it with want. */
static void check_output_on(cuv_stream_t *stream, const chain_t *c, const float *want) {
  cuv_output_t out;
  cuv_op_t *download = cuv_download(c->y, 0, N * sizeof(float));
  assert_cuv_ok(stream ? cuv_sync_on(stream, download, &out) : cuv_sync(download, &out));
  assert_non_null(out.data);
  cuvt_assert_floats_equal(out.data, want, N);
  cuv_output_release(&out);
}

/* ---- capture and replay ---- */

static void replay_chain(cuv_stream_t *capture_stream) {
  chain_t c;
  chain_create(&c);
  /* The output's initial contents: whatever the capture does, they stay until the first launch. */
  float *initial = malloc(N * sizeof *initial), *want = malloc(N * sizeof *want);
  assert_non_null(initial);
  assert_non_null(want);
  cuvt_random_ints(initial, N);
  cuvt_upload(c.y, 0, initial, N * sizeof *initial);
  cuvt_upload(c.x, 0, initial, N * sizeof *initial);

  cuv_graph_t *g = NULL;
  assert_cuv_ok(cuv_graph_capture(&g, chain_op(&c), capture_stream, NULL));
  assert_non_null(g);
  cuv_stream_t *gs = cuv_graph_stream(g);
  assert_non_null(gs);
  if (capture_stream)
    assert_ptr_equal(gs, capture_stream);
  check_output_on(gs, &c, initial); /* nothing ran at capture time */
  cuvt_read(want, c.x, 0, N * sizeof *want);
  cuvt_assert_floats_equal(want, initial, N);

  for (int r = 0; r < REPLAYS; r++) {
    new_inputs(g, &c, want);
    assert_cuv_ok(cuv_sync_on(cuv_graph_stream(g), cuv_graph_launch(g), NULL));
    check_output_on(gs, &c, want);
  }
  cuv_graph_unref(g);
  chain_destroy(&c);
  free(initial);
  free(want);
}

static void test_replay_on_own_stream(void **state) {
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  replay_chain(s);
  cuv_stream_destroy(s);
}

static void test_replay_on_policy_stream(void **state) { replay_chain(NULL); }

/* The captured op's output is handed out at capture time; a graph with a unit chain gives a
 * tuple of units, and a captured download gives a host pointer the replays fill. */
static void test_capture_output_of_download(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(N * sizeof(float));
  float *data = malloc(N * sizeof *data);
  assert_non_null(data);
  cuvt_random_ints(data, N);
  cuvt_upload(buf, 0, data, N * sizeof *data);
  cuv_graph_t *g = NULL;
  cuv_output_t out;
  cuv_op_t *op = cuv_seq(cuvt_add_one(buf, N), cuv_download(buf, 0, N * sizeof(float)));
  assert_cuv_ok(cuv_graph_capture(&g, op, NULL, &out));
  assert_non_null(out.data);
  for (int r = 0; r < 3; r++) {
    assert_cuv_ok(cuv_sync_on(cuv_graph_stream(g), cuv_graph_launch(g), NULL));
    for (size_t i = 0; i < N; i++)
      data[i] += 1.0f;
    cuvt_assert_floats_equal(out.data, data, N); /* each replay refills the captured download */
  }
  cuv_output_release(&out);
  cuv_graph_unref(g);
  cuv_buffer_unref(buf);
  free(data);
}

/* ---- capture failures ---- */

/* After a failed capture: no graph, and the stream works normally (work on it runs at once and
 * its result is right), also when the captured op wrote the buffer: nothing of it ran. */
static void assert_stream_works(cuv_stream_t *s, cuv_buffer_t *buf, const float *before) {
  float *want = malloc(N * sizeof *want);
  assert_non_null(want);
  for (size_t i = 0; i < N; i++)
    want[i] = before[i] + 1.0f;
  assert_cuv_ok(cuv_sync_on(s, cuvt_add_one(buf, N), NULL));
  cuv_output_t out;
  assert_cuv_ok(cuv_sync_on(s, cuv_download(buf, 0, N * sizeof(float)), &out));
  cuvt_assert_floats_equal(out.data, want, N);
  cuv_output_release(&out);
  assert_int_equal(cuv_stream_in_flight(s), 0);
  free(want);
}

typedef struct failing_capture {
  const char *name;
  cuv_op_t *(*make)(cuv_buffer_t *buf, atomic_int *releases);
  int sim_only;           /* needs failure injection */
  const char *fail_entry; /* injected: the nth call of this entry point fails */
  unsigned fail_nth;
  int want;               /* the status the capture returns */
} failing_capture_t;

static cuv_op_t *bad_launch(void) {
  /* A parameter-count mismatch: the constructor fails, the op carries CUV_EARGS. */
  return cuv_launch(cuvt_kernel("add_one"), CUV_DIM1(1), CUVT_BLOCK, 0, NULL, 0);
}

static cuv_op_t *make_error_in_zip(cuv_buffer_t *buf, atomic_int *releases) {
  cuv_op_t *ops[] = {cuvt_scale(buf, N, 5.0f), cuvt_counted_value(1, releases), bad_launch(),
                     cuvt_add_one(buf, N)};
  return cuv_zip(ops, 4);
}

static cuv_op_t *make_error_in_seq(cuv_buffer_t *buf, atomic_int *releases) {
  return cuv_seq(cuv_seq(cuvt_scale(buf, N, 5.0f), cuvt_counted_value(1, releases)), bad_launch());
}

static cuv_op_t *then_returns_bad_launch(cuv_output_t *input, void *arg) {
  return bad_launch();
}

/* Fails at execution time, after two kernels and a value were enqueued into the capture. */
static cuv_op_t *make_failure_midway(cuv_buffer_t *buf, atomic_int *releases) {
  cuv_op_t *ops[] = {cuvt_scale(buf, N, 5.0f), cuvt_counted_value(1, releases),
                     cuv_then(cuvt_add_one(buf, N), then_returns_bad_launch, NULL),
                     cuvt_add_one(buf, N)};
  return cuv_zip(ops, 4);
}

static int map_fails(cuv_output_t *value, void *arg) { return CUV_ERANGE; }

static cuv_op_t *make_map_failure(cuv_buffer_t *buf, atomic_int *releases) {
  return cuv_seq(cuvt_scale(buf, N, 5.0f),
                 cuv_map(cuv_seq(cuvt_add_one(buf, N), cuvt_counted_value(1, releases)),
                         map_fails, NULL));
}

/* The driver refuses the second launch: a block of 2048 threads is over every GPU's limit. */
static cuv_op_t *make_driver_refusal(cuv_buffer_t *buf, atomic_int *releases) {
  unsigned n = N;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(buf)};
  cuv_op_t *ops[] = {cuvt_scale(buf, N, 5.0f), cuvt_counted_value(1, releases),
                     cuv_launch(cuvt_kernel("add_one"), CUV_DIM1(1), CUV_DIM1(2048), 0, args, 2),
                     cuvt_add_one(buf, N)};
  return cuv_zip(ops, 4);
}

/* Three launches; the injection decides which one fails. */
static cuv_op_t *make_three_launches(cuv_buffer_t *buf, atomic_int *releases) {
  cuv_op_t *ops[] = {cuvt_scale(buf, N, 5.0f), cuvt_add_one(buf, N),
                     cuvt_counted_value(1, releases), cuvt_add_one(buf, N)};
  return cuv_zip(ops, 4);
}

static const failing_capture_t failing[] = {
    {"error op in zip", make_error_in_zip, 0, NULL, 0, CUV_EARGS},
    {"error op in seq", make_error_in_seq, 0, NULL, 0, CUV_EARGS},
    {"then returns an error op midway", make_failure_midway, 0, NULL, 0, CUV_EARGS},
    {"map fails midway", make_map_failure, 0, NULL, 0, CUV_ERANGE},
    {"driver refuses a launch", make_driver_refusal, 0, NULL, 0,
     CUV_ECUDA(CUDA_ERROR_INVALID_VALUE)},
    {"injected cuLaunchKernel failure", make_three_launches, 1, "cuLaunchKernel", 2,
     CUV_ECUDA(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)},
    {"injected cuGraphInstantiate failure", make_three_launches, 1, "cuGraphInstantiateWithFlags",
     1, CUV_ECUDA(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)},
    {"injected cuGraphUpload failure", make_three_launches, 1, "cuGraphUpload", 1,
     CUV_ECUDA(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)},
    {"injected cuStreamBeginCapture failure", make_three_launches, 1, "cuStreamBeginCapture", 1,
     CUV_ECUDA(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)},
};

static void test_capture_failures(void **state) {
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  cuv_buffer_t *buf = cuvt_buffer(N * sizeof(float));
  float *data = malloc(N * sizeof *data);
  assert_non_null(data);
  uint64_t flying = cuvt_stats().in_flight;
  for (size_t i = 0; i < COUNT_OF(failing); i++) {
    const failing_capture_t *f = &failing[i];
    if (f->sim_only && !cuvt_is_sim())
      continue;
    print_message("# capture failure: %s\n", f->name);
    cuvt_random_ints(data, N);
    cuvt_upload(buf, 0, data, N * sizeof *data);
    atomic_int releases = 0;
    cuv_graph_t *g = NULL;
    cuv_output_t out = {.data = &releases}; /* must be cleared */
    if (f->fail_entry)
      cuv_sim_fail(f->fail_entry, f->fail_nth, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    int rc = cuv_graph_capture(&g, f->make(buf, &releases), s, &out);
    if (f->fail_entry)
      cuv_sim_fail_clear(); /* before any assert: a failed assert must not leave the rule */
    assert_int_equal(rc, f->want);
    assert_null(g);
    assert_null(out.data);
    assert_int_equal(atomic_load(&releases), 1); /* the captured value was released once */
    assert_int_equal(cuvt_stats().in_flight, flying); /* the capture's submission retired */
    assert_stream_works(s, buf, data);              /* nothing captured ran; no capture open */
  }
  cuv_buffer_unref(buf);
  cuv_stream_destroy(s);
  free(data);
}

/* Bad arguments: nothing is captured and the op is consumed. */
static void test_capture_bad_arguments(void **state) {
  atomic_int releases = 0;
  assert_int_equal(cuv_graph_capture(NULL, cuvt_counted_value(1, &releases), NULL, NULL),
                   CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 1);
  cuv_graph_t *g = NULL;
  assert_int_equal(cuv_graph_capture(&g, NULL, NULL, NULL), CUV_EINVAL);
  assert_null(g);
  cuv_op_t *launch = cuv_graph_launch(NULL);
  assert_int_equal(cuv_op_error(launch), CUV_EINVAL);
  assert_int_equal(cuv_sync(launch, NULL), CUV_EINVAL);
  assert_int_equal(cuv_graph_update(NULL, cuvt_counted_value(2, &releases)), CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 2);
  assert_null(cuv_graph_stream(NULL));
  cuv_graph_unref(NULL);
}

/* ---- nested execution inside the captured op ---- */

typedef struct nested {
  atomic_int calls;
  atomic_int releases;
  int rc_sync, rc_sync_on, rc_enqueue, rc_capture;
  cuv_buffer_t *buf;
  cuv_stream_t *stream;
} nested_t;

static void try_executors(nested_t *n) {
  atomic_fetch_add(&n->calls, 1);
  n->rc_sync = cuv_sync(cuvt_counted_value(1, &n->releases), NULL);
  n->rc_sync_on = cuv_sync_on(n->stream, cuvt_add_one(n->buf, N), NULL);
  cuv_output_t out;
  n->rc_enqueue = cuv_enqueue_on(n->stream, cuvt_counted_value(2, &n->releases), &out);
  cuv_output_release(&out);
  cuv_graph_t *inner = NULL;
  n->rc_capture = cuv_graph_capture(&inner, cuvt_counted_value(3, &n->releases), NULL, NULL);
  if (inner) /* never, but a failing test must not leak it */
    cuv_graph_unref(inner);
}

static cuv_op_t *nested_then(cuv_output_t *input, void *arg) {
  nested_t *n = arg;
  try_executors(n);
  return cuvt_scale(n->buf, N, SCALE);
}

static cuv_op_t *nested_context(cuv_stream_t *stream, void *arg) {
  nested_t *n = arg;
  try_executors(n);
  return cuvt_scale(n->buf, N, SCALE);
}

static void assert_nested_refused(nested_t *n) {
  assert_int_equal(atomic_load(&n->calls), 1);
  assert_int_equal(n->rc_sync, CUV_EREENTRANT);
  assert_int_equal(n->rc_sync_on, CUV_EREENTRANT);
  assert_int_equal(n->rc_enqueue, CUV_EREENTRANT);
  assert_int_equal(n->rc_capture, CUV_EREENTRANT);
  assert_int_equal(atomic_load(&n->releases), 3); /* each refused op was consumed */
}

static void test_nested_execution_refused(void **state) {
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  float *data = malloc(N * sizeof *data), *want = malloc(N * sizeof *want);
  assert_non_null(data);
  assert_non_null(want);
  for (int variant = 0; variant < 2; variant++) {
    nested_t n = {.buf = cuvt_buffer(N * sizeof(float)), .stream = s};
    cuvt_random_ints(data, N);
    cuvt_upload(n.buf, 0, data, N * sizeof *data);
    cuv_op_t *op = variant == 0 ? cuv_then(cuvt_add_one(n.buf, N), nested_then, &n)
                                : cuv_seq(cuvt_add_one(n.buf, N),
                                          cuv_with_context(nested_context, &n, NULL));
    cuv_graph_t *g = NULL;
    assert_cuv_ok(cuv_graph_capture(&g, op, s, NULL));
    assert_nested_refused(&n);
    /* The graph holds what the callback returned; the refused add_one never ran. */
    cuvt_read(want, n.buf, 0, N * sizeof *want);
    cuvt_assert_floats_equal(want, data, N);
    assert_cuv_ok(cuv_sync_on(cuv_graph_stream(g), cuv_graph_launch(g), NULL));
    for (size_t i = 0; i < N; i++)
      want[i] = (data[i] + 1.0f) * SCALE;
    cuvt_read(data, n.buf, 0, N * sizeof *data);
    cuvt_assert_floats_equal(data, want, N);
    cuv_graph_unref(g);
    cuv_buffer_unref(n.buf);
    /* The lock went with the capture: this thread executes again. */
    assert_cuv_ok(cuv_sync(cuv_value(NULL, NULL), NULL));
  }
  free(data);
  free(want);
  cuv_stream_destroy(s);
}

/* ---- lifetime: a launch op outlives cuv_graph_unref ---- */

static void test_launch_outlives_release(void **state) {
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  chain_t c;
  chain_create(&c);
  cuv_graph_t *g = NULL;
  assert_cuv_ok(cuv_graph_capture(&g, chain_op(&c), s, NULL));
  enum { LAUNCHES = 3 };
  cuv_op_t *launches[LAUNCHES + 1];
  for (int i = 0; i <= LAUNCHES; i++)
    launches[i] = cuv_graph_launch(g);
  cuv_graph_unref(g); /* the launch ops keep it alive */
  g = NULL;
  float *in = malloc(N * sizeof *in), *yin = malloc(N * sizeof *yin),
        *want = malloc(N * sizeof *want);
  assert_true(in && yin && want);
  for (int i = 0; i < LAUNCHES; i++) {
    cuvt_random_ints(in, N);
    cuvt_random_ints(yin, N);
    chain_reference(want, in, yin);
    /* Inputs through ordinary ops on the graph's stream (the graph handle is gone). */
    cuv_op_t *inputs[] = {cuv_memcpy_htod(c.in, 0, in, N * sizeof *in, 0),
                          cuv_memcpy_htod(c.yin, 0, yin, N * sizeof *yin, 0)};
    assert_cuv_ok(cuv_sync_on(s, cuv_zip(inputs, 2), NULL));
    assert_cuv_ok(cuv_sync_on(s, launches[i], NULL));
    check_output_on(s, &c, want);
  }
  cuv_op_destroy(launches[LAUNCHES]); /* the last reference: dropped unexecuted, the graph goes */
  chain_destroy(&c);
  cuv_stream_destroy(s);
  free(in);
  free(yin);
  free(want);
}

/* The launch op submitted and its graph released while the replay is in flight. */
typedef struct replay_result {
  atomic_int calls;
  int status;
  float *got; /* the downloaded output, moved out of the callback's output */
  cuv_output_t kept;
} replay_result_t;

static void replay_done(int status, cuv_output_t *output, void *arg) {
  replay_result_t *r = arg;
  atomic_fetch_add(&r->calls, 1);
  r->status = status;
  r->kept = cuv_output_take(output); /* record; the test thread asserts */
  r->got = r->kept.data;
}

/* ---- replays submitted into a completion queue ---- */

#define QUEUED 20

typedef struct queued_replay {
  replay_result_t result;
  float want[N];
} queued_replay_t;

static void test_replays_through_queue(void **state) {
  chain_t c;
  chain_create(&c);
  cuv_graph_t *g = NULL;
  assert_cuv_ok(cuv_graph_capture(&g, chain_op(&c), NULL, NULL));
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  queued_replay_t *r = calloc(QUEUED, sizeof *r);
  assert_non_null(r);
  /* All in flight at once: each replay's inputs are copied in on the graph's stream right
   * before it, so stream order keeps every replay's inputs and output apart. */
  for (int i = 0; i < QUEUED; i++) {
    new_inputs(g, &c, r[i].want);
    cuv_submit_opts_t opts = {.stream = cuv_graph_stream(g)};
    cuv_op_t *op = cuv_seq(cuv_graph_launch(g), cuv_download(c.y, 0, N * sizeof(float)));
    assert_cuv_ok(cuv_submit(q, op, replay_done, &r[i].result, &opts));
  }
  cuv_graph_unref(g); /* the submitted launches hold it */
  for (int spins = 0; cuv_queue_pending(q) > 0; spins++) {
    int rc = cuv_queue_wait(q, 1000);
    assert_true(rc == 0 || rc == CUV_EBUSY);
    cuv_queue_drain(q);
    if (spins > 120)
      fail_msg("replays did not complete: %u pending", cuv_queue_pending(q));
  }
  for (int i = 0; i < QUEUED; i++) {
    assert_int_equal(atomic_load(&r[i].result.calls), 1);
    assert_cuv_ok(r[i].result.status);
    assert_non_null(r[i].result.got);
    cuvt_assert_floats_equal(r[i].result.got, r[i].want, N);
    cuv_output_release(&r[i].result.kept);
  }
  assert_cuv_ok(cuv_queue_destroy(q));
  chain_destroy(&c);
  free(r);
}

/* One replay submitted, then the graph released before its completion is drained. */
static void test_submitted_launch_outlives_release(void **state) {
  chain_t c;
  chain_create(&c);
  cuv_graph_t *g = NULL;
  assert_cuv_ok(cuv_graph_capture(&g, chain_op(&c), NULL, NULL));
  float *want = malloc(N * sizeof *want);
  assert_non_null(want);
  new_inputs(g, &c, want);
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  replay_result_t r = {0};
  cuv_submit_opts_t opts = {.stream = cuv_graph_stream(g)};
  assert_cuv_ok(cuv_submit(q, cuv_seq(cuv_graph_launch(g), cuv_download(c.y, 0, N * sizeof(float))),
                           replay_done, &r, &opts));
  cuv_graph_unref(g);
  cuvt_drain_until(q, &r.calls, 1);
  assert_int_equal(atomic_load(&r.calls), 1);
  assert_cuv_ok(r.status);
  cuvt_assert_floats_equal(r.got, want, N);
  cuv_output_release(&r.kept);
  assert_cuv_ok(cuv_queue_destroy(q));
  chain_destroy(&c);
  free(want);
}

/* ---- graphs and hazards ---- */

/* A capture that touches a buffer another stream still writes: nothing runs at capture, and the
 * first replay on the graph's stream still sees the write. */
static void test_capture_while_buffer_written_elsewhere(void **state) {
  cuv_stream_t *writer, *gs;
  assert_cuv_ok(cuv_stream_create(&writer, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&gs, cuvt_device()));
  cuv_buffer_t *src = cuvt_buffer(N * sizeof(float)), *buf = cuvt_buffer(N * sizeof(float)),
               *flag = cuvt_buffer(sizeof(unsigned));
  float *data = malloc(N * sizeof *data), *want = malloc(N * sizeof *want);
  assert_true(data && want);
  cuvt_random_ints(data, N);
  cuvt_upload(src, 0, data, N * sizeof *data);
  /* buf = src, after 50 ms, on the writer stream. */
  cuv_output_t unit;
  assert_cuv_ok(cuv_enqueue_on(
      writer, cuv_seq(cuvt_slow_write(50, 1, flag), cuvt_copy_f32(buf, src, N)), &unit));
  cuv_graph_t *g = NULL;
  uint64_t waits = cuvt_waits_inserted();
  int rc = cuv_graph_capture(&g, cuvt_add_one(buf, N), gs, NULL);
  int rc_launch = rc == 0 ? cuv_sync_on(gs, cuv_graph_launch(g), NULL) : rc;
  assert_cuv_ok(cuv_stream_synchronize(writer)); /* before asserting: no work left behind */
  assert_cuv_ok(rc);
  assert_cuv_ok(rc_launch);
  assert_true(cuvt_waits_inserted() > waits); /* the replay waited for the writer */
  for (size_t i = 0; i < N; i++)
    want[i] = data[i] + 1.0f;
  cuvt_read(data, buf, 0, N * sizeof *data);
  cuvt_assert_floats_equal(data, want, N);
  cuv_graph_unref(g);
  cuv_buffer_unref(src);
  cuv_buffer_unref(buf);
  cuv_buffer_unref(flag);
  cuv_stream_destroy(writer);
  cuv_stream_destroy(gs);
  free(data);
  free(want);
}

/* A replay is ordered after conflicting work in flight, on whatever stream each runs: inputs
 * written by a slow submission on one stream, the replay and the read on others. */
static void test_replay_ordered_after_writer(void **state) {
  cuv_stream_t *writer, *replay;
  assert_cuv_ok(cuv_stream_create(&writer, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&replay, cuvt_device()));
  chain_t c;
  chain_create(&c);
  cuv_buffer_t *src = cuvt_buffer(N * sizeof(float)), *ysrc = cuvt_buffer(N * sizeof(float)),
               *flag = cuvt_buffer(sizeof(unsigned));
  cuv_graph_t *g = NULL;
  assert_cuv_ok(cuv_graph_capture(&g, chain_op(&c), NULL, NULL));
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  float *in = malloc(N * sizeof *in), *yin = malloc(N * sizeof *yin),
        *want = malloc(N * sizeof *want);
  assert_true(in && yin && want);
  for (int r = 0; r < 5; r++) {
    cuvt_random_ints(in, N);
    cuvt_random_ints(yin, N);
    chain_reference(want, in, yin);
    cuvt_upload(src, 0, in, N * sizeof *in);
    cuvt_upload(ysrc, 0, yin, N * sizeof *yin);
    /* in = src and yin = ysrc after 20 ms on the writer stream, completion to the queue. */
    cuv_op_t *ops[] = {cuvt_slow_write(20, 1, flag), cuvt_copy_f32(c.in, src, N),
                       cuvt_copy_f32(c.yin, ysrc, N)};
    replay_result_t w = {0};
    cuv_submit_opts_t on_writer = {.stream = writer};
    assert_cuv_ok(cuv_submit(q, cuv_zip(ops, 3), replay_done, &w, &on_writer));
    uint64_t waits = cuvt_waits_inserted();
    assert_cuv_ok(cuv_sync_on(replay, cuv_graph_launch(g), NULL));
    assert_true(cuvt_waits_inserted() > waits);
    check_output_on(NULL, &c, want); /* on the policy's stream */
    cuvt_drain_until(q, &w.calls, 1);
    assert_cuv_ok(w.status);
    cuv_output_release(&w.kept);
  }
  cuv_graph_unref(g);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_buffer_unref(src);
  cuv_buffer_unref(ysrc);
  cuv_buffer_unref(flag);
  chain_destroy(&c);
  cuv_stream_destroy(writer);
  cuv_stream_destroy(replay);
  free(in);
  free(yin);
  free(want);
}

/* Two graphs over the same buffers, captured and replayed on different streams. */
static void test_two_graphs_share_buffers(void **state) {
  cuv_stream_t *s1, *s2;
  assert_cuv_ok(cuv_stream_create(&s1, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&s2, cuvt_device()));
  cuv_buffer_t *buf = cuvt_buffer(N * sizeof(float));
  float *data = malloc(N * sizeof *data), *want = malloc(N * sizeof *want);
  assert_true(data && want);
  cuvt_random_ints(data, N);
  cuvt_upload(buf, 0, data, N * sizeof *data);
  cuv_graph_t *g1 = NULL, *g2 = NULL;
  assert_cuv_ok(cuv_graph_capture(&g1, cuvt_add_one(buf, N), s1, NULL));
  assert_cuv_ok(cuv_graph_capture(&g2, cuvt_scale(buf, N, SCALE), s2, NULL));
  memcpy(want, data, N * sizeof *want);
  for (int r = 0; r < 4; r++) {
    cuv_graph_t *g = r % 2 ? g2 : g1;
    assert_cuv_ok(cuv_sync_on(cuv_graph_stream(g), cuv_graph_launch(g), NULL));
    for (size_t i = 0; i < N; i++)
      want[i] = r % 2 ? want[i] * SCALE : want[i] + 1.0f;
  }
  cuvt_read(data, buf, 0, N * sizeof *data);
  cuvt_assert_floats_equal(data, want, N);
  cuv_graph_unref(g1);
  cuv_graph_unref(g2);
  cuv_buffer_unref(buf);
  cuv_stream_destroy(s1);
  cuv_stream_destroy(s2);
  free(data);
  free(want);
}

/* A buffer that tracks nothing (CUV_HAZARD_NONE) and that a captured launch and copy use is held
 * by the graph, not only by the capture: released by the caller after the capture, it stays
 * until the graph goes (an adopted alias of x, whose release is counted), and every replay still
 * computes into it. */
static void count_release(void *arg) { atomic_fetch_add((atomic_int *)arg, 1); }

static void test_graph_holds_untracked_buffer(void **state) {
  chain_t c;
  chain_create(&c);
  atomic_int released = 0;
  cuv_buffer_t *alias = NULL;
  assert_cuv_ok(cuv_buffer_adopt(&alias, cuvt_device(), cuv_buffer_ptr(c.x), N * sizeof(float),
                                 count_release, &released));
  assert_cuv_ok(cuv_buffer_set_hazard_mode(alias, CUV_HAZARD_NONE));
  cuv_op_t *ops[] = {cuvt_copy_f32(alias, c.in, N), cuvt_scale(alias, N, SCALE),
                     cuvt_add_one(alias, N), cuvt_copy_f32(c.y, c.yin, N),
                     saxpy_op(alias, c.y, N, ALPHA)};
  cuv_graph_t *g = NULL;
  assert_cuv_ok(cuv_graph_capture(&g, cuv_zip(ops, COUNT_OF(ops)), NULL, NULL));
  cuv_buffer_unref(alias);
  assert_int_equal(atomic_load(&released), 0);
  float want[N];
  for (int r = 0; r < 3; r++) {
    new_inputs(g, &c, want);
    assert_cuv_ok(cuv_sync_on(cuv_graph_stream(g), cuv_graph_launch(g), NULL));
    check_output_on(cuv_graph_stream(g), &c, want);
  }
  assert_int_equal(atomic_load(&released), 0);
  cuv_graph_unref(g);
  assert_int_equal(atomic_load(&released), 1);
  chain_destroy(&c);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replay_on_own_stream),
      cmocka_unit_test(test_replay_on_policy_stream),
      cmocka_unit_test(test_capture_output_of_download),
      cmocka_unit_test(test_capture_failures),
      cmocka_unit_test(test_capture_bad_arguments),
      cmocka_unit_test(test_nested_execution_refused),
      cmocka_unit_test(test_launch_outlives_release),
      cmocka_unit_test(test_replays_through_queue),
      cmocka_unit_test(test_submitted_launch_outlives_release),
      cmocka_unit_test(test_capture_while_buffer_written_elsewhere),
      cmocka_unit_test(test_replay_ordered_after_writer),
      cmocka_unit_test(test_two_graphs_share_buffers),
      cmocka_unit_test(test_graph_holds_untracked_buffer),
  };
  return cuvt_run(tests);
}
