/* Conformance of the driver semantics cuv relies on, run on libcuv-sim (suite sim) and on the real
 * driver (suite gpu): what the simulator does is checked against what the GPU does. Every scenario
 * talks to the driver through cuv's table, proves orders with data (never with timing), checks
 * results against a host computation on fresh random data, and asserts on the test thread only. */
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "driver-util.h"

/* Long enough that a later operation overtaking the kernel would certainly be seen doing so. */
#define SLOW_KERNEL_NS 100000000ull /* 100 ms */

static CUdeviceptr dev_alloc(size_t bytes) {
  CUdeviceptr d = 0;
  CU_OK(cuv__drv.cuMemAlloc(&d, bytes));
  return d;
}

static unsigned random_count(unsigned lo, unsigned span) {
  return lo + cuvt_random_u32() % span;
}

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* Exact equality: each test kernel applies one IEEE fp32 operation per element, which the host
 * rounds identically, so any difference is an ordering or copying error. */
static void assert_floats_equal(const float *got, const float *want, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (got[i] != want[i]) {
      print_error("element %zu: got %.9g, want %.9g\n", i, (double)got[i], (double)want[i]);
      fail();
    }
  }
}

/* ---- kernels ------------------------------------------------------------------------------- */

/* The non-commuting steps of the ordering chains: x *= 2, x *= -0.5 (exact), x += 1. */
enum step { STEP_DOUBLE, STEP_NEG_HALF, STEP_ADD_ONE };

static void launch_step(CUstream s, enum step step, unsigned n, CUdeviceptr x) {
  float factor = step == STEP_DOUBLE ? 2.0f : -0.5f;
  if (step == STEP_ADD_ONE) {
    void *params[] = {&n, &x};
    cuvt_launch(s, "add_one", n, params);
  } else {
    void *params[] = {&n, &factor, &x};
    cuvt_launch(s, "scale", n, params);
  }
}

static void host_step(enum step step, float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    x[i] = step == STEP_ADD_ONE ? x[i] + 1.0f : x[i] * (step == STEP_DOUBLE ? 2.0f : -0.5f);
}

/* Additions alternate with random scalings, so no two neighbours commute. */
static enum step random_step(size_t k) {
  return k % 2 ? STEP_ADD_ONE : (enum step)(cuvt_random_u32() % 2);
}

/* Busy for ns on the GPU, then writes value to *flag (flag 0: writes nothing). */
static void launch_sleep_then_write(CUstream s, unsigned long long ns, unsigned value,
                                    CUdeviceptr flag) {
  void *params[] = {&ns, &value, &flag};
  cuvt_launch(s, "sleep_then_write", 1, params);
}

/* ---- stream FIFO order --------------------------------------------------------------------- */

/* A chain of kernels with a device-to-device copy in the middle, on one stream: the final values
 * match only if the kernels ran in order, the snapshot only if the copy ran exactly between. */
static void test_fifo_kernel_chain(void **state) {
  enum { STEPS = 12 };
  unsigned n = random_count(1000, 4000);
  size_t bytes = n * sizeof(float);
  float *x = cuvt_pinned(bytes), *out = cuvt_pinned(bytes), *snap = cuvt_pinned(bytes);
  float *want = malloc(bytes), *snap_want = malloc(bytes);
  assert_non_null(want);
  assert_non_null(snap_want);
  cuvt_random_floats(x, n);
  memcpy(want, x, bytes);
  CUdeviceptr dx = dev_alloc(bytes), dsnap = dev_alloc(bytes);
  CUstream s = cuvt_stream_new();

  CU_OK(cuv__drv.cuMemcpyHtoDAsync(dx, x, bytes, s));
  for (size_t k = 0; k < STEPS; k++) {
    if (k == STEPS / 2) {
      CU_OK(cuv__drv.cuMemcpyDtoDAsync(dsnap, dx, bytes, s));
      memcpy(snap_want, want, bytes);
    }
    enum step step = random_step(k);
    launch_step(s, step, n, dx);
    host_step(step, want, n);
  }
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(out, dx, bytes, s));
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(snap, dsnap, bytes, s));
  CU_OK(cuv__drv.cuStreamSynchronize(s));

  assert_floats_equal(out, want, n);
  assert_floats_equal(snap, snap_want, n);
  free(want);
  free(snap_want);
  cuv__drv.cuMemFreeHost(x);
  cuv__drv.cuMemFreeHost(out);
  cuv__drv.cuMemFreeHost(snap);
  cuv__drv.cuMemFree(dx);
  cuv__drv.cuMemFree(dsnap);
  cuv__drv.cuStreamDestroy(s);
}

/* A slow kernel writes a value; the copy behind it must read that value (not the zero before),
 * and a memset behind the copy must not leak into what the copy read. */
static void test_fifo_slow_kernel_then_copy(void **state) {
  uint32_t v = cuvt_random_nonzero(), later = ~v;
  CUdeviceptr flag = dev_alloc(sizeof(uint32_t));
  uint32_t *seen = cuvt_pinned(2 * sizeof(uint32_t));
  CUstream s = cuvt_stream_new();

  CU_OK(cuv__drv.cuMemsetD32Async(flag, 0, 1, s));
  launch_sleep_then_write(s, SLOW_KERNEL_NS, v, flag);
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(&seen[0], flag, sizeof(uint32_t), s));
  CU_OK(cuv__drv.cuMemsetD32Async(flag, later, 1, s));
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(&seen[1], flag, sizeof(uint32_t), s));
  CU_OK(cuv__drv.cuStreamSynchronize(s));

  assert_int_equal(seen[0], v);
  assert_int_equal(seen[1], later);
  cuv__drv.cuMemFreeHost(seen);
  cuv__drv.cuMemFree(flag);
  cuv__drv.cuStreamDestroy(s);
}

/* ---- events across streams ----------------------------------------------------------------- */

/* Stream b waits on an event recorded on a behind a slow kernel: b's copy sees a's write even
 * though only b is synchronized. */
static void test_event_orders_streams(void **state) {
  uint32_t v = cuvt_random_nonzero();
  CUdeviceptr flag = dev_alloc(sizeof(uint32_t));
  uint32_t *seen = cuvt_pinned(sizeof(uint32_t));
  CUstream a = cuvt_stream_new(), b = cuvt_stream_new();
  CUevent ev;
  CU_OK(cuv__drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuv__drv.cuMemsetD32Async(flag, 0, 1, a));
  CU_OK(cuv__drv.cuStreamSynchronize(a));

  launch_sleep_then_write(a, SLOW_KERNEL_NS, v, flag);
  CU_OK(cuv__drv.cuEventRecord(ev, a));
  CU_OK(cuv__drv.cuStreamWaitEvent(b, ev, 0));
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(seen, flag, sizeof(uint32_t), b));
  CU_OK(cuv__drv.cuStreamSynchronize(b));

  assert_int_equal(*seen, v);
  /* b got past the wait, so the event has completed. */
  CU_OK(cuv__drv.cuEventQuery(ev));
  CU_OK(cuv__drv.cuStreamSynchronize(a));
  cuv__drv.cuEventDestroy(ev);
  cuv__drv.cuMemFreeHost(seen);
  cuv__drv.cuMemFree(flag);
  cuv__drv.cuStreamDestroy(a);
  cuv__drv.cuStreamDestroy(b);
}

