/* Custom ops (include/cuv/custom.h) and adopted device memory. The custom ops here make raw
 * driver calls (cuMemsetD32Async, cuMemcpyDtoDAsync) on the stream cuv gives them, through a
 * driver table this file resolves itself, as an application would. What is proven:
 * - a retained object outlives every reference the caller dropped right after submitting (a gate
 *   kernel holds the GPU work in flight), and is released exactly once on every path: success,
 *   execute failing after it retained, a later op failing, cancel, a graph capture (for the
 *   graph's lifetime); a never executed op runs its drop instead of execute, once;
 * - declared accesses order the op against work on other streams, as a launch's arguments do;
 * - custom ops inside seq, zip, fork, then, map and shared, through cuv_submit (engine threads
 *   with CUV_SUBMIT_INLINE=never) and cuv_uv_submit, with outputs and data checked;
 * - adopted memory (a raw cuMemAlloc) works with copies, launches and graphs, and its release
 *   runs once, only after the work in flight, also through cuv_free. */
#include <cuda.h>

#include "driver-proc.h"
#include "gate.h"
#include "uvt.h"

#define N 4096 /* words */
#define BYTES (N * sizeof(uint32_t))
#define REPS 10
#define SLOW_MS 20

/* ---- the driver, resolved as an application resolves it ---- */

static struct {
  __typeof__(cuMemsetD32Async) *memset32;
  __typeof__(cuMemcpyDtoDAsync) *dtod;
  __typeof__(cuMemcpyDtoHAsync) *dtoh;
  __typeof__(cuMemAlloc) *alloc;
  __typeof__(cuMemFree) *free;
} drv;

static void resolve_driver(void) {
  cuvt_driver_proc("cuMemsetD32Async", &drv.memset32);
  cuvt_driver_proc("cuMemcpyDtoDAsync", &drv.dtod);
  cuvt_driver_proc("cuMemcpyDtoHAsync", &drv.dtoh);
  cuvt_driver_proc("cuMemAlloc", &drv.alloc);
  cuvt_driver_proc("cuMemFree", &drv.free);
}

/* ---- a custom op of raw driver calls, and what its execute saw ---- */

typedef struct probe {
  atomic_int executed, dropped, released; /* released: the object execute retained */
  cuv_stream_t *stream;                   /* what the context said */
  struct CUstream_st *cu;
  cuv_device_t *dev;
  int nested; /* a cuv_sync tried inside execute */
} probe_t;

static void probe_release(void *arg) { atomic_fetch_add(&((probe_t *)arg)->released, 1); }

/* dst = src (cuMemcpyDtoDAsync), or every word of dst = value (cuMemsetD32Async) when src is
 * NULL; output: a counted value of `payload` when it is not 0; returns `status` after retaining
 * (a failing execute). */
typedef struct raw {
  probe_t *probe;
  cuv_buffer_t *dst, *src; /* borrowed: the op's declared accesses hold them */
  uint32_t value;
  int status, payload;
  atomic_int *payload_releases;
} raw_t;

static void raw_drop(void *arg) {
  atomic_fetch_add(&((raw_t *)arg)->probe->dropped, 1);
  free(arg);
}

static cuv_output_t counted_output(int payload, atomic_int *releases) {
  cuvt_counted_t *v = malloc(sizeof *v);
  if (!v)
    abort();
  *v = (cuvt_counted_t){payload, releases};
  return (cuv_output_t){v, cuvt_counted_release, v};
}

static CUresult raw_enqueue(const raw_t *r, CUstream stream) {
  CUdeviceptr dst = cuv_buffer_ptr(r->dst);
  if (r->src)
    return drv.dtod(dst, cuv_buffer_ptr(r->src), cuv_buffer_size(r->dst), stream);
  return drv.memset32(dst, r->value, cuv_buffer_size(r->dst) / 4, stream);
}

static int raw_execute(cuv_custom_ctx_t *ctx, cuv_output_t *out, void *arg) {
  raw_t *r = arg;
  probe_t *p = r->probe;
  int status = r->status, payload = r->payload;
  atomic_int *payload_releases = r->payload_releases;
  p->stream = cuv_custom_stream(ctx);
  p->cu = cuv_custom_cu_stream(ctx);
  p->dev = cuv_custom_device(ctx);
  p->nested = cuv_sync(cuv_value(NULL, NULL), NULL);
  atomic_fetch_add(&p->executed, 1);
  CUresult res = raw_enqueue(r, cuv_custom_cu_stream(ctx));
  int rc = cuv_custom_retain(ctx, p, probe_release);
  /* r itself is retained too (freed at retirement), as an application's state would be. */
  if (rc < 0 || (rc = cuv_custom_retain(ctx, r, free)) < 0)
    free(r);
  if (rc == 0 && res != CUDA_SUCCESS)
    rc = CUV_ECUDA(res);
  if (rc == 0 && payload)
    *out = counted_output(payload, payload_releases);
  return rc < 0 ? rc : status;
}

