/* The failure-injection sweep (suite sim only: it needs cuv_sim_fail). A representative workload
 * (a then-chain into cuv_sync_on, two cuv_submit into a queue, a graph capture with its update and
 * replays, a writer on one stream read from another, a fork, a tree over two devices with a peer
 * copy, a submission from a new thread, a module's load and launch, a launch whose arguments are
 * ops, and queries) runs clean to learn how many calls each of its steps makes to each entry
 * point of CUV__DRIVER_FUNCS (and cuLaunchHostFunc_v2). Then, for each entry point, step and
 * call k of that step (the first PER_STEP and the last), the workload runs again with that call
 * failing, and must:
 *   - report the failure as an error of that step, every other step succeeding; or absorb it
 *     (every step succeeds with right results: a fallback took over);
 *   - never report success with wrong results; run every completion callback exactly once and
 *     release every value once; and not report an error while the step's GPU work still runs
 *     (what the work holds is released when the error is reported);
 *   - leave a runtime whose next clean run is right in every step (nothing freed early, nothing
 *     left broken; ASan and UBSan watch the rest).
 * No sticky fault is injected (that needs a process of its own: tests/errors/fault.c, uv-fault.c).
 * A failing cuStreamWriteValue64 sends a submission to the host-callback path, so both
 * completion paths are in the sweep. The figures are printed at
 * the end (tests/README.md, "Failure-injection sweep"); CUVT_SWEEP_ONLY=<entry point> sweeps
 * just one. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "counted.h"
#include "driver_funcs.h"

#define N 1000          /* elements per buffer: not a multiple of the block size */
#define PER_STEP 4      /* calls injected per entry point and step: the first ones, and the last */
#define SLOW_MS 3       /* a kernel that outlasts the inline spin and the reactor's first probe */

/* The list, and the optional cuLaunchHostFunc_v2 resolved beside it (lib/driver.c): the
 * host functions of CUV_HOST_SYNC=spin on the simulator. */
#define SWEEP_NAME(name) #name,
static const char *const entries[] = {CUV__DRIVER_FUNCS(SWEEP_NAME) "cuLaunchHostFunc_v2"};
#undef SWEEP_NAME
#define NENTRIES (sizeof entries / sizeof entries[0])

/* Entry points not injected, and why. */
static const char *not_injected(const char *entry) {
  /* The simulator's injection returns without acting: a failed end leaves the stream capturing
   * for good, which no driver does (a failed cuStreamEndCapture still ends the capture). */
  if (strcmp(entry, "cuStreamEndCapture") == 0)
    return "not injected: the simulator's stream would stay capturing for good";
  return NULL;
}

/* Why the warm workload makes no call to an entry point. */
static const char *why_not_called(const char *entry) {
  static const char *const reasons[][2] = {
      {"cuInit", "once per process (cuv_init)"},
      {"cuDriverGetVersion", "once per process (cuv_init)"},
      {"cuDeviceGet", "when a device is first opened (the test holds device 0)"},
      {"cuDeviceGetName", "when a device is first opened"},
      {"cuDevicePrimaryCtxRetain", "when a device is first opened"},
      {"cuDevicePrimaryCtxRelease", "when a device's last reference goes"},
      {"cuDevicePrimaryCtxReset", "not called by the runtime (the simulator's smoke test)"},
      {"cuCtxSynchronize", "not called by the runtime (conformance tests)"},
      {"cuStreamWaitValue32", "not called by the runtime (conformance tests)"},
      {"cuStreamWriteValue32", "not called by the runtime (conformance tests)"},
      {"cuStreamIsCapturing", "not called by the runtime (conformance tests)"},
      {"cuEventCreate", "the device's event pool is large enough once warm"},
      {"cuEventDestroy", "pooled events go at device destruction"},
      {"cuMemHostGetDevicePointer", "once, when the reactor starts"},
      {"cuMemHostAlloc", "staging blocks are pooled (hundreds per size class) once warm"},
      {"cuMemFreeHost", "staging blocks are pooled (hundreds per size class) once warm"},
      {"cuDeviceCanAccessPeer", "once per pair of devices (peer access is asked once)"},
      {"cuCtxEnablePeerAccess", "once per pair of devices (peer access is asked once)"},
      {"cuCtxDisablePeerAccess", "not called by the runtime (the simulator's smoke test)"},
  };
  for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
    if (strcmp(reasons[i][0], entry) == 0)
      return reasons[i][1];
  return "not called by the workload once warm";
}

