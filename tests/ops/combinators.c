/* Combinators through the public API: then, seq, map, zip, fork and shared. Each test checks the
 * device results against host references, counts every callback and every release, and proves
 * ordering with a slow writer (sleep_then_write) rather than assuming it. */
#include <pthread.h>

#include "counted.h"

#define N 3000
#define SLOW_MS 20

static void buffer_release(void *buf) { cuv_buffer_unref(buf); }

/* `op`, then `buf` as the output: how a then stage hands its buffer to the next one. */
static cuv_op_t *pass_buffer(cuv_op_t *op, cuv_buffer_t *buf) {
  return cuv_seq(op, cuv_value(cuv_buffer_ref(buf), buffer_release));
}

/* A buffer whose accesses cuv does not track: the ordering tests below must prove the ordering
 * of the combinator itself, not the hazard tracking that would otherwise order a reader after an
 * in-flight writer on another stream anyway. */
static cuv_buffer_t *untracked_buffer(size_t bytes) {
  cuv_buffer_t *buf = cuvt_buffer(bytes);
  assert_cuv_ok(cuv_buffer_set_hazard_mode(buf, CUV_HAZARD_NONE));
  return buf;
}

/* A float whose bits a u32 kernel argument can carry: a random positive integer. */
static float random_int_float(void) { return (float)(1 + cuvt_random_u32() % 1000000); }
static unsigned float_bits(float f) {
  unsigned u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* ---- then ---- */

typedef struct counting_chain {
  atomic_int calls;
  atomic_int releases;
  int seen[8];      /* payload each stage received */
  int fail_at;      /* the stage (0-based) whose fn returns a failed op; -1: none */
} counting_chain_t;

/* Receives the previous stage's value and returns the next one (payload + 1). The input is left
 * to cuv, which releases it after we return. */
static cuv_op_t *next_value(cuv_output_t *input, void *arg) {
  counting_chain_t *c = arg;
  int stage = atomic_fetch_add(&c->calls, 1);
  c->seen[stage] = cuvt_payload(input);
  if (stage == c->fail_at)
    return cuv_memset32(NULL, 0, 0, 1); /* a constructor failing at execution time */
  return cuvt_counted_value(cuvt_payload(input) + 1, &c->releases);
}

static cuv_op_t *counting_chain(counting_chain_t *c, int first, int stages) {
  cuv_op_t *op = cuvt_counted_value(first, &c->releases);
  for (int i = 0; i < stages; i++)
    op = cuv_then(op, next_value, c);
  return op;
}

static void test_then_passes_each_output_on(void **state) {
  counting_chain_t c = {.fail_at = -1};
  int first = (int)(cuvt_random_u32() % 1000);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(counting_chain(&c, first, 5), &out));
  assert_int_equal(atomic_load(&c.calls), 5);
  for (int i = 0; i < 5; i++)
    assert_int_equal(c.seen[i], first + i);
  assert_int_equal(cuvt_payload(&out), first + 5);
  assert_int_equal(atomic_load(&c.releases), 5); /* every intermediate value, once */
  cuv_output_release(&out);
  assert_int_equal(atomic_load(&c.releases), 6);
}

static void test_then_failing_stage_stops_the_chain(void **state) {
  counting_chain_t c = {.fail_at = 2};
  assert_int_equal(cuv_sync(counting_chain(&c, 0, 5), NULL), CUV_EINVAL);
  assert_int_equal(atomic_load(&c.calls), 3); /* stages after the failure never ran */
  assert_int_equal(atomic_load(&c.releases), 3);
}

/* A constructor failing in the middle of a 5-stage chain: one check at the end finds its error,
 * nothing executes, and what the chain had captured is released once. */
static void test_failed_constructor_mid_chain(void **state) {
  counting_chain_t c = {.fail_at = -1};
  cuv_buffer_t *buf = cuvt_buffer(16);
  cuv_op_t *op = cuv_then(cuv_then(cuvt_counted_value(0, &c.releases), next_value, &c),
                          next_value, &c);
  op = cuv_seq(op, cuv_memcpy_dtoh(NULL, buf, 0, 4)); /* the failing constructor */
  op = cuv_then(cuv_then(op, next_value, &c), next_value, &c);
  assert_int_equal(cuv_op_error(op), CUV_EINVAL);
  assert_int_equal(atomic_load(&c.releases), 1); /* the captured value, dropped at the seq */
  assert_int_equal(cuv_sync(op, NULL), CUV_EINVAL);
  assert_int_equal(atomic_load(&c.calls), 0);
  assert_int_equal(atomic_load(&c.releases), 1);
  cuv_buffer_unref(buf);
}