static atomic_int payload_releases;

static cuv_op_t *raw_op(probe_t *p, cuv_buffer_t *dst, cuv_buffer_t *src, uint32_t value,
                        int payload, int status) {
  raw_t *r = malloc(sizeof *r);
  if (!r)
    abort();
  *r = (raw_t){p, dst, src, value, status, payload, &payload_releases};
  cuv_access_t accesses[] = {CUV_ACCESS_WRITE(dst), CUV_ACCESS_READ(src)};
  return cuv_custom(raw_execute, r, raw_drop, accesses, src ? 2 : 1);
}

/* A fill that declares nothing: cuv neither holds nor orders dst for it. */
static cuv_op_t *undeclared_fill(probe_t *p, cuv_buffer_t *dst, uint32_t value, int payload) {
  raw_t *r = malloc(sizeof *r);
  if (!r)
    abort();
  *r = (raw_t){p, dst, NULL, value, 0, payload, &payload_releases};
  return cuv_custom(raw_execute, r, raw_drop, NULL, 0);
}

static cuv_op_t *fill(probe_t *p, cuv_buffer_t *dst, uint32_t value, int payload) {
  return raw_op(p, dst, NULL, value, payload, 0);
}

static cuv_op_t *copy(probe_t *p, cuv_buffer_t *dst, cuv_buffer_t *src, int payload) {
  return raw_op(p, dst, src, 0, payload, 0);
}

/* A random word that is also a normal float (an integer in 1..1e6): the kernels that copy floats
 * keep it bit for bit. */
static uint32_t word(void) {
  float f = (float)(cuvt_random_u32() % 1000000u + 1u);
  uint32_t w;
  memcpy(&w, &f, sizeof w);
  return w;
}

static void assert_words(cuv_buffer_t *buf, uint32_t want) {
  static uint32_t got[N];
  cuvt_read(got, buf, 0, BYTES);
  for (size_t i = 0; i < N; i++) {
    if (got[i] != want)
      print_error("word %zu: got %u, want %u\n", i, got[i], want);
    assert_int_equal(got[i], want);
  }
}

/* Executed once, released once, never dropped, and it could not run another op inside. */
static void assert_ran_once(probe_t *p) {
  assert_int_equal(atomic_load(&p->executed), 1);
  assert_int_equal(atomic_load(&p->released), 1);
  assert_int_equal(atomic_load(&p->dropped), 0);
  assert_int_equal(p->nested, CUV_EREENTRANT);
}

/* ---- one run: the context, the output, the data ---- */

static void test_context_and_output(void **state) {
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  cuv_buffer_t *a = cuvt_buffer(BYTES), *b = cuvt_buffer(BYTES);
  for (int r = 0; r < REPS; r++) {
    probe_t p1 = {0}, p2 = {0};
    uint32_t v = word();
    atomic_store(&payload_releases, 0);
    cuv_output_t out;
    assert_cuv_ok(cuv_sync_on(s, cuv_seq(fill(&p1, a, v, 0), copy(&p2, b, a, 7)), &out));
    assert_int_equal(cuvt_payload(&out), 7);
    cuv_output_release(&out);
    assert_int_equal(atomic_load(&payload_releases), 1);
    assert_ran_once(&p1);
    assert_ran_once(&p2);
    assert_ptr_equal(p1.stream, s);
    assert_ptr_equal(p1.cu, cuv_stream_handle(s));
    assert_ptr_equal(p1.dev, cuvt_device());
    assert_words(b, v);
  }
  cuv_buffer_unref(a);
  cuv_buffer_unref(b);
  cuv_stream_destroy(s);
}

/* An op without declared accesses runs on the default policy; its output is its own. */
static void test_no_accesses(void **state) {
  probe_t p = {0};
  cuv_buffer_t *a = cuvt_buffer(BYTES);
  uint32_t v = word();
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(undeclared_fill(&p, a, v, 3), &out));
  assert_int_equal(cuvt_payload(&out), 3);
  cuv_output_release(&out);
  assert_ran_once(&p);
  assert_words(a, v); /* the submission ran on the stream execute used */
  cuv_buffer_unref(a);
}

/* ---- retained objects outlive the caller's references, released once on every path ---- */

