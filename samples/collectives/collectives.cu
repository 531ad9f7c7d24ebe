// The collectives sample's kernels, compiled to PTX by nvcc at build time. Their host twins for
// the simulator are in collectives.c (same names, same parameters).

// A gradient-like vector of rank `rank` at step `step`: g = w / 2 + c(rank, i, step).
extern "C" __global__ void dp_grad(unsigned n, unsigned step, unsigned rank, const float *w,
                                   float *g) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) g[i] = 0.5f * w[i] + (float)((rank + 1u) * ((i + step) % 7u));
}

// The update with the averaged gradient: w -= lr * g.
extern "C" __global__ void dp_apply(unsigned n, float lr, const float *g, float *w) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) w[i] -= lr * g[i];
}