/* A plausible error for a failing call (never a sticky fault). */
static CUresult injected_error(const char *entry) {
  if (strcmp(entry, "cuMemAlloc") == 0 || strcmp(entry, "cuMemAllocAsync") == 0 ||
      strcmp(entry, "cuMemHostAlloc") == 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  return CUDA_ERROR_UNKNOWN;
}

/* ---- one run of the workload ---- */

enum { STEP_CHAIN, STEP_SUBMIT, STEP_GRAPH, STEP_HAZARD, STEP_FORK, STEP_DEVICES, STEP_THREAD,
       STEP_MODULE, STEP_OP_ARGS, STEP_QUERY, NSTEPS };
static const char *const step_names[NSTEPS] = {"then-chain", "submit", "graph",  "hazard",
                                               "fork",       "devices", "thread", "module",
                                               "op-args",    "query"};

typedef struct step_result {
  int status;     /* 0, or the first error the step reported */
  char wrong[200]; /* non-empty: what broke a rule (success with wrong data, callback counts) */
} step_result_t;

typedef struct run {
  step_result_t step[NSTEPS];
  unsigned long calls[NSTEPS][NENTRIES]; /* calls each step made to each entry point */
} run_t;

/* Fresh host data for each run: integer floats, so every result compares exactly. */
typedef struct data {
  float x[N], y[N], a;
  unsigned v[4];
} data_t;

static void note_error(step_result_t *r, int rc) {
  if (rc != 0 && r->status == 0)
    r->status = rc;
}

__attribute__((format(printf, 2, 3))) static void note_wrong(step_result_t *r, const char *fmt,
                                                             ...);
static void note_wrong(step_result_t *r, const char *fmt, ...) {
  if (r->wrong[0])
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->wrong, sizeof r->wrong, fmt, ap);
  va_end(ap);
}

static cuv_buffer_t *new_buffer(step_result_t *r, size_t bytes) {
  cuv_buffer_t *buf = NULL;
  note_error(r, cuv_buffer_create(&buf, cuvt_device(), bytes));
  return buf;
}

static void check_floats(step_result_t *r, const float *got, const float *want) {
  for (size_t i = 0; i < N; i++) {
    if (got[i] != want[i]) {
      note_wrong(r, "element %zu: got %g, want %g", i, (double)got[i], (double)want[i]);
      return;
    }
  }
}

static void check_u32(step_result_t *r, const cuv_output_t *out, unsigned want) {
  const unsigned *got = out ? out->data : NULL;
  if (!got) {
    note_wrong(r, "no output");
    return;
  }
  for (size_t i = 0; i < N; i++) {
    if (got[i] != want) {
      note_wrong(r, "element %zu: got %u, want %u", i, got[i], want);
      return;
    }
  }
}

static void buffer_release(void *buf) { cuv_buffer_unref(buf); }

/* `op`, then `buf` as the output: a then stage hands its buffer on. */
static cuv_op_t *pass_buffer(cuv_op_t *op, cuv_buffer_t *buf) {
  return cuv_seq(op, cuv_value(cuv_buffer_ref(buf), buffer_release));
}

/* A step that reported an error must have let what it enqueued finish first: its resources go
 * when the error is reported. Device memory is host memory in the simulator, so the test sees
 * whether the GPU still writes `buf` afterwards (the work left is a SLOW_MS kernel at most). */
static void check_settled(step_result_t *r, cuv_buffer_t *buf) {
  const unsigned char *p = (const unsigned char *)(uintptr_t)cuv_buffer_ptr(buf);
  size_t n = cuv_buffer_size(buf);
  unsigned char *before = malloc(n);
  if (!before)
    abort();
  memcpy(before, p, n);
  struct timespec t = {0, 4 * SLOW_MS * 1000000L};
  nanosleep(&t, NULL);
  if (memcmp(before, p, n) != 0)
    note_wrong(r, "the GPU still wrote the step's buffer after the error was reported: what the "
                  "work held was released before it finished");
  free(before);
}

/* ---- then-chain: alloc -> uploads -> slow kernel, saxpy -> download, in cuv_sync_on ---- */

typedef struct chain {
  const data_t *d;
  cuv_buffer_t *bx, *by; /* by: the allocated buffer, referenced here for check_settled */
  atomic_int calls[3];
} chain_t;

