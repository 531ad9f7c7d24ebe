// expect: 3: parameter 'x' of kernel copy points to const but is marked out
#include <cuv/kernel.h>
extern "C" __global__ void copy(CUV_OUT const float *x, float *y) {}
