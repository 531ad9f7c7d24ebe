// The kernels of the seed's README examples (samples/seed/seed.c), compiled to PTX by nvcc at
// build time and launched through the typed launchers cuv-launchers generates from this file.
// Host twins for the simulator: twins.c (same names, same parameters).
#include <cuv/kernel.h>

extern "C" {

// y = a * x + y
__global__ void saxpy(unsigned n, float a, const float *x, float *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// y = a * x + y over a partition of y: one block per tile and one thread per tile element
// (cuv_partition_launch_config); ld is the row stride of x and y, in elements.
__global__ void saxpy_tile(unsigned ld, float a, const float *x, float *y) {
  unsigned row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  y[row * ld + col] = a * x[row * ld + col] + y[row * ld + col];
}

// c = a + b
__global__ void vecadd(const float *a, const float *b, CUV_OUT float *c, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// c[m][n] = sum over j of a[m][j] * b[j][n], row-major; one thread per element of c.
__global__ void gemm(unsigned m, unsigned n, unsigned k, const float *a, const float *b,
                     CUV_OUT float *c) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m * n) return;
  unsigned r = i / n, col = i % n;
  float acc = 0.0f;
  for (unsigned j = 0; j < k; j++) acc += a[r * k + j] * b[j * n + col];
  c[i] = acc;
}

// x = max(x, 0)
__global__ void relu(unsigned n, float *x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && x[i] < 0.0f) x[i] = 0.0f;
}

}  // extern "C"