static cuv_op_t *chain_upload(cuv_output_t *in, void *arg) {
  chain_t *c = arg;
  atomic_fetch_add(&c->calls[0], 1);
  cuv_buffer_t *by = in->data;
  c->by = cuv_buffer_ref(by);
  return pass_buffer(cuv_seq(cuv_memcpy_htod(c->bx, 0, c->d->x, sizeof c->d->x, CUV_COPY_STAGE),
                             cuv_memcpy_htod(by, 0, c->d->y, sizeof c->d->y, CUV_COPY_STAGE)),
                     by);
}

/* A slow kernel first: the wait for the chain starts while the GPU still needs bx. */
static cuv_op_t *chain_saxpy(cuv_output_t *in, void *arg) {
  chain_t *c = arg;
  atomic_fetch_add(&c->calls[1], 1);
  cuv_buffer_t *by = in->data;
  unsigned n = N;
  float a = c->d->a;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_READ(c->bx), CUV_ARG_RW(by)};
  cuv_op_t *saxpy = cuv_launch(cuvt_kernel("saxpy"), CUVT_GRID(N), CUVT_BLOCK, 0, args, 4);
  return pass_buffer(cuv_seq(cuvt_sleep(SLOW_MS), saxpy), by);
}

static cuv_op_t *chain_download(cuv_output_t *in, void *arg) {
  chain_t *c = arg;
  atomic_fetch_add(&c->calls[2], 1);
  return cuv_download(in->data, 0, N * sizeof(float));
}

static void step_chain(step_result_t *r, const data_t *d) {
  cuv_stream_t *s = NULL;
  note_error(r, cuv_stream_create(&s, cuvt_device()));
  chain_t c = {.d = d, .bx = s ? new_buffer(r, N * sizeof(float)) : NULL};
  if (!c.bx) {
    cuv_stream_destroy(s);
    return;
  }
  cuv_op_t *op = cuv_alloc(cuvt_device(), N * sizeof(float));
  op = cuv_then(op, chain_upload, &c);
  op = cuv_then(op, chain_saxpy, &c);
  op = cuv_then(op, chain_download, &c);
  cuv_output_t out;
  int rc = cuv_sync_on(s, op, &out);
  note_error(r, rc);
  if (rc != 0 && c.by)
    check_settled(r, c.by);
  for (int i = 0; i < 3; i++)
    if (atomic_load(&c.calls[i]) > 1)
      note_wrong(r, "then stage %d ran %d times", i, atomic_load(&c.calls[i]));
  if (rc == 0) {
    float want[N];
    for (size_t i = 0; i < N; i++)
      want[i] = d->a * d->x[i] + d->y[i];
    check_floats(r, out.data, want);
    cuv_output_release(&out);
  }
  cuv_buffer_unref(c.by);
  cuv_buffer_unref(c.bx);
  cuv_stream_destroy(s);
}

/* ---- submit: two overlapping submissions into a queue (the reactor) ------------------------- */

typedef struct submitted {
  atomic_int calls;
  int status;
  unsigned want;
  step_result_t *r;
} submitted_t;

static void submit_done(int status, cuv_output_t *out, void *arg) {
  submitted_t *s = arg;
  if (atomic_fetch_add(&s->calls, 1) == 0) {
    s->status = status;
    if (status == 0)
      check_u32(s->r, out, s->want);
  }
}

