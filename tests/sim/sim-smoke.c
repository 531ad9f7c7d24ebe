/* Smoke test of libcuv-sim, dependency-free: it links the simulator, resolves every entry point of
 * internal/driver_funcs.h through cuGetProcAddress (as lib/driver.c does) and checks the semantics
 * cuv relies on: stream FIFO order, event waits across streams, write/wait value, host function
 * order, a registered kernel on random data, why a kernel name does not resolve, failure
 * injection, the sticky fault and reset, capture and replay, and concurrent use from several
 * threads; in mode `peer` (CUV_SIM_DEVICES=10), several devices: the variable itself, peer access
 * with the driver's answers, copies between contexts and events of one context waited on by a
 * stream of another. */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuv/sim.h>

#include "driver_funcs.h"

/* ---- Checks ---------------------------------------------------------------------------------- */

static atomic_int checks;

#define CHECK(cond)                                                                              \
  do {                                                                                           \
    checks++;                                                                                    \
    if (!(cond)) {                                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                   \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

/* The driver's entry points, resolved by base name. */
static struct {
#define SIM_TEST_MEMBER(name) __typeof__(name) *name;
  CUV__DRIVER_FUNCS(SIM_TEST_MEMBER)
#undef SIM_TEST_MEMBER
} d;

static const char *result_name(CUresult r) {
  const char *s = NULL;
  return d.cuGetErrorName && d.cuGetErrorName(r, &s) == CUDA_SUCCESS ? s : "(unknown)";
}

#define CHECK_CU(call, expected)                                                                 \
  do {                                                                                           \
    checks++;                                                                                    \
    CUresult r_ = (call);                                                                        \
    if (r_ != (expected)) {                                                                      \
      fprintf(stderr, "%s:%d: %s returned %s (%d), expected %s (%d)\n", __FILE__, __LINE__,       \
              #call, result_name(r_), (int)r_, result_name(expected), (int)(expected));          \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)
#define OK(call) CHECK_CU(call, CUDA_SUCCESS)

static void resolve(const char *name, void *slot) {
  void *p = NULL;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CHECK(cuGetProcAddress(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
        CUDA_SUCCESS);
  CHECK(p != NULL && status == CU_GET_PROC_ADDRESS_SUCCESS);
  memcpy(slot, &p, sizeof p);
}

/* Every entry point of the list resolves. Two are then taken under other terms, as the real
 * driver requires (checked on the GPU): at CUDA 13.0 "cuCtxSynchronize" is the variant taking a
 * context, so the (void) one is asked for at 12.0; "cuGraphInstantiate" is the legacy
 * five-argument function, so cuda.h's cuGraphInstantiate (= cuGraphInstantiateWithFlags) is asked
 * for by that name. */
static void resolve_all(void) {
#define SIM_TEST_RESOLVE(name) resolve(#name, &d.name);
  CUV__DRIVER_FUNCS(SIM_TEST_RESOLVE)
#undef SIM_TEST_RESOLVE
  void *p;
  CHECK(cuGetProcAddress("cuCtxSynchronize", &p, 12000, 0, NULL) == CUDA_SUCCESS && p);
  memcpy(&d.cuCtxSynchronize, &p, sizeof p);
  resolve("cuGraphInstantiateWithFlags", &d.cuGraphInstantiate);
}

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void sleep_us(unsigned us) {
  struct timespec ts = {0, (long)us * 1000};
  nanosleep(&ts, NULL);
}

/* A gate word in pinned memory: a stream waiting on it holds everything queued after. */
static uint32_t *gate_new(void) {
  void *p;
  OK(d.cuMemHostAlloc(&p, sizeof(uint32_t), CU_MEMHOSTALLOC_DEVICEMAP));
  __atomic_store_n((uint32_t *)p, 0, __ATOMIC_RELEASE);
  return p;
}

static void gate_block(CUstream s, uint32_t *gate) {
  OK(d.cuStreamWaitValue32(s, (CUdeviceptr)(uintptr_t)gate, 1, CU_STREAM_WAIT_VALUE_GEQ));
}

static void gate_open(uint32_t *gate) { __atomic_store_n(gate, 1, __ATOMIC_RELEASE); }

/* ---- Kernels (host twins) -------------------------------------------------------------------- */

/* saxpy(float a, const float *x, float *y, int n): y = a * x + y */
static int saxpy_twin(const cuv_sim_launch_t *launch, void **params) {
  float a = *(float *)params[0];
  const float *x = *(const float **)params[1];
  float *y = *(float **)params[2];
  int n = *(int *)params[3];
  unsigned threads = launch->block[0] * launch->grid[0];
  for (unsigned t = 0; t < threads; t++)
    for (int i = (int)t; i < n; i += (int)threads)
      y[i] = a * x[i] + y[i];
  return 0;
}

/* wide(char tag, struct wide32 v, int n, struct dq q, float *out): over-aligned parameters.
 * out[0] = tag + v's sum + n + q.a + q.b, or -1 when a parameter is not at its alignment. */
struct wide32 {
  _Alignas(32) float v[8];
};
struct dq {
  double a;
  float b;
};
/* The layout the driver reports: parameters at most 16-aligned (the GPU, driver 580), so v sits
 * at 16 after the 1-byte tag, where a C struct of the same members puts it at 32. */
struct wide_params {
  char tag;
  struct __attribute__((aligned(16))) {
    float v[8];
  } v;
  int n;
  struct dq q;
  float *out;
};

static int wide_twin(const cuv_sim_launch_t *launch, void **params) {
  float *out = *(float **)params[4];
  if ((uintptr_t)params[1] % 16 != 0 || (uintptr_t)params[3] % 8 != 0) {
    *out = -1.0f;
    return 0;
  }
  struct wide32 v_value; /* copied out: at 16, not at its own 32 */
  memcpy(&v_value, params[1], sizeof v_value);
  const struct wide32 *v = &v_value;
  const struct dq *q = params[3];
  float sum = (float)*(char *)params[0] + (float)*(int *)params[2] + (float)q->a + q->b;
  for (int i = 0; i < 8; i++)
    sum += v->v[i];
  *out = sum;
  return 0;
}

/* fault(): an illegal address, as a bad kernel on a GPU. */
static int fault_twin(const cuv_sim_launch_t *launch, void **params) {
  return CUDA_ERROR_ILLEGAL_ADDRESS;
}

/* incr(int *counter): counter += 1 (uses shared memory to check the scratch buffer). */
static int incr_twin(const cuv_sim_launch_t *launch, void **params) {
  int *counter = *(int **)params[0];
  if (launch->shared_bytes) {
    memset(launch->shared, 0xab, launch->shared_bytes);
  }
  __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
  return 0;
}

/* slow(int *flags): sets flags[0], sleeps 30 ms, then sets flags[1] (a kernel still running
 * when a fault hits). */
static int slow_twin(const cuv_sim_launch_t *launch, void **params) {
  int *flags = *(int **)params[0];
  __atomic_store_n(&flags[0], 1, __ATOMIC_RELEASE);
  sleep_us(30000);
  __atomic_store_n(&flags[1], 1, __ATOMIC_RELEASE);
  return 0;
}

static const char ptx[] = "//\n"
                          ".version 8.0\n"
                          ".target sm_90\n"
                          "// .entry not_declared(\n"
                          "/* .visible .entry also_not_declared( */\n"
                          ".visible .entry saxpy(\n"
                          "  .param .f32 a, .param .u64 x, .param .u64 y, .param .u32 n)\n"
                          "{ ret; }\n"
                          ".entry fault(\n"
                          ") { ret; }\n"
                          ".visible .entry incr(.param .u64 c) { ret; }\n"
                          ".visible .entry slow(.param .u64 f) { ret; }\n"
                          ".visible .entry no_twin() { ret; }\n"
                          ".visible .entry wide() { ret; }\n";

static CUmodule module;
static CUfunction f_saxpy, f_fault, f_incr, f_slow, f_wide;

static void register_kernels(void) {
  static const size_t saxpy_sizes[] = {sizeof(float), sizeof(void *), sizeof(void *), sizeof(int)};
  static const size_t ptr_size[] = {sizeof(void *)};
  CHECK(cuv_sim_register_kernel("saxpy", saxpy_twin, 4, saxpy_sizes) == 0);
  CHECK(cuv_sim_register_kernel("fault", fault_twin, 0, NULL) == 0);
  CHECK(cuv_sim_register_kernel("incr", incr_twin, 1, ptr_size) == 0);
  CHECK(cuv_sim_register_kernel("not_declared", incr_twin, 1, ptr_size) == 0);
  CHECK(cuv_sim_register_kernel("slow", slow_twin, 1, ptr_size) == 0);
  CHECK(cuv_sim_register_kernel(NULL, incr_twin, 0, NULL) == -EINVAL);
  CHECK(cuv_sim_register_kernel("incr", incr_twin, 1, (const size_t[]){0}) == -EINVAL);
  static const size_t wide_sizes[] = {1, 32, 4, 16, 8}, wide_aligns[] = {1, 32, 4, 8, 8};
  CHECK(cuv_sim_register_kernel_aligned("wide", wide_twin, 5, wide_sizes, wide_aligns) == 0);
  static const size_t not_pow2[] = {1, 24, 4, 8, 8}, not_dividing[] = {1, 32, 8, 8, 8};
  CHECK(cuv_sim_register_kernel_aligned("wide", wide_twin, 5, wide_sizes, not_pow2) == -EINVAL);
  CHECK(cuv_sim_register_kernel_aligned("wide", wide_twin, 5, wide_sizes, not_dividing) ==
        -EINVAL);
}

static void *lookup_error_of_new_thread(void *arg) {
  *(const char **)arg = cuv_sim_lookup_error();
  return NULL;
}

static void load_module(void) {
  OK(d.cuModuleLoadData(&module, ptx));
  OK(d.cuModuleGetFunction(&f_saxpy, module, "saxpy"));
  OK(d.cuModuleGetFunction(&f_fault, module, "fault"));
  OK(d.cuModuleGetFunction(&f_incr, module, "incr"));
  OK(d.cuModuleGetFunction(&f_slow, module, "slow"));
  OK(d.cuModuleGetFunction(&f_wide, module, "wide"));
  CUfunction again;
  OK(d.cuModuleGetFunction(&again, module, "saxpy"));
  CHECK(again == f_saxpy);
  CHECK(cuv_sim_lookup_error() == NULL);
  /* A name that does not resolve says which half is missing: the twin, the .entry, or both. */
  CHECK_CU(d.cuModuleGetFunction(&again, module, "not_declared"), CUDA_ERROR_NOT_FOUND);
  CHECK(strcmp(cuv_sim_lookup_error(), "kernel \"not_declared\": the module's PTX declares no "
                                       ".entry of that name") == 0);
  CHECK_CU(d.cuModuleGetFunction(&again, module, "no_twin"), CUDA_ERROR_NOT_FOUND);
  CHECK(strcmp(cuv_sim_lookup_error(), "kernel \"no_twin\": no host twin registered "
                                       "(cuv_sim_register_kernel)") == 0);
  CHECK_CU(d.cuModuleGetFunction(&again, module, "also_not_declared"), CUDA_ERROR_NOT_FOUND);
  CHECK(strcmp(cuv_sim_lookup_error(),
               "kernel \"also_not_declared\": no host twin registered (cuv_sim_register_kernel), "
               "and the module's PTX declares no .entry of that name") == 0);
  CHECK_CU(d.cuModuleGetFunction(&again, module, "unregistered"), CUDA_ERROR_NOT_FOUND);
  CHECK(strstr(cuv_sim_lookup_error(), "\"unregistered\": no host twin") != NULL);
  /* Per thread, and cleared by the next lookup that resolves. */
  pthread_t other;
  const char *seen = "unset";
  CHECK(pthread_create(&other, NULL, lookup_error_of_new_thread, &seen) == 0);
  CHECK(pthread_join(other, NULL) == 0 && seen == NULL);
  OK(d.cuModuleGetFunction(&again, module, "incr"));
  CHECK(again == f_incr && cuv_sim_lookup_error() == NULL);
}

/* ---- Tests ----------------------------------------------------------------------------------- */

static void test_before_init(void) {
  void *p = (void *)1;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  /* An unknown name is no error: NULL and SYMBOL_NOT_FOUND, as cuda.h says and the driver does. */
  OK(cuGetProcAddress("cuNoSuchThing", &p, CUDA_VERSION, 0, &status));
  CHECK(p == NULL && status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  void *v12, *v13;
  OK(cuGetProcAddress("cuCtxSynchronize", &v12, 12000, 0, NULL));
  OK(cuGetProcAddress("cuCtxSynchronize", &v13, 13000, 0, NULL));
  CHECK(v12 && v13 && v12 != v13);
  CHECK_CU(cuGetProcAddress("cuInit", &p, 13030, 0, NULL), CUDA_ERROR_INVALID_VALUE);
  /* 13.2's host functions with a sync mode: at 13.2 only. */
  OK(cuGetProcAddress("cuLaunchHostFunc_v2", &p, 13020, 0, &status));
  CHECK(p != NULL && status == CU_GET_PROC_ADDRESS_SUCCESS);
  OK(cuGetProcAddress("cuLaunchHostFunc_v2", &p, 13010, 0, &status));
  CHECK(p == NULL && status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  resolve_all();
  int count = -1, version = 0;
  CHECK_CU(d.cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
  OK(d.cuDriverGetVersion(&version));
  CHECK(version == 13020);
  const char *s;
  OK(d.cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
  CHECK(strcmp(s, "CUDA_ERROR_ILLEGAL_ADDRESS") == 0);
  OK(d.cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
  CHECK(strcmp(s, "an illegal memory access was encountered") == 0);
  CHECK_CU(d.cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
  CHECK(s == NULL);
}

static CUcontext ctx;

/* cuCtxSynchronize as resolved at 13.0 takes the context. */
static void test_ctx_synchronize_v2(void) {
  void *p;
  CUresult (*sync_v2)(CUcontext);
  OK(cuGetProcAddress("cuCtxSynchronize", &p, 13000, 0, NULL));
  memcpy(&sync_v2, &p, sizeof p);
  OK(sync_v2(NULL));
  OK(sync_v2(ctx));
  CHECK_CU(sync_v2((CUcontext)(uintptr_t)0x1234), CUDA_ERROR_CONTEXT_IS_DESTROYED);
}

static void test_init_and_device(void) {
  int count, value;
  CUdevice dev;
  char name[64];
  OK(d.cuInit(0));
  OK(d.cuDeviceGetCount(&count));
  CHECK(count == 1);
  CHECK_CU(d.cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
  OK(d.cuDeviceGet(&dev, 0));
  OK(d.cuDeviceGetName(name, sizeof name, dev));
  CHECK(strcmp(name, "cuv-sim CPU device") == 0);
  OK(d.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev));
  CHECK(value == 1024);
  OK(d.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CHECK(value == 9);
  OK(d.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev));
  CHECK(value == 1);
  CUstream s;
  CHECK_CU(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_ERROR_INVALID_CONTEXT);
  OK(d.cuDevicePrimaryCtxRetain(&ctx, dev));
  OK(d.cuCtxSetCurrent(ctx));
  CUcontext cur;
  OK(d.cuCtxGetCurrent(&cur));
  CHECK(cur == ctx);
}

static int order_log[2000];
static atomic_int order_len;

static void CUDA_CB log_fn(void *arg) {
  order_log[atomic_fetch_add(&order_len, 1)] = (int)(intptr_t)arg;
}

/* Copies run when the stream reaches them, not at call time, and in FIFO order. */
static void test_fifo(void) {
  CUstream s;
  CUdeviceptr buf;
  uint32_t *gate = gate_new();
  unsigned char host[256], *back; /* pinned: into pageable memory the copy would wait */
  OK(d.cuMemHostAlloc((void **)&back, sizeof host, 0));
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(d.cuMemAlloc(&buf, sizeof host));
  memset(back, 0, sizeof host);
  for (int i = 0; i < 256; i++)
    host[i] = (unsigned char)i;
  gate_block(s, gate);
  OK(d.cuMemsetD8Async(buf, 7, sizeof host, s));
  OK(d.cuMemcpyHtoDAsync(buf, host, 128, s));
  OK(d.cuMemcpyDtoHAsync(back, buf, sizeof host, s));
  for (int i = 0; i < 1000; i++)
    OK(d.cuLaunchHostFunc(s, log_fn, (void *)(intptr_t)i));
  sleep_us(2000);
  CHECK_CU(d.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  CHECK(back[0] == 0 && atomic_load(&order_len) == 0); /* nothing ran yet */
  gate_open(gate);
  OK(d.cuStreamSynchronize(s));
  OK(d.cuStreamQuery(s));
  for (int i = 0; i < 256; i++)
    CHECK(back[i] == (i < 128 ? i : 7));
  CHECK(atomic_load(&order_len) == 1000);
  for (int i = 0; i < 1000; i++)
    CHECK(order_log[i] == i);
  /* Zero-size operations succeed without enqueueing anything. */
  OK(d.cuMemcpyHtoDAsync(buf, NULL, 0, s));
  OK(d.cuMemsetD32Async(buf, 0, 0, s));
  /* 16-bit sets: elements at 2-byte alignment, as the driver wants them. */
  OK(d.cuMemsetD16Async(buf + 2, 0xbeef, 3, s));
  CHECK_CU(d.cuMemsetD16Async(buf + 1, 0xbeef, 1, s), CUDA_ERROR_INVALID_VALUE);
  OK(d.cuMemcpyDtoHAsync(back, buf, 10, s));
  OK(d.cuStreamSynchronize(s));
  for (int i = 0; i < 10; i++) {
    uint16_t set = 0xbeef;
    CHECK(back[i] == (i < 2 || i >= 8 ? i : ((const unsigned char *)&set)[i % 2]));
  }
  /* Device ranges are checked. */
  CHECK_CU(d.cuMemcpyHtoDAsync(buf + 200, host, 100, s), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(d.cuMemcpyDtoHAsync(back, (CUdeviceptr)(uintptr_t)host, 1, s), CUDA_ERROR_INVALID_VALUE);
  OK(d.cuMemFree(buf));
  CHECK_CU(d.cuMemFree(buf), CUDA_ERROR_INVALID_VALUE);
  OK(d.cuMemFreeHost(gate));
  OK(d.cuMemFreeHost(back));
  OK(d.cuStreamDestroy(s));
  CHECK_CU(d.cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
}

/* A stream waits for the record generation current when it called cuStreamWaitEvent. */
static void test_events(void) {
  CUstream s1, s2, s3;
  CUevent e, never;
  CUdeviceptr buf;
  uint32_t *gate = gate_new();
  uint32_t value = 0, *out; /* pinned: into pageable memory the copy would wait for the gate */
  OK(d.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  OK(d.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  OK(d.cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING));
  OK(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  OK(d.cuEventCreate(&never, CU_EVENT_DEFAULT));
  OK(d.cuEventQuery(never)); /* never recorded: complete */
  OK(d.cuEventSynchronize(never));
  OK(d.cuStreamWaitEvent(s2, never, 0)); /* no-op */
  OK(d.cuMemAlloc(&buf, 4));
  OK(d.cuMemHostAlloc((void **)&out, sizeof *out, 0));
  *out = 0;
  OK(d.cuMemsetD32Async(buf, 0, 1, s1));
  gate_block(s1, gate);
  value = 42;
  OK(d.cuMemcpyHtoDAsync(buf, &value, 4, s1));
  OK(d.cuEventRecord(e, s1));
  OK(d.cuStreamWaitEvent(s2, e, 0));  /* generation 1: behind the gate */
  OK(d.cuEventRecord(e, s3));         /* generation 2: completes at once */
  OK(d.cuMemcpyDtoHAsync(out, buf, 4, s2));
  OK(d.cuStreamSynchronize(s3));
  OK(d.cuEventSynchronize(e)); /* waits for generation 2 only */
  sleep_us(2000);
  CHECK_CU(d.cuStreamQuery(s2), CUDA_ERROR_NOT_READY);
  CHECK_CU(d.cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
  gate_open(gate);
  OK(d.cuStreamSynchronize(s2));
  CHECK(*out == 42);
  OK(d.cuEventRecord(e, s1));
  OK(d.cuCtxSynchronize());
  OK(d.cuEventQuery(e));
  OK(d.cuEventDestroy(e));
  CHECK_CU(d.cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
  OK(d.cuEventDestroy(never));
  OK(d.cuMemFree(buf));
  OK(d.cuMemFreeHost(gate));
  OK(d.cuMemFreeHost(out));
  OK(d.cuStreamDestroy(s1));
  OK(d.cuStreamDestroy(s2));
  OK(d.cuStreamDestroy(s3));
}

/* Write value lands in stream order; wait value conditions follow cuda.h. */
static void test_memops(void) {
  CUstream s;
  uint32_t *words;
  CUdeviceptr dwords;
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(d.cuMemHostAlloc((void **)&words, 4 * sizeof *words, CU_MEMHOSTALLOC_DEVICEMAP));
  OK(d.cuMemHostGetDevicePointer(&dwords, words, 0));
  CHECK(dwords == (CUdeviceptr)(uintptr_t)words);
  CHECK_CU(d.cuMemHostGetDevicePointer(&dwords, &dwords, 0), CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; i < 4; i++)
    __atomic_store_n(&words[i], 0, __ATOMIC_RELAXED);
  gate_block(s, &words[0]);
  OK(d.cuStreamWriteValue32(s, dwords + 4, 5, 0));
  sleep_us(1000);
  CHECK(__atomic_load_n(&words[1], __ATOMIC_ACQUIRE) == 0);
  gate_open(&words[0]);
  OK(d.cuStreamSynchronize(s));
  CHECK(__atomic_load_n(&words[1], __ATOMIC_ACQUIRE) == 5);
  /* GEQ is cyclic: 0 >= 0xfffffff0 */
  OK(d.cuStreamWaitValue32(s, dwords + 8, 0xfffffff0u, CU_STREAM_WAIT_VALUE_GEQ));
  OK(d.cuStreamWaitValue32(s, dwords + 4, 5, CU_STREAM_WAIT_VALUE_EQ));
  OK(d.cuStreamWaitValue32(s, dwords + 4, 4, CU_STREAM_WAIT_VALUE_AND));
  OK(d.cuStreamWaitValue32(s, dwords + 12, 0, CU_STREAM_WAIT_VALUE_NOR));
  OK(d.cuStreamSynchronize(s));
  CHECK_CU(d.cuStreamWriteValue32(s, dwords + 2, 1, 0), CUDA_ERROR_INVALID_VALUE); /* unaligned */
  OK(d.cuMemFreeHost(words));
  OK(d.cuStreamDestroy(s));
}

static atomic_int inside;
static atomic_int overlap;
static pthread_t cb_thread;
static atomic_int cb_threads_seen;

static void CUDA_CB serial_fn(void *arg) {
  if (atomic_fetch_add(&inside, 1) != 0)
    atomic_store(&overlap, 1);
  if (atomic_fetch_add(&cb_threads_seen, 1) == 0)
    cb_thread = pthread_self();
  else if (!pthread_equal(cb_thread, pthread_self()))
    atomic_store(&overlap, 2);
  sleep_us(50);
  atomic_fetch_sub(&inside, 1);
  log_fn(arg);
}

/* Host functions of all streams run one at a time on one thread; each stream's in order. */
static void test_hostfn(void) {
  CUstream s[3];
  atomic_store(&order_len, 0);
  for (int i = 0; i < 3; i++)
    OK(d.cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
  for (int n = 0; n < 50; n++)
    for (int i = 0; i < 3; i++)
      OK(d.cuLaunchHostFunc(s[i], serial_fn, (void *)(intptr_t)(i * 1000 + n)));
  OK(d.cuCtxSynchronize());
  CHECK(atomic_load(&overlap) == 0);
  CHECK(atomic_load(&order_len) == 150);
  int last[3] = {-1, -1, -1};
  for (int k = 0; k < 150; k++) {
    int stream = order_log[k] / 1000, n = order_log[k] % 1000;
    CHECK(n == last[stream] + 1);
    last[stream] = n;
  }
  CHECK_CU(d.cuLaunchHostFunc(s[0], NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; i < 3; i++)
    OK(d.cuStreamDestroy(s[i]));
}

/* saxpy on random data; parameters are copied at launch time. */
static void test_kernel(void) {
  enum { N = 10000 };
  static float x[N], y[N], expect[N];
  CUstream s;
  CUdeviceptr dx, dy;
  uint32_t *gate = gate_new();
  size_t off, size;
  OK(d.cuFuncGetParamInfo(f_saxpy, 0, &off, &size));
  CHECK(off == 0 && size == 4);
  OK(d.cuFuncGetParamInfo(f_saxpy, 1, &off, &size));
  CHECK(off == 8 && size == 8);
  OK(d.cuFuncGetParamInfo(f_saxpy, 3, &off, NULL));
  CHECK(off == 24);
  CHECK_CU(d.cuFuncGetParamInfo(f_saxpy, 4, &off, &size), CUDA_ERROR_INVALID_VALUE);
  srand(12345);
  float a = 2.5f;
  for (int i = 0; i < N; i++) {
    x[i] = (float)rand() / (float)RAND_MAX;
    y[i] = (float)rand() / (float)RAND_MAX;
    expect[i] = a * x[i] + y[i];
  }
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(d.cuMemAllocAsync(&dx, sizeof x, s));
  OK(d.cuMemAllocAsync(&dy, sizeof y, s));
  OK(d.cuMemcpyHtoDAsync(dx, x, sizeof x, s));
  OK(d.cuMemcpyHtoDAsync(dy, y, sizeof y, s));
  gate_block(s, gate);
  int n = N;
  void *params[] = {&a, &dx, &dy, &n};
  OK(d.cuLaunchKernel(f_saxpy, (N + 255) / 256, 1, 1, 256, 1, 1, 0, s, params, NULL));
  a = -100.0f; /* the launch copied the old value */
  n = 0;
  gate_open(gate);
  OK(d.cuMemcpyDtoHAsync(y, dy, sizeof y, s));
  OK(d.cuMemFreeAsync(dx, s));
  OK(d.cuMemFreeAsync(dy, s));
  CHECK_CU(d.cuMemFreeAsync(dy, s), CUDA_ERROR_INVALID_VALUE); /* already being freed */
  OK(d.cuStreamSynchronize(s));
  for (int i = 0; i < N; i++)
    CHECK(y[i] == expect[i]);
  /* Validation. */
  CHECK_CU(d.cuLaunchKernel(f_saxpy, 0, 1, 1, 1, 1, 1, 0, s, params, NULL),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(d.cuLaunchKernel(f_saxpy, 1, 1, 1, 1025, 1, 1, 0, s, params, NULL),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(d.cuLaunchKernel(f_saxpy, 1, 1, 1, 32, 32, 2, 0, s, params, NULL),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(d.cuLaunchKernel(f_saxpy, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL),
           CUDA_ERROR_INVALID_VALUE);
  /* extra: an empty list is accepted; a packed buffer is laid out as cuFuncGetParamInfo says. */
  int extra_counter = 0;
  CUdeviceptr dextra;
  OK(d.cuMemAlloc(&dextra, sizeof extra_counter));
  OK(d.cuMemsetD32Async(dextra, 0, 1, s));
  void *cparams_extra[] = {&dextra};
  void *extra_end[] = {CU_LAUNCH_PARAM_END};
  OK(d.cuLaunchKernel(f_incr, 1, 1, 1, 1, 1, 1, 0, s, cparams_extra, extra_end));
  size_t packed_size = sizeof dextra;
  void *extra_buf[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &dextra, CU_LAUNCH_PARAM_BUFFER_SIZE,
                       &packed_size, CU_LAUNCH_PARAM_END};
  OK(d.cuLaunchKernel(f_incr, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra_buf));
  CHECK_CU(d.cuLaunchKernel(f_incr, 1, 1, 1, 1, 1, 1, 0, s, cparams_extra, extra_buf),
           CUDA_ERROR_INVALID_VALUE);
  OK(d.cuMemcpyDtoHAsync(&extra_counter, dextra, sizeof extra_counter, s));
  OK(d.cuStreamSynchronize(s));
  CHECK(extra_counter == 2);
  OK(d.cuMemFree(dextra));
  /* Shared memory scratch and kernel duration. */
  int counter = 0;
  CUdeviceptr dcounter;
  OK(d.cuMemAlloc(&dcounter, sizeof counter));
  OK(d.cuMemsetD32Async(dcounter, 0, 1, s));
  void *cparams[] = {&dcounter};
  cuv_sim_set_kernel_duration("incr", 20000);
  uint64_t t0 = now_us();
  OK(d.cuLaunchKernel(f_incr, 1, 1, 1, 64, 1, 1, 4096, s, cparams, NULL));
  OK(d.cuMemcpyDtoHAsync(&counter, dcounter, sizeof counter, s));
  OK(d.cuStreamSynchronize(s));
  CHECK(now_us() - t0 >= 20000);
  CHECK(counter == 1);
  cuv_sim_set_kernel_duration("incr", 0);
  OK(d.cuMemFree(dcounter));
  /* Over-aligned parameters: laid out and handed to the twin at their registered alignments,
   * capped at 16 as the driver places them. */
  struct wide_params wp = {.tag = 3, .n = 40, .q = {0.5, 0.25f}};
  float want = 3 + 40 + 0.5f + 0.25f;
  for (int i = 0; i < 8; i++) {
    wp.v.v[i] = (float)(i * i);
    want += wp.v.v[i];
  }
  size_t wide_offsets[] = {offsetof(struct wide_params, tag), offsetof(struct wide_params, v),
                           offsetof(struct wide_params, n), offsetof(struct wide_params, q),
                           offsetof(struct wide_params, out)};
  for (size_t i = 0; i < 5; i++) {
    OK(d.cuFuncGetParamInfo(f_wide, i, &off, NULL));
    CHECK(off == wide_offsets[i]);
  }
  CUdeviceptr dout;
  float got = 0;
  OK(d.cuMemAlloc(&dout, sizeof got));
  void *wparams[] = {&wp.tag, &wp.v, &wp.n, &wp.q, &dout};
  OK(d.cuLaunchKernel(f_wide, 1, 1, 1, 1, 1, 1, 0, s, wparams, NULL));
  OK(d.cuMemcpyDtoHAsync(&got, dout, sizeof got, s));
  OK(d.cuStreamSynchronize(s));
  CHECK(got == want);
  OK(d.cuMemFree(dout));
  OK(d.cuMemFreeHost(gate));
  OK(d.cuStreamDestroy(s));
}

static void test_failure_injection(void) {
  CUstream s;
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  unsigned long before = cuv_sim_calls("cuStreamQuery");
  cuv_sim_fail("cuStreamQuery", 2, CUDA_ERROR_UNKNOWN);
  OK(d.cuStreamQuery(s));
  CHECK_CU(d.cuStreamQuery(s), CUDA_ERROR_UNKNOWN);
  OK(d.cuStreamQuery(s));
  CHECK(cuv_sim_calls("cuStreamQuery") == before + 3);
  cuv_sim_fail("cuMemAlloc", 0, CUDA_ERROR_OUT_OF_MEMORY);
  CUdeviceptr p;
  CHECK_CU(d.cuMemAlloc(&p, 16), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_CU(d.cuMemAlloc(&p, 16), CUDA_ERROR_OUT_OF_MEMORY);
  cuv_sim_fail_clear();
  OK(d.cuMemAlloc(&p, 16));
  OK(d.cuMemFree(p));
  CHECK(cuv_sim_calls("cuNoSuchEntry") == 0);
  OK(d.cuStreamDestroy(s));
}

/* A reset destroys the context's objects and leaves it uninitialized until the next retain. */
static void test_reset(void) {
  CUstream s;
  CUevent e;
  CUdeviceptr p;
  CUcontext again;
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  OK(d.cuMemAlloc(&p, 64));
  OK(d.cuDevicePrimaryCtxReset(0));
  CHECK_CU(d.cuStreamCreate(&s, 0), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CHECK_CU(d.cuMemAlloc(&p, 16), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CHECK_CU(d.cuCtxSynchronize(), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  OK(d.cuDevicePrimaryCtxRetain(&again, 0)); /* initializes it again: same handle */
  CHECK(again == ctx);
  CHECK_CU(d.cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
  CHECK_CU(d.cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
  CHECK_CU(d.cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(d.cuLaunchKernel(f_incr, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
           CUDA_ERROR_INVALID_HANDLE); /* the module went with the context */
  OK(d.cuDevicePrimaryCtxRelease(0)); /* the reset kept the count: two retains now */
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(d.cuStreamSynchronize(s));
  OK(d.cuStreamDestroy(s));
  OK(d.cuCtxSynchronize());
  load_module();
}

static atomic_int ran_after_fault;

static void CUDA_CB mark_fn(void *arg) { atomic_store(&ran_after_fault, 1); }

/* A faulting kernel poisons the context for the rest of the process (`test-sim-smoke fault` runs
 * this alone): queued and later work is dropped, every call reports the fault, destroy calls
 * included, and a reset does not bring the device back. */
static void test_sticky_fault(void) {
  CUstream s, other, slow;
  CUevent e;
  uint32_t *words;
  int *flag;
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(d.cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  OK(d.cuStreamCreate(&slow, CU_STREAM_NON_BLOCKING));
  OK(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  OK(d.cuMemHostAlloc((void **)&words, 12, 0));
  OK(d.cuMemHostAlloc((void **)&flag, 2 * sizeof *flag, 0));
  for (int i = 0; i < 3; i++)
    __atomic_store_n(&words[i], 0, __ATOMIC_RELAXED);
  __atomic_store_n(&flag[0], 0, __ATOMIC_RELAXED);
  __atomic_store_n(&flag[1], 0, __ATOMIC_RELAXED);
  /* `other` waits on a value nobody writes: the fault must release it. */
  OK(d.cuStreamWaitValue32(other, (CUdeviceptr)(uintptr_t)&words[1], 1, CU_STREAM_WAIT_VALUE_EQ));
  /* `slow` runs a 30 ms kernel when the fault hits. */
  CUdeviceptr dflag = (CUdeviceptr)(uintptr_t)flag;
  void *fparams[] = {&dflag};
  OK(d.cuLaunchKernel(f_slow, 1, 1, 1, 1, 1, 1, 0, slow, fparams, NULL));
  gate_block(s, &words[2]); /* the fault happens once everything is queued */
  OK(d.cuLaunchKernel(f_fault, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  OK(d.cuLaunchHostFunc(s, mark_fn, NULL));
  OK(d.cuStreamWriteValue32(s, (CUdeviceptr)(uintptr_t)&words[0], 9, 0));
  OK(d.cuEventRecord(e, s));
  for (int i = 0; i < 10000 && !__atomic_load_n(&flag[0], __ATOMIC_ACQUIRE); i++)
    sleep_us(100); /* until the slow kernel runs */
  CHECK(__atomic_load_n(&flag[0], __ATOMIC_ACQUIRE) == 1);
  gate_open(&words[2]);
  CHECK_CU(d.cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
  /* Synchronize calls after the fault still wait for a command in progress, so that the caller
   * may free what it used. */
  CHECK(__atomic_load_n(&flag[1], __ATOMIC_ACQUIRE) == 1);
  CHECK_CU(d.cuStreamSynchronize(other), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuStreamSynchronize(slow), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuStreamQuery(s), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuEventQuery(e), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuEventSynchronize(e), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuEventRecord(e, s), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuLaunchKernel(f_incr, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL),
           CUDA_ERROR_ILLEGAL_ADDRESS);
  CUdeviceptr p;
  CHECK_CU(d.cuMemAlloc(&p, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
  CUstream s2;
  CHECK_CU(d.cuStreamCreate(&s2, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  /* Destroy calls fail with the fault too, even on an invalid handle. */
  CHECK_CU(d.cuStreamDestroy(other), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuEventDestroy(e), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuMemFreeHost(words), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuModuleUnload(module), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuStreamDestroy((CUstream)(uintptr_t)0x1234), CUDA_ERROR_ILLEGAL_ADDRESS);
  sleep_us(2000);
  CHECK(atomic_load(&ran_after_fault) == 0);
  CHECK(__atomic_load_n(&words[0], __ATOMIC_ACQUIRE) == 0);
  /* These still work. */
  const char *name;
  int value;
  OK(d.cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &name));
  OK(d.cuCtxSetCurrent(ctx));
  OK(d.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
  /* Without a current context, the objects report their context's fault. */
  OK(d.cuCtxSetCurrent(NULL));
  CHECK_CU(d.cuStreamQuery(s), CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_CU(d.cuStreamCreate(&s2, 0), CUDA_ERROR_INVALID_CONTEXT);
  OK(d.cuCtxSetCurrent(ctx));
  /* A reset succeeds but cannot bring the device back. */
  OK(d.cuDevicePrimaryCtxReset(0));
  CHECK_CU(d.cuStreamCreate(&s2, 0), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CUcontext again;
  CHECK_CU(d.cuDevicePrimaryCtxRetain(&again, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  OK(d.cuDevicePrimaryCtxRelease(0));
  CHECK_CU(d.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
}

static atomic_int captured_calls;

static void CUDA_CB count_fn(void *arg) { atomic_fetch_add(&captured_calls, 1); }

static void test_capture(void) {
  CUstream s, s2;
  CUgraph g;
  CUgraphExec exec;
  CUevent e1, e2;
  CUstreamCaptureStatus st;
  CUdeviceptr dcounter;
  int counter = -1;
  uint32_t *word;
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(d.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  OK(d.cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
  OK(d.cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
  OK(d.cuMemAlloc(&dcounter, sizeof(int)));
  OK(d.cuMemHostAlloc((void **)&word, 4, 0));
  __atomic_store_n(word, 0, __ATOMIC_RELAXED);
  OK(d.cuMemsetD32Async(dcounter, 0, 1, s));
  OK(d.cuStreamSynchronize(s));

  OK(d.cuStreamIsCapturing(s, &st));
  CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK_CU(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
  OK(d.cuStreamIsCapturing(s, &st));
  CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  void *cparams[] = {&dcounter};
  OK(d.cuLaunchKernel(f_incr, 1, 1, 1, 32, 1, 1, 0, s, cparams, NULL));
  OK(d.cuLaunchHostFunc(s, count_fn, NULL));
  /* Fork s2 into the capture and join it back. */
  OK(d.cuEventRecord(e1, s));
  OK(d.cuStreamWaitEvent(s2, e1, 0));
  OK(d.cuStreamIsCapturing(s2, &st));
  CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  OK(d.cuLaunchKernel(f_incr, 1, 1, 1, 32, 1, 1, 0, s2, cparams, NULL));
  OK(d.cuEventRecord(e2, s2));
  OK(d.cuStreamWaitEvent(s, e2, 0));
  OK(d.cuStreamWriteValue32(s, (CUdeviceptr)(uintptr_t)word, 7, 0));
  sleep_us(2000);
  CHECK(atomic_load(&captured_calls) == 0); /* recorded, not run */
  CHECK(__atomic_load_n(word, __ATOMIC_ACQUIRE) == 0);
  OK(d.cuStreamEndCapture(s, &g));
  CHECK(g != NULL);
  OK(d.cuStreamIsCapturing(s2, &st));
  CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
  OK(d.cuGraphInstantiate(&exec, g, 0));
  OK(d.cuGraphDestroy(g)); /* the executable graph stays valid */
  OK(d.cuGraphUpload(exec, s));
  for (int i = 0; i < 3; i++)
    OK(d.cuGraphLaunch(exec, s));
  OK(d.cuMemcpyDtoHAsync(&counter, dcounter, sizeof counter, s));
  OK(d.cuStreamSynchronize(s));
  CHECK(counter == 6);
  CHECK(atomic_load(&captured_calls) == 3);
  CHECK(__atomic_load_n(word, __ATOMIC_ACQUIRE) == 7);
  OK(d.cuGraphExecDestroy(exec));
  CHECK_CU(d.cuGraphLaunch(exec, s), CUDA_ERROR_INVALID_HANDLE);

  /* Synchronizing a capturing stream is illegal and invalidates the capture. */
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK_CU(d.cuStreamQuery(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  OK(d.cuStreamIsCapturing(s, &st));
  CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CHECK_CU(d.cuLaunchHostFunc(s, count_fn, NULL), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  g = (CUgraph)1;
  CHECK_CU(d.cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(g == NULL);
  CHECK_CU(d.cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);

  /* Waiting on work outside the capture is an isolation error. */
  OK(d.cuEventRecord(e1, s2));
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CHECK_CU(d.cuStreamWaitEvent(s, e1, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
  CHECK_CU(d.cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

  /* A forked stream must be joined back. */
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  OK(d.cuEventRecord(e1, s));
  OK(d.cuStreamWaitEvent(s2, e1, 0));
  OK(d.cuLaunchHostFunc(s2, count_fn, NULL));
  CHECK_CU(d.cuStreamEndCapture(s2, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
  CHECK_CU(d.cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  OK(d.cuEventRecord(e1, s));
  OK(d.cuStreamWaitEvent(s2, e1, 0));
  OK(d.cuLaunchHostFunc(s2, count_fn, NULL));
  CHECK_CU(d.cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
  OK(d.cuStreamIsCapturing(s2, &st));
  CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
  /* Querying an event recorded in an active capture invalidates it; once the capture is over, the
   * event is invalid until recorded again. */
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  OK(d.cuEventRecord(e1, s));
  CHECK_CU(d.cuEventQuery(e1), CUDA_ERROR_CAPTURED_EVENT);
  OK(d.cuStreamIsCapturing(s, &st));
  CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CHECK_CU(d.cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK_CU(d.cuEventQuery(e1), CUDA_ERROR_INVALID_VALUE);
  OK(d.cuEventRecord(e1, s2));
  OK(d.cuEventSynchronize(e1));
  /* A fork with no work of its own needs no join. */
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  OK(d.cuEventRecord(e1, s));
  OK(d.cuStreamWaitEvent(s2, e1, 0));
  OK(d.cuStreamEndCapture(s, &g));
  OK(d.cuGraphDestroy(g));
  /* "Potentially unsafe" calls: refused during a global capture (which they invalidate), allowed
   * during a relaxed one. */
  CUdeviceptr tmp;
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK_CU(d.cuMemAlloc(&tmp, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CHECK_CU(d.cuStreamQuery(s2), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CHECK_CU(d.cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  OK(d.cuMemAlloc(&tmp, 64));
  OK(d.cuStreamQuery(s2));
  CHECK_CU(d.cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); /* never allowed */
  CHECK_CU(d.cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  OK(d.cuMemFree(tmp));
  /* Memory nodes: an allocation made during capture keeps its address; the graph is instantiated
   * once, and relaunched only after its allocation was freed. */
  CUdeviceptr gmem;
  CUgraphExec exec2;
  unsigned char bytes[64];
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  OK(d.cuMemAllocAsync(&gmem, sizeof bytes, s));
  OK(d.cuMemsetD8Async(gmem, 0x5a, sizeof bytes, s));
  CHECK_CU(d.cuMemFreeAsync(dcounter, s), CUDA_ERROR_INVALID_VALUE); /* not a graph allocation */
  OK(d.cuStreamEndCapture(s, &g));
  OK(d.cuGraphInstantiate(&exec, g, 0));
  CHECK_CU(d.cuGraphInstantiate(&exec2, g, 0), CUDA_ERROR_NOT_SUPPORTED);
  OK(d.cuGraphLaunch(exec, s));
  OK(d.cuMemcpyDtoHAsync(bytes, gmem, sizeof bytes, s));
  OK(d.cuStreamSynchronize(s));
  CHECK(bytes[0] == 0x5a && bytes[63] == 0x5a);
  CHECK_CU(d.cuGraphLaunch(exec, s), CUDA_ERROR_INVALID_VALUE); /* still allocated */
  OK(d.cuMemFreeAsync(gmem, s));
  OK(d.cuGraphLaunch(exec, s));
  OK(d.cuStreamSynchronize(s));
  OK(d.cuMemFree(gmem));
  OK(d.cuGraphExecDestroy(exec));
  OK(d.cuGraphDestroy(g));
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  OK(d.cuMemAllocAsync(&gmem, sizeof bytes, s));
  OK(d.cuMemFreeAsync(gmem, s));
  OK(d.cuStreamEndCapture(s, &g));
  OK(d.cuGraphInstantiate(&exec, g, 0));
  OK(d.cuGraphDestroy(g));
  OK(d.cuGraphLaunch(exec, s));
  OK(d.cuGraphLaunch(exec, s)); /* allocated and freed inside: relaunch at will */
  OK(d.cuStreamSynchronize(s));
  OK(d.cuGraphExecDestroy(exec));
  /* A graph cannot be launched into a capture. */
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  OK(d.cuStreamEndCapture(s, &g));
  OK(d.cuGraphInstantiate(&exec, g, 0));
  OK(d.cuGraphDestroy(g));
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK_CU(d.cuGraphLaunch(exec, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CHECK_CU(d.cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK_CU(d.cuGraphInstantiate(&exec2, g, 0), CUDA_ERROR_INVALID_VALUE); /* NULL graph */
  OK(d.cuGraphExecDestroy(exec));
  /* An empty capture makes an empty graph. */
  OK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  OK(d.cuStreamEndCapture(s, &g));
  OK(d.cuGraphInstantiate(&exec, g, 0));
  OK(d.cuGraphLaunch(exec, s));
  OK(d.cuStreamSynchronize(s));
  OK(d.cuGraphExecDestroy(exec));
  OK(d.cuGraphDestroy(g));
  CHECK_CU(d.cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
           CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CHECK(atomic_load(&captured_calls) == 3);

  OK(d.cuEventDestroy(e1));
  OK(d.cuEventDestroy(e2));
  OK(d.cuMemFree(dcounter));
  OK(d.cuMemFreeHost(word));
  OK(d.cuStreamDestroy(s));
  OK(d.cuStreamDestroy(s2));
}

static atomic_int destroyed_ran;

static void CUDA_CB destroyed_fn(void *arg) { atomic_store(&destroyed_ran, 1); }

/* cuStreamDestroy returns at once; queued work still completes. */
static void test_destroy_pending(void) {
  CUstream s;
  uint32_t *gate = gate_new();
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  gate_block(s, gate);
  OK(d.cuLaunchHostFunc(s, destroyed_fn, NULL));
  OK(d.cuStreamDestroy(s));
  CHECK(atomic_load(&destroyed_ran) == 0);
  gate_open(gate);
  OK(d.cuCtxSynchronize()); /* also waits for the draining stream */
  CHECK(atomic_load(&destroyed_ran) == 1);
  OK(d.cuMemFreeHost(gate));
}

/* Several threads using the driver at once (for ThreadSanitizer). */
static void *stress_thread(void *arg) {
  CUstream s;
  CUevent e;
  CUdeviceptr buf;
  int seed = (int)(intptr_t)arg;
  unsigned char host[512], back[512];
  OK(d.cuCtxSetCurrent(ctx));
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  OK(d.cuMemAlloc(&buf, sizeof host));
  for (int round = 0; round < 50; round++) {
    for (size_t i = 0; i < sizeof host; i++)
      host[i] = (unsigned char)(seed + round + (int)i);
    OK(d.cuMemcpyHtoDAsync(buf, host, sizeof host, s));
    OK(d.cuEventRecord(e, s));
    OK(d.cuStreamWaitEvent(NULL, e, 0));
    OK(d.cuMemcpyDtoHAsync(back, buf, sizeof back, s));
    OK(d.cuStreamSynchronize(s));
    CHECK(memcmp(host, back, sizeof host) == 0);
    (void)d.cuEventQuery(e);
  }
  OK(d.cuMemFree(buf));
  OK(d.cuEventDestroy(e));
  OK(d.cuStreamDestroy(s));
  return NULL;
}

static void test_threads(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    CHECK(pthread_create(&t[i], NULL, stress_thread, (void *)(intptr_t)i) == 0);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  OK(d.cuCtxSynchronize());
}

/* A round trip (enqueue + completion) costs microseconds. */
static void test_round_trip(void) {
  CUstream s;
  CUdeviceptr buf;
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(d.cuMemAlloc(&buf, 64));
  enum { ROUNDS = 2000 };
  uint64_t t0 = now_us();
  for (int i = 0; i < ROUNDS; i++) {
    OK(d.cuMemsetD8Async(buf, (unsigned char)i, 64, s));
    OK(d.cuStreamSynchronize(s));
  }
  double us = (double)(now_us() - t0) / ROUNDS;
  printf("sim-smoke: round trip %.1f us\n", us);
  CHECK(us < 1000.0);
  OK(d.cuMemFree(buf));
  OK(d.cuStreamDestroy(s));
}

/* ---- Several devices (mode peer) ------------------------------------------------------------ */

#define PEER_DEVICES 10 /* CUV_SIM_DEVICES in tests' meson.build: more than the peer bound of 8 */

/* cuInit reads CUV_SIM_DEVICES until it succeeds once: a value that is no count fails it. */
static void test_devices_variable(void) {
  const char *given = getenv("CUV_SIM_DEVICES");
  CHECK(given && atoi(given) == PEER_DEVICES);
  char keep[16];
  snprintf(keep, sizeof keep, "%s", given);
  static const char *const bad[] = {"two", "17", "-1", "3x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("CUV_SIM_DEVICES", bad[i], 1);
    CHECK_CU(d.cuInit(0), CUDA_ERROR_INVALID_VALUE);
  }
  setenv("CUV_SIM_DEVICES", "0", 1);
  CHECK_CU(d.cuInit(0), CUDA_ERROR_NO_DEVICE);
  setenv("CUV_SIM_DEVICES", keep, 1);
  OK(d.cuInit(0));
  int count;
  OK(d.cuDeviceGetCount(&count));
  CHECK(count == PEER_DEVICES);
}

static CUcontext peer_ctx[PEER_DEVICES];

static void test_peer_access(void) {
  int can = -1;
  OK(d.cuDeviceCanAccessPeer(&can, 0, 1));
  CHECK(can == 1);
  OK(d.cuDeviceCanAccessPeer(&can, 1, 1));
  CHECK(can == 0); /* a device is not its own peer */
  CHECK_CU(d.cuDeviceCanAccessPeer(&can, 0, PEER_DEVICES), CUDA_ERROR_INVALID_DEVICE);
  CHECK_CU(d.cuDeviceCanAccessPeer(NULL, 0, 1), CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; i < PEER_DEVICES; i++)
    OK(d.cuDevicePrimaryCtxRetain(&peer_ctx[i], i));
  OK(d.cuCtxSetCurrent(NULL));
  CHECK_CU(d.cuCtxEnablePeerAccess(peer_ctx[1], 0), CUDA_ERROR_INVALID_CONTEXT);
  OK(d.cuCtxSetCurrent(peer_ctx[0]));
  CHECK_CU(d.cuCtxEnablePeerAccess(peer_ctx[1], 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(d.cuCtxEnablePeerAccess(peer_ctx[0], 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
  CHECK_CU(d.cuCtxEnablePeerAccess((CUcontext)(uintptr_t)0x1234, 0), CUDA_ERROR_INVALID_CONTEXT);
  OK(d.cuCtxEnablePeerAccess(peer_ctx[1], 0));
  CHECK_CU(d.cuCtxEnablePeerAccess(peer_ctx[1], 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  CHECK_CU(d.cuCtxDisablePeerAccess(peer_ctx[2]), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  OK(d.cuCtxDisablePeerAccess(peer_ctx[1]));
  CHECK_CU(d.cuCtxDisablePeerAccess(peer_ctx[1]), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  /* One way: device 0 may not reach device 2, device 2 still reaches device 0. */
  cuv_sim_set_peer_access(0, 2, 0);
  OK(d.cuDeviceCanAccessPeer(&can, 0, 2));
  CHECK(can == 0);
  CHECK_CU(d.cuCtxEnablePeerAccess(peer_ctx[2], 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
  OK(d.cuDeviceCanAccessPeer(&can, 2, 0));
  CHECK(can == 1);
  cuv_sim_set_peer_access(0, 2, 1);
  /* At most 8 peers per context. */
  for (int i = 1; i <= 8; i++)
    OK(d.cuCtxEnablePeerAccess(peer_ctx[i], 0));
  CHECK_CU(d.cuCtxEnablePeerAccess(peer_ctx[9], 0), CUDA_ERROR_TOO_MANY_PEERS);
  /* A reset takes the access to and from the context with it. */
  OK(d.cuDevicePrimaryCtxReset(1));
  OK(d.cuDevicePrimaryCtxRetain(&peer_ctx[1], 1));
  OK(d.cuCtxEnablePeerAccess(peer_ctx[1], 0));
  CHECK_CU(d.cuCtxEnablePeerAccess(peer_ctx[9], 0), CUDA_ERROR_TOO_MANY_PEERS);
  for (int i = 1; i <= 8; i++)
    OK(d.cuCtxDisablePeerAccess(peer_ctx[i]));
}

static CUdeviceptr alloc_on(int dev, size_t bytes) {
  CUdeviceptr p;
  OK(d.cuCtxSetCurrent(peer_ctx[dev]));
  OK(d.cuMemAlloc(&p, bytes));
  return p;
}

static CUstream stream_on(int dev) {
  CUstream s;
  OK(d.cuCtxSetCurrent(peer_ctx[dev]));
  OK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  return s;
}

/* A copy between two contexts runs on its stream, in its order, whatever context is current; its
 * sides are checked against their own contexts. */
static void test_peer_copy(void) {
  enum { N = 4096 };
  unsigned char *host, *back;
  OK(d.cuMemHostAlloc((void **)&host, N, 0));
  OK(d.cuMemHostAlloc((void **)&back, N, 0));
  for (int i = 0; i < N; i++)
    host[i] = (unsigned char)rand();
  memset(back, 0, N);
  CUdeviceptr a = alloc_on(0, N), b = alloc_on(1, N);
  CUstream s0 = stream_on(0), s1 = stream_on(1);
  uint32_t *gate = gate_new();
  OK(d.cuMemcpyHtoDAsync(a, host, N, s0));
  gate_block(s0, gate);
  OK(d.cuCtxSetCurrent(peer_ctx[2])); /* neither side's */
  OK(d.cuMemcpyPeerAsync(b, peer_ctx[1], a, peer_ctx[0], N, s0));
  OK(d.cuMemcpyPeerAsync(b, peer_ctx[1], a, peer_ctx[0], 0, s0)); /* nothing to do */
  CHECK_CU(d.cuMemcpyPeerAsync(b, peer_ctx[0], a, peer_ctx[0], N, s0), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(d.cuMemcpyPeerAsync(b + 1, peer_ctx[1], a, peer_ctx[0], N, s0),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(d.cuMemcpyPeerAsync(b, peer_ctx[1], (CUdeviceptr)(uintptr_t)host, peer_ctx[0], N, s0),
           CUDA_ERROR_INVALID_VALUE); /* pinned host memory is no device memory */
  CHECK_CU(d.cuMemcpyPeerAsync(b, (CUcontext)(uintptr_t)0x1234, a, peer_ctx[0], N, s0),
           CUDA_ERROR_INVALID_CONTEXT);
  /* The reader on device 1 waits for an event of device 0's context. */
  CUevent e0;
  OK(d.cuCtxSetCurrent(peer_ctx[0]));
  OK(d.cuEventCreate(&e0, CU_EVENT_DISABLE_TIMING));
  OK(d.cuEventRecord(e0, s0));
  CHECK_CU(d.cuEventRecord(e0, s1), CUDA_ERROR_INVALID_HANDLE); /* another context's stream */
  OK(d.cuCtxSetCurrent(peer_ctx[1]));
  OK(d.cuStreamWaitEvent(s1, e0, 0));
  OK(d.cuMemcpyDtoHAsync(back, b, N, s1));
  sleep_us(2000);
  CHECK_CU(d.cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
  CHECK(back[0] == 0 && back[N - 1] == 0);
  gate_open(gate);
  OK(d.cuStreamSynchronize(s1));
  CHECK(memcmp(back, host, N) == 0);
  /* A kernel runs only on a stream of its module's context. */
  OK(d.cuCtxSetCurrent(peer_ctx[0]));
  load_module();
  void *params[] = {&a};
  CHECK_CU(d.cuLaunchKernel(f_incr, 1, 1, 1, 1, 1, 1, 0, s1, params, NULL),
           CUDA_ERROR_INVALID_HANDLE);
  OK(d.cuLaunchKernel(f_incr, 1, 1, 1, 1, 1, 1, 0, s0, params, NULL));
  OK(d.cuModuleUnload(module));
  OK(d.cuEventDestroy(e0));
  OK(d.cuStreamDestroy(s1));
  OK(d.cuMemFree(b));
  OK(d.cuCtxSetCurrent(peer_ctx[0]));
  OK(d.cuStreamDestroy(s0));
  OK(d.cuMemFree(a));
  OK(d.cuMemFreeHost(gate));
  OK(d.cuMemFreeHost(host));
  OK(d.cuMemFreeHost(back));
}

static int run_peer_mode(void) {
  resolve_all();
  register_kernels();
  test_devices_variable();
  test_peer_access();
  test_peer_copy();
  printf("sim-smoke peer: %d checks passed\n", atomic_load(&checks));
  return 0;
}

int main(int argc, char **argv) {
  bool fault_mode = argc > 1 && strcmp(argv[1], "fault") == 0;
  if (argc > 1 && strcmp(argv[1], "peer") == 0)
    return run_peer_mode();
  test_before_init();
  register_kernels();
  test_init_and_device();
  load_module();
  if (fault_mode) { /* a fault ends the device's use for the process */
    test_sticky_fault();
    printf("sim-smoke fault: %d checks passed\n", atomic_load(&checks));
    return 0;
  }
  test_ctx_synchronize_v2();
  test_fifo();
  test_events();
  test_memops();
  test_hostfn();
  test_kernel();
  test_failure_injection();
  test_capture();
  test_destroy_pending();
  test_reset();
  test_threads();
  test_round_trip();
  OK(d.cuModuleUnload(module));
  OK(d.cuDevicePrimaryCtxRelease(0));
  CHECK_CU(d.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
  printf("sim-smoke: %d checks passed\n", atomic_load(&checks));
  return 0;
}