typedef struct buffer_stages {
  const float *x;
  atomic_int calls;
  cuv_buffer_t *seen[4];
} buffer_stages_t;

static cuv_buffer_t *stage_input(cuv_output_t *input, buffer_stages_t *s) {
  cuv_buffer_t *buf = input->data;
  s->seen[atomic_fetch_add(&s->calls, 1)] = buf;
  return buf;
}

static cuv_op_t *stage_upload(cuv_output_t *input, void *arg) {
  buffer_stages_t *s = arg;
  cuv_buffer_t *buf = stage_input(input, s);
  return pass_buffer(cuv_memcpy_htod(buf, 0, s->x, N * sizeof(float), CUV_COPY_STAGE), buf);
}

static cuv_op_t *stage_scale(cuv_output_t *input, void *arg) {
  cuv_buffer_t *buf = stage_input(input, arg);
  return pass_buffer(cuvt_scale(buf, N, 3.0f), buf);
}

static cuv_op_t *stage_add_one(cuv_output_t *input, void *arg) {
  cuv_buffer_t *buf = stage_input(input, arg);
  return pass_buffer(cuvt_add_one(buf, N), buf);
}

static cuv_op_t *stage_download(cuv_output_t *input, void *arg) {
  cuv_buffer_t *buf = stage_input(input, arg);
  return cuv_download(buf, 0, N * sizeof(float));
}

/* A buffer allocated by the first op flows through four then stages on one stream. */
static void test_then_buffer_pipeline(void **state) {
  float *x = malloc(N * sizeof *x);
  cuvt_random_ints(x, N);
  buffer_stages_t s = {.x = x};
  cuv_op_t *op = cuv_alloc(cuvt_device(), N * sizeof(float));
  op = cuv_then(op, stage_upload, &s);
  op = cuv_then(op, stage_scale, &s);
  op = cuv_then(op, stage_add_one, &s);
  op = cuv_then(op, stage_download, &s);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(op, &out));
  assert_int_equal(atomic_load(&s.calls), 4);
  for (int i = 1; i < 4; i++)
    assert_ptr_equal(s.seen[i], s.seen[0]);
  const float *got = out.data;
  for (size_t i = 0; i < N; i++)
    assert_true(got[i] == x[i] * 3.0f + 1.0f);
  cuv_output_release(&out);
  free(x);
}

/* ---- ordering behind a slow kernel ---- */

typedef struct slow_then {
  cuv_buffer_t *flag;
  atomic_int calls;
} slow_then_t;

static cuv_op_t *add_one_then_download(cuv_output_t *input, void *arg) {
  slow_then_t *s = arg;
  atomic_fetch_add(&s->calls, 1);
  return cuv_seq(cuvt_add_one(s->flag, 1), cuv_download(s->flag, 0, sizeof(float)));
}

/* The next kernel and the copy after a 20 ms writer see what it wrote. */
static void test_then_ordered_after_slow_kernel(void **state) {
  slow_then_t s = {.flag = cuvt_buffer(sizeof(float))};
  assert_cuv_ok(cuv_sync(cuv_memset32(s.flag, 0, 0, 1), NULL));
  float value = random_int_float();
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_then(cuvt_slow_write(SLOW_MS, float_bits(value), s.flag),
                                  add_one_then_download, &s),
                         &out));
  assert_int_equal(atomic_load(&s.calls), 1);
  assert_true(*(float *)out.data == value + 1.0f);
  cuv_output_release(&out);
  cuv_buffer_unref(s.flag);
}

/* ---- seq ---- */

static void test_seq_outputs_second_releases_first(void **state) {
  atomic_int first = 0, second = 0;
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_seq(cuvt_counted_value(1, &first), cuvt_counted_value(2, &second)),
                         &out));
  assert_int_equal(cuvt_payload(&out), 2);
  assert_int_equal(atomic_load(&first), 1);
  assert_int_equal(atomic_load(&second), 0);
  cuv_output_release(&out);
  assert_int_equal(atomic_load(&second), 1);

  /* A NULL half fails the pair and still consumes the other. */
  cuv_op_t *op = cuv_seq(cuvt_counted_value(3, &first), NULL);
  assert_int_equal(cuv_op_error(op), CUV_EINVAL);
  assert_int_equal(atomic_load(&first), 2);
  cuv_op_destroy(op);
}