static void step_submit(step_result_t *r, const data_t *d) {
  cuv_queue_t *q = NULL;
  note_error(r, cuv_queue_create(&q, NULL, NULL));
  if (!q)
    return;
  cuv_buffer_t *bufs[2] = {new_buffer(r, N * 4), new_buffer(r, N * 4)};
  submitted_t subs[2] = {{.want = d->v[0], .r = r}, {.want = d->v[1], .r = r}};
  atomic_int releases = 0;
  int accepted = 0, expected_releases = 0;
  for (int i = 0; i < 2 && bufs[0] && bufs[1]; i++) {
    /* The first is slow: it outlasts the inline spin and waits on its stream's word in the
     * reactor, which probes its stream; the second overlaps it. */
    cuv_op_t *work = cuv_seq(cuvt_fill_u32(bufs[i], N, d->v[i]), cuv_download(bufs[i], 0, N * 4));
    if (i == 0)
      work = cuv_seq(cuvt_sleep(SLOW_MS), work);
    cuv_op_t *op = cuv_seq(cuvt_counted_value(i, &releases), work);
    expected_releases++;
    cuv_submit_opts_t opts = {0};
    int rc = cuv_submit(q, op, submit_done, &subs[i], &opts);
    note_error(r, rc);
    accepted += rc == 0;
  }
  /* Drain until every accepted submission called back (a watchdog of 20 s, not a timing test). */
  int called = 0;
  for (int waits = 0; waits < 200; waits++) {
    called = atomic_load(&subs[0].calls) + atomic_load(&subs[1].calls);
    if (called >= accepted)
      break;
    int rc = cuv_queue_wait(q, 100);
    if (rc != 0 && rc != CUV_EBUSY)
      note_wrong(r, "cuv_queue_wait: %s", cuv_err_name(rc));
    cuv_queue_drain(q);
  }
  cuv_queue_drain(q);
  for (int i = 0; i < 2; i++) {
    note_error(r, subs[i].status);
    if (subs[i].status != 0)
      check_settled(r, bufs[i]);
    if (atomic_load(&subs[i].calls) > 1)
      note_wrong(r, "submission %d called back %d times", i, atomic_load(&subs[i].calls));
  }
  called = atomic_load(&subs[0].calls) + atomic_load(&subs[1].calls);
  if (called != accepted)
    note_wrong(r, "%d of %d accepted submissions called back", called, accepted);
  if (atomic_load(&releases) != expected_releases)
    note_wrong(r, "values released %d times, want %d", atomic_load(&releases), expected_releases);
  if (cuv_queue_destroy(q) != 0)
    note_wrong(r, "queue still busy after every callback");
  for (int i = 0; i < 2; i++)
    cuv_buffer_unref(bufs[i]);
}

/* ---- graph: capture add_one on a private stream, update its input, replay twice ---- */

static void step_graph(step_result_t *r, const data_t *d) {
  cuv_stream_t *s = NULL;
  note_error(r, cuv_stream_create(&s, cuvt_device()));
  cuv_buffer_t *buf = s ? new_buffer(r, N * sizeof(float)) : NULL;
  cuv_graph_t *g = NULL;
  int rc = buf ? cuv_graph_capture(&g, cuvt_add_one(buf, N), s, NULL) : -1;
  note_error(r, buf ? rc : 0);
  if (rc == 0)
    note_error(r, rc = cuv_graph_update(g, cuv_memcpy_htod(buf, 0, d->x, sizeof d->x,
                                                           CUV_COPY_STAGE)));
  for (int i = 0; rc == 0 && i < 2; i++)
    note_error(r, rc = cuv_sync_on(s, cuv_graph_launch(g), NULL));
  cuv_output_t out;
  if (rc == 0)
    note_error(r, rc = cuv_sync_on(s, cuv_download(buf, 0, sizeof d->x), &out));
  if (rc == 0) {
    float want[N];
    for (size_t i = 0; i < N; i++)
      want[i] = d->x[i] + 2.0f;
    check_floats(r, out.data, want);
    cuv_output_release(&out);
  }
  cuv_graph_unref(g);
  cuv_buffer_unref(buf);
  cuv_stream_destroy(s);
}

/* ---- hazard: a slow writer on stream A (enqueue_on), a reader on stream B (sync_on) ---- */

static void step_hazard(step_result_t *r, const data_t *d) {
  cuv_stream_t *a = NULL, *b = NULL;
  note_error(r, cuv_stream_create(&a, cuvt_device()));
  note_error(r, cuv_stream_create(&b, cuvt_device()));
  cuv_buffer_t *flag = a && b ? new_buffer(r, sizeof(unsigned)) : NULL;
  int rc = flag ? cuv_enqueue_on(b, cuv_memset32(flag, 0, 0, 1), NULL) : -1;
  note_error(r, flag ? rc : 0);
  int written = rc == 0 ? cuv_enqueue_on(a, cuvt_slow_write(SLOW_MS, d->v[2], flag), NULL) : -1;
  note_error(r, rc == 0 ? written : 0);
  /* More work on A reaps A's finished work first (the writer is still running): what the writer
   * holds, its access to the flag included, must stay until it is done. */
  if (written == 0)
    note_error(r, rc = cuv_enqueue_on(a, cuv_value(NULL, NULL), NULL));
  if (written == 0 && rc == 0) {
    cuv_output_t out;
    note_error(r, rc = cuv_sync_on(b, cuv_download(flag, 0, sizeof(unsigned)), &out));
    if (rc == 0 && *(unsigned *)out.data != d->v[2])
      note_wrong(r, "the reader on another stream saw %u, not the writer's %u",
                 *(unsigned *)out.data, d->v[2]);
    if (rc == 0)
      cuv_output_release(&out);
  }
  cuv_stream_t *both[2] = {a, b};
  for (int i = 0; i < 2; i++) /* waits, and reaps the enqueue_on work */
    if (both[i])
      note_error(r, cuv_stream_synchronize(both[i]));
  cuv_buffer_unref(flag);
  cuv_stream_destroy(a);
  cuv_stream_destroy(b);
}

