// expect: 4: parameter 'rows' of kernel gather is a pointer to a pointer
typedef float *row_t;
extern "C" __global__ void gather(float *out,
                                  row_t *rows) {}
