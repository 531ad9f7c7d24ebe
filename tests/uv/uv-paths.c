/* The libuv bridge on each completion path. tests/meson.build runs this file once per
 * environment (cuv reads it once per process): default, CUV_SPIN_BUDGET_US=0,
 * CUV_HOST_SYNC=spin and =block; cuv_stats() proves which path delivered the work.
 * Every scenario checks results against a host reference on fresh random data, that each
 * callback ran exactly once and on the loop thread, that the loop returned by itself after the
 * last callback, and that uv_loop_close succeeds afterwards (no handle leaked). */
#include "uvt.h"

#define N 3000     /* elements: not a multiple of the block size */
#define SUBS 48    /* submissions in flight at once */
#define CHAIN 100  /* submissions made one after another from callbacks */

/* The path this process's environment forces. */
enum path { PATH_REACTOR, PATH_HOSTFN };
static enum path expected_path(void) {
  const char *sync = getenv("CUV_HOST_SYNC");
  return sync && (!strcmp(sync, "spin") || !strcmp(sync, "block")) ? PATH_HOSTFN : PATH_REACTOR;
}

/* Every one of `n` submissions completed on the expected path; the bridge never spins on the
 * submitting thread, and nothing fell back. */
static void assert_path(const cuv_stats_t *before, uint64_t n) {
  cuv_stats_t d = uvt_stats_delta(before);
  print_message("# completed %llu: reactor %llu, hostfn %llu, spin %llu, sync %llu, fallbacks "
                "%llu\n", (unsigned long long)d.completed, (unsigned long long)d.completed_reactor,
                (unsigned long long)d.completed_hostfn, (unsigned long long)d.completed_spin,
                (unsigned long long)d.completed_sync, (unsigned long long)d.fallbacks);
  const char *budget = getenv("CUV_SPIN_BUDGET_US");
  assert_int_equal(cuvt_spin_budget_us(), budget ? (unsigned)atoi(budget) : 20u); /* env seen */
  assert_int_equal(d.completed_spin, 0); /* the bridge never spins on the submitting thread */
  assert_int_equal(d.completed_sync, 0);
  assert_int_equal(d.fallbacks, 0);
  assert_int_equal(d.faults, 0);
  if (expected_path() == PATH_HOSTFN) {
    assert_int_equal(d.completed_hostfn, n);
    assert_int_equal(d.completed_reactor, 0);
  } else {
    assert_int_equal(d.completed_reactor, n);
    assert_int_equal(d.completed_hostfn, 0);
  }
}

/* ---- saxpy: copies in, a kernel, a download out; many in flight ---- */

typedef struct saxpy_job {
  float a;
  float x[N], y[N], want[N];
} saxpy_job_t;

static cuv_op_t *saxpy_op(saxpy_job_t *job) {
  unsigned n = N;
  cuv_buffer_t *x = uvt_buffer(N * sizeof(float)), *y = uvt_buffer(N * sizeof(float));
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(job->a), CUV_ARG_READ(x), CUV_ARG_RW(y)};
  cuv_op_t *op = cuv_seq(cuv_memcpy_htod(x, 0, job->x, sizeof job->x, CUV_COPY_STAGE),
                         cuv_memcpy_htod(y, 0, job->y, sizeof job->y, CUV_COPY_STAGE));
  op = cuv_seq(op, cuv_launch(cuvt_kernel("saxpy"), CUVT_GRID(N), CUVT_BLOCK, 0, args, 4));
  op = cuv_seq(op, cuv_download(y, 0, sizeof job->y));
  cuv_buffer_unref(x); /* the submission holds them until its completion is proven */
  cuv_buffer_unref(y);
  return op;
}

static void test_saxpy_results_on_loop_thread(void **state) {
  static saxpy_job_t jobs[SUBS];
  uvt_call_t calls[SUBS] = {0};
  for (size_t j = 0; j < SUBS; j++) {
    jobs[j].a = (float)(cuvt_random_u32() % 2001) / 100.0f - 10.0f;
    cuvt_random_floats(jobs[j].x, N);
    cuvt_random_floats(jobs[j].y, N);
    for (size_t i = 0; i < N; i++)
      jobs[j].want[i] = jobs[j].a * jobs[j].x[i] + jobs[j].y[i];
  }
  uvt_loop_t l;
  uvt_open(&l);
  cuv_stats_t before;
  cuv_stats(&before);
  for (size_t j = 0; j < SUBS; j++) {
    calls[j].loop = &l;
    assert_cuv_ok(cuv_uv_submit(l.bridge, saxpy_op(&jobs[j]), uvt_done, &calls[j], NULL));
  }
  assert_int_equal(cuv_uv_pending(l.bridge), SUBS);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0); /* returns by itself after the last */
  assert_int_equal(cuv_uv_pending(l.bridge), 0);
  uvt_assert_all_ok(calls, SUBS);
  for (size_t j = 0; j < SUBS; j++) {
    const float *got = calls[j].out.data;
    assert_non_null(got);
    for (size_t i = 0; i < N; i++) {
      if (fabsf(got[i] - jobs[j].want[i]) > 1e-3f * (1.0f + fabsf(jobs[j].want[i])))
        print_error("job %zu element %zu: got %g want %g\n", j, i, (double)got[i],
                    (double)jobs[j].want[i]);
      assert_float_close(got[i], jobs[j].want[i]);
    }
  }
  assert_path(&before, SUBS);
  uvt_release_outputs(calls, SUBS);
  uvt_close(&l);
}