typedef struct seen {
  atomic_int calls;
  int status;
  int released_at_callback; /* the probe's releases when the callback ran */
  probe_t *probe;
} seen_t;

static void seen_done(int status, cuv_output_t *output, void *arg) {
  seen_t *s = arg;
  s->status = status;
  s->released_at_callback = s->probe ? atomic_load(&s->probe->released) : -1;
  atomic_fetch_add(&s->calls, 1);
}

/* Waits (with a watchdog, asserting nothing about time) until execute ran. */
static void wait_executed(probe_t *p) {
  for (int ms = 0; atomic_load(&p->executed) == 0; ms++) {
    if (ms > 60000)
      fail_msg("execute never ran");
    struct timespec t = {0, 1000000};
    nanosleep(&t, NULL);
  }
}

static void drain_all(cuv_queue_t *q) {
  for (int idle = 0; cuv_queue_pending(q) > 0;) {
    int rc = cuv_queue_wait(q, 1000);
    assert_true(rc == 0 || rc == CUV_EBUSY);
    idle = cuv_queue_drain(q) > 0 ? 0 : idle + 1;
    if (idle > 120)
      fail_msg("work did not retire");
  }
}

/* An adopted buffer's release, counted; it frees the raw allocation. */
typedef struct adopted {
  CUdeviceptr ptr;
  atomic_int released;
  int free_status;
} adopted_t;

static void adopted_release(void *arg) {
  adopted_t *a = arg;
  a->free_status = (int)drv.free(a->ptr);
  atomic_fetch_add(&a->released, 1);
}

static cuv_buffer_t *adopt(adopted_t *a, size_t bytes) {
  memset(a, 0, sizeof *a);
  assert_cuv_ok(cuv_device_bind(cuvt_device()));
  assert_int_equal(drv.alloc(&a->ptr, bytes), CUDA_SUCCESS);
  cuv_buffer_t *buf = NULL;
  assert_cuv_ok(cuv_buffer_adopt(&buf, cuvt_device(), a->ptr, bytes, adopted_release, a));
  assert_int_equal(cuv_buffer_ptr(buf), a->ptr);
  assert_int_equal(cuv_buffer_size(buf), bytes);
  return buf;
}

/* A gate, a queue and an adopted buffer: what the gated cases share. Closing proves the buffer's
 * release ran once and freed the allocation. */
typedef struct gated {
  cuvt_gate_t gate;
  cuv_queue_t *q;
  adopted_t mem;
  cuv_buffer_t *buf;
} gated_t;

static void gated_open(gated_t *g) {
  cuvt_gate_init(&g->gate);
  assert_cuv_ok(cuv_queue_create(&g->q, NULL, NULL));
  g->buf = adopt(&g->mem, BYTES);
}

static void gated_close(gated_t *g) {
  assert_int_equal(atomic_load(&g->mem.released), 1);
  assert_int_equal(g->mem.free_status, CUDA_SUCCESS);
  assert_cuv_ok(cuv_queue_destroy(g->q));
  cuvt_gate_close(&g->gate);
}

/* Submits gate-wait then `custom` (its work queued behind the gate), drops the buffer right away,
 * and proves the retained object and the adopted memory stay until the gate opens and the work
 * is proven complete, then are released once: before the callback (want_status), or, cancelled
 * while the gate holds the work, after the CUV_ECANCELED callback that came at once. */
static void gated_submit(cuv_op_t *(*build)(probe_t *, cuv_buffer_t *, uint32_t), bool cancel,
                         int want_status) {
  gated_t G;
  gated_open(&G);
  cuvt_gate_t *g = &G.gate;
  cuv_queue_t *q = G.q;
  cuv_buffer_t *buf = G.buf;
  probe_t p = {0};
  seen_t s = {.probe = &p};
  cuv_ticket_t ticket = 0;
  cuv_submit_opts_t opts = {.ticket = &ticket};
  cuv_op_t *op = cuv_seq(cuvt_gate_wait(g), build(&p, buf, word()));
  assert_cuv_ok(cuv_submit(q, op, seen_done, &s, &opts));
  cuv_buffer_unref(buf); /* the caller's last reference, with the work in flight */
  wait_executed(&p);
  if (cancel) {
    assert_cuv_ok(cuv_cancel(q, ticket));
    cuvt_drain_until(q, &s.calls, 1);
  }
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_int_equal(atomic_load(&p.released), 0);
  assert_int_equal(atomic_load(&G.mem.released), 0);
  cuvt_gate_open(g);
  drain_all(q);
  assert_int_equal(atomic_load(&s.calls), 1);
  assert_int_equal(s.status, cancel ? CUV_ECANCELED : want_status);
  assert_int_equal(s.released_at_callback, cancel ? 0 : 1);
  assert_ran_once(&p);
  gated_close(&G);
}

