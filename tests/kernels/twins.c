/* Host twins of test_kernels.cu for libcuv-sim: same names, same parameters, same results. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuv/sim.h>

#include "arg-types.h"
#include "twins.h"

#define N_THREADS(l) ((size_t)(l)->grid[0] * (l)->grid[1] * (l)->grid[2] * (l)->block[0] * \
                      (l)->block[1] * (l)->block[2])
#define P(i, type) (*(type *)params[i])
#define PTR(i, type) ((type *)(uintptr_t)P(i, CUdeviceptr))

static int empty_kernel(const cuv_sim_launch_t *l, void **params) { return 0; }

static int saxpy(const cuv_sim_launch_t *l, void **params) {
  unsigned n = P(0, unsigned);
  float a = P(1, float);
  const float *x = PTR(2, const float);
  float *y = PTR(3, float);
  size_t threads = N_THREADS(l);
  for (size_t i = 0; i < n && i < threads; i++)
    y[i] = a * x[i] + y[i];
  return 0;
}

/* The (row, col) of each thread of a 2-D grid of 2-D blocks, as tile kernels compute it. */
#define FOR_EACH_2D(l, row, col)                                                                   \
  for (size_t row = 0; row < (size_t)(l)->grid[1] * (l)->block[1]; row++)                       \
    for (size_t col = 0; col < (size_t)(l)->grid[0] * (l)->block[0]; col++)

static int tile_saxpy(const cuv_sim_launch_t *l, void **params) {
  unsigned ldx = P(0, unsigned), ldy = P(1, unsigned);
  float a = P(2, float);
  const float *x = PTR(3, const float);
  float *y = PTR(4, float);
  FOR_EACH_2D(l, row, col)
  y[row * ldy + col] = a * x[row * ldx + col] + y[row * ldy + col];
  return 0;
}

static int tile_set2(const cuv_sim_launch_t *l, void **params) {
  unsigned ld = P(0, unsigned);
  float a = P(1, float), b = P(3, float);
  float *y0 = PTR(2, float), *y1 = PTR(4, float);
  FOR_EACH_2D(l, row, col) {
    y0[row * ld + col] = a;
    y1[row * ld + col] = b;
  }
  return 0;
}

static int fill_u32(const cuv_sim_launch_t *l, void **params) {
  unsigned n = P(0, unsigned), value = P(1, unsigned);
  unsigned *out = PTR(2, unsigned);
  size_t threads = N_THREADS(l);
  for (size_t i = 0; i < n && i < threads; i++)
    out[i] = value;
  return 0;
}

static int scale(const cuv_sim_launch_t *l, void **params) {
  unsigned n = P(0, unsigned);
  float factor = P(1, float);
  float *x = PTR(2, float);
  size_t threads = N_THREADS(l);
  for (size_t i = 0; i < n && i < threads; i++)
    x[i] *= factor;
  return 0;
}

static int add_one(const cuv_sim_launch_t *l, void **params) {
  unsigned n = P(0, unsigned);
  float *x = PTR(1, float);
  size_t threads = N_THREADS(l);
  for (size_t i = 0; i < n && i < threads; i++)
    x[i] += 1.0f;
  return 0;
}

static int sum_reduce(const cuv_sim_launch_t *l, void **params) {
  unsigned n = P(0, unsigned);
  const float *in = PTR(1, const float);
  float *out = PTR(2, float);
  float acc = 0.0f;
  for (size_t i = 0; i < n; i++)
    acc += in[i];
  *out += acc;
  return 0;
}

static int copy_f32(const cuv_sim_launch_t *l, void **params) {
  unsigned n = P(0, unsigned);
  const float *in = PTR(1, const float);
  float *out = PTR(2, float);
  size_t threads = N_THREADS(l);
  for (size_t i = 0; i < n && i < threads; i++)
    out[i] = in[i];
  return 0;
}

