// The package's copy of cuv's apps/tcp-infer/mlp.cu, the same below (README.md here).
// tcp-infer's kernels, compiled to PTX by nvcc at build time and launched through the typed
// launchers cuv-launchers generates from this file (mlp_launchers.h). mlp_dense: one dense layer,
// bias and optional ReLU fused, one thread per output element. Its host twin for the simulator
// is mlp_dense in mlp.c (same name, same parameters, same order of additions).
#include <cuv/kernel.h>

extern "C" __global__ void mlp_dense(unsigned rows, unsigned in_dim, unsigned out_dim,
                                     const float *x, const float *w, const float *b,
                                     CUV_OUT float *y, unsigned relu) {
  unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= rows * out_dim) return;
  unsigned r = idx / out_dim, o = idx % out_dim;
  const float *xr = x + (size_t)r * in_dim, *wo = w + (size_t)o * in_dim;
  float acc = b[o];
  for (unsigned i = 0; i < in_dim; i++) acc += xr[i] * wo[i];
  y[idx] = relu && acc < 0.0f ? 0.0f : acc;
}

// The --cublas path's epilogue: y = act(y + b), after cublasSgemm wrote y = x W^T.
extern "C" __global__ void mlp_bias_act(unsigned rows, unsigned n, float *y, const float *b,
                                        unsigned relu) {
  unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= rows * n) return;
  float v = y[idx] + b[idx % n];
  y[idx] = relu && v < 0.0f ? 0.0f : v;
}

// tcp-infer --isolate --debug-fault (POST /debug/fault): a write through a bad pointer (the
// worker passes 0x10: the GPU's first page is never mapped), an illegal address, which is a
// sticky fault: the context is dead for the rest of the worker process. Host twin: worker.c.
// The address is a number, not a buffer: no buffer holds it.
extern "C" __global__ void mlp_fault(unsigned long long bad) { *(unsigned *)bad = 1u; }

// tcp-infer --isolate --debug-fault (POST /debug/hang): a kernel that never ends, as far as the
// front can tell: it spins on a flag nobody sets. The guard (guard_ns of the GPU's global timer,
// the worker passes 60 s) ends it anyway, so that a machine whose front does not kill the worker
// (--isolate-timeout 0) is not wedged for ever; killing the worker frees the GPU sooner (the
// driver tears its context down). Host twin: worker.c.
__device__ volatile unsigned mlp_hang_flag;

extern "C" __global__ void mlp_hang(unsigned long long guard_ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (mlp_hang_flag == 0 && now - start < guard_ns);
}
