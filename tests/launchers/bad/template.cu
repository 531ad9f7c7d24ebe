// expect: 5: kernel scale is a template: a template has no C name
// A template has no C name (nvcc refuses C linkage for it too): refused, not skipped.
extern "C" {
template <typename T>
__global__ void scale(unsigned n, T factor, T *x) {}
}
