#ifndef CUVT_COUNTED_H
#define CUVT_COUNTED_H

/* Helpers of the programming-model scenarios (ops, combinators, errors, reentrancy, policies):
 * host values whose releases are counted, so a test proves every output is released exactly once
 * on every path, and small device-buffer helpers. Header-only (static inline), so each scenario
 * stays one file. Nothing here asserts except the buffer helpers and cuvt_drain_until, which run
 * on the test thread: the value helpers are also called from callbacks inside cuv, where an
 * assert would longjmp through the runtime. */

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* A host value that counts its own release. */
typedef struct cuvt_counted {
  int payload;
  atomic_int *releases;
} cuvt_counted_t;

static inline void cuvt_counted_release(void *arg) {
  cuvt_counted_t *v = arg;
  atomic_fetch_add(v->releases, 1);
  free(v);
}

/* cuv_value of `payload`; releasing it increments *releases. */
static inline cuv_op_t *cuvt_counted_value(int payload, atomic_int *releases) {
  cuvt_counted_t *v = malloc(sizeof *v);
  if (!v)
    abort();
  v->payload = payload;
  v->releases = releases;
  return cuv_value(v, cuvt_counted_release);
}

/* The payload of a counted output; INT32_MIN for an output that is not one (no data). */
static inline int cuvt_payload(const cuv_output_t *out) {
  return out && out->data ? ((const cuvt_counted_t *)out->data)->payload : INT32_MIN;
}

/* Random floats with integer values in [-1000, 1000]: sums and products of small integers are
 * exact in float, so device results compare exactly whatever order or FMA the GPU uses. */
static inline void cuvt_random_ints(float *out, size_t n) {
  cuvt_random_floats(out, n);
  for (size_t i = 0; i < n; i++)
    out[i] = roundf(out[i]);
}

/* A new buffer of `bytes` on the test device. */
static inline cuv_buffer_t *cuvt_buffer(size_t bytes) {
  cuv_buffer_t *buf = NULL;
  assert_cuv_ok(cuv_buffer_create(&buf, cuvt_device(), bytes));
  return buf;
}

/* Synchronous copies for setting up and checking (each waits for its own submission). */
static inline void cuvt_upload(cuv_buffer_t *buf, size_t offset, const void *src, size_t bytes) {
  assert_cuv_ok(cuv_sync(cuv_memcpy_htod(buf, offset, src, bytes, CUV_COPY_STAGE), NULL));
}

static inline void cuvt_read(void *dst, cuv_buffer_t *buf, size_t offset, size_t bytes) {
  assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(dst, buf, offset, bytes), NULL));
}

/* A buffer holding a copy of `n` host floats. */
static inline cuv_buffer_t *cuvt_buffer_of(const float *host, size_t n) {
  cuv_buffer_t *buf = cuvt_buffer(n * sizeof *host);
  cuvt_upload(buf, 0, host, n * sizeof *host);
  return buf;
}

/* A buffer of `words` random words, and its host copy in *host (malloc'd: the caller frees it). */
static inline cuv_buffer_t *cuvt_random_words(size_t words, uint32_t **host) {
  *host = malloc(words * 4);
  assert_non_null(*host);
  for (size_t i = 0; i < words; i++)
    (*host)[i] = cuvt_random_u32();
  cuv_buffer_t *buf = cuvt_buffer(words * 4);
  cuvt_upload(buf, 0, *host, words * 4);
  return buf;
}

/* The buffer's first `words` words are want's. */
static inline void cuvt_expect_words(cuv_buffer_t *buf, const uint32_t *want, size_t words) {
  uint32_t *got = malloc(words * 4);
  assert_non_null(got);
  cuvt_read(got, buf, 0, words * 4);
  assert_memory_equal(got, want, words * 4);
  free(got);
}

static inline void cuvt_assert_floats_equal(const float *got, const float *want, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (got[i] != want[i])
      print_error("element %zu: got %g, want %g\n", i, (double)got[i], (double)want[i]);
    assert_true(got[i] == want[i]);
  }
}

/* Kernels of tests/kernels/test_kernels.cu (lookups are cached by cuvt_kernel). */
static inline cuv_kernel_t *cuvt_kernel_ok(const char *name) {
  cuv_kernel_t *k = cuvt_kernel(name);
  if (!k)
    print_error("test kernel %s not found\n", name);
  assert_non_null(k);
  return k;
}

