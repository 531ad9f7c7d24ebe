#ifndef CUV_LIB_TENSOR_H
#define CUV_LIB_TENSOR_H

#include <cuv/tensor.h>

/* A tensor view (include/cuv/tensor.h). Besides its shape and strides it records where it lies in
 * its root, the tensor it was sliced from (itself when made directly): the root's byte offset and
 * the index of its first element there. Two slices of one root are then compared by index boxes,
 * exactly (tensor_launch.c). */
struct cuv_tensor_s {
  atomic_int refs;
  cuv_buffer_t *buf;
  size_t offset; /* bytes into buf of element 0 */
  cuv_dtype_t dtype;
  size_t ndim;
  size_t shape[CUV_TENSOR_MAX_DIMS];
  size_t strides[CUV_TENSOR_MAX_DIMS]; /* elements */
  size_t root_offset;                  /* bytes into buf of the root's element 0 */
  size_t origin[CUV_TENSOR_MAX_DIMS];  /* index of element 0 in the root */
  size_t span;    /* bytes from element 0 to the end of the last: what the view may touch */
  bool injective; /* no two elements share storage */
};

/* Whether the shape is valid (1..CUV_TENSOR_MAX_DIMS dimensions, none 0), and its element count
 * times esize fits a size_t (*bytes). */
bool cuv__shape_bytes(const size_t *shape, size_t ndim, size_t esize, size_t *bytes);

#endif
