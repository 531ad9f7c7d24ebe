// expect: 2: parameter 2 of kernel add is a reference
extern "C" __global__ void add(float *x, const float &y) {}
