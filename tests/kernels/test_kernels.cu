// Kernels of the test suites, compiled to PTX by nvcc at build time. Each has a host twin in
// twins.c with the same name and parameters, registered for libcuv-sim.
#include <stdint.h>

#include "arg-types.h"

extern "C" {

__global__ void empty_kernel(void) {}

__global__ void saxpy(unsigned n, float a, const float *x, float *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Over a partition (tests/tensors): one block per tile, one thread per tile element; ldx and
// ldy are the row strides of x and y in elements. y = a x + y.
__global__ void tile_saxpy(unsigned ldx, unsigned ldy, float a, const float *x, float *y) {
  unsigned row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  y[row * ldy + col] = a * x[row * ldx + col] + y[row * ldy + col];
}

// Two partitions of one shape written at once: y0 = a, y1 = b, both with row stride ld.
__global__ void tile_set2(unsigned ld, float a, float *y0, float b, float *y1) {
  unsigned row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  y0[row * ld + col] = a;
  y1[row * ld + col] = b;
}

__global__ void fill_u32(unsigned n, unsigned value, unsigned *out) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

__global__ void scale(unsigned n, float factor, float *x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void add_one(unsigned n, float *x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

// Sum of n floats into out[0] (out must be zeroed first), one atomic per block.
__global__ void sum_reduce(unsigned n, const float *in, float *out) {
  __shared__ float partial[256];
  unsigned t = threadIdx.x;
  float acc = 0.0f;
  for (unsigned i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) acc += in[i];
  partial[t] = acc;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];
    __syncthreads();
  }
  if (t == 0) atomicAdd(out, partial[0]);
}

// Copies n floats; lets the tests prove a reader saw a writer's data.
__global__ void copy_f32(unsigned n, const float *in, float *out) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

// Two outputs: x[i] = a, then y[i] = b (tests/ops/args-unique.c gives it two ranges of one buffer).
__global__ void fill_two_u32(unsigned n, unsigned a, unsigned *x, unsigned b, unsigned *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    x[i] = a;
    y[i] = b;
  }
}

// Busy for at least ns nanoseconds (one thread is enough), then writes `value` to *flag.
__global__ void sleep_then_write(unsigned long long ns, unsigned value, unsigned *flag) {
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) break;
    __nanosleep(1000);
  }
  if (flag) *flag = value;
}

// The concurrency pair: wait_flag spins (one thread) until *flag == value, reading it through a
// volatile pointer so that each poll loads what another kernel wrote, and gives up after
// timeout_ns; it writes 1 to *result when it saw the value, 2 when it timed out. set_flag writes
// the value. A driver that runs two streams' kernels one after the other makes a wait_flag
// launched before its set_flag report 2 instead of hanging.
__global__ void wait_flag(unsigned long long timeout_ns, unsigned value, const unsigned *flag,
                          unsigned *result) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const volatile unsigned *f = flag;
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    if (*f == value) {
      *result = 1u;
      return;
    }
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= timeout_ns) {
      *result = 2u;
      return;
    }
    __nanosleep(200);
  }
}

__global__ void set_flag(unsigned value, unsigned *flag) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  *(volatile unsigned *)flag = value;
  __threadfence();
}

// Writes through a bad pointer: an illegal address, the sticky fault.
__global__ void fault_kernel(unsigned *bad) { *bad = 1u; }

// Over-aligned parameters mixed with pointers (tests/ops/args-aligned.c): each reads every byte of
// its parameters, so a value placed at the wrong offset shows in the results.
__global__ void args_f4(unsigned n, cuvt_f4 v, const float *x, float *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * v.x + v.y * v.z - v.w;
}

__global__ void args_double2(unsigned n, double2 ab, const double *x, double *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = ab.x * x[i] + ab.y;
}

// An 8-byte value after a 1-byte one.
__global__ void args_u8_u64(unsigned char shift, unsigned long long add,
                            const unsigned long long *x, unsigned long long *y, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = (x[i] << shift) + add;
}

__global__ void args_a32(signed char tag, cuvt_a32 s, const float *x, float *y, unsigned n,
                         cuvt_dq q) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * s.v[i % 8] + (float)tag + (float)q.a + q.b;
}

}  // extern "C"