static cuv_op_t *fill_ok(probe_t *p, cuv_buffer_t *buf, uint32_t v) { return fill(p, buf, v, 0); }

static void test_retained_outlives_caller(void **state) { gated_submit(fill_ok, false, 0); }

static cuv_op_t *fill_failing(probe_t *p, cuv_buffer_t *buf, uint32_t v) {
  return raw_op(p, buf, NULL, v, 0, CUV_EIO);
}

static void test_retained_when_execute_fails(void **state) {
  gated_submit(fill_failing, false, CUV_EIO);
}

static cuv_op_t *no_op(cuv_stream_t *stream, void *arg) { return NULL; }

static cuv_op_t *fill_then_failure(probe_t *p, cuv_buffer_t *buf, uint32_t v) {
  return cuv_seq(fill(p, buf, v, 0), cuv_with_context(no_op, NULL, NULL));
}

static void test_retained_when_a_later_op_fails(void **state) {
  gated_submit(fill_then_failure, false, CUV_EINVAL);
}

/* Cancelled while the gate holds its work: called back with CUV_ECANCELED at once, the retained
 * object and the memory still held until the work is over. */
static void test_retained_through_cancel(void **state) { gated_submit(fill_ok, true, 0); }

/* Never executed: drop runs once, execute never (destroyed; a refusing combinator; an earlier op
 * of the submission failing). */
static void test_never_executed(void **state) {
  cuv_buffer_t *a = cuvt_buffer(BYTES);
  probe_t p1 = {0}, p2 = {0}, p3 = {0};
  cuv_op_destroy(fill(&p1, a, 1, 0));
  cuv_op_t *refused = cuv_seq(fill(&p2, a, 1, 0), NULL);
  assert_int_equal(cuv_op_error(refused), CUV_EINVAL);
  cuv_op_destroy(refused);
  cuv_op_t *items[] = {cuv_with_context(no_op, NULL, NULL), fill(&p3, a, 1, 0)};
  assert_int_equal(cuv_sync(cuv_zip(items, 2), NULL), CUV_EINVAL);
  probe_t *all[] = {&p1, &p2, &p3};
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(atomic_load(&all[i]->dropped), 1);
    assert_int_equal(atomic_load(&all[i]->executed), 0);
    assert_int_equal(atomic_load(&all[i]->released), 0);
  }
  cuv_buffer_unref(a);
}

/* Captured into a graph: execute runs once, at capture; its raw memset is replayed by every
 * launch; what it retained lives as long as the graph. */
static void test_graph_holds_retained(void **state) {
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  cuv_buffer_t *a = cuvt_buffer(BYTES);
  probe_t p = {0};
  uint32_t v = word();
  cuv_graph_t *g = NULL;
  assert_cuv_ok(cuv_graph_capture(&g, fill(&p, a, v, 0), s, NULL));
  assert_int_equal(atomic_load(&p.executed), 1);
  for (int r = 0; r < 3; r++) {
    assert_cuv_ok(cuv_sync(cuv_memset32(a, 0, 0, N), NULL));
    assert_cuv_ok(cuv_sync_on(s, cuv_graph_launch(g), NULL));
    assert_words(a, v);
    assert_int_equal(atomic_load(&p.released), 0);
  }
  cuv_graph_unref(g);
  assert_ran_once(&p);
  cuv_buffer_unref(a);
  cuv_stream_destroy(s);
}

/* ---- declared accesses order the op against other streams ---- */

typedef struct two_streams {
  cuv_stream_t *a, *b;
  cuv_queue_t *q;
  cuv_buffer_t *src, *buf, *out;
} two_streams_t;

static void two_open(two_streams_t *t) {
  assert_cuv_ok(cuv_stream_create(&t->a, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&t->b, cuvt_device()));
  assert_cuv_ok(cuv_queue_create(&t->q, NULL, NULL));
  t->src = cuvt_buffer(BYTES);
  t->buf = cuvt_buffer(BYTES);
  t->out = cuvt_buffer(BYTES);
}

static void two_close(two_streams_t *t) {
  drain_all(t->q);
  assert_cuv_ok(cuv_queue_destroy(t->q));
  cuv_buffer_unref(t->src);
  cuv_buffer_unref(t->buf);
  cuv_buffer_unref(t->out);
  cuv_stream_destroy(t->a);
  cuv_stream_destroy(t->b);
}

