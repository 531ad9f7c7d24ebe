#ifndef CUV_KERNEL_H
#define CUV_KERNEL_H

/** @file
 * For .cu files whose kernels cuv-launchers reads (docs/launchers.md): markers on a
 * pointer parameter that say how the kernel uses the buffer behind it. They expand to nothing,
 * so nvcc sees the plain signature; the comments cuv:out and cuv:in in the same place mark the
 * same without including this header. Unmarked, a pointer to const is read and any other
 * pointer read and written. */

/** The kernel writes the buffer (CUV_ARG_WRITE): float *CUV_OUT y, or CUV_OUT float *y. */
#define CUV_OUT
/** The kernel only reads the buffer although the pointer is not to const (CUV_ARG_READ). */
#define CUV_IN

#endif
