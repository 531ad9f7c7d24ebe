// expect: 3: kernel fill is declared again with other parameters (line 2)
extern "C" __global__ void fill(float *x, unsigned n);
extern "C" __global__ void fill(float *x, int n) {}