static void submit_on(two_streams_t *t, cuv_stream_t *stream, cuv_op_t *op, seen_t *seen) {
  cuv_submit_opts_t opts = {.stream = stream};
  assert_cuv_ok(cuv_submit(t->q, op, seen_done, seen, &opts));
}

/* buf = src after SLOW_MS on stream a (a kernel); then on b a custom op reading buf (a raw
 * device-to-device copy into out): it sees the writer's data. */
static void test_reader_waits_for_writer(void **state) {
  two_streams_t t;
  two_open(&t);
  for (int r = 0; r < REPS; r++) {
    uint32_t v = word();
    assert_cuv_ok(cuv_sync(cuv_memset32(t.src, 0, v, N), NULL));
    assert_cuv_ok(cuv_sync(cuv_memset32(t.buf, 0, 0, N), NULL));
    uint64_t waits = cuvt_waits_inserted();
    seen_t writer = {0};
    submit_on(&t, t.a, cuv_seq(cuvt_sleep(SLOW_MS), cuvt_copy_f32(t.buf, t.src, N)), &writer);
    probe_t p = {0};
    assert_cuv_ok(cuv_sync_on(t.b, copy(&p, t.out, t.buf, 0), NULL));
    assert_true(cuvt_waits_inserted() > waits);
    assert_ran_once(&p);
    assert_words(t.out, v);
    cuvt_drain_until(t.q, &writer.calls, 1);
    assert_cuv_ok(writer.status);
  }
  two_close(&t);
}

/* The custom op is the slow writer (a raw memset behind a sleep on a); a download on b sees it. */
static void test_writer_is_waited_for(void **state) {
  two_streams_t t;
  two_open(&t);
  for (int r = 0; r < REPS; r++) {
    uint32_t v = word();
    assert_cuv_ok(cuv_sync(cuv_memset32(t.buf, 0, 0, N), NULL));
    uint64_t waits = cuvt_waits_inserted();
    seen_t writer = {0};
    probe_t p = {0};
    submit_on(&t, t.a, cuv_seq(cuvt_sleep(SLOW_MS), fill(&p, t.buf, v, 0)), &writer);
    cuv_output_t out;
    assert_cuv_ok(cuv_sync_on(t.b, cuv_download(t.buf, 0, BYTES), &out));
    assert_true(cuvt_waits_inserted() > waits);
    for (size_t i = 0; i < N; i++)
      assert_int_equal(((const uint32_t *)out.data)[i], v);
    cuv_output_release(&out);
    cuvt_drain_until(t.q, &writer.calls, 1);
    assert_cuv_ok(writer.status);
    assert_ran_once(&p);
  }
  two_close(&t);
}

/* Write after read: a slow reader of buf on a (out = buf after SLOW_MS), then a custom op writing
 * buf on b: the reader still sees the old data. */
static void test_write_after_read(void **state) {
  two_streams_t t;
  two_open(&t);
  for (int r = 0; r < REPS / 2; r++) {
    uint32_t old = word(), v = old + 1;
    assert_cuv_ok(cuv_sync(cuv_memset32(t.buf, 0, old, N), NULL));
    uint64_t waits = cuvt_waits_inserted();
    seen_t reader = {0};
    submit_on(&t, t.a, cuv_seq(cuvt_sleep(SLOW_MS), cuvt_copy_f32(t.out, t.buf, N)), &reader);
    probe_t p = {0};
    assert_cuv_ok(cuv_sync_on(t.b, fill(&p, t.buf, v, 0), NULL));
    assert_true(cuvt_waits_inserted() > waits);
    cuvt_drain_until(t.q, &reader.calls, 1);
    assert_cuv_ok(reader.status);
    assert_words(t.out, old);
    assert_words(t.buf, v);
  }
  two_close(&t);
}

/* A declared access refused at execution (a strict buffer another stream writes): execute never
 * runs, drop does, once, and the buffer keeps the writer's data. */
static void test_refused_access_drops(void **state) {
  two_streams_t t;
  two_open(&t);
  assert_cuv_ok(cuv_buffer_set_hazard_mode(t.buf, CUV_HAZARD_STRICT));
  uint32_t v = word();
  seen_t writer = {0};
  submit_on(&t, t.a, cuv_seq(cuvt_sleep(SLOW_MS), cuvt_fill_u32(t.buf, N, v)), &writer);
  probe_t p = {0};
  assert_int_equal(cuv_sync_on(t.b, fill(&p, t.buf, v + 1, 0), NULL), CUV_ECONFLICT);
  assert_int_equal(atomic_load(&p.dropped), 1);
  assert_int_equal(atomic_load(&p.executed), 0);
  cuvt_drain_until(t.q, &writer.calls, 1);
  assert_cuv_ok(writer.status);
  assert_words(t.buf, v);
  two_close(&t);
}