static int fill_two_u32(const cuv_sim_launch_t *l, void **params) {
  unsigned n = P(0, unsigned), a = P(1, unsigned), b = P(3, unsigned);
  unsigned *x = PTR(2, unsigned), *y = PTR(4, unsigned);
  size_t threads = N_THREADS(l);
  for (size_t i = 0; i < n && i < threads; i++) {
    x[i] = a;
    y[i] = b;
  }
  return 0;
}

static int sleep_then_write(const cuv_sim_launch_t *l, void **params) {
  unsigned long long ns = P(0, unsigned long long);
  unsigned value = P(1, unsigned);
  unsigned *flag = PTR(2, unsigned);
  struct timespec t = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  nanosleep(&t, NULL);
  if (flag)
    *flag = value;
  return 0;
}

/* The flag is written by another stream's worker while this one polls: atomic accesses on both
 * sides (the GPU's volatile accesses), and sleeps between polls so the spin leaves the CPU to the
 * setter on a small machine. */
static int wait_flag(const cuv_sim_launch_t *l, void **params) {
  unsigned long long timeout_ns = P(0, unsigned long long);
  unsigned value = P(1, unsigned);
  const unsigned *flag = PTR(2, const unsigned);
  unsigned *result = PTR(3, unsigned);
  struct timespec start, now, pause = {0, 20000};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == value) {
      *result = 1u;
      return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    unsigned long long elapsed = (unsigned long long)(now.tv_sec - start.tv_sec) * 1000000000ull +
                                 (unsigned long long)(now.tv_nsec - start.tv_nsec);
    if (elapsed >= timeout_ns) {
      *result = 2u;
      return 0;
    }
    nanosleep(&pause, NULL);
  }
}

static int set_flag(const cuv_sim_launch_t *l, void **params) {
  __atomic_store_n(PTR(1, unsigned), P(0, unsigned), __ATOMIC_RELEASE);
  return 0;
}

static int fault_kernel(const cuv_sim_launch_t *l, void **params) {
  return CUDA_ERROR_ILLEGAL_ADDRESS;
}

/* The over-aligned parameters are read in place: the simulator hands each at its alignment. */
static int args_f4(const cuv_sim_launch_t *l, void **params) {
  unsigned n = P(0, unsigned);
  const struct cuvt_f4 *v = params[1];
  const float *x = PTR(2, const float);
  float *y = PTR(3, float);
  size_t threads = N_THREADS(l);
  for (size_t i = 0; i < n && i < threads; i++)
    y[i] = x[i] * v->x + v->y * v->z - v->w;
  return 0;
}

static int args_double2(const cuv_sim_launch_t *l, void **params) {
  unsigned n = P(0, unsigned);
  const struct cuvt_d2 *ab = params[1];
  const double *x = PTR(2, const double);
  double *y = PTR(3, double);
  size_t threads = N_THREADS(l);
  for (size_t i = 0; i < n && i < threads; i++)
    y[i] = ab->x * x[i] + ab->y;
  return 0;
}

static int args_u8_u64(const cuv_sim_launch_t *l, void **params) {
  unsigned char shift = P(0, unsigned char);
  unsigned long long add = P(1, unsigned long long);
  const unsigned long long *x = PTR(2, const unsigned long long);
  unsigned long long *y = PTR(3, unsigned long long);
  unsigned n = P(4, unsigned);
  size_t threads = N_THREADS(l);
  for (size_t i = 0; i < n && i < threads; i++)
    y[i] = (x[i] << shift) + add;
  return 0;
}

static int args_a32(const cuv_sim_launch_t *l, void **params) {
  signed char tag = P(0, signed char);
  struct cuvt_a32 s_value; /* copied out: the driver places parameters at most 16-aligned */
  memcpy(&s_value, params[1], sizeof s_value);
  const struct cuvt_a32 *s = &s_value;
  const float *x = PTR(2, const float);
  float *y = PTR(3, float);
  unsigned n = P(4, unsigned);
  const struct cuvt_dq *q = params[5];
  size_t threads = N_THREADS(l);
  for (size_t i = 0; i < n && i < threads; i++)
    y[i] = x[i] * s->v[i % 8] + (float)tag + (float)q->a + q->b;
  return 0;
}