/* ---- streams run concurrently -------------------------------------------------------------- */

/* What a wait_flag kernel (test_kernels.cu) writes to its result word. */
enum { FLAG_SEEN = 1, FLAG_TIMED_OUT = 2 };
/* How long a waiter spins before it reports FLAG_TIMED_OUT: a bound that keeps a serializing
 * driver from hanging the test, never an assertion about time. */
#define FLAG_TIMEOUT_NS 5000000000ull /* 5 s */

static void launch_wait_flag(CUstream s, uint32_t value, CUdeviceptr flag, CUdeviceptr result) {
  unsigned long long timeout = FLAG_TIMEOUT_NS;
  unsigned v = value;
  void *params[] = {&timeout, &v, &flag, &result};
  cuvt_launch(s, "wait_flag", 1, params);
}

static void launch_set_flag(CUstream s, uint32_t value, CUdeviceptr flag) {
  unsigned v = value;
  void *params[] = {&v, &flag};
  cuvt_launch(s, "set_flag", 1, params);
}

/* Four streams, a chain of waits across them: stream 0 waits for flag 0; stream k (1, 2) waits
 * for flag k, then sets flag k-1; stream 3 sets flag 2. Launched in that order, so every waiter is
 * queued before the kernel that releases it: waiter 0 sees its flag only while waiters 0, 1 and 2
 * all run at once with stream 3's setter. A driver that runs one stream's work at a time (or two,
 * or three) makes a waiter time out; each waiter's result says which. Behind each stream's
 * kernels, a value it copies shows the stream also went on in order. */
static void test_streams_run_concurrently(void **state) {
  enum { STREAMS = 4, WAITERS = STREAMS - 1 };
  CUdeviceptr flags = dev_alloc(WAITERS * sizeof(uint32_t));
  CUdeviceptr results = dev_alloc(WAITERS * sizeof(uint32_t));
  uint32_t *got = cuvt_pinned(WAITERS * sizeof(uint32_t));
  uint32_t *flags_after = cuvt_pinned(WAITERS * sizeof(uint32_t));
  uint32_t values[WAITERS];
  CUstream s[STREAMS];
  for (unsigned k = 0; k < STREAMS; k++)
    s[k] = cuvt_stream_new();
  for (unsigned k = 0; k < WAITERS; k++)
    values[k] = cuvt_random_nonzero();
  CU_OK(cuv__drv.cuMemsetD32Async(flags, 0, WAITERS, s[0]));
  CU_OK(cuv__drv.cuMemsetD32Async(results, 0, WAITERS, s[0]));
  CU_OK(cuv__drv.cuStreamSynchronize(s[0]));

  for (unsigned k = 0; k < STREAMS; k++) {
    if (k < WAITERS)
      launch_wait_flag(s[k], values[k], flags + 4 * k, results + 4 * k);
    if (k > 0)
      launch_set_flag(s[k], values[k - 1], flags + 4 * (k - 1));
  }
  for (unsigned k = 0; k < STREAMS; k++)
    CU_OK(cuv__drv.cuStreamSynchronize(s[k]));
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(got, results, WAITERS * sizeof(uint32_t), s[0]));
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(flags_after, flags, WAITERS * sizeof(uint32_t), s[0]));
  CU_OK(cuv__drv.cuStreamSynchronize(s[0]));

  for (unsigned k = 0; k < WAITERS; k++) {
    if (got[k] != FLAG_SEEN)
      print_error("waiter %u: %s\n", k, got[k] == FLAG_TIMED_OUT ? "timed out" : "did not run");
    assert_int_equal(got[k], FLAG_SEEN);
    assert_int_equal(flags_after[k], values[k]);
  }
  cuv__drv.cuMemFreeHost(got);
  cuv__drv.cuMemFreeHost(flags_after);
  cuv__drv.cuMemFree(flags);
  cuv__drv.cuMemFree(results);
  for (unsigned k = 0; k < STREAMS; k++)
    cuv__drv.cuStreamDestroy(s[k]);
}

/* ---- host functions ------------------------------------------------------------------------ */

enum { HOSTFN_PER_STREAM = 64 };

/* Written by the driver's callback thread, read by the test after every call was counted. */
struct hostfn_log {
  atomic_int inside;   /* callbacks running now */
  atomic_int overlaps; /* times a callback started while another was running */
  atomic_uint entered;
  atomic_uint calls; /* released last in each callback: reading it publishes the rest */
  atomic_uint next[2];
  unsigned order[2][HOSTFN_PER_STREAM];
  pthread_t thread[2 * HOSTFN_PER_STREAM];
};

struct hostfn_call {
  struct hostfn_log *log;
  unsigned stream, index;
};

static void spin_us(unsigned us) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do
    clock_gettime(CLOCK_MONOTONIC, &now);
  while ((now.tv_sec - start.tv_sec) * 1000000L + (now.tv_nsec - start.tv_nsec) / 1000 < us);
}

/* Records, never asserts (this is the driver's thread). The spin widens the window in which a
 * second, concurrent callback would be caught. */
static void CUDA_CB record_host_call(void *arg) {
  struct hostfn_call *call = arg;
  struct hostfn_log *log = call->log;
  if (atomic_fetch_add(&log->inside, 1) != 0)
    atomic_fetch_add(&log->overlaps, 1);
  unsigned pos = atomic_fetch_add(&log->next[call->stream], 1);
  if (pos < HOSTFN_PER_STREAM)
    log->order[call->stream][pos] = call->index;
  unsigned slot = atomic_fetch_add(&log->entered, 1);
  if (slot < 2 * HOSTFN_PER_STREAM)
    log->thread[slot] = pthread_self();
  spin_us(50);
  atomic_fetch_sub(&log->inside, 1);
  atomic_fetch_add_explicit(&log->calls, 1, memory_order_release);
}

/* Host functions of two streams, all made ready at once by one event: each stream's run in
 * order, every one exactly once, all on one driver thread that is not ours, never two at once. */