/* ---- inside every combinator ---- */

static void test_in_zip_and_fork(void **state) {
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  cuv_buffer_t *a = cuvt_buffer(BYTES), *b = cuvt_buffer(BYTES), *c = cuvt_buffer(BYTES);
  for (int forked = 0; forked < 2; forked++) {
    probe_t p[3] = {0};
    uint32_t va = word(), vb = word();
    /* zip runs in order on one stream (c = a after a is filled); fork's branches may overlap,
     * so there the third branch fills c itself. */
    cuv_op_t *ops[] = {fill(&p[0], a, va, 21), fill(&p[1], b, vb, 22),
                       forked ? fill(&p[2], c, va, 23) : copy(&p[2], c, a, 23)};
    cuv_output_t out;
    assert_cuv_ok(cuv_sync_on(s, (forked ? cuv_fork : cuv_zip)(ops, 3), &out));
    for (size_t i = 0; i < 3; i++) {
      assert_int_equal(cuvt_payload(cuv_tuple_get(&out, i)), 21 + (int)i);
      assert_ran_once(&p[i]);
    }
    assert_ptr_equal(p[0].stream, s);
    cuv_output_release(&out);
    assert_words(a, va);
    assert_words(b, vb);
    assert_words(c, va);
  }
  cuv_buffer_unref(a);
  cuv_buffer_unref(b);
  cuv_buffer_unref(c);
  cuv_stream_destroy(s);
}

typedef struct then_arg {
  probe_t *probe;
  cuv_buffer_t *dst, *src;
  int input_payload;
} then_arg_t;

static cuv_op_t *then_copy(cuv_output_t *input, void *arg) {
  then_arg_t *t = arg;
  t->input_payload = cuvt_payload(input);
  return copy(t->probe, t->dst, t->src, 32);
}

static int map_add_one(cuv_output_t *value, void *arg) {
  ((cuvt_counted_t *)value->data)->payload++;
  return 0;
}

static void test_in_then_and_map(void **state) {
  cuv_buffer_t *a = cuvt_buffer(BYTES), *b = cuvt_buffer(BYTES);
  probe_t p1 = {0}, p2 = {0};
  uint32_t v = word();
  then_arg_t t = {&p2, b, a, 0};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_map(cuv_then(fill(&p1, a, v, 31), then_copy, &t), map_add_one, NULL),
                         &out));
  assert_int_equal(t.input_payload, 31);
  assert_int_equal(cuvt_payload(&out), 33);
  cuv_output_release(&out);
  assert_ran_once(&p1);
  assert_ran_once(&p2);
  assert_words(b, v);
  cuv_buffer_unref(a);
  cuv_buffer_unref(b);
}

/* A custom op copying to the host (a raw cuMemcpyDtoHAsync into a pinned host buffer) behind a
 * slow kernel: a map over it runs once the copy landed and reads the kernel's word. */
typedef struct to_host {
  cuv_host_buffer_t *dst;
  cuv_buffer_t *src;
} to_host_t;

static int to_host_execute(cuv_custom_ctx_t *ctx, cuv_output_t *out, void *arg) {
  to_host_t *t = arg;
  CUresult res = drv.dtoh(cuv_host_buffer_data(t->dst), cuv_buffer_ptr(t->src), 4,
                          cuv_custom_cu_stream(ctx));
  int rc = cuv_custom_retain(ctx, t->dst, (cuv_release_fn)cuv_host_buffer_unref);
  if (rc < 0)
    cuv_host_buffer_unref(t->dst);
  free(t);
  return rc < 0 ? rc : res == CUDA_SUCCESS ? 0 : CUV_ECUDA(res);
}

typedef struct word_seen {
  cuv_host_buffer_t *host;
  uint32_t got;
} word_seen_t;

static int map_reads_host(cuv_output_t *value, void *arg) {
  word_seen_t *w = arg;
  w->got = *(const volatile uint32_t *)cuv_host_buffer_data(w->host);
  return 0;
}

