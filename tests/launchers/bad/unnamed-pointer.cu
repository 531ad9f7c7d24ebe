// expect: 2: parameter 1 of kernel zero has no name
extern "C" __global__ void zero(float *, unsigned n) {}
