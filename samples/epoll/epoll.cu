// The sample's kernel, compiled to PTX by nvcc at build time. Its host twin for the simulator is
// in epoll.c (same name, same parameters).
extern "C" __global__ void affine(unsigned n, float a, float b, float *x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + b;
}