/* Launch builders, also used inside then callbacks: they never assert (a missing kernel gives an
 * op carrying CUV_EINVAL, which fails the test where the op is executed). */

/* sleep_then_write(ns, value, flag): a kernel busy for `ms` milliseconds, then *flag = value.
 * The slow writer every ordering test uses: a reader not ordered after it sees the old value. */
static inline cuv_op_t *cuvt_slow_write(unsigned ms, unsigned value, cuv_buffer_t *flag) {
  unsigned long long ns = (unsigned long long)ms * 1000000ull;
  cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(value), CUV_ARG_WRITE(flag)};
  return cuv_launch(cuvt_kernel("sleep_then_write"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 3);
}

/* sleep_then_write with a NULL flag: a kernel busy for `ms` milliseconds that writes nothing. It
 * only delays what follows it on its stream. */
static inline cuv_op_t *cuvt_sleep(unsigned ms) {
  unsigned long long ns = (unsigned long long)ms * 1000000ull;
  unsigned value = 0;
  cuv_deviceptr_t none = 0;
  cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(value), CUV_ARG_VALUE(none)};
  return cuv_launch(cuvt_kernel("sleep_then_write"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 3);
}

/* Element-wise kernels of the test module over the first n elements. */
static inline cuv_op_t *cuvt_scale(cuv_buffer_t *buf, unsigned n, float factor) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(factor), CUV_ARG_RW(buf)};
  return cuv_launch(cuvt_kernel("scale"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 3);
}

static inline cuv_op_t *cuvt_add_one(cuv_buffer_t *buf, unsigned n) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(buf)};
  return cuv_launch(cuvt_kernel("add_one"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 2);
}

static inline cuv_op_t *cuvt_copy_f32(cuv_buffer_t *dst, cuv_buffer_t *src, unsigned n) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_READ(src), CUV_ARG_WRITE(dst)};
  return cuv_launch(cuvt_kernel("copy_f32"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 3);
}

static inline cuv_op_t *cuvt_fill_u32(cuv_buffer_t *buf, unsigned n, unsigned value) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(value), CUV_ARG_WRITE(buf)};
  return cuv_launch(cuvt_kernel("fill_u32"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 3);
}

/* cuv_stats() as a value (cuvt_stats().in_flight), and the count of event waits inserted between
 * streams so far: what hazard tracking adds. */
static inline cuv_stats_t cuvt_stats(void) {
  cuv_stats_t s;
  cuv_stats(&s);
  return s;
}

static inline uint64_t cuvt_waits_inserted(void) { return cuvt_stats().waits_inserted; }

/* Waits on and drains q until *calls reaches want (callbacks that count themselves), on the test
 * thread: it asserts. */
static inline void cuvt_drain_until(cuv_queue_t *q, atomic_int *calls, int want) {
  for (int idle = 0, seen = atomic_load(calls); seen < want; seen = atomic_load(calls)) {
    int rc = cuv_queue_wait(q, 1000);
    assert_true(rc == 0 || rc == CUV_EBUSY);
    cuv_queue_drain(q);
    idle = atomic_load(calls) > seen ? 0 : idle + 1;
    if (idle > 120) /* a watchdog, not a timing assertion: two minutes without progress */
      fail_msg("callbacks did not arrive: %d of %d", atomic_load(calls), want);
  }
}

/* A random u32 that is never 0 (0 is what buffers are cleared to before an ordering check). */
static inline unsigned cuvt_nonzero_u32(void) {
  unsigned v;
  while ((v = cuvt_random_u32()) == 0)
    ;
  return v;
}

/* One submission's callback as its draining thread saw it: calls, status, and the first word of
 * the output (a download's), read on the test thread after the drain. */
typedef struct cuvt_seen {
  int calls;
  int status;
  unsigned got;
} cuvt_seen_t;

static inline void cuvt_record_seen(int status, cuv_output_t *output, void *arg) {
  cuvt_seen_t *s = arg;
  s->calls++;
  s->status = status;
  s->got = status == 0 && output && output->data ? *(const unsigned *)output->data : 0;
}

#endif
