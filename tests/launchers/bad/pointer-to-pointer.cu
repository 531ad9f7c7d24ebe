// expect: 2: parameter 'rows' of kernel gather is a pointer to a pointer
extern "C" __global__ void gather(const float *const *rows, float *out) {}
