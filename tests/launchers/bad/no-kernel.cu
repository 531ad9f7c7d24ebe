// expect: 1: no extern "C" __global__ kernel
// Kernels with C++ linkage only: their names are mangled.
__global__ void scale(float *x) {}
extern "C++" { __global__ void shift(float *x) {} }
