// The pipeline sample's kernels, compiled to PTX by nvcc at build time. Their host twins for the
// simulator are in pipeline.c (same names, same parameters); their typed launchers are generated
// by cuv-launchers, which reads CUV_OUT: the kernel only writes that buffer.
#include <cuv/kernel.h>

// u = a*x + y
extern "C" __global__ void pl_axpy(unsigned n, float a, const float *x, const float *y,
                                   CUV_OUT float *u) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) u[i] = a * x[i] + y[i];
}

// v = x*y
extern "C" __global__ void pl_mul(unsigned n, const float *x, const float *y, CUV_OUT float *v) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = x[i] * y[i];
}

// w = u - v
extern "C" __global__ void pl_sub(unsigned n, const float *u, const float *v, CUV_OUT float *w) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) w[i] = u[i] - v[i];
}

// Keeps its stream busy for `ns` nanoseconds (one thread reading the global timer), so that a
// stage lasts long enough on any GPU for the loop's timer to tick while it runs.
extern "C" __global__ void pl_delay(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
