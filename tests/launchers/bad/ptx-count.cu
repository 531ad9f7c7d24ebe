// expect: 2: kernel fill: 2 parameters read from the signature, 1 in
extern "C" __global__ void fill(float *x, unsigned n) {}
