/* Host twins of the kernels the addon runs, for libcuv-sim: same names, same parameters, same
 * results. saxpy is samples/saxpy/saxpy.cu's; mlp_dense is apps/tcp-infer/mlp.cu's, whose twin
 * is tcp-infer's host reference (mlp.c). Simulated device memory is host memory, so a
 * CUdeviceptr parameter is the host address. */
#include <stdint.h>

#include <cuda.h>
#include <cuv/sim.h>

#include "../../apps/tcp-infer/mlp.h"
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

void cuv_node_register_twins(void) {
  static const size_t saxpy_sizes[] = {sizeof(unsigned), sizeof(float), sizeof(CUdeviceptr),
                                       sizeof(CUdeviceptr)};
  static const size_t dense_sizes[] = {sizeof(unsigned),    sizeof(unsigned),
                                       sizeof(unsigned),    sizeof(CUdeviceptr),
                                       sizeof(CUdeviceptr), sizeof(CUdeviceptr),
                                       sizeof(CUdeviceptr), sizeof(unsigned)};
  cuv_sim_register_kernel("saxpy", saxpy, 4, saxpy_sizes);
  cuv_sim_register_kernel("mlp_dense", dense, 8, dense_sizes);
}
