// expect: 4: parameter 1 of kernel sum has a template type
template <typename T, int N> struct vec { T v[N]; };
extern "C" __global__ void
sum(vec<float, 4> v, float *out) {}