/* ---- a pipeline: each callback submits the next step ---- */

typedef struct chain {
  uvt_loop_t *l;
  cuv_buffer_t *buf;
  unsigned step;
  unsigned values[CHAIN];
  uvt_call_t calls[CHAIN];
  int refused;          /* cuv_uv_submit failures inside callbacks */
  unsigned max_pending; /* cuv_uv_pending seen inside callbacks */
} chain_t;

/* Fills buf with values[step] and reads it back. */
static cuv_op_t *chain_op(chain_t *c) {
  unsigned n = 257;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(c->values[c->step]), CUV_ARG_WRITE(c->buf)};
  cuv_op_t *fill = cuv_launch(cuvt_kernel("fill_u32"), CUV_DIM1(2), CUVT_BLOCK, 0, args, 3);
  return cuv_seq(fill, cuv_download(c->buf, 256 * sizeof(unsigned), sizeof(unsigned)));
}

static void chain_done(int status, cuv_output_t *output, void *arg) {
  chain_t *c = arg;
  uvt_done(status, output, &c->calls[c->step]);
  unsigned pending = cuv_uv_pending(c->l->bridge);
  if (pending > c->max_pending)
    c->max_pending = pending;
  if (++c->step < CHAIN) {
    c->calls[c->step].loop = c->l;
    if (cuv_uv_submit(c->l->bridge, chain_op(c), chain_done, c, NULL) != 0)
      c->refused++;
  }
}

static void test_callbacks_submit_the_next_step(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  chain_t *c = calloc(1, sizeof *c);
  c->l = &l;
  c->buf = uvt_buffer(257 * sizeof(unsigned));
  for (size_t i = 0; i < CHAIN; i++)
    c->values[i] = cuvt_random_u32();
  cuv_stats_t before;
  cuv_stats(&before);
  c->calls[0].loop = &l;
  assert_cuv_ok(cuv_uv_submit(l.bridge, chain_op(c), chain_done, c, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(c->step, CHAIN);
  assert_int_equal(c->refused, 0);
  assert_int_equal(c->max_pending, 0); /* a callback does not count itself */
  uvt_assert_all_ok(c->calls, CHAIN);
  for (size_t i = 0; i < CHAIN; i++)
    assert_int_equal((unsigned)c->calls[i].payload, c->values[i]);
  for (size_t i = 1; i < CHAIN; i++)
    assert_true(c->calls[i].seq > c->calls[i - 1].seq);
  assert_path(&before, CHAIN);
  uvt_release_outputs(c->calls, CHAIN);
  cuv_buffer_unref(c->buf);
  free(c);
  uvt_close(&l);
}

/* ---- host values only: outputs delivered intact ---- */

static void test_values(void **state) {
  enum { VALUES = 200 };
  uvt_call_t calls[VALUES] = {0};
  int payloads[VALUES];
  uvt_loop_t l;
  uvt_open(&l);
  cuv_stats_t before;
  cuv_stats(&before);
  for (size_t i = 0; i < VALUES; i++) {
    calls[i].loop = &l;
    payloads[i] = (int)cuvt_random_u32();
    assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value(payloads[i]), uvt_done, &calls[i], NULL));
  }
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(calls, VALUES);
  for (size_t i = 0; i < VALUES; i++)
    assert_int_equal(calls[i].payload, payloads[i]);
  assert_path(&before, VALUES);
  uvt_release_outputs(calls, VALUES);
  uvt_close(&l);
}

/* ---- a refused submission neither runs its callback nor keeps the loop alive ---- */

static void test_refused_submission(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  uvt_call_t call = {.loop = &l};
  cuv_buffer_t *buf = uvt_buffer(16);
  /* An out-of-range download carries CUV_ERANGE from construction: cuv_submit refuses it. */
  int rc = cuv_uv_submit(l.bridge, cuv_download(buf, 8, 64), uvt_done, &call, NULL);
  assert_true(rc < 0);
  assert_int_equal(cuv_uv_pending(l.bridge), 0);
  assert_int_equal(cuv_uv_submit(NULL, uvt_value(1), uvt_done, &call, NULL), CUV_EINVAL);
  assert_int_equal(cuv_uv_submit(l.bridge, uvt_value(1), NULL, &call, NULL), CUV_EINVAL);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(call.calls, 0);
  cuv_buffer_unref(buf);
  uvt_close(&l);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_saxpy_results_on_loop_thread),
      cmocka_unit_test(test_callbacks_submit_the_next_step),
      cmocka_unit_test(test_values),
      cmocka_unit_test(test_refused_submission),
  };
  return cuvt_run(tests);
}
