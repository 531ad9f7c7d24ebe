#ifndef CUV_TYPED_H
#define CUV_TYPED_H

/** @file
 * Typed launches: what the launchers that cuv-launchers generates from a .cu file take
 * (docs/launchers.md). A launch configuration (grid, block, dynamic shared memory, with
 * cuv_for_num_elems for one thread per element), and the C names of CUDA's vector and half types,
 * with the device's size, alignment and members, for kernels that take them by value. cuv.h
 * includes this header. */

#include <cuv.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Where and how wide a kernel runs: what cuv_launch takes besides the arguments. */
typedef struct cuv_launch_config {
  cuv_dim3_t grid;       /**< blocks in the grid */
  cuv_dim3_t block;      /**< threads per block */
  unsigned shared_bytes; /**< dynamic shared memory per block */
} cuv_launch_config_t;

/** The block size cuv_for_num_elems uses (cudarc's for_num_elems uses 1024). */
#define CUV_DEFAULT_BLOCK 256u

/** One thread per element: CUV_DEFAULT_BLOCK threads per block, enough blocks for n elements.
 *
 * The kernel ignores threads past n.
 * There is no shared memory.
 *
 * @returns The configuration; for n == 0, or more blocks than a grid holds (2^31 - 1 in x), its
 *          grid is 0, and a launch with it fails with CUV_EINVAL.
 * @threads Any thread; it only computes. */
CUV_EXTERN cuv_launch_config_t cuv_for_num_elems(size_t n);
/** The same as cuv_for_num_elems with `block` threads per block.
 *
 * @returns The configuration; block 0 gives a block of 0, and a launch with it fails with
 *          CUV_EINVAL.
 * @threads Any thread; it only computes. */
CUV_EXTERN cuv_launch_config_t cuv_for_num_elems_block(size_t n, unsigned block);

/* CUDA's vector types (vector_types.h) as cuv_<name>_t: same members, size and alignment.
 * cuv-launchers names a float4 parameter cuv_float4_t, and so on. */
#define CUV__VECTOR(name, type, align, ...)                                                        \
  typedef struct __attribute__((aligned(align))) cuv_##name {                                      \
    type __VA_ARGS__;                                                                              \
  } cuv_##name##_t;
/* The four widths of one element type; n-element alignment as CUDA gives it. */
#define CUV__VECTORS(name, type, a1, a2, a3, a4)                                                   \
  CUV__VECTOR(name##1, type, a1, x)                                                                \
  CUV__VECTOR(name##2, type, a2, x, y)                                                             \
  CUV__VECTOR(name##3, type, a3, x, y, z)                                                          \
  CUV__VECTOR(name##4, type, a4, x, y, z, w)
/* The 4-element types of 8-byte elements also come aligned to 16 and to 32 (CUDA 13). */
#define CUV__WIDE_VECTORS(name, type)                                                              \
  CUV__VECTORS(name, type, 8, 16, 8, 16)                                                           \
  CUV__VECTOR(name##4_16a, type, 16, x, y, z, w)                                                   \
  CUV__VECTOR(name##4_32a, type, 32, x, y, z, w)

CUV__VECTORS(char, signed char, 1, 2, 1, 4)
CUV__VECTORS(uchar, unsigned char, 1, 2, 1, 4)
CUV__VECTORS(short, short, 2, 4, 2, 8)
CUV__VECTORS(ushort, unsigned short, 2, 4, 2, 8)
CUV__VECTORS(int, int, 4, 8, 4, 16)
CUV__VECTORS(uint, unsigned int, 4, 8, 4, 16)
CUV__VECTORS(float, float, 4, 8, 4, 16)
CUV__WIDE_VECTORS(long, long)
CUV__WIDE_VECTORS(ulong, unsigned long)
CUV__WIDE_VECTORS(longlong, long long)
CUV__WIDE_VECTORS(ulonglong, unsigned long long)
CUV__WIDE_VECTORS(double, double)

/* __half and __nv_bfloat16 by their bits (C has no 16-bit float type everywhere), and their
 * pairs __half2 and __nv_bfloat162. */
CUV__VECTOR(half, uint16_t, 2, bits)
CUV__VECTOR(bfloat16, uint16_t, 2, bits)
CUV__VECTOR(half2, cuv_half_t, 4, x, y)
CUV__VECTOR(bfloat162, cuv_bfloat16_t, 4, x, y)

#undef CUV__WIDE_VECTORS
#undef CUV__VECTORS
#undef CUV__VECTOR

#ifdef __cplusplus
}
#endif

#endif