/* ---- fork: two branches on different streams, joined ---- */

static void step_fork(step_result_t *r, const data_t *d) {
  cuv_buffer_t *bufs[3] = {new_buffer(r, N * 4), new_buffer(r, N * 4), new_buffer(r, N * 4)};
  unsigned char byte = (unsigned char)(d->v[3] | 1u);
  if (bufs[0] && bufs[1] && bufs[2]) {
    /* A kernel on one branch; a set and a device-to-device copy on the other. */
    cuv_op_t *ops[2] = {
        cuv_seq(cuvt_fill_u32(bufs[0], N, d->v[2]), cuv_download(bufs[0], 0, N * 4)),
        cuv_seq(cuv_seq(cuv_memset8(bufs[2], 0, byte, N * 4),
                        cuv_memcpy_dtod(bufs[1], 0, bufs[2], 0, N * 4)),
                cuv_download(bufs[1], 0, N * 4)),
    };
    cuv_output_t out;
    int rc = cuv_sync(cuv_fork(ops, 2), &out);
    note_error(r, rc);
    if (rc == 0) {
      check_u32(r, cuv_tuple_get(&out, 0), d->v[2]);
      check_u32(r, cuv_tuple_get(&out, 1), byte * 0x01010101u);
      cuv_output_release(&out);
    }
  }
  for (int i = 0; i < 3; i++)
    cuv_buffer_unref(bufs[i]);
}

/* ---- devices: a tree executing on device 0 with a peer copy to device 1 and its download ---- */

static cuv_device_t *device1; /* the simulator runs two devices here (main) */

static void step_devices(step_result_t *r, const data_t *d) {
  cuv_buffer_t *b0 = new_buffer(r, N * 4), *b1 = NULL;
  note_error(r, cuv_buffer_create(&b1, device1, N * 4));
  if (b0 && b1) {
    /* A slow kernel first: device 1's part waits for it behind its fork point. */
    cuv_op_t *op = cuv_seq(cuv_seq(cuvt_sleep(SLOW_MS), cuvt_fill_u32(b0, N, d->v[1])),
                           cuv_seq(cuv_memcpy_peer(b1, 0, b0, 0, N * 4),
                                   cuv_download(b1, 0, N * 4)));
    cuv_output_t out;
    int rc = cuv_sync(op, &out);
    note_error(r, rc);
    if (rc == 0) {
      check_u32(r, &out, d->v[1]);
      cuv_output_release(&out);
    } else {
      check_settled(r, b1);
    }
  }
  cuv_buffer_unref(b0);
  cuv_buffer_unref(b1);
}

/* ---- thread: a submission from a new thread (cuv binds the device's context there) ---- */

typedef struct threaded {
  const data_t *d;
  step_result_t *r;
} threaded_t;

static void *thread_main(void *arg) {
  threaded_t *t = arg;
  cuv_buffer_t *buf = new_buffer(t->r, N * 4);
  if (!buf)
    return NULL;
  cuv_output_t out;
  int rc = cuv_sync(cuv_seq(cuvt_fill_u32(buf, N, t->d->v[0]), cuv_download(buf, 0, N * 4)), &out);
  note_error(t->r, rc);
  if (rc == 0) {
    check_u32(t->r, &out, t->d->v[0]);
    cuv_output_release(&out);
  }
  cuv_buffer_unref(buf);
  return NULL;
}

static void step_thread(step_result_t *r, const data_t *d) {
  threaded_t t = {d, r};
  pthread_t thread;
  if (pthread_create(&thread, NULL, thread_main, &t) != 0)
    abort();
  pthread_join(thread, NULL);
}

