// The package's copy of cuv's samples/saxpy/saxpy.cu, the same below (README.md here); its
// host twin here is src/twins.c's, not saxpy.c's.
// The sample's kernel, compiled to PTX by nvcc at build time. Its host twin for the simulator is
// in saxpy.c (same name, same parameters).
extern "C" __global__ void saxpy(unsigned n, float a, const float *x, float *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