/* ---- map ---- */

typedef struct map_probe {
  atomic_int calls;
  atomic_int releases;
  int fail;
} map_probe_t;

/* Replaces the value by a new counted value holding payload * 10. */
static int map_replace(cuv_output_t *value, void *arg) {
  map_probe_t *m = arg;
  atomic_fetch_add(&m->calls, 1);
  if (m->fail)
    return CUV_ECANCELED;
  int payload = cuvt_payload(value);
  cuv_output_release(value);
  cuvt_counted_t *v = malloc(sizeof *v);
  if (!v)
    abort();
  v->payload = payload * 10;
  v->releases = &m->releases;
  value->data = v;
  value->release = cuvt_counted_release;
  value->release_arg = v;
  return 0;
}

static void test_map_replaces_the_value(void **state) {
  map_probe_t m = {0};
  int payload = (int)(cuvt_random_u32() % 1000);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_map(cuvt_counted_value(payload, &m.releases), map_replace, &m),
                         &out));
  assert_int_equal(atomic_load(&m.calls), 1);
  assert_int_equal(cuvt_payload(&out), payload * 10);
  assert_int_equal(atomic_load(&m.releases), 1); /* the original, released by map_replace */
  cuv_output_release(&out);
  assert_int_equal(atomic_load(&m.releases), 2);
}

static void test_map_failure_fails_the_op_and_releases(void **state) {
  map_probe_t m = {.fail = 1};
  assert_int_equal(cuv_sync(cuv_map(cuvt_counted_value(5, &m.releases), map_replace, &m), NULL),
                   CUV_ECANCELED);
  assert_int_equal(atomic_load(&m.calls), 1);
  assert_int_equal(atomic_load(&m.releases), 1);

  cuv_op_t *op = cuv_map(cuvt_counted_value(6, &m.releases), NULL, &m);
  assert_int_equal(cuv_op_error(op), CUV_EINVAL);
  assert_int_equal(atomic_load(&m.releases), 2);
  cuv_op_destroy(op);
}

/* The map of a download: the transformed output wraps the downloaded block, which is read after
 * completion through the wrapper. */
typedef struct wrapped_download {
  cuv_output_t inner;
  size_t count;
} wrapped_download_t;

static void wrapped_release(void *arg) {
  wrapped_download_t *w = arg;
  cuv_output_release(&w->inner);
  free(w);
}

static int wrap_download(cuv_output_t *value, void *arg) {
  wrapped_download_t *w = malloc(sizeof *w);
  if (!w)
    return CUV_ENOMEM;
  w->inner = cuv_output_take(value);
  w->count = *(size_t *)arg;
  *value = (cuv_output_t){w, wrapped_release, w};
  return 0;
}

static void test_map_wraps_device_output(void **state) {
  float *x = malloc(N * sizeof *x);
  cuvt_random_ints(x, N);
  cuv_buffer_t *buf = cuvt_buffer_of(x, N);
  size_t count = N;
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_map(cuv_download(buf, 0, N * sizeof *x), wrap_download, &count),
                         &out));
  wrapped_download_t *w = out.data;
  assert_int_equal(w->count, N);
  cuvt_assert_floats_equal(w->inner.data, x, N);
  cuv_output_release(&out);
  cuv_buffer_unref(buf);
  free(x);
}

/* ---- zip ---- */

typedef struct run_counter {
  atomic_int calls;
  atomic_int arg_releases;
  atomic_int *releases;
  int payload;
  bool fail;
} run_counter_t;

static cuv_op_t *counted_run(cuv_stream_t *stream, void *arg) {
  run_counter_t *r = arg;
  atomic_fetch_add(&r->calls, 1);
  return r->fail ? NULL : cuvt_counted_value(r->payload, r->releases);
}

static void run_counter_release(void *arg) {
  atomic_fetch_add(&((run_counter_t *)arg)->arg_releases, 1);
}

static cuv_op_t *counted_run_op(run_counter_t *r) {
  return cuv_with_context(counted_run, r, run_counter_release);
}