static void test_host_functions(void **state) {
  static struct hostfn_log log;
  static struct hostfn_call calls[2][HOSTFN_PER_STREAM];
  memset(&log, 0, sizeof log);
  CUstream gate = cuvt_stream_new(), s[2] = {cuvt_stream_new(), cuvt_stream_new()};
  CUevent ev;
  CU_OK(cuv__drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  launch_sleep_then_write(gate, SLOW_KERNEL_NS / 2, 0, 0);
  CU_OK(cuv__drv.cuEventRecord(ev, gate));
  for (unsigned k = 0; k < 2; k++)
    CU_OK(cuv__drv.cuStreamWaitEvent(s[k], ev, 0));
  for (unsigned i = 0; i < HOSTFN_PER_STREAM; i++) {
    for (unsigned k = 0; k < 2; k++) {
      calls[k][i] = (struct hostfn_call){&log, k, i};
      CU_OK(cuv__drv.cuLaunchHostFunc(s[k], record_host_call, &calls[k][i]));
    }
  }
  for (unsigned k = 0; k < 2; k++)
    CU_OK(cuv__drv.cuStreamSynchronize(s[k]));

  assert_int_equal(atomic_load_explicit(&log.calls, memory_order_acquire), 2 * HOSTFN_PER_STREAM);
  assert_int_equal(atomic_load(&log.overlaps), 0);
  for (unsigned k = 0; k < 2; k++)
    for (unsigned i = 0; i < HOSTFN_PER_STREAM; i++)
      assert_int_equal(log.order[k][i], i);
  for (unsigned i = 0; i < 2 * HOSTFN_PER_STREAM; i++)
    assert_true(pthread_equal(log.thread[i], log.thread[0]));
  assert_false(pthread_equal(log.thread[0], pthread_self()));
  cuv__drv.cuEventDestroy(ev);
  cuv__drv.cuStreamDestroy(gate);
  cuv__drv.cuStreamDestroy(s[0]);
  cuv__drv.cuStreamDestroy(s[1]);
}

/* ---- stream memory operations on pinned, device-mapped memory ------------------------------ */

/* Polls a 64-bit word until it equals want or limit_ms passed; the last value read. */
static uint64_t poll64(const uint64_t *word, uint64_t want, unsigned limit_ms) {
  uint64_t deadline = cuvt_now_ms() + limit_ms, v;
  while ((v = __atomic_load_n(word, __ATOMIC_ACQUIRE)) != want && cuvt_now_ms() < deadline)
    cuvt_sleep_ms(1);
  return v;
}

/* cuStreamWriteValue64 behind a slow kernel writes all 8 bytes at once, after the kernel: a value
 * with both halves random and non-zero is never seen torn, and the kernel's write is visible by
 * then. A word 4 bytes off 8-byte alignment is refused. */
static void test_write_value64_after_kernel(void **state) {
  CUdeviceptr d;
  uint32_t *w = cuvt_mapped_words(4, &d); /* cuMemHostAlloc is page aligned: w + 2 is 8-aligned */
  uint32_t kernel_value = cuvt_random_nonzero();
  uint64_t value = (uint64_t)cuvt_random_nonzero() << 32 | cuvt_random_nonzero();
  CUstream s = cuvt_stream_new();

  launch_sleep_then_write(s, SLOW_KERNEL_NS, kernel_value, d);
  CU_OK(cuv__drv.cuStreamWriteValue64(s, d + 8, value, 0));
  uint64_t *word = (uint64_t *)(void *)(w + 2);
  uint64_t seen;
  while ((seen = __atomic_load_n(word, __ATOMIC_ACQUIRE)) == 0) /* until something lands */
    ;
  assert_true(seen == value); /* never half of it */
  assert_true(poll64(word, value, 30000) == value);
  assert_int_equal(cuvt_load(&w[0]), kernel_value);
  CU_OK(cuv__drv.cuStreamSynchronize(s));
  assert_int_equal(cuv__drv.cuStreamWriteValue64(s, d + 4, value, 0), CUDA_ERROR_INVALID_VALUE);
  CU_OK(cuv__drv.cuStreamSynchronize(s));

  cuv__drv.cuMemFreeHost(w);
  cuv__drv.cuStreamDestroy(s);
}

/* A write-value behind a slow kernel: by the time the host sees the written value with a plain
 * load, the kernel's own write is visible too (the write did not overtake the kernel, and its
 * default memory barrier published what came before). */
static void test_write_value_after_kernel(void **state) {
  CUdeviceptr d;
  uint32_t *w = cuvt_mapped_words(2, &d);
  uint32_t kernel_value = cuvt_random_nonzero(), flag_value = cuvt_random_nonzero();
  CUstream s = cuvt_stream_new();

  launch_sleep_then_write(s, SLOW_KERNEL_NS, kernel_value, d);
  CU_OK(cuv__drv.cuStreamWriteValue32(s, d + 4, flag_value, 0));
  assert_int_equal(cuvt_poll(&w[1], flag_value, 30000), flag_value);
  assert_int_equal(cuvt_load(&w[0]), kernel_value);
  CU_OK(cuv__drv.cuStreamSynchronize(s));

  cuv__drv.cuMemFreeHost(w);
  cuv__drv.cuStreamDestroy(s);
}

/* cuStreamWaitValue32 (EQ) holds the stream until the host writes the awaited value: a write-value
 * behind it does not land while the gate holds a different value, and does once it opens. */
static void test_wait_value_blocks_stream(void **state) {
  CUdeviceptr d;
  uint32_t *w = cuvt_mapped_words(2, &d);
  uint32_t open = cuvt_random_nonzero(), flag_value = cuvt_random_nonzero();
  CUstream s = cuvt_stream_new();

  CU_OK(cuv__drv.cuStreamWaitValue32(s, d, open, CU_STREAM_WAIT_VALUE_EQ));
  CU_OK(cuv__drv.cuStreamWriteValue32(s, d + 4, flag_value, 0));
  /* Bounded waits that prove something did NOT happen: an open stream lands the write within
   * microseconds, so 250 ms (over 1000 times that) of nothing means the stream is held. What is
   * seen is recorded and asserted only after the gate opened: a failure must not leave a held
   * stream behind (it would block the later tests' cuMemFree). */
  cuvt_sleep_ms(250);
  uint32_t while_closed = cuvt_load(&w[1]);
  CUresult query_while_closed = cuv__drv.cuStreamQuery(s);
  cuvt_store(&w[0], open + 1); /* not the awaited value: still held */
  cuvt_sleep_ms(250);
  uint32_t while_wrong = cuvt_load(&w[1]);
  cuvt_store(&w[0], open);
  CU_OK(cuv__drv.cuStreamSynchronize(s));

  assert_int_equal(while_closed, 0);
  assert_int_equal(query_while_closed, CUDA_ERROR_NOT_READY);
  assert_int_equal(while_wrong, 0);
  assert_int_equal(cuvt_load(&w[1]), flag_value);
  cuv__drv.cuMemFreeHost(w);
  cuv__drv.cuStreamDestroy(s);
}

/* ---- copies, memsets and a kernel on random data ------------------------------------------- */

struct copy_case {
  unsigned n;
  size_t y_split;            /* y is uploaded in two ranges split here (elements) */
  size_t z_set_at, z_set_len; /* bytes of z set with memset8 */
  size_t z_dst, x_src, m;    /* z[z_dst..+m) = x[x_src..+m) (elements) */
  size_t x_part, x_part_len; /* x[x_part..+len) downloaded on its own */
  float a;
  uint8_t byte;
};

static struct copy_case random_copy_case(void) {
  struct copy_case c;
  c.n = random_count(4096, 4096);
  c.y_split = 1 + cuvt_random_u32() % (c.n - 1);
  c.z_set_at = cuvt_random_u32() % (c.n * 4 / 2);
  c.z_set_len = 1 + cuvt_random_u32() % (c.n * 4 / 2);
  c.m = 1 + cuvt_random_u32() % (c.n / 2);
  c.z_dst = cuvt_random_u32() % (c.n - c.m);
  c.x_src = cuvt_random_u32() % (c.n - c.m);
  c.x_part_len = 1 + cuvt_random_u32() % (c.n / 2);
  c.x_part = cuvt_random_u32() % (c.n - c.x_part_len);
  cuvt_random_floats(&c.a, 1);
  c.byte = (uint8_t)(1 + cuvt_random_u32() % 255);
  return c;
}

/* What the device computes, on the host. */
static void copy_case_reference(const struct copy_case *c, const float *x, const float *y,
                                float *want_y, float *want_z) {
  for (size_t i = 0; i < c->n; i++) {
    want_y[i] = c->a * x[i] + y[i];
    want_z[i] = 0.25f;
  }
  memset((uint8_t *)want_z + c->z_set_at, c->byte, c->z_set_len);
  memcpy(want_z + c->z_dst, x + c->x_src, c->m * sizeof(float));
}

static void test_copies_memsets_saxpy(void **state) {
  struct copy_case c = random_copy_case();
  size_t bytes = c.n * sizeof(float);
  float *x = cuvt_pinned(bytes), *y = cuvt_pinned(bytes), *got_y = cuvt_pinned(bytes),
        *got_z = cuvt_pinned(bytes), *got_x_part = cuvt_pinned(bytes);
  float *want_y = malloc(bytes), *want_z = malloc(bytes);
  assert_non_null(want_y);
  assert_non_null(want_z);
  cuvt_random_floats(x, c.n);
  cuvt_random_floats(y, c.n);
  CUdeviceptr dx = dev_alloc(bytes), dy = dev_alloc(bytes), dz = dev_alloc(bytes);
  CUstream s = cuvt_stream_new();

  CU_OK(cuv__drv.cuMemcpyHtoDAsync(dx, x, bytes, s));
  CU_OK(cuv__drv.cuMemcpyHtoDAsync(dy, y, c.y_split * 4, s));
  CU_OK(cuv__drv.cuMemcpyHtoDAsync(dy + c.y_split * 4, y + c.y_split, bytes - c.y_split * 4, s));
  CU_OK(cuv__drv.cuMemsetD32Async(dz, float_bits(0.25f), c.n, s));
  CU_OK(cuv__drv.cuMemsetD8Async(dz + c.z_set_at, c.byte, c.z_set_len, s));
  CU_OK(cuv__drv.cuMemcpyDtoDAsync(dz + c.z_dst * 4, dx + c.x_src * 4, c.m * 4, s));
  void *params[] = {&c.n, &c.a, &dx, &dy};
  cuvt_launch(s, "saxpy", c.n, params);
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(got_y, dy, bytes, s));
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(got_z, dz, bytes, s));
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(got_x_part, dx + c.x_part * 4, c.x_part_len * 4, s));
  CU_OK(cuv__drv.cuStreamSynchronize(s));

  copy_case_reference(&c, x, y, want_y, want_z);
  for (size_t i = 0; i < c.n; i++)
    assert_float_close(got_y[i], want_y[i]); /* the GPU may fuse a*x+y: not bit-exact */
  assert_memory_equal(got_z, want_z, bytes);
  assert_memory_equal(got_x_part, x + c.x_part, c.x_part_len * 4);
  free(want_y);
  free(want_z);
  void *host[] = {x, y, got_y, got_z, got_x_part};
  for (size_t i = 0; i < 5; i++)
    cuv__drv.cuMemFreeHost(host[i]);
  cuv__drv.cuMemFree(dx);
  cuv__drv.cuMemFree(dy);
  cuv__drv.cuMemFree(dz);
  cuv__drv.cuStreamDestroy(s);
}

