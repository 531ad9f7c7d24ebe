/* Capture modes (cuv_graph_capture_opts): each mode captures the multi-kernel chain, which
 * replays with new inputs against its host reference; the mode reaches cuStreamBeginCapture, as
 * the driver's answer to a potentially unsafe call (cuMemAlloc) made during the capture shows, on
 * the capturing thread and on another one; an unknown mode is CUV_EINVAL with the op consumed.
 * Allocating and freeing ops inside a capture are refused with CUV_ENOTSUP in every mode: the
 * capture fails, nothing captured runs, and a refused cuv_free drops its reference once. */
#include <pthread.h>

#include "driver-proc.h"
#include "graph-chain.h"

#define REPLAYS 10

static const cuv_capture_mode_t modes[] = {CUV_CAPTURE_RELAXED, CUV_CAPTURE_THREAD_LOCAL,
                                           CUV_CAPTURE_GLOBAL};

static int capture(cuv_graph_t **g, cuv_op_t *op, cuv_stream_t *s, cuv_capture_mode_t mode) {
  return cuv_graph_capture_opts(g, op, s, NULL, &(cuv_graph_opts_t){.capture_mode = mode});
}

/* ---- the driver, resolved as an application resolves it ---- */

static struct {
  __typeof__(cuMemAlloc) *alloc;
  __typeof__(cuMemFree) *free;
  __typeof__(cuCtxGetCurrent) *get_ctx;
  __typeof__(cuCtxSetCurrent) *set_ctx;
} drv;

static void resolve_driver(void) {
  cuvt_driver_proc("cuMemAlloc", &drv.alloc);
  cuvt_driver_proc("cuMemFree", &drv.free);
  cuvt_driver_proc("cuCtxGetCurrent", &drv.get_ctx);
  cuvt_driver_proc("cuCtxSetCurrent", &drv.set_ctx);
}

/* ---- every mode captures and replays ---- */

static void test_each_mode_replays(void **state) {
  float *want = malloc(N * sizeof *want), *initial = malloc(N * sizeof *initial);
  for (size_t m = 0; m < COUNT_OF(modes); m++) {
    chain_t c;
    chain_create(&c);
    cuv_stream_t *s;
    assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
    cuvt_random_ints(initial, N);
    cuvt_upload(c.y, 0, initial, N * sizeof *initial);
    cuv_graph_t *g = NULL;
    assert_cuv_ok(capture(&g, chain_op(&c), s, modes[m]));
    assert_ptr_equal(cuv_graph_stream(g), s);
    cuvt_read(want, c.y, 0, N * sizeof *want);
    cuvt_assert_floats_equal(want, initial, N); /* nothing ran at capture time */
    for (int r = 0; r < REPLAYS; r++) {
      new_inputs(g, &c, want);
      assert_cuv_ok(cuv_sync_on(s, cuv_graph_launch(g), NULL));
      float *got = malloc(N * sizeof *got);
      cuvt_read(got, c.y, 0, N * sizeof *got);
      cuvt_assert_floats_equal(got, want, N);
      free(got);
    }
    cuv_graph_unref(g);
    cuv_stream_destroy(s);
    chain_destroy(&c);
  }
  free(want);
  free(initial);
}

/* ---- the mode reaches the driver ---- */

/* What a cuMemAlloc made during the capture returned, here and on another thread. */
typedef struct probe {
  CUcontext ctx;
  CUresult here, there;
  CUdeviceptr mem[2]; /* what they allocated, freed after the capture */
  cuv_buffer_t *buf;
} probe_t;

static void *alloc_elsewhere(void *arg) {
  probe_t *p = arg;
  p->there = drv.set_ctx(p->ctx);
  if (p->there == CUDA_SUCCESS)
    p->there = drv.alloc(&p->mem[1], 256);
  return NULL;
}

/* with_context, on the capturing thread inside the capture: one allocation here, one there. */
static cuv_op_t *probe_unsafe_calls(cuv_stream_t *stream, void *arg) {
  probe_t *p = arg;
  p->here = drv.alloc(&p->mem[0], 256);
  pthread_t t;
  if (drv.get_ctx(&p->ctx) != CUDA_SUCCESS || pthread_create(&t, NULL, alloc_elsewhere, p) != 0)
    return cuv_fail(CUV_ETHREAD);
  pthread_join(t, NULL);
  return cuvt_add_one(p->buf, N);
}

/* RELAXED allows both calls; THREAD_LOCAL refuses the capturing thread's only; GLOBAL refuses
 * both. A refused call fails the capture (the driver's error from the end of the capture). */