static void test_zip_outputs_a_tuple_once(void **state) {
  atomic_int releases = 0;
  run_counter_t r = {.releases = &releases, .payload = 22};
  float *x = malloc(N * sizeof *x);
  cuvt_random_ints(x, N);
  cuv_buffer_t *buf = cuvt_buffer_of(x, N);
  cuv_op_t *ops[] = {cuvt_counted_value(11, &releases), counted_run_op(&r),
                     cuv_download(buf, 0, N * sizeof *x)};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_zip(ops, 3), &out));
  assert_int_equal(atomic_load(&r.calls), 1);
  assert_int_equal(cuvt_payload(cuv_tuple_get(&out, 0)), 11);
  assert_int_equal(cuvt_payload(cuv_tuple_get(&out, 1)), 22);
  cuvt_assert_floats_equal(cuv_tuple_get(&out, 2)->data, x, N);
  assert_null(cuv_tuple_get(&out, 3));
  assert_null(cuv_tuple_get(cuv_tuple_get(&out, 0), 0)); /* not a tuple */
  assert_int_equal(atomic_load(&releases), 0);
  cuv_output_release(&out);
  assert_int_equal(atomic_load(&releases), 2);
  assert_int_equal(atomic_load(&r.arg_releases), 1);
  cuv_buffer_unref(buf);
  free(x);
}

/* An item failing at execution: the items before it are released, the ones after dropped (their
 * captured values released, their functions never called). */
static void test_zip_failure_midway_releases_every_item(void **state) {
  atomic_int releases = 0;
  run_counter_t failing = {.releases = &releases, .fail = true};
  run_counter_t after = {.releases = &releases, .payload = 3};
  cuv_op_t *ops[] = {cuvt_counted_value(1, &releases), counted_run_op(&failing),
                     cuvt_counted_value(2, &releases), counted_run_op(&after)};
  assert_int_equal(cuv_sync(cuv_zip(ops, 4), NULL), CUV_EINVAL);
  assert_int_equal(atomic_load(&failing.calls), 1);
  assert_int_equal(atomic_load(&after.calls), 0);
  assert_int_equal(atomic_load(&releases), 2);
  assert_int_equal(atomic_load(&failing.arg_releases), 1);
  assert_int_equal(atomic_load(&after.arg_releases), 1);

  /* A failed item at construction: the zip carries its error, every item is consumed. */
  cuv_op_t *bad[] = {cuvt_counted_value(4, &releases), cuv_alloc(NULL, 1)};
  cuv_op_t *op = cuv_zip(bad, 2);
  assert_int_equal(cuv_op_error(op), CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 3);
  cuv_op_destroy(op);
  op = cuv_zip(NULL, 0);
  assert_int_equal(cuv_op_error(op), CUV_EINVAL);
  cuv_op_destroy(op);
}

/* ---- fork ---- */

#define BRANCHES 4

typedef struct stream_spy {
  struct CUstream_st *seen;
  atomic_int calls;
} stream_spy_t;

static cuv_op_t *spy_stream(cuv_stream_t *stream, void *arg) {
  stream_spy_t *spy = arg;
  spy->seen = cuv_stream_handle(stream);
  atomic_fetch_add(&spy->calls, 1);
  return cuv_value(NULL, NULL);
}

static cuv_op_t *spy_op(stream_spy_t *spy) { return cuv_with_context(spy_stream, spy, NULL); }

typedef struct fork_run {
  stream_spy_t main_spy, branch_spy[BRANCHES];
  cuv_buffer_t *flags[BRANCHES];
  unsigned values[BRANCHES];
} fork_run_t;

/* Each branch notes its stream, then writes its value slowly into its own flag; after the join
 * the executing stream downloads every flag. Without the join the downloads would overtake the
 * 20 ms writers. */
static cuv_op_t *fork_then_read(fork_run_t *f) {
  cuv_op_t *branches[BRANCHES], *reads[BRANCHES];
  for (int i = 0; i < BRANCHES; i++) {
    f->flags[i] = untracked_buffer(sizeof(unsigned));
    cuvt_upload(f->flags[i], 0, &(unsigned){0}, sizeof(unsigned));
    f->values[i] = cuvt_nonzero_u32();
    branches[i] = cuv_seq(spy_op(&f->branch_spy[i]),
                          cuvt_slow_write(SLOW_MS, f->values[i], f->flags[i]));
    reads[i] = cuv_download(f->flags[i], 0, sizeof(unsigned));
  }
  return cuv_seq(cuv_seq(spy_op(&f->main_spy), cuv_fork(branches, BRANCHES)),
                 cuv_zip(reads, BRANCHES));
}