/* ---- stream-ordered allocation ------------------------------------------------------------- */

/* Allocated on a, used on b behind an event, freed on b; a second allocation on b reuses what
 * the pool got back. Each result is checked, so a free ordered too early would show as data. */
static void test_stream_ordered_alloc(void **state) {
  int pools = 0;
  assert_cuv_ok(cuv_device_attribute(cuvt_device(), CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                     &pools));
  if (!pools)
    skip();
  unsigned n = random_count(1000, 4000);
  size_t bytes = n * sizeof(float);
  float *x = cuvt_pinned(bytes), *got = cuvt_pinned(bytes), *want = malloc(bytes);
  uint32_t *got2 = cuvt_pinned(bytes);
  assert_non_null(want);
  cuvt_random_floats(x, n);
  uint32_t fill = cuvt_random_u32();
  CUstream a = cuvt_stream_new(), b = cuvt_stream_new();
  CUevent ev;
  CU_OK(cuv__drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));

  CUdeviceptr d = 0, d2 = 0;
  CU_OK(cuv__drv.cuMemAllocAsync(&d, bytes, a));
  assert_true(d != 0);
  CU_OK(cuv__drv.cuMemcpyHtoDAsync(d, x, bytes, a));
  launch_step(a, STEP_ADD_ONE, n, d);
  CU_OK(cuv__drv.cuEventRecord(ev, a));
  CU_OK(cuv__drv.cuStreamWaitEvent(b, ev, 0));
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(got, d, bytes, b));
  CU_OK(cuv__drv.cuMemFreeAsync(d, b));
  CU_OK(cuv__drv.cuMemAllocAsync(&d2, bytes, b));
  CU_OK(cuv__drv.cuMemsetD32Async(d2, fill, n, b));
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(got2, d2, bytes, b));
  CU_OK(cuv__drv.cuMemFreeAsync(d2, b));
  CU_OK(cuv__drv.cuStreamSynchronize(b));
  CU_OK(cuv__drv.cuStreamSynchronize(a));

  memcpy(want, x, bytes);
  host_step(STEP_ADD_ONE, want, n);
  assert_floats_equal(got, want, n);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(got2[i], fill);
  free(want);
  cuv__drv.cuMemFreeHost(x);
  cuv__drv.cuMemFreeHost(got);
  cuv__drv.cuMemFreeHost(got2);
  cuv__drv.cuEventDestroy(ev);
  cuv__drv.cuStreamDestroy(a);
  cuv__drv.cuStreamDestroy(b);
}

/* ---- graphs -------------------------------------------------------------------------------- */

/* A captured chain runs nothing while captured, and each launch of its instance runs the whole
 * chain once, in order, with the parameters captured at launch time. */