static void test_mode_reaches_driver(void **state) {
  resolve_driver();
  cuv_buffer_t *buf = cuvt_buffer(N * sizeof(float));
  float *data = malloc(N * sizeof *data), *got = malloc(N * sizeof *got);
  for (size_t m = 0; m < COUNT_OF(modes); m++) {
    cuvt_random_ints(data, N);
    cuvt_upload(buf, 0, data, N * sizeof *data);
    cuv_stream_t *s;
    assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
    probe_t p = {.here = CUDA_ERROR_UNKNOWN, .there = CUDA_ERROR_UNKNOWN, .buf = buf};
    cuv_graph_t *g = NULL;
    int rc = capture(&g, cuv_with_context(probe_unsafe_calls, &p, NULL), s, modes[m]);
    bool here_ok = modes[m] == CUV_CAPTURE_RELAXED, there_ok = modes[m] != CUV_CAPTURE_GLOBAL;
    assert_int_equal(p.here, here_ok ? CUDA_SUCCESS : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(p.there, there_ok ? CUDA_SUCCESS : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    for (int k = 0; k < 2; k++)
      if (p.mem[k])
        assert_int_equal(drv.free(p.mem[k]), CUDA_SUCCESS);
    /* The simulator invalidates the capture at a refused call, as it models the driver; on a GPU
     * the capture's fate is the driver's, and the replay is checked where one was captured. */
    if (here_ok && there_ok)
      assert_cuv_ok(rc);
    else if (cuvt_is_sim())
      assert_int_equal(rc, CUV_ECUDA(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED));
    else
      assert_true(rc == 0 || rc == CUV_ECUDA(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) ||
                  rc == CUV_ECUDA(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED));
    assert_true((rc == 0) == (g != NULL));
    if (g) {
      assert_cuv_ok(cuv_sync_on(s, cuv_graph_launch(g), NULL));
      for (size_t i = 0; i < N; i++)
        data[i] += 1.0f;
    }
    cuvt_read(got, buf, 0, N * sizeof *got);
    cuvt_assert_floats_equal(got, data, N); /* added to once, by the replay, where it captured */
    cuv_graph_unref(g);
    cuv_stream_destroy(s);
  }
  cuv_buffer_unref(buf);
  free(data);
  free(got);
}

/* An unknown mode: CUV_EINVAL, the op consumed, nothing captured. */
static void test_unknown_mode_refused(void **state) {
  atomic_int releases = 0;
  cuv_graph_t *g = NULL;
  assert_int_equal(capture(&g, cuvt_counted_value(1, &releases), NULL, (cuv_capture_mode_t)3),
                   CUV_EINVAL);
  assert_int_equal(capture(&g, cuvt_counted_value(2, &releases), NULL, (cuv_capture_mode_t)-1),
                   CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 2);
  assert_null(g);
  assert_int_equal(cuv_graph_capture_opts(NULL, cuvt_counted_value(3, &releases), NULL, NULL, NULL),
                   CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 3);
  /* NULL options: relaxed. */
  cuv_output_t out;
  assert_cuv_ok(cuv_graph_capture_opts(&g, cuvt_counted_value(4, &releases), NULL, &out, NULL));
  assert_int_equal(cuvt_payload(&out), 4);
  cuv_output_release(&out);
  cuv_graph_unref(g);
  assert_int_equal(atomic_load(&releases), 4);
}

/* ---- allocations and frees inside a capture ---- */

static atomic_int adopted_releases;

static void count_adopted_release(void *arg) { atomic_fetch_add(&adopted_releases, 1); }

/* Between two kernels on buf, the op that allocates or frees (which = 0 ... 6). */
static cuv_op_t *allocating(int which, cuv_buffer_t *buf, cuv_buffer_t *adopted) {
  switch (which) {
  case 0: return cuv_alloc(cuvt_device(), 256);
  case 1: return cuv_zeros(cuvt_device(), 256);
  case 2: return cuv_fill32(cuvt_device(), 64, cuvt_random_u32());
  case 3: return cuv_iota_u32(cuvt_device(), 64, 1, 2);
  case 4: return cuv_ones_f32(cuvt_device(), 64);
  case 5: return cuv_dup(buf);
  default: return cuv_free(adopted); /* its last reference */
  }
}

static void test_allocations_refused(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(N * sizeof(float));
  float *data = malloc(N * sizeof *data), *got = malloc(N * sizeof *got);
  uint64_t flying = cuvt_stats().in_flight;
  for (size_t m = 0; m < COUNT_OF(modes); m++) {
    for (int which = 0; which < 7; which++) {
      cuvt_random_ints(data, N);
      cuvt_upload(buf, 0, data, N * sizeof *data);
      cuv_buffer_t *adopted = NULL;
      atomic_store(&adopted_releases, 0);
      assert_cuv_ok(cuv_buffer_adopt(&adopted, cuvt_device(), cuv_buffer_ptr(buf), 64,
                                     count_adopted_release, NULL));
      cuv_stream_t *s;
      assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
      cuv_op_t *ops[] = {cuvt_add_one(buf, N), allocating(which, buf, adopted),
                         cuvt_add_one(buf, N)};
      cuv_graph_t *g = NULL;
      assert_int_equal(capture(&g, cuv_zip(ops, 3), s, modes[m]), CUV_ENOTSUP);
      assert_null(g);
      if (which != 6)
        cuv_buffer_unref(adopted);
      assert_int_equal(atomic_load(&adopted_releases), 1); /* once, and no later */
      assert_int_equal(cuvt_stats().in_flight, flying);    /* the capture's submission retired */
      /* No capture is left open on s, and nothing captured ran. */
      assert_cuv_ok(cuv_sync_on(s, cuvt_add_one(buf, N), NULL));
      for (size_t i = 0; i < N; i++)
        data[i] += 1.0f;
      cuvt_read(got, buf, 0, N * sizeof *got);
      cuvt_assert_floats_equal(got, data, N);
      cuv_stream_destroy(s);
    }
  }
  /* Outside a capture, the same ops run. */
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_zeros(cuvt_device(), 256), &out));
  assert_non_null(cuv_output_buffer(&out));
  cuv_output_release(&out);
  cuv_buffer_unref(buf);
  free(data);
  free(got);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_mode_replays),
      cmocka_unit_test(test_mode_reaches_driver),
      cmocka_unit_test(test_unknown_mode_refused),
      cmocka_unit_test(test_allocations_refused),
  };
  return cuvt_run(tests);
}
