// Kernels whose signatures exercise cuv-launchers (tests/launchers/launch.c runs them through
// the generated launchers; twins.c holds their host twins for the simulator): scalars of every
// size, CUDA's vector and half types, structs by value (one over-aligned), twenty parameters,
// typedefs, markers, comments and attributes in odd places, and both ways of saying extern "C".
#include <cuda_fp16.h>
#include <stdint.h>

#include <cuv/kernel.h>

#include "kinds.h"

typedef unsigned int u32;
typedef float real_t;
using count_t = unsigned long long;

// Skipped by the generator: C++ linkage (a mangled name), a template, a device function.
__global__ void cxx_kernel(int *out) { *out = 1; }
template <typename T> __global__ void template_kernel(T *out) { *out = T(1); }
__device__ static unsigned long long widen(long long v) { return (unsigned long long)v; }

namespace kinds {
struct with_methods {
  int v;
  __device__ int get() const { return v; }
};
} // namespace kinds

extern "C" {

// Every scalar width: out[k] = parameter k, widened (floats by their bits).
__global__ void k_scalars(int8_t a, unsigned char b, short c, unsigned short d, int e, u32 f,
                          long g, count_t h, size_t i, float j, double k, bool l,
                          CUV_OUT unsigned long long *out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  out[0] = widen(a); out[1] = b; out[2] = widen(c); out[3] = d; out[4] = widen(e); out[5] = f;
  out[6] = widen(g); out[7] = h; out[8] = i; out[9] = __float_as_uint(j);
  out[10] = (unsigned long long)__double_as_longlong(k); out[11] = l ? 1 : 0;
}

// Vector types and __half: out[] = their members in order, widened (floats by their bits).
__global__ void k_vectors(double2 d2, float4 f4, uchar3 c3, short2 s2, longlong4_32a l4,
                          __half h, unsigned long long *out /* cuv:out */) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  unsigned long long *o = out;
  *o++ = (unsigned long long)__double_as_longlong(d2.x);
  *o++ = (unsigned long long)__double_as_longlong(d2.y);
  *o++ = __float_as_uint(f4.x); *o++ = __float_as_uint(f4.y);
  *o++ = __float_as_uint(f4.z); *o++ = __float_as_uint(f4.w);
  *o++ = c3.x; *o++ = c3.y; *o++ = c3.z;
  *o++ = widen(s2.x); *o++ = widen(s2.y);
  *o++ = widen(l4.x); *o++ = widen(l4.y); *o++ = widen(l4.z); *o++ = widen(l4.w);
  *o++ = __half_as_ushort(h);
}

} // extern "C"

// Structs by value and through buffers: outs[i] = {in[i].a * p.a + g.a, in[i].b + p.b + g.b}.
extern "C" __global__ void
k_structs(unsigned n, kinds_pair_t p, struct kinds_big g, const kinds_big_t *in,
          kinds_big_t *CUV_OUT outs) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  outs[i].a = in[i].a * p.a + g.a;
  outs[i].b = in[i].b + p.b + g.b;
}

extern "C" {
// Twenty parameters: y[i] = sum over k of a_k * x_k[i].
__global__ void k_many(unsigned n, float a0, float a1, float a2, float a3, float a4, float a5,
                       float a6, float a7, float a8, const float *x0, const float *x1,
                       const float *x2, const float *x3, const float *x4, const float *x5,
                       const float *x6, const float *x7, const float *x8, float *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = a0 * x0[i] + a1 * x1[i] + a2 * x2[i] + a3 * x3[i] + a4 * x4[i] + a5 * x5[i] +
         a6 * x6[i] + a7 * x7[i] + a8 * x8[i];
}

// Comments, attributes and qualifiers in odd places: y[i] = s * x[i] + y[i] for i < n.
__global__ void __launch_bounds__(256) /* a comment (with parentheses) */ k_odd(
    const u32 n, // the count, const by value
    [[maybe_unused]] real_t s,
    real_t const *__restrict__ x /* read: points to const */,
    real_t *__restrict__ const y) __attribute__((used));
}

extern "C" __global__ void __launch_bounds__(256) k_odd(const u32 n, real_t s,
                                                        real_t const *__restrict__ x,
                                                        real_t *__restrict__ const y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = s * x[i] + y[i];
}

// A pointer marked read though not to const, and one to void: out[i] = in[i] ^ key.
extern "C" __global__ void k_xor(std::size_t n, CUV_IN unsigned *in, unsigned key, void *out) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) ((unsigned *)out)[i] = in[i] ^ key;
}
