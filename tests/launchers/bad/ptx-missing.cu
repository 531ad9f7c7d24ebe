// expect: 3: kernel drain: no .entry drain in
extern "C" __global__ void fill(float *x, unsigned n) {}
extern "C" __global__ void drain(float *x) {}