/* Sizes and alignments as the C types have them, which is how nvcc lays out the parameters. */
#define ARG(type) sizeof(type), _Alignof(type)

static void register_aligned(const char *name, cuv_sim_kernel_fn fn, size_t n,
                             const size_t *size_align) {
  size_t sizes[8], aligns[8];
  for (size_t i = 0; i < n; i++) {
    sizes[i] = size_align[2 * i];
    aligns[i] = size_align[2 * i + 1];
  }
  cuv_sim_register_kernel_aligned(name, fn, n, sizes, aligns);
}

static void register_over_aligned(void) {
  static const size_t f4[] = {ARG(unsigned), ARG(struct cuvt_f4), ARG(void *), ARG(void *)};
  static const size_t d2[] = {ARG(unsigned), ARG(struct cuvt_d2), ARG(void *), ARG(void *)};
  static const size_t u8_u64[] = {ARG(unsigned char), ARG(unsigned long long), ARG(void *),
                                  ARG(void *), ARG(unsigned)};
  static const size_t a32[] = {ARG(signed char), ARG(struct cuvt_a32), ARG(void *),
                               ARG(void *),      ARG(unsigned),        ARG(struct cuvt_dq)};
  register_aligned("args_f4", args_f4, 4, f4);
  register_aligned("args_double2", args_double2, 4, d2);
  register_aligned("args_u8_u64", args_u8_u64, 5, u8_u64);
  register_aligned("args_a32", args_a32, 6, a32);
}

void cuvt_register_twins(void) {
  static const size_t p_none[1] = {0};
  static const size_t p_saxpy[] = {4, 4, 8, 8};
  static const size_t p_u4_u4_ptr[] = {4, 4, 8};
  static const size_t p_u4_f4_ptr[] = {4, 4, 8};
  static const size_t p_u4_ptr[] = {4, 8};
  static const size_t p_u4_ptr_ptr[] = {4, 8, 8};
  static const size_t p_sleep[] = {8, 4, 8};
  static const size_t p_ptr[] = {8};
  cuv_sim_register_kernel("empty_kernel", empty_kernel, 0, p_none);
  cuv_sim_register_kernel("saxpy", saxpy, 4, p_saxpy);
  cuv_sim_register_kernel("fill_u32", fill_u32, 3, p_u4_u4_ptr);
  cuv_sim_register_kernel("scale", scale, 3, p_u4_f4_ptr);
  cuv_sim_register_kernel("add_one", add_one, 2, p_u4_ptr);
  cuv_sim_register_kernel("sum_reduce", sum_reduce, 3, p_u4_ptr_ptr);
  cuv_sim_register_kernel("copy_f32", copy_f32, 3, p_u4_ptr_ptr);
  static const size_t p_fill_two[] = {4, 4, 8, 4, 8};
  cuv_sim_register_kernel("fill_two_u32", fill_two_u32, 5, p_fill_two);
  cuv_sim_register_kernel("sleep_then_write", sleep_then_write, 3, p_sleep);
  cuv_sim_register_kernel("fault_kernel", fault_kernel, 1, p_ptr);
  static const size_t p_wait_flag[] = {8, 4, 8, 8};
  cuv_sim_register_kernel("wait_flag", wait_flag, 4, p_wait_flag);
  cuv_sim_register_kernel("set_flag", set_flag, 2, p_u4_ptr);
  static const size_t p_tile_saxpy[] = {4, 4, 4, 8, 8};
  static const size_t p_tile_set2[] = {4, 4, 8, 4, 8};
  cuv_sim_register_kernel("tile_saxpy", tile_saxpy, 5, p_tile_saxpy);
  cuv_sim_register_kernel("tile_set2", tile_set2, 5, p_tile_set2);
  register_over_aligned();
}
