// expect: 3: parameter 'n' of kernel fill has a default argument
extern "C" __global__ void fill(float *x,
                                unsigned n = 256) {}