/* ---- module: load the test module again, look a kernel up, launch it, unload ---- */

static void step_module(step_result_t *r, const data_t *d) {
  cuv_module_t *mod = NULL;
  cuv_kernel_t *k = NULL;
  int rc = cuv_module_load_file(&mod, cuvt_device(), cuvt_ptx_path());
  note_error(r, rc);
  if (rc == 0)
    note_error(r, rc = cuv_kernel_get(&k, mod, "add_one"));
  size_t nparams = 0;
  if (rc == 0 && (rc = cuv_kernel_param_count(k, &nparams)) == 0 && nparams != 2)
    note_wrong(r, "add_one has %zu parameters, want 2", nparams);
  note_error(r, rc == CUV_ENOTSUP ? 0 : rc);
  cuv_buffer_t *buf = k ? new_buffer(r, N * sizeof(float)) : NULL;
  if (buf) {
    unsigned n = N;
    cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(buf)};
    cuv_op_t *op = cuv_seq(cuv_memcpy_htod(buf, 0, d->y, sizeof d->y, CUV_COPY_STAGE),
                           cuv_seq(cuv_launch(k, CUVT_GRID(N), CUVT_BLOCK, 0, args, 2),
                                   cuv_download(buf, 0, sizeof d->y)));
    cuv_output_t out;
    note_error(r, rc = cuv_sync(op, &out));
    if (rc == 0) {
      float want[N];
      for (size_t i = 0; i < N; i++)
        want[i] = d->y[i] + 1.0f;
      check_floats(r, out.data, want);
      cuv_output_release(&out);
    }
  }
  cuv_buffer_unref(buf);
  cuv_kernel_unref(k);
  cuv_module_unref(mod);
}

/* ---- op-args: a launch whose arguments are ops (a dup, ones), behind a slow write and a
 * 16-bit set on a buffer of the step's ---- */

static void check_flag(step_result_t *r, cuv_buffer_t *flag, unsigned want) {
  cuv_output_t out;
  int rc = cuv_sync(cuv_download(flag, 0, 2 * sizeof(unsigned)), &out);
  note_error(r, rc);
  const unsigned *got = rc == 0 ? out.data : NULL;
  if (got && (got[0] != want || got[1] != 0xbeefbeefu))
    note_wrong(r, "flag: %x %x, want %x beefbeef", got[0], got[1], want);
  cuv_output_release(&out);
}

static void step_op_args(step_result_t *r, const data_t *d) {
  cuv_buffer_t *bx = new_buffer(r, sizeof d->x);
  cuv_buffer_t *flag = bx ? new_buffer(r, 2 * sizeof(unsigned)) : NULL;
  if (!flag) {
    cuv_buffer_unref(bx);
    return;
  }
  unsigned n = N;
  float a = d->a;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_OP_READ(cuv_dup(bx)),
                      CUV_ARG_OP_RW(cuv_ones_f32(cuvt_device(), N))};
  cuv_op_t *op = cuv_seq(cuv_memcpy_htod(bx, 0, d->x, sizeof d->x, CUV_COPY_STAGE),
                         cuv_seq(cuvt_slow_write(SLOW_MS, d->v[1], flag),
                                 cuv_memset16(flag, sizeof(unsigned), 0xbeef, 2)));
  op = cuv_seq(op, cuv_launch(cuvt_kernel("saxpy"), CUVT_GRID(N), CUVT_BLOCK, 0, args, 4));
  cuv_output_t out;
  int rc = cuv_sync(op, &out);
  note_error(r, rc);
  if (rc != 0)
    check_settled(r, flag);
  cuv_buffer_t *y = rc == 0 ? cuv_output_buffer(cuv_tuple_get(&out, 1)) : NULL;
  if (rc == 0 && !y)
    note_wrong(r, "the launch output no buffer");
  float got[N], want[N];
  if (y && (rc = cuv_sync(cuv_memcpy_dtoh(got, y, 0, sizeof got), NULL)) == 0) {
    for (size_t i = 0; i < N; i++)
      want[i] = d->a * d->x[i] + 1.0f;
    check_floats(r, got, want);
    check_flag(r, flag, d->v[1]);
  }
  note_error(r, rc);
  cuv_output_release(&out);
  cuv_buffer_unref(flag);
  cuv_buffer_unref(bx);
}