static void test_graph_capture_replay(void **state) {
  enum { STEPS = 5, LAUNCHES = 3 };
  unsigned n = random_count(1000, 4000);
  size_t bytes = n * sizeof(float);
  float *x = cuvt_pinned(bytes), *got = cuvt_pinned(bytes), *want = malloc(bytes);
  assert_non_null(want);
  cuvt_random_floats(x, n);
  CUdeviceptr dx = dev_alloc(bytes);
  CUstream s = cuvt_stream_new();
  CU_OK(cuv__drv.cuMemcpyHtoDAsync(dx, x, bytes, s));
  CU_OK(cuv__drv.cuStreamSynchronize(s));

  enum step steps[STEPS];
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuvt_fn("scale"); /* look the kernels up now: no module calls while capturing */
  cuvt_fn("add_one");
  CU_OK(cuv__drv.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CU_OK(cuv__drv.cuStreamIsCapturing(s, &status));
  assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  for (size_t k = 0; k < STEPS; k++)
    launch_step(s, steps[k] = random_step(k), n, dx);
  CUgraph graph = NULL;
  CU_OK(cuv__drv.cuStreamEndCapture(s, &graph));
  assert_non_null(graph);
  CU_OK(cuv__drv.cuStreamIsCapturing(s, &status));
  assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_NONE);

  /* Capturing ran nothing. */
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(got, dx, bytes, s));
  CU_OK(cuv__drv.cuStreamSynchronize(s));
  assert_memory_equal(got, x, bytes);

  CUgraphExec exec = NULL;
  CU_OK(cuv__drv.cuGraphInstantiate(&exec, graph, 0));
  CU_OK(cuv__drv.cuGraphUpload(exec, s));
  for (size_t r = 0; r < LAUNCHES; r++)
    CU_OK(cuv__drv.cuGraphLaunch(exec, s));
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(got, dx, bytes, s));
  CU_OK(cuv__drv.cuStreamSynchronize(s));

  memcpy(want, x, bytes);
  for (size_t r = 0; r < LAUNCHES; r++)
    for (size_t k = 0; k < STEPS; k++)
      host_step(steps[k], want, n);
  assert_floats_equal(got, want, n);
  CU_OK(cuv__drv.cuGraphExecDestroy(exec));
  CU_OK(cuv__drv.cuGraphDestroy(graph));
  free(want);
  cuv__drv.cuMemFreeHost(x);
  cuv__drv.cuMemFreeHost(got);
  cuv__drv.cuMemFree(dx);
  cuv__drv.cuStreamDestroy(s);
}

/* ---- failure injection (simulator only) ---------------------------------------------------- */

/* The nth call fails without acting; the calls around it act. Nothing else in this process calls
 * cuStreamWriteValue32, so the call numbers are ours. */
static void test_failure_injection(void **state) {
  if (!cuvt_is_sim())
    skip(); /* a real driver cannot be told to fail */
  enum { WRITES = 4, FAILING = 2 };
  CUdeviceptr d;
  uint32_t *w = cuvt_mapped_words(WRITES, &d);
  uint32_t values[WRITES];
  CUresult results[WRITES];
  CUstream s = cuvt_stream_new();
  unsigned long before = cuv_sim_calls("cuStreamWriteValue32");

  cuv_sim_fail("cuStreamWriteValue32", FAILING, CUDA_ERROR_NOT_SUPPORTED);
  for (size_t i = 0; i < WRITES; i++) {
    values[i] = cuvt_random_nonzero();
    results[i] = cuv__drv.cuStreamWriteValue32(s, d + 4 * i, values[i], 0);
  }
  cuv_sim_fail_clear();
  CU_OK(cuv__drv.cuStreamSynchronize(s));

  assert_int_equal(cuv_sim_calls("cuStreamWriteValue32") - before, WRITES);
  for (size_t i = 0; i < WRITES; i++) {
    int failing = i + 1 == FAILING;
    assert_int_equal(results[i], failing ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS);
    assert_int_equal(cuvt_load(&w[i]), failing ? 0 : values[i]);
  }
  cuv__drv.cuMemFreeHost(w);
  cuv__drv.cuStreamDestroy(s);
}

/* A delayed flag write (simulator only): the stream and an event behind the write report it
 * done while the word still holds its old value; the value lands later, and a second write to
 * the same word queued before the first landed is counted as a stale landing. */
