// expect: 2: parameter 'n' of kernel copy is marked out but is not a pointer
extern "C" __global__ void copy(unsigned n /* cuv:out */, float *y) {}