static void check_fork_results(fork_run_t *f, cuv_output_t *out) {
  for (int i = 0; i < BRANCHES; i++) {
    assert_int_equal(atomic_load(&f->branch_spy[i].calls), 1);
    assert_int_equal(*(unsigned *)cuv_tuple_get(out, (size_t)i)->data, f->values[i]);
    cuv_buffer_unref(f->flags[i]);
  }
  cuv_output_release(out);
}

static bool is_policy_stream(struct CUstream_st *h, cuv_policy_t *policy, unsigned n) {
  bool found = false;
  for (unsigned i = 0; i < n; i++) {
    cuv_stream_t *s;
    assert_cuv_ok(cuv_policy_next_stream(policy, NULL, &s));
    found = found || cuv_stream_handle(s) == h;
  }
  return found;
}

static void test_fork_branches_on_different_streams(void **state) {
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_policy_round_robin(&policy, cuvt_device(), BRANCHES));
  fork_run_t f = {0};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync_policy(policy, fork_then_read(&f), &out));
  /* Branch 0 runs on the executing stream; each other branch on a stream of its own. */
  assert_ptr_equal(f.branch_spy[0].seen, f.main_spy.seen);
  for (int i = 0; i < BRANCHES; i++) {
    assert_true(is_policy_stream(f.branch_spy[i].seen, policy, BRANCHES));
    for (int j = 0; j < i; j++)
      assert_ptr_not_equal(f.branch_spy[i].seen, f.branch_spy[j].seen);
  }
  check_fork_results(&f, &out);
  cuv_policy_destroy(policy);
}

/* With one stream there is nowhere to fork to: the branches run in order, still correct. */
static void test_fork_on_a_single_stream(void **state) {
  cuv_stream_t *stream;
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  assert_cuv_ok(cuv_policy_single(&policy, stream));
  fork_run_t f = {0};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync_policy(policy, fork_then_read(&f), &out));
  for (int i = 0; i < BRANCHES; i++)
    assert_ptr_equal(f.branch_spy[i].seen, cuv_stream_handle(stream));
  check_fork_results(&f, &out);
  cuv_policy_destroy(policy);
  cuv_stream_destroy(stream);
}

/* ---- shared ---- */

static void test_shared_clones_in_a_zip_run_once(void **state) {
  atomic_int releases = 0;
  run_counter_t r = {.releases = &releases, .payload = (int)(cuvt_random_u32() % 1000)};
  cuv_shared_t *sh = cuv_shared(counted_run_op(&r));
  assert_non_null(sh);
  cuv_op_t *ops[] = {cuv_shared_clone(sh), cuv_shared_clone(sh), cuv_shared_clone(sh)};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_zip(ops, 3), &out));
  assert_int_equal(cuv_shared_runs(sh), 1);
  assert_int_equal(atomic_load(&r.calls), 1);
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(cuvt_payload(cuv_tuple_get(&out, i)), r.payload);
    assert_ptr_equal(cuv_tuple_get(&out, i)->data, cuv_tuple_get(&out, 0)->data);
  }
  cuv_output_release(&out);
  assert_int_equal(atomic_load(&releases), 0); /* the handle still holds the value */
  cuv_op_destroy(cuv_shared_clone(sh));          /* an unused clone changes nothing */
  cuv_shared_unref(sh);
  assert_int_equal(atomic_load(&releases), 1);
  assert_int_equal(atomic_load(&r.arg_releases), 1);
}

#define THREADS 4

typedef struct shared_race {
  cuv_shared_t *sh;
  pthread_barrier_t start;
  int rc[THREADS];
  int payload[THREADS];
  void *data[THREADS];
} shared_race_t;

typedef struct racer {
  shared_race_t *race;
  int index;
} racer_t;

/* Records, never asserts: cmocka asserts belong to the test thread. */
static void *race_clone(void *arg) {
  racer_t *me = arg;
  shared_race_t *race = me->race;
  cuv_op_t *clone = cuv_shared_clone(race->sh);
  pthread_barrier_wait(&race->start);
  cuv_output_t out = {0};
  race->rc[me->index] = cuv_sync(clone, &out);
  race->payload[me->index] = cuvt_payload(&out);
  race->data[me->index] = out.data;
  cuv_output_release(&out);
  return NULL;
}