static void test_sim_write_delay(void **state) {
  if (!cuvt_is_sim())
    skip(); /* the GPU's writes cannot be told to be late */
  CUdeviceptr d;
  uint32_t *w = cuvt_mapped_words(1, &d);
  uint32_t first = cuvt_random_nonzero(), second = first + 1;
  CUstream s = cuvt_stream_new(), t = cuvt_stream_new();
  CUevent ev;
  CU_OK(cuv__drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  unsigned long stale_before = cuv_sim_stale_writes();
  cuv_sim_set_write_delay_us(200000); /* 200 ms: far beyond the checks made meanwhile */

  CU_OK(cuv__drv.cuStreamWriteValue32(s, d, first, 0));
  CU_OK(cuv__drv.cuEventRecord(ev, s));
  CU_OK(cuv__drv.cuStreamSynchronize(s));
  CUresult query = cuv__drv.cuStreamQuery(s), event = cuv__drv.cuEventQuery(ev);
  uint32_t before_landing = cuvt_load(w);
  /* Queued behind a wait on a word nobody sets yet: pending while the first write lands. */
  CUdeviceptr gate;
  uint32_t *g = cuvt_mapped_words(1, &gate);
  CU_OK(cuv__drv.cuStreamWaitValue32(t, gate, 1, CU_STREAM_WAIT_VALUE_EQ));
  CU_OK(cuv__drv.cuStreamWriteValue32(t, d, second, 0));
  uint32_t landed = cuvt_poll(w, first, 10000);
  cuv_sim_set_write_delay_us(0);
  cuvt_store(g, 1);
  CU_OK(cuv__drv.cuStreamSynchronize(t));

  assert_int_equal(query, CUDA_SUCCESS);
  assert_int_equal(event, CUDA_SUCCESS);
  assert_int_equal(before_landing, 0);
  assert_int_equal(landed, first);
  assert_int_equal(cuvt_load(w), second);
  assert_int_equal(cuv_sim_stale_writes() - stale_before, 1);
  cuv__drv.cuEventDestroy(ev);
  cuv__drv.cuMemFreeHost(w);
  cuv__drv.cuMemFreeHost(g);
  cuv__drv.cuStreamDestroy(s);
  cuv__drv.cuStreamDestroy(t);
}

/* A module unloaded while a launch of its function is queued behind a slow kernel (simulator
 * only: a GPU may lose the code): the unload succeeds and is counted, the function handle dies,
 * and the launch still runs and writes its value. */
static void test_sim_unload_with_pending_launch(void **state) {
  if (!cuvt_is_sim())
    skip();
  FILE *f = fopen(cuvt_ptx_path(), "rb");
  assert_non_null(f);
  char image[65536];
  size_t n = fread(image, 1, sizeof image - 1, f);
  fclose(f);
  image[n] = '\0';
  CUmodule mod;
  CUfunction fn;
  CU_OK(cuv__drv.cuModuleLoadData(&mod, image));
  CU_OK(cuv__drv.cuModuleGetFunction(&fn, mod, "fill_u32"));
  uint32_t value = cuvt_random_nonzero();
  CUdeviceptr out = dev_alloc(sizeof(uint32_t));
  uint32_t *got = cuvt_pinned(sizeof(uint32_t));
  CUstream s = cuvt_stream_new();
  unsigned long before = cuv_sim_unloads_with_pending_launches();

  launch_sleep_then_write(s, SLOW_KERNEL_NS, 0, 0);
  unsigned one = 1;
  void *params[] = {&one, &value, &out};
  CU_OK(cuv__drv.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
  CU_OK(cuv__drv.cuModuleUnload(mod));
  unsigned long counted = cuv_sim_unloads_with_pending_launches() - before;
  CUresult stale_handle = cuv__drv.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(got, out, sizeof(uint32_t), s));
  CU_OK(cuv__drv.cuStreamSynchronize(s));

  assert_int_equal(counted, 1);
  assert_int_equal(stale_handle, CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(*got, value);
  cuv__drv.cuMemFreeHost(got);
  cuv__drv.cuMemFree(out);
  cuv__drv.cuStreamDestroy(s);
}

/* ---- kernel parameter layout --------------------------------------------------------------- */

/* Offsets and sizes as the CUDA ABI lays out the test kernels' parameters (test_kernels.cu). */
static const struct {
  const char *name;
  size_t n;
  size_t offset[4], size[4];
} param_layouts[] = {
    {"empty_kernel", 0, {0}, {0}},
    {"saxpy", 4, {0, 4, 8, 16}, {4, 4, 8, 8}},
    {"fill_u32", 3, {0, 4, 8}, {4, 4, 8}},
    {"add_one", 2, {0, 8}, {4, 8}},
    {"sleep_then_write", 3, {0, 8, 16}, {8, 4, 8}},
    {"fault_kernel", 1, {0}, {8}},
    {"wait_flag", 4, {0, 8, 16, 24}, {8, 4, 8, 8}},
    {"set_flag", 2, {0, 8}, {4, 8}},
};

static void test_param_info(void **state) {
  if (!cuv__drv.cuFuncGetParamInfo)
    skip(); /* drivers before CUDA 12.4 */
  for (size_t k = 0; k < sizeof param_layouts / sizeof param_layouts[0]; k++) {
    CUfunction fn = cuvt_fn(param_layouts[k].name);
    for (size_t i = 0; i < param_layouts[k].n; i++) {
      size_t offset = ~(size_t)0, size = 0;
      CU_OK(cuv__drv.cuFuncGetParamInfo(fn, i, &offset, &size));
      if (offset != param_layouts[k].offset[i] || size != param_layouts[k].size[i])
        print_error("%s param %zu: offset %zu size %zu\n", param_layouts[k].name, i, offset, size);
      assert_int_equal(offset, param_layouts[k].offset[i]);
      assert_int_equal(size, param_layouts[k].size[i]);
    }
    size_t offset, size;
    assert_int_equal(cuv__drv.cuFuncGetParamInfo(fn, param_layouts[k].n, &offset, &size),
                     CUDA_ERROR_INVALID_VALUE);
  }
}

/* ---- a sticky fault and the work queued before it (a process of its own) ----------------- */

/* Set in the child process that runs the fault case: a fault ends the context for the rest of the
 * process, so the parent's other cases must not share it. */
#define CHILD_ENV "CUVT_CONFORMANCE_CHILD"

/* How long stream b's kernel is busy (on a GPU the fault ends it early), and how long a kernel
 * in front of the faulting one is: set-up bounds, so that b's kernel has started when the fault
 * hits and a's queued work is enqueued before it (calls of microseconds). Never asserted on. */
#define FAULT_BUSY_NS 1000000000ull /* 1 s */
#define FAULT_AFTER_NS 200000000ull /* 200 ms */

static atomic_uint fault_host_calls[2]; /* by stream: 0 the faulting one, 1 the other */

static void CUDA_CB count_fault_host_call(void *arg) {
  atomic_fetch_add(&fault_host_calls[*(const unsigned *)arg], 1);
}

/* Stream b is busy with a kernel, then has a host function and a flag write queued, when a kernel
 * on stream a faults; behind the faulting kernel, a has a host function and a flag write too.
 * What the GPU does (driver 580): b's host function and write ran in some runs
 * (tests/errors/fault.c) and not in others; the write queued behind the faulting kernel on its own
 * stream never lands (cuv's reactor relies on that: tests/uv/uv-fault.c passes on the GPU), nor,
 * in the simulator, the host function there. The simulator runs b's queued work every time
 * (sim/stream.c). The waits are bounds that keep a broken driver from hanging the test; a's queued
 * work would have run before b's (it has nothing but the faulting kernel in front of it, and host
 * functions run in the order their streams reach them), so once b's has run, a's never will. */
static void test_fault_child(void **state) {
  static const unsigned stream_id[2] = {0, 1};
  enum { FLAG_A, FLAG_B, KERNEL_B, WORDS };
  CUdeviceptr d;
  uint32_t *w = cuvt_mapped_words(WORDS, &d);
  uint32_t value_a = cuvt_random_nonzero(), value_b = cuvt_random_nonzero();
  uint32_t value_kernel_b = cuvt_random_nonzero();
  CUstream a = cuvt_stream_new(), b = cuvt_stream_new();

  launch_sleep_then_write(b, FAULT_BUSY_NS, value_kernel_b, d + 4 * KERNEL_B);
  CU_OK(cuv__drv.cuLaunchHostFunc(b, count_fault_host_call, (void *)&stream_id[1]));
  CU_OK(cuv__drv.cuStreamWriteValue32(b, d + 4 * FLAG_B, value_b, 0));
  CUdeviceptr bad = 0x10; /* the GPU's first page is never mapped */
  void *params[] = {&bad};
  /* A kernel not yet started when the fault hits is dropped, and what is queued behind it with
   * it (sim/stream.c): b's has, after a's first kernel. */
  launch_sleep_then_write(a, FAULT_AFTER_NS, 0, 0);
  cuvt_launch(a, "fault_kernel", 1, params);
  CU_OK(cuv__drv.cuLaunchHostFunc(a, count_fault_host_call, (void *)&stream_id[0]));
  CU_OK(cuv__drv.cuStreamWriteValue32(a, d + 4 * FLAG_A, value_a, 0));
  CUresult fault = cuv__drv.cuStreamSynchronize(a);
  assert_true(fault == CUDA_ERROR_ILLEGAL_ADDRESS || fault == CUDA_ERROR_LAUNCH_FAILED);

  uint32_t landed_b = cuvt_poll(&w[FLAG_B], value_b, 3000);
  uint64_t deadline = cuvt_now_ms() + 3000;
  while (atomic_load(&fault_host_calls[1]) == 0 && cuvt_now_ms() < deadline)
    cuvt_sleep_ms(1);
  assert_int_equal(cuv__drv.cuStreamSynchronize(b), fault);
  bool kernel_b_done = cuvt_load(&w[KERNEL_B]) == value_kernel_b;
  fprintf(stderr, "# other stream: kernel %s, host function ran %u time(s), write %s\n",
          kernel_b_done ? "finished" : "ended early", atomic_load(&fault_host_calls[1]),
          landed_b == value_b ? "landed" : "did not land");
  fprintf(stderr, "# host function behind the faulting kernel ran %u time(s)\n",
          atomic_load(&fault_host_calls[0]));
  /* What cuv's reactor relies on, on both drivers: a write behind the faulting kernel never
   * lands, and one that lands on another stream proves the work in front of it finished. */
  assert_int_equal(cuvt_load(&w[FLAG_A]), 0);
  if (landed_b == value_b)
    assert_true(kernel_b_done);
  /* The GPU ran b's queued work in one run and not in the next (driver 580): whether it runs is
   * not defined there. The simulator takes the first answer, every time. */
  if (cuvt_is_sim()) {
    assert_int_equal(landed_b, value_b);
    assert_true(kernel_b_done);
    assert_int_equal(atomic_load(&fault_host_calls[1]), 1);
    assert_int_equal(atomic_load(&fault_host_calls[0]), 0);
  }
  /* Nothing is freed: after a fault the driver refuses to. */
}

/* A stream of device 0 waits for an event that device 1 records behind a faulting kernel: the
 * record is dropped with the rest of device 1's work, and cuStreamWaitEvent makes the stream wait
 * for all the work the event captured, which never completes. So the waiter stays blocked for
 * good, busy to cuStreamQuery, with nothing behind it run, while its context is healthy: another
 * stream of device 0 still runs, and device 1's event answers the fault. The simulator does this
 * (sim/event.c); cuv's reactor relies on it only in that it asks the streams of the other device
 * (lib/reactor.c), and tests/devices/cross-fault.c checks cuv on it. Nothing here synchronizes or
 * frees in device 0's context (both would wait for the blocked stream). The bound on the wait only
 * keeps a driver that releases the waiter from passing unnoticed; it asserts nothing on time. */
static void test_cross_fault_child(void **state) {
  int count = 0;
  CU_OK(cuv__drv.cuDeviceGetCount(&count));
  if (count < 2) {
    print_message("# one device: no other context to wait for\n");
    return;
  }
  enum { BEHIND_WAIT, OTHER_STREAM, WORDS };
  CUdeviceptr d;
  uint32_t *w = cuvt_mapped_words(WORDS, &d);
  uint32_t behind = cuvt_random_nonzero(), other = cuvt_random_nonzero();
  CUstream waiter = cuvt_stream_new(), healthy = cuvt_stream_new();
  cuv_device_t *d1;
  cuv_module_t *m1;
  cuv_kernel_t *sleep1, *fault1;
  assert_cuv_ok(cuv_device_open(&d1, 1));
  assert_cuv_ok(cuv_module_load_file(&m1, d1, cuvt_ptx_path()));
  assert_cuv_ok(cuv_kernel_get(&sleep1, m1, "sleep_then_write"));
  assert_cuv_ok(cuv_kernel_get(&fault1, m1, "fault_kernel"));
  CU_OK(cuv__drv.cuCtxSetCurrent(cuv_device_context(d1)));
  CUstream faulting = cuvt_stream_new();
  CUevent recorded;
  CU_OK(cuv__drv.cuEventCreate(&recorded, CU_EVENT_DISABLE_TIMING));
  /* The sleep keeps the fault behind the record and the wait (calls of microseconds). */
  unsigned long long ns = FAULT_AFTER_NS;
  unsigned no_value = 0;
  CUdeviceptr no_flag = 0, bad = 0x10;
  void *sleep_params[] = {&ns, &no_value, &no_flag}, *fault_params[] = {&bad};
  CU_OK(cuv__drv.cuLaunchKernel(sleep1->fn, 1, 1, 1, 1, 1, 1, 0, faulting, sleep_params, NULL));
  CU_OK(cuv__drv.cuLaunchKernel(fault1->fn, 1, 1, 1, 1, 1, 1, 0, faulting, fault_params, NULL));
  CU_OK(cuv__drv.cuEventRecord(recorded, faulting));
  CU_OK(cuv__drv.cuCtxSetCurrent(cuv_device_context(cuvt_device())));
  CU_OK(cuv__drv.cuStreamWaitEvent(waiter, recorded, 0));
  CU_OK(cuv__drv.cuStreamWriteValue32(waiter, d + 4 * BEHIND_WAIT, behind, 0));

  CU_OK(cuv__drv.cuCtxSetCurrent(cuv_device_context(d1)));
  CUresult fault = cuv__drv.cuStreamSynchronize(faulting);
  assert_true(fault == CUDA_ERROR_ILLEGAL_ADDRESS || fault == CUDA_ERROR_LAUNCH_FAILED);
  assert_int_equal(cuv__drv.cuEventQuery(recorded), fault);
  CU_OK(cuv__drv.cuCtxSetCurrent(cuv_device_context(cuvt_device())));
  launch_sleep_then_write(healthy, 1000000ull, other, d + 4 * OTHER_STREAM);
  CU_OK(cuv__drv.cuStreamSynchronize(healthy));
  assert_int_equal(cuvt_load(&w[OTHER_STREAM]), other);
  uint32_t landed = cuvt_poll(&w[BEHIND_WAIT], behind, 1000);
  CUresult waiting = cuv__drv.cuStreamQuery(waiter);
  fprintf(stderr, "# the wait on the dead context's event: %s, the write behind it %s\n",
          waiting == CUDA_ERROR_NOT_READY ? "still waiting" : "ended",
          landed == behind ? "landed" : "did not land");
  assert_int_equal(landed, 0);
  assert_int_equal(waiting, CUDA_ERROR_NOT_READY);
  /* Nothing of device 0's is freed or destroyed (see above); device 1's objects are let go, which
   * the dead context refuses to free. */
  cuv_kernel_unref(sleep1);
  cuv_kernel_unref(fault1);
  cuv_module_unref(m1);
  cuv_device_unref(d1);
}

/* Runs a child case (CHILD_ENV=which) in a new process of this program (exec'd, not forked: a
 * CUDA process may not use the driver in a fork), its TAP output sent to stderr, and asserts it
 * passed. */
static void run_child(const char *which) {
  extern char **environ;
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = calloc(n + 2, sizeof *env);
  assert_non_null(env);
  memcpy(env, environ, n * sizeof *env);
  char setting[64];
  snprintf(setting, sizeof setting, "%s=%s", CHILD_ENV, which);
  env[n] = setting;
  posix_spawn_file_actions_t actions;
  assert_int_equal(posix_spawn_file_actions_init(&actions), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&actions, 2, 1), 0);
  char name[64];
  snprintf(name, sizeof name, "conformance-%s", which);
  char *argv[] = {name, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, "/proc/self/exe", &actions, NULL, argv, env);
  posix_spawn_file_actions_destroy(&actions);
  free(env);
  assert_int_equal(rc, 0);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_fault_runs_queued_host_work(void **state) { run_child("fault"); }

static void test_cross_context_wait_on_fault(void **state) { run_child("cross-fault"); }

/* ---- two contexts -------------------------------------------------------------------------- */

/* A launch of a context's kernel on another context's stream fails: the simulator answers
 * CUDA_ERROR_INVALID_HANDLE, the GPU with whatever error its driver gives. */
static void expect_refused(CUresult r, CUresult sim_answer) {
  if (cuvt_is_sim())
    assert_int_equal(r, sim_answer);
  else
    assert_int_not_equal(r, CUDA_SUCCESS);
}

/* What cuv's work across devices relies on, between the primary contexts of devices 0 and 1
 * (the simulator runs two here): peer access's answers (a device is not its own peer; enabling
 * twice, for the context itself (unsupported), with flags, and disabling what is not enabled are
 * refused), an event recorded only on a stream of its own context but waited on by another's, a
 * peer copy in that other stream's order, and a kernel only on its own context's streams. */
static void test_two_contexts(void **state) {
  int count = 0;
  CU_OK(cuv__drv.cuDeviceGetCount(&count));
  if (count < 2) {
    print_message("# one device: nothing to check between two contexts\n");
    return;
  }
  cuv_device_t *d1;
  assert_cuv_ok(cuv_device_open(&d1, 1));
  CUcontext c0 = cuv_device_context(cuvt_device()), c1 = cuv_device_context(d1);
  int self = -1, peer = -1;
  CU_OK(cuv__drv.cuDeviceCanAccessPeer(&self, 0, 0));
  CU_OK(cuv__drv.cuDeviceCanAccessPeer(&peer, 0, 1));
  assert_int_equal(self, 0);
  print_message("# device 0 %s access device 1's memory\n", peer ? "can" : "cannot");
  CU_OK(cuv__drv.cuCtxSetCurrent(c0));
  assert_int_equal(cuv__drv.cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
  assert_int_equal(cuv__drv.cuCtxEnablePeerAccess(c1, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuv__drv.cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  if (peer) {
    CU_OK(cuv__drv.cuCtxEnablePeerAccess(c1, 0));
    assert_int_equal(cuv__drv.cuCtxEnablePeerAccess(c1, 0),
                     CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CU_OK(cuv__drv.cuCtxDisablePeerAccess(c1));
  }
  unsigned n = random_count(1000, 3000);
  float *host = cuvt_pinned(n * sizeof *host), *back = cuvt_pinned(n * sizeof *back);
  cuvt_random_floats(host, n);
  CUstream s0 = cuvt_stream_new();
  CUdeviceptr a0 = dev_alloc(n * sizeof *host), flag = dev_alloc(4);
  CUevent e0;
  CU_OK(cuv__drv.cuEventCreate(&e0, CU_EVENT_DISABLE_TIMING));
  /* Device 0: the data, behind a slow kernel; the event after both. */
  unsigned long long ns = SLOW_KERNEL_NS;
  unsigned one = 1;
  void *slow[] = {&ns, &one, &flag};
  CU_OK(cuv__drv.cuLaunchKernel(cuvt_fn("sleep_then_write"), 1, 1, 1, 1, 1, 1, 0, s0, slow, NULL));
  CU_OK(cuv__drv.cuMemcpyHtoDAsync(a0, host, n * sizeof *host, s0));
  CU_OK(cuv__drv.cuEventRecord(e0, s0));
  /* Device 1: waits for device 0's event, copies the data over, reads it back. */
  CU_OK(cuv__drv.cuCtxSetCurrent(c1));
  CUstream s1 = cuvt_stream_new();
  CUdeviceptr b1 = dev_alloc(n * sizeof *host);
  assert_int_equal(cuv__drv.cuEventRecord(e0, s1), CUDA_ERROR_INVALID_HANDLE);
  CU_OK(cuv__drv.cuStreamWaitEvent(s1, e0, 0));
  CU_OK(cuv__drv.cuMemcpyPeerAsync(b1, c1, a0, c0, n * sizeof *host, s1));
  CU_OK(cuv__drv.cuMemcpyDtoHAsync(back, b1, n * sizeof *back, s1));
  void *params[] = {&n, &b1};
  expect_refused(cuv__drv.cuLaunchKernel(cuvt_fn("add_one"), 1, 1, 1, 256, 1, 1, 0, s1, params,
                                         NULL),
                 CUDA_ERROR_INVALID_HANDLE);
  CU_OK(cuv__drv.cuStreamSynchronize(s1));
  assert_floats_equal(back, host, n);
  CU_OK(cuv__drv.cuStreamDestroy(s1));
  CU_OK(cuv__drv.cuMemFree(b1));
  CU_OK(cuv__drv.cuCtxSetCurrent(c0));
  CU_OK(cuv__drv.cuStreamSynchronize(s0));
  CU_OK(cuv__drv.cuEventDestroy(e0));
  CU_OK(cuv__drv.cuStreamDestroy(s0));
  CU_OK(cuv__drv.cuMemFree(a0));
  CU_OK(cuv__drv.cuMemFree(flag));
  CU_OK(cuv__drv.cuMemFreeHost(host));
  CU_OK(cuv__drv.cuMemFreeHost(back));
  cuv_device_unref(d1);
}

int main(void) {
  const char *child = getenv(CHILD_ENV);
  if (child && strcmp(child, "fault") == 0) {
    cuvt_drv_setup();
    const struct CMUnitTest fault_tests[] = {cmocka_unit_test(test_fault_child)};
    return cuvt_run(fault_tests);
  }
  if (child && strcmp(child, "cross-fault") == 0) {
    cuv_sim_set_device_count(2); /* the simulator only */
    cuvt_drv_setup();
    const struct CMUnitTest cross_tests[] = {cmocka_unit_test(test_cross_fault_child)};
    return cuvt_run(cross_tests);
  }
  cuv_sim_set_device_count(2); /* test_two_contexts; the simulator only */
  cuvt_drv_setup();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fifo_kernel_chain),
      cmocka_unit_test(test_fifo_slow_kernel_then_copy),
      cmocka_unit_test(test_event_orders_streams),
      cmocka_unit_test(test_streams_run_concurrently),
      cmocka_unit_test(test_host_functions),
      cmocka_unit_test(test_write_value_after_kernel),
      cmocka_unit_test(test_write_value64_after_kernel),
      cmocka_unit_test(test_wait_value_blocks_stream),
      cmocka_unit_test(test_copies_memsets_saxpy),
      cmocka_unit_test(test_stream_ordered_alloc),
      cmocka_unit_test(test_graph_capture_replay),
      cmocka_unit_test(test_failure_injection),
      cmocka_unit_test(test_sim_write_delay),
      cmocka_unit_test(test_sim_unload_with_pending_launch),
      cmocka_unit_test(test_param_info),
      cmocka_unit_test(test_fault_runs_queued_host_work),
      cmocka_unit_test(test_two_contexts),
      cmocka_unit_test(test_cross_context_wait_on_fault),
  };
  return cuvt_run(tests);
}