/* ---- queries: device count and attribute, a driver error's name and text ---- */

static void step_query(step_result_t *r, const data_t *d) {
  int count = 0, sms = 0;
  int rc = cuv_device_count(&count);
  note_error(r, rc);
  if (rc == 0 && count < 1)
    note_wrong(r, "%d devices", count);
  rc = cuv_device_attribute(cuvt_device(), CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms);
  note_error(r, rc);
  if (rc == 0 && sms < 1)
    note_wrong(r, "%d multiprocessors", sms);
  int status = CUV_ECUDA(CUDA_ERROR_INVALID_VALUE);
  const char *name = cuv_err_name(status), *text = cuv_strerror(status);
  if (!name || !*name || !text || !*text)
    note_wrong(r, "no name or text for a driver error");
}

static void (*const steps[NSTEPS])(step_result_t *, const data_t *) = {
    step_chain, step_submit,  step_graph, step_hazard,  step_fork,
    step_devices, step_thread, step_module, step_op_args, step_query};

static void snapshot(unsigned long *calls) {
  for (size_t e = 0; e < NENTRIES; e++)
    calls[e] = cuv_sim_calls(entries[e]);
}

/* One injected failure: call `nth` of entry point `entry` within step `step`. */
typedef struct injection {
  size_t entry;
  int step;
  unsigned long nth;
  CUresult error;
} injection_t;

/* Runs every step on fresh data, counting each step's calls per entry point; with `inj`, the
 * injected call fails (the rule is added when its step begins and cleared when it ends, so the
 * call is found by its rank inside the step, whatever the steps before did). */
static void run_workload(run_t *run, const injection_t *inj) {
  static data_t d;
  memset(run, 0, sizeof *run);
  cuvt_random_ints(d.x, N);
  cuvt_random_ints(d.y, N);
  d.a = (float)(cuvt_random_u32() % 7) - 3.0f;
  for (int i = 0; i < 4; i++)
    d.v[i] = cuvt_nonzero_u32();
  unsigned long before[NENTRIES], after[NENTRIES];
  for (int s = 0; s < NSTEPS; s++) {
    snapshot(before);
    if (inj && inj->step == s)
      cuv_sim_fail(entries[inj->entry], (unsigned)inj->nth, (int)inj->error);
    steps[s](&run->step[s], &d);
    if (inj && inj->step == s)
      cuv_sim_fail_clear();
    snapshot(after);
    for (size_t e = 0; e < NENTRIES; e++)
      run->calls[s][e] = after[e] - before[e];
  }
}

static unsigned long total_calls(const run_t *run, size_t e) {
  unsigned long n = 0;
  for (int s = 0; s < NSTEPS; s++)
    n += run->calls[s][e];
  return n;
}

/* Asserts that every step of a run succeeded with right results. */
static void assert_clean(const run_t *run, const char *when) {
  for (int s = 0; s < NSTEPS; s++) {
    const step_result_t *r = &run->step[s];
    if (r->status != 0 || r->wrong[0])
      fail_msg("%s: step %s: %s %s", when, step_names[s], r->status ? cuv_err_name(r->status) : "",
               r->wrong);
  }
}

/* ---- the sweep ---- */

typedef struct entry_figures {
  unsigned long calls;     /* per clean run */
  bool steady;             /* the same count per step in two clean runs */
  unsigned injected, surfaced, absorbed, unreached;
  unsigned surfaced_in[NSTEPS], absorbed_in[NSTEPS];
} entry_figures_t;

static entry_figures_t figures[NENTRIES];