static void test_shared_clones_from_four_threads(void **state) {
  atomic_int releases = 0;
  run_counter_t r = {.releases = &releases, .payload = (int)(cuvt_random_u32() % 1000)};
  shared_race_t race = {.sh = cuv_shared(counted_run_op(&r))};
  pthread_barrier_init(&race.start, NULL, THREADS);
  pthread_t threads[THREADS];
  racer_t racers[THREADS];
  for (int i = 0; i < THREADS; i++) {
    racers[i] = (racer_t){&race, i};
    assert_int_equal(pthread_create(&threads[i], NULL, race_clone, &racers[i]), 0);
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(threads[i], NULL);
  for (int i = 0; i < THREADS; i++) {
    assert_cuv_ok(race.rc[i]);
    assert_int_equal(race.payload[i], r.payload);
    assert_ptr_equal(race.data[i], race.data[0]);
  }
  assert_int_equal(cuv_shared_runs(race.sh), 1);
  assert_int_equal(atomic_load(&r.calls), 1);
  assert_int_equal(atomic_load(&releases), 0);
  cuv_shared_unref(race.sh);
  assert_int_equal(atomic_load(&releases), 1);
  pthread_barrier_destroy(&race.start);
}

/* The producer, a 20 ms writer, is enqueued on stream A; a clone executed on stream B reads the
 * flag right away. Only the event wait the clone inserts keeps B's read behind A's write. */
static void test_shared_clone_on_another_stream_is_ordered(void **state) {
  cuv_stream_t *a, *b;
  assert_cuv_ok(cuv_stream_create(&a, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&b, cuvt_device()));
  cuv_buffer_t *flag = untracked_buffer(sizeof(unsigned));
  cuvt_upload(flag, 0, &(unsigned){0}, sizeof(unsigned));
  unsigned value = cuvt_nonzero_u32();
  cuv_shared_t *sh = cuv_shared(cuvt_slow_write(SLOW_MS, value, flag));
  assert_cuv_ok(cuv_enqueue_on(a, cuv_shared_clone(sh), NULL));
  cuv_output_t out;
  assert_cuv_ok(
      cuv_sync_on(b, cuv_seq(cuv_shared_clone(sh), cuv_download(flag, 0, sizeof value)), &out));
  assert_int_equal(*(unsigned *)out.data, value);
  assert_int_equal(cuv_shared_runs(sh), 1);
  cuv_output_release(&out);
  assert_cuv_ok(cuv_stream_synchronize(a));
  cuv_shared_unref(sh);
  cuv_buffer_unref(flag);
  cuv_stream_destroy(a);
  cuv_stream_destroy(b);
}

typedef struct diamond {
  cuv_buffer_t *a, *b, *c, *flag;
  atomic_int a_runs;
} diamond_t;

/* A: a slow writer, then a *= 2 (the slow kernel delays A's result, so a branch not ordered
 * after A would copy the old a). */
static cuv_op_t *diamond_a(cuv_stream_t *stream, void *arg) {
  diamond_t *d = arg;
  atomic_fetch_add(&d->a_runs, 1);
  return cuv_seq(cuvt_slow_write(SLOW_MS, 1, d->flag), cuvt_scale(d->a, N, 2.0f));
}

static void test_shared_diamond(void **state) {
  float *x = malloc(N * sizeof *x);
  cuvt_random_ints(x, N);
  diamond_t d = {.a = untracked_buffer(N * 4), .b = untracked_buffer(N * 4),
                 .c = untracked_buffer(N * 4), .flag = untracked_buffer(4)};
  cuvt_upload(d.a, 0, x, N * 4);
  cuv_shared_t *a = cuv_shared(cuv_with_context(diamond_a, &d, NULL));
  cuv_op_t *b = cuv_seq(cuv_shared_clone(a), cuv_seq(cuvt_copy_f32(d.b, d.a, N),
                                                     cuvt_scale(d.b, N, 3.0f)));
  cuv_op_t *c = cuv_seq(cuv_shared_clone(a), cuv_seq(cuvt_copy_f32(d.c, d.a, N),
                                                     cuvt_add_one(d.c, N)));
  cuv_op_t *reads[] = {cuv_download(d.b, 0, N * 4), cuv_download(d.c, 0, N * 4)};
  cuv_op_t *bc[] = {b, c};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_seq(cuv_fork(bc, 2), cuv_zip(reads, 2)), &out));
  assert_int_equal(cuv_shared_runs(a), 1);
  assert_int_equal(atomic_load(&d.a_runs), 1);
  const float *got_b = cuv_tuple_get(&out, 0)->data, *got_c = cuv_tuple_get(&out, 1)->data;
  for (size_t i = 0; i < N; i++) {
    assert_true(got_b[i] == x[i] * 6.0f);
    assert_true(got_c[i] == x[i] * 2.0f + 1.0f);
  }
  cuv_output_release(&out);
  cuv_shared_unref(a);
  cuv_buffer_unref(d.a);
  cuv_buffer_unref(d.b);
  cuv_buffer_unref(d.c);
  cuv_buffer_unref(d.flag);
  free(x);
}

