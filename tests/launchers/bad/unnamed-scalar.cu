// expect: 4: parameter 2 of kernel zero has no name
extern "C" {
__global__ void zero(float *x,
                     unsigned long) {}
}
