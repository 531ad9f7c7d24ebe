// expect: 2: kernel fill: parameter 'x' is read as a pointer but is 4 bytes in
extern "C" __global__ void fill(float *x, unsigned n) {}