static double seconds_since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Runs with one call failing and judges the run, then runs clean. */
static void inject(const injection_t *inj) {
  entry_figures_t *f = &figures[inj->entry];
  static run_t run;
  run_workload(&run, inj);
  bool fired = run.calls[inj->step][inj->entry] >= inj->nth;
  char when[160];
  snprintf(when, sizeof when, "%s call %lu of step %s failing with %d", entries[inj->entry],
           inj->nth, step_names[inj->step], (int)inj->error);

  for (int s = 0; s < NSTEPS; s++) {
    const step_result_t *r = &run.step[s];
    if (r->wrong[0])
      fail_msg("%s: step %s broke a rule: %s", when, step_names[s], r->wrong);
    /* The failure belongs to its step: every other step succeeds, and without the failure
     * (the step made fewer calls this time) every step does. */
    if (r->status != 0 && (s != inj->step || !fired))
      fail_msg("%s: step %s failed too (%s)", when, step_names[s], cuv_err_name(r->status));
  }
  f->injected++;
  if (!fired) {
    f->unreached++;
  } else if (run.step[inj->step].status != 0) {
    f->surfaced++;
    f->surfaced_in[inj->step]++;
  } else {
    f->absorbed++;
    f->absorbed_in[inj->step]++;
  }

  /* Nothing freed early, nothing left broken: the next clean run is right everywhere. */
  run_workload(&run, NULL);
  char after[200];
  snprintf(after, sizeof after, "clean run after %s", when);
  assert_clean(&run, after);
}

static void print_figures(double secs) {
  unsigned points = 0, sites = 0, surfaced = 0, absorbed = 0, unreached = 0;
  fprintf(stderr, "# %-28s %6s %6s %8s %8s %9s  %s\n", "entry point", "calls", "inject",
          "surfaced", "absorbed", "unreached", "steps (absorbed there)");
  for (size_t e = 0; e < NENTRIES; e++) {
    const entry_figures_t *f = &figures[e];
    const char *why = not_injected(entries[e]);
    if (!f->calls || why) {
      fprintf(stderr, "# %-28s %6lu %6s  %s\n", entries[e], f->calls, "-",
              why ? why : why_not_called(entries[e]));
      continue;
    }
    char where[200] = "";
    size_t len = 0;
    for (int s = 0; s < NSTEPS && len < sizeof where; s++)
      if (f->surfaced_in[s] || f->absorbed_in[s])
        len += (size_t)snprintf(where + len, sizeof where - len, "%s%s%s", len ? ", " : "",
                                step_names[s], f->surfaced_in[s] ? "" : " (absorbed)");
    fprintf(stderr, "# %-28s %6lu %6u %8u %8u %9u  %s%s\n", entries[e], f->calls, f->injected,
            f->surfaced, f->absorbed, f->unreached, where, f->steady ? "" : " [timing-dependent]");
    points++;
    sites += f->injected;
    surfaced += f->surfaced;
    absorbed += f->absorbed;
    unreached += f->unreached;
  }
  fprintf(stderr,
          "# sweep: %u of %zu entry points covered, %u call sites (entry, step, k) exercised: %u "
          "surfaced as errors, %u absorbed, %u not reached (timing); %.1f s\n",
          points, NENTRIES, sites, surfaced, absorbed, unreached, secs);
}

static void test_failure_injection_sweep(void **state) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  static run_t counted, again;
  run_workload(&counted, NULL); /* warm: pools, the reactor, the default policy */
  assert_clean(&counted, "warm-up run");
  run_workload(&counted, NULL);
  assert_clean(&counted, "counting run");
  run_workload(&again, NULL);
  assert_clean(&again, "second counting run");
  const char *only = getenv("CUVT_SWEEP_ONLY"); /* one entry point, to replay a failure */
  for (size_t e = 0; e < NENTRIES; e++) {
    entry_figures_t *f = &figures[e];
    f->calls = total_calls(&counted, e);
    f->steady = true;
    for (int s = 0; s < NSTEPS; s++)
      f->steady = f->steady && counted.calls[s][e] == again.calls[s][e];
    if (not_injected(entries[e]) || (only && strcmp(only, entries[e]) != 0))
      continue;
    /* Each step's first PER_STEP calls and its last one. */
    for (int s = 0; s < NSTEPS; s++) {
      unsigned long n = counted.calls[s][e];
      for (unsigned long k = 1; k <= n; k = k < PER_STEP ? k + 1 : (k < n ? n : n + 1)) {
        injection_t inj = {e, s, k, injected_error(entries[e])};
        inject(&inj);
      }
    }
  }
  print_figures(seconds_since(&t0));
}

int main(void) {
  cuv_sim_set_device_count(2); /* step devices; the simulator only */
  cuvt_init();
  if (!cuvt_is_sim()) {
    printf("1..0 # SKIP the sweep needs the simulator's failure injection\n");
    return 0;
  }
  if (cuv_device_open(&device1, 1) < 0) {
    fprintf(stderr, "sweep: no second simulated device\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failure_injection_sweep),
  };
  return cuvt_run(tests);
}
