// expect: 2: parameter 1 of kernel apply is a function pointer
extern "C" __global__ void apply(float (*op)(float), float *x) {}
