#ifndef CUVT_DRIVER_UTIL_H
#define CUVT_DRIVER_UTIL_H

/* Helpers of the scenarios that talk to the driver directly through cuv's table (cuv__drv), as
 * the conformance and fault tests do: the same calls reach libcuda in suite gpu and libcuv-sim in
 * suite sim. Header-only (static inline) so each scenario stays one file. Call on the test
 * thread only: they assert. */

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "internal.h"

/* A driver call that must succeed, with the driver's name for the error when it does not. */
#define CU_OK(call) assert_cuv_ok(cuv__cu(call))

/* Loads the suite's driver (cuvt_init: skips the file where the gpu suite has no GPU) and makes
 * device 0's primary context current on the test thread. */
static inline void cuvt_drv_setup(void) {
  cuvt_init();
  CUresult r = cuv__drv.cuCtxSetCurrent(cuv_device_context(cuvt_device()));
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuCtxSetCurrent: %d\n", (int)r);
    exit(1);
  }
}

/* A test kernel's CUfunction (the module is loaded once by the harness). */
static inline CUfunction cuvt_fn(const char *name) {
  cuv_kernel_t *kernel = cuvt_kernel(name);
  assert_non_null(kernel);
  return kernel->fn;
}

/* Launches `name` over n threads (blocks of 256) on stream s. */
static inline void cuvt_launch(CUstream s, const char *name, unsigned n, void **params) {
  unsigned blocks = n ? (n + 255u) / 256u : 1u;
  CU_OK(cuv__drv.cuLaunchKernel(cuvt_fn(name), blocks, 1, 1, 256, 1, 1, 0, s, params, NULL));
}

static inline CUstream cuvt_stream_new(void) {
  CUstream s = NULL;
  CU_OK(cuv__drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  return s;
}

/* Pinned host memory (so async copies really are asynchronous), zeroed. */
static inline void *cuvt_pinned(size_t bytes) {
  void *p = NULL;
  CU_OK(cuv__drv.cuMemHostAlloc(&p, bytes, 0));
  memset(p, 0, bytes);
  return p;
}

/* Pinned, device-mapped host words, zeroed; *dptr is their device address. */
static inline uint32_t *cuvt_mapped_words(size_t n, CUdeviceptr *dptr) {
  void *p = NULL;
  CU_OK(cuv__drv.cuMemHostAlloc(&p, n * sizeof(uint32_t), CU_MEMHOSTALLOC_DEVICEMAP));
  memset(p, 0, n * sizeof(uint32_t));
  CU_OK(cuv__drv.cuMemHostGetDevicePointer(dptr, p, 0));
  return p;
}

/* A word the device or the driver writes, read on the host with a plain (acquire) load. */
static inline uint32_t cuvt_load(const uint32_t *word) {
  return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

static inline void cuvt_store(uint32_t *word, uint32_t value) {
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

static inline uint64_t cuvt_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static inline void cuvt_sleep_ms(unsigned ms) {
  struct timespec t = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
}

/* Polls *word until it equals want or limit_ms passed, and returns the last value read. The
 * limit only keeps a broken driver from hanging the test: nothing is asserted about the time. */
static inline uint32_t cuvt_poll(const uint32_t *word, uint32_t want, unsigned limit_ms) {
  uint64_t deadline = cuvt_now_ms() + limit_ms;
  uint32_t v;
  while ((v = cuvt_load(word)) != want && cuvt_now_ms() < deadline)
    cuvt_sleep_ms(1);
  return v;
}

/* A random 32-bit value that is never 0 (0 is what every flag starts as). */
static inline uint32_t cuvt_random_nonzero(void) {
  uint32_t v;
  while ((v = cuvt_random_u32()) == 0) {
  }
  return v;
}

#endif
