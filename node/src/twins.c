/* Host twins of the package's kernels (twins.h). saxpy is kernels/saxpy.cu's; mlp_dense is
 * kernels/mlp.cu's, whose twin is tcp-infer's host reference (kernels/mlp.c); the cuv_node_* ones
 * are kernels/testing.cu's. Simulated device memory is host memory, so a CUdeviceptr parameter
 * is the host address. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "mlp.h"
#include "twins.h"

#define P(i, type) (*(type *)params[i])
#define PTR(i, type) ((type *)(uintptr_t)P(i, CUdeviceptr))

static size_t threads(const cuv_sim_launch_t *l) {
  return (size_t)l->grid[0] * l->grid[1] * l->grid[2] * l->block[0] * l->block[1] * l->block[2];
}

static int saxpy(const cuv_sim_launch_t *l, void **params) {
  unsigned n = P(0, unsigned);
  float a = P(1, float);
  const float *x = PTR(2, const float);
  float *y = PTR(3, float);
  for (size_t i = 0; i < n && i < threads(l); i++)
    y[i] = a * x[i] + y[i];
  return 0;
}

/* The addon launches at least rows * out threads (the kernel's guard covers the rest). */
static int dense(const cuv_sim_launch_t *l, void **params) {
  mlp_dense(P(0, unsigned), P(1, unsigned), P(2, unsigned), PTR(3, const float),
            PTR(4, const float), PTR(5, const float), PTR(6, float), P(7, unsigned));
  return 0;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int gate(const cuv_sim_launch_t *l, void **params) {
  uint64_t timeout_ns = P(0, unsigned long long), start = now_ns();
  const unsigned *flag = PTR(1, const unsigned);
  unsigned *state = PTR(2, unsigned);
  struct timespec pause = {0, 20000};
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0) {
    if (now_ns() - start >= timeout_ns) {
      *state += 2u;
      return 0;
    }
    nanosleep(&pause, NULL);
  }
  *state += 1u;
  return 0;
}

static int bump(const cuv_sim_launch_t *l, void **params) {
  unsigned *state = PTR(0, unsigned);
  *state += 4u;
  *PTR(1, unsigned) = *state;
  return 0;
}

static int echo(const cuv_sim_launch_t *l, void **params) {
  uint64_t *out = PTR(10, uint64_t);
  uint32_t f32_bits;
  memcpy(&f32_bits, params[8], sizeof f32_bits);
  out[0] = (uint64_t)(int64_t)P(0, int8_t);
  out[1] = P(1, uint8_t);
  out[2] = (uint64_t)(int64_t)P(2, int16_t);
  out[3] = P(3, uint16_t);
  out[4] = (uint64_t)(int64_t)P(4, int32_t);
  out[5] = P(5, uint32_t);
  out[6] = (uint64_t)P(6, int64_t);
  out[7] = P(7, uint64_t);
  out[8] = f32_bits;
  memcpy(&out[9], params[9], sizeof out[9]);
  return 0;
}

void cuv_node_twins_register(cuv_node_register_fn register_kernel) {
  static const size_t saxpy_sizes[] = {4, 4, 8, 8};
  static const size_t dense_sizes[] = {4, 4, 4, 8, 8, 8, 8, 4};
  static const size_t gate_sizes[] = {8, 8, 8};
  static const size_t bump_sizes[] = {8, 8};
  static const size_t echo_sizes[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8};
  register_kernel("saxpy", saxpy, 4, saxpy_sizes);
  register_kernel("mlp_dense", dense, 8, dense_sizes);
  register_kernel("cuv_node_gate", gate, 3, gate_sizes);
  register_kernel("cuv_node_bump", bump, 2, bump_sizes);
  register_kernel("cuv_node_echo", echo, 11, echo_sizes);
}
