// expect: 3: unterminated comment
extern "C" __global__ void fill(float *x, unsigned n) {}
/* an unterminated
   comment