/* A shared op whose constructor failed: every clone reports the error, nothing runs. */
static void test_shared_of_failed_op(void **state) {
  cuv_shared_t *sh = cuv_shared(cuv_alloc(NULL, 1));
  assert_non_null(sh);
  assert_int_equal(cuv_sync(cuv_shared_clone(sh), NULL), CUV_EINVAL);
  assert_int_equal(cuv_sync(cuv_shared_clone(sh), NULL), CUV_EINVAL);
  assert_int_equal(cuv_shared_runs(sh), 0);
  cuv_shared_unref(sh);
  sh = cuv_shared(NULL); /* never NULL: a handle whose clones fail, as an error op does */
  assert_non_null(sh);
  assert_int_equal(cuv_sync(cuv_shared_clone(sh), NULL), CUV_EINVAL);
  cuv_shared_unref(sh);
  cuv_shared_unref(sh); /* does nothing, however often */
  cuv_op_t *op = cuv_shared_clone(NULL);
  assert_int_equal(cuv_op_error(op), CUV_EINVAL);
  cuv_op_destroy(op);
}

/* An op that fails when it runs (not when built): every clone reports that failure, the op ran
 * once, and the then that failed was called once. */
static atomic_int failing_calls;

static cuv_op_t *fail_when_run(cuv_output_t *in, void *arg) {
  (void)in;
  atomic_fetch_add(&failing_calls, 1);
  return cuv_fail(*(int *)arg);
}

static void test_shared_failing_when_run(void **state) {
  static const int codes[] = {CUV_EIO, CUV_ENOMEM, CUV_ERANGE};
  int code = codes[cuvt_random_u32() % 3];
  atomic_store(&failing_calls, 0);
  cuv_shared_t *sh = cuv_shared(cuv_then(cuv_value(NULL, NULL), fail_when_run, &code));
  assert_non_null(sh);
  cuv_output_t out = {.data = &code};
  assert_int_equal(cuv_sync(cuv_shared_clone(sh), &out), code);
  assert_null(out.data);
  assert_int_equal(cuv_sync(cuv_shared_clone(sh), NULL), code);
  cuv_op_t *ops[] = {cuv_shared_clone(sh), cuv_value(NULL, NULL)};
  assert_int_equal(cuv_sync(cuv_zip(ops, 2), NULL), code);
  assert_int_equal(cuv_shared_runs(sh), 1);
  assert_int_equal(atomic_load(&failing_calls), 1);
  cuv_shared_unref(sh);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_then_passes_each_output_on),
      cmocka_unit_test(test_then_failing_stage_stops_the_chain),
      cmocka_unit_test(test_failed_constructor_mid_chain),
      cmocka_unit_test(test_then_buffer_pipeline),
      cmocka_unit_test(test_then_ordered_after_slow_kernel),
      cmocka_unit_test(test_seq_outputs_second_releases_first),
      cmocka_unit_test(test_map_replaces_the_value),
      cmocka_unit_test(test_map_failure_fails_the_op_and_releases),
      cmocka_unit_test(test_map_wraps_device_output),
      cmocka_unit_test(test_zip_outputs_a_tuple_once),
      cmocka_unit_test(test_zip_failure_midway_releases_every_item),
      cmocka_unit_test(test_fork_branches_on_different_streams),
      cmocka_unit_test(test_fork_on_a_single_stream),
      cmocka_unit_test(test_shared_clones_in_a_zip_run_once),
      cmocka_unit_test(test_shared_clones_from_four_threads),
      cmocka_unit_test(test_shared_clone_on_another_stream_is_ordered),
      cmocka_unit_test(test_shared_diamond),
      cmocka_unit_test(test_shared_of_failed_op),
      cmocka_unit_test(test_shared_failing_when_run),
  };
  return cuvt_run(tests);
}