static void test_map_sees_its_copy_to_host(void **state) {
  cuv_buffer_t *word_buf = cuvt_buffer(4);
  for (int r = 0; r < REPS / 2; r++) {
    assert_cuv_ok(cuv_sync(cuv_memset32(word_buf, 0, 0, 1), NULL));
    word_seen_t w = {NULL, 0};
    assert_cuv_ok(cuv_host_buffer_create(&w.host, cuvt_device(), 4));
    memset(cuv_host_buffer_data(w.host), 0, 4);
    to_host_t *t = malloc(sizeof *t);
    *t = (to_host_t){cuv_host_buffer_ref(w.host), word_buf};
    cuv_access_t read = CUV_ACCESS_READ(word_buf);
    uint32_t v = word();
    cuv_op_t *op = cuv_seq(cuvt_slow_write(SLOW_MS, v, word_buf),
                           cuv_custom(to_host_execute, t, free, &read, 1));
    assert_cuv_ok(cuv_sync(cuv_map(op, map_reads_host, &w), NULL));
    assert_int_equal(w.got, v);
    cuv_host_buffer_unref(w.host);
  }
  cuv_buffer_unref(word_buf);
}

/* A shared custom op runs once whichever clone runs first; clones on two streams see its data. */
static void test_in_shared(void **state) {
  cuv_stream_t *s1, *s2;
  assert_cuv_ok(cuv_stream_create(&s1, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&s2, cuvt_device()));
  cuv_buffer_t *a = cuvt_buffer(BYTES), *b = cuvt_buffer(BYTES), *c = cuvt_buffer(BYTES);
  probe_t p = {0}, pb = {0}, pc = {0};
  uint32_t v = word();
  cuv_shared_t *sh = cuv_shared(fill(&p, a, v, 41));
  cuv_output_t o1, o2;
  assert_cuv_ok(cuv_sync_on(s1, cuv_seq(cuv_shared_clone(sh), copy(&pb, b, a, 0)), &o1));
  assert_cuv_ok(cuv_sync_on(s2, cuv_shared_clone(sh), &o2));
  assert_cuv_ok(cuv_sync_on(s2, copy(&pc, c, a, 0), NULL));
  assert_int_equal(cuv_shared_runs(sh), 1);
  assert_int_equal(cuvt_payload(&o2), 41);
  cuv_output_release(&o1);
  cuv_output_release(&o2);
  cuv_shared_unref(sh);
  assert_ran_once(&p);
  assert_words(b, v);
  assert_words(c, v);
  cuv_buffer_unref(a);
  cuv_buffer_unref(b);
  cuv_buffer_unref(c);
  cuv_stream_destroy(s1);
  cuv_stream_destroy(s2);
}

/* Many at once through cuv_submit (the engine's threads run them with
 * CUV_SUBMIT_INLINE=never), each filling its own buffer and downloading it. */
#define MANY 16

static void test_many_submitted(void **state) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_buffer_t *bufs[MANY];
  probe_t p[MANY] = {0};
  cuvt_seen_t seen[MANY] = {0};
  uint32_t v[MANY];
  for (size_t i = 0; i < MANY; i++) {
    bufs[i] = cuvt_buffer(BYTES);
    v[i] = word();
    cuv_op_t *op = cuv_seq(fill(&p[i], bufs[i], v[i], 0), cuv_download(bufs[i], 0, 4));
    assert_cuv_ok(cuv_submit(q, op, cuvt_record_seen, &seen[i], NULL));
    cuv_buffer_unref(bufs[i]);
  }
  drain_all(q);
  for (size_t i = 0; i < MANY; i++) {
    assert_int_equal(seen[i].calls, 1);
    assert_cuv_ok(seen[i].status);
    assert_int_equal(seen[i].got, v[i]);
    assert_ran_once(&p[i]);
  }
  assert_cuv_ok(cuv_queue_destroy(q));
}

static void test_uv_submit(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  cuv_buffer_t *a = cuvt_buffer(BYTES), *b = cuvt_buffer(BYTES);
  probe_t p1 = {0}, p2 = {0};
  cuvt_seen_t seen = {0};
  uint32_t v = word();
  cuv_op_t *op = cuv_seq(cuv_seq(fill(&p1, a, v, 0), copy(&p2, b, a, 0)),
                         cuv_download(b, BYTES - 4, 4));
  assert_cuv_ok(cuv_uv_submit(l.bridge, op, cuvt_record_seen, &seen, NULL));
  cuv_buffer_unref(a);
  cuv_buffer_unref(b);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0); /* returns after the callback */
  assert_int_equal(seen.calls, 1);
  assert_cuv_ok(seen.status);
  assert_int_equal(seen.got, v);
  assert_ran_once(&p1);
  assert_ran_once(&p2);
  uvt_close(&l);
}

/* ---- adopted memory ---- */

/* A raw cuMemAlloc adopted: copies, a launch, a memset and a graph replay use it; its release
 * runs once, after the last reference (the graph's) is gone. */
