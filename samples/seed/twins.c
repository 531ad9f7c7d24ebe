/* Host twins of seed.cu for libcuv-sim (include/cuv/sim.h): same names and parameters, the same
 * arithmetic in the same order; each runs the whole grid. Simulated device memory is host
 * memory, so a device pointer is a host address. Built without the simulator, registering does
 * nothing. */
#include <stddef.h>

#include "seed.h"

#ifdef SEED_WITH_SIM
#include <stdint.h>
#include <string.h>

#include <cuv.h>
#include <cuv/sim.h>

#define ARG(i, type, var)                                                                          \
  type var;                                                                                        \
  memcpy(&var, params[i], sizeof var)
#define DEV(i, type, var)                                                                          \
  cuv_deviceptr_t var##_at;                                                                        \
  memcpy(&var##_at, params[i], sizeof var##_at);                                                   \
  type *var = (type *)(uintptr_t)var##_at

static int saxpy(const cuv_sim_launch_t *launch, void **params) {
  ARG(0, unsigned, n);
  ARG(1, float, a);
  DEV(2, const float, x);
  DEV(3, float, y);
  for (unsigned i = 0; i < n; i++)
    y[i] = a * x[i] + y[i];
  return 0;
}

/* Every (row, col) of the grid of tiles, as the kernel's threads compute them. */
static int saxpy_tile(const cuv_sim_launch_t *launch, void **params) {
  ARG(0, unsigned, ld);
  ARG(1, float, a);
  DEV(2, const float, x);
  DEV(3, float, y);
  size_t rows = (size_t)launch->grid[1] * launch->block[1];
  size_t cols = (size_t)launch->grid[0] * launch->block[0];
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++)
      y[r * ld + c] = a * x[r * ld + c] + y[r * ld + c];
  return 0;
}

static int vecadd(const cuv_sim_launch_t *launch, void **params) {
  DEV(0, const float, a);
  DEV(1, const float, b);
  DEV(2, float, c);
  ARG(3, unsigned, n);
  for (unsigned i = 0; i < n; i++)
    c[i] = a[i] + b[i];
  return 0;
}

static int gemm(const cuv_sim_launch_t *launch, void **params) {
  ARG(0, unsigned, m);
  ARG(1, unsigned, n);
  ARG(2, unsigned, k);
  DEV(3, const float, a);
  DEV(4, const float, b);
  DEV(5, float, c);
  seed_gemm(m, n, k, a, b, c);
  return 0;
}

static int relu(const cuv_sim_launch_t *launch, void **params) {
  ARG(0, unsigned, n);
  DEV(1, float, x);
  seed_relu(n, x);
  return 0;
}

void seed_register_twins(void) {
  const size_t u = sizeof(unsigned), f = sizeof(float), p = sizeof(cuv_deviceptr_t);
  const size_t saxpy_sizes[] = {u, f, p, p}, vecadd_sizes[] = {p, p, p, u};
  const size_t saxpy_tile_sizes[] = {u, f, p, p};
  const size_t gemm_sizes[] = {u, u, u, p, p, p}, relu_sizes[] = {u, p};
  cuv_sim_register_kernel("saxpy", saxpy, 4, saxpy_sizes);
  cuv_sim_register_kernel("saxpy_tile", saxpy_tile, 4, saxpy_tile_sizes);
  cuv_sim_register_kernel("vecadd", vecadd, 4, vecadd_sizes);
  cuv_sim_register_kernel("gemm", gemm, 6, gemm_sizes);
  cuv_sim_register_kernel("relu", relu, 2, relu_sizes);
}
#else
void seed_register_twins(void) {}
#endif

void seed_gemm(unsigned m, unsigned n, unsigned k, const float *a, const float *b, float *c) {
  for (unsigned i = 0; i < m * n; i++) {
    unsigned r = i / n, col = i % n;
    float acc = 0.0f;
    for (unsigned j = 0; j < k; j++)
      acc += a[r * k + j] * b[j * n + col];
    c[i] = acc;
  }
}

void seed_relu(unsigned n, float *x) {
  for (unsigned i = 0; i < n; i++)
    if (x[i] < 0.0f)
      x[i] = 0.0f;
}
