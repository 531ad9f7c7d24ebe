// expect: 2: parameter 1 of kernel copy is marked both in and out
extern "C" __global__ void copy(CUV_IN float *x /* cuv:out */, float *y) {}