static void test_adopted_with_every_op(void **state) {
  adopted_t mem;
  cuv_buffer_t *buf = adopt(&mem, N * sizeof(float));
  float *data = malloc(N * sizeof(float)), *got = malloc(N * sizeof(float));
  cuvt_random_ints(data, N);
  cuvt_upload(buf, 0, data, N * sizeof(float));
  assert_cuv_ok(cuv_sync(cuvt_add_one(buf, N), NULL));
  for (size_t i = 0; i < N; i++)
    data[i] += 1.0f;
  cuvt_read(got, buf, 0, N * sizeof(float));
  cuvt_assert_floats_equal(got, data, N);
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  cuv_graph_t *g = NULL;
  assert_cuv_ok(cuv_graph_capture(&g, cuvt_add_one(buf, N), s, NULL));
  cuv_buffer_unref(buf); /* the graph holds it now */
  assert_cuv_ok(cuv_sync_on(s, cuv_graph_launch(g), NULL));
  assert_cuv_ok(cuv_sync_on(s, cuv_graph_launch(g), NULL));
  assert_int_equal(atomic_load(&mem.released), 0);
  cuv_graph_unref(g);
  assert_int_equal(atomic_load(&mem.released), 1);
  assert_int_equal(mem.free_status, CUDA_SUCCESS);
  cuv_stream_destroy(s);
  free(data);
  free(got);
}

/* cuv_free of an adopted buffer's last reference, behind gated work that writes the memory
 * without declaring it (so holds nothing): the release still waits for that work, as cuv's own
 * memory would be freed in stream order. */
static void test_adopted_freed_in_stream_order(void **state) {
  gated_t G;
  gated_open(&G);
  cuvt_gate_t *g = &G.gate;
  cuv_queue_t *q = G.q;
  cuv_buffer_t *buf = G.buf;
  seen_t seen = {0};
  probe_t writer = {0}, after = {0}; /* after: executed once the free was */
  cuv_buffer_t *mark = cuvt_buffer(4);
  cuv_op_t *ops[] = {cuvt_gate_wait(g), undeclared_fill(&writer, buf, word(), 0), cuv_free(buf),
                     fill(&after, mark, 1, 0)};
  assert_cuv_ok(cuv_submit(q, cuv_zip(ops, 4), seen_done, &seen, NULL));
  cuv_buffer_unref(mark);
  wait_executed(&after);
  assert_int_equal(atomic_load(&G.mem.released), 0);
  cuvt_gate_open(g);
  drain_all(q);
  assert_int_equal(atomic_load(&seen.calls), 1);
  assert_cuv_ok(seen.status);
  assert_ran_once(&writer);
  gated_close(&G);
}

/* Without a release the caller keeps the memory and frees it after the last reference. */
static void test_adopted_without_release(void **state) {
  assert_cuv_ok(cuv_device_bind(cuvt_device()));
  CUdeviceptr ptr = 0;
  assert_int_equal(drv.alloc(&ptr, BYTES), CUDA_SUCCESS);
  cuv_buffer_t *buf = NULL;
  assert_cuv_ok(cuv_buffer_adopt(&buf, cuvt_device(), ptr, BYTES, NULL, NULL));
  probe_t p = {0};
  uint32_t v = word();
  assert_cuv_ok(cuv_sync(fill(&p, buf, v, 0), NULL));
  assert_words(buf, v);
  cuv_buffer_unref(buf);
  assert_int_equal(drv.free(ptr), CUDA_SUCCESS);
  assert_ran_once(&p);
}

int main(void) {
  cuvt_init();
  resolve_driver();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_context_and_output),
      cmocka_unit_test(test_no_accesses),
      cmocka_unit_test(test_retained_outlives_caller),
      cmocka_unit_test(test_retained_when_execute_fails),
      cmocka_unit_test(test_retained_when_a_later_op_fails),
      cmocka_unit_test(test_retained_through_cancel),
      cmocka_unit_test(test_never_executed),
      cmocka_unit_test(test_graph_holds_retained),
      cmocka_unit_test(test_reader_waits_for_writer),
      cmocka_unit_test(test_writer_is_waited_for),
      cmocka_unit_test(test_write_after_read),
      cmocka_unit_test(test_refused_access_drops),
      cmocka_unit_test(test_in_zip_and_fork),
      cmocka_unit_test(test_in_then_and_map),
      cmocka_unit_test(test_in_shared),
      cmocka_unit_test(test_map_sees_its_copy_to_host),
      cmocka_unit_test(test_many_submitted),
      cmocka_unit_test(test_uv_submit),
      cmocka_unit_test(test_adopted_with_every_op),
      cmocka_unit_test(test_adopted_freed_in_stream_order),
      cmocka_unit_test(test_adopted_without_release),
  };
  return cuvt_run(tests);
}
