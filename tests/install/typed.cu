// The kernel of consumer-typed.c, whose typed launcher the installed cuv-launchers generates (the
// install test), and cuv-launchers of cuv as a subproject (the subproject test). Its twin is in
// consumer-typed.c; typed-sim.ptx lists its entry for the simulator (nvcc is not run here).
#include <cuv/kernel.h>

// y = 2 x + b
extern "C" __global__ void twice(unsigned n, float b, const float *x, CUV_OUT float *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + b;
}
