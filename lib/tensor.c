/* Typed tensor views: an element type, a shape and strides over a buffer, reference counted, the
 * buffer held by a reference of the view's own. Reshape and slice make new views of the same
 * buffer without GPU work; the lazy ops are in tensor_ops.c. */
#include <string.h>

#include "internal.h"
#include "tensor.h"

static const unsigned char dtype_sizes[CUV_DTYPE_COUNT] = {
    [CUV_DTYPE_F32] = 4, [CUV_DTYPE_F64] = 8, [CUV_DTYPE_F16] = 2, [CUV_DTYPE_BF16] = 2,
    [CUV_DTYPE_I8] = 1,  [CUV_DTYPE_U8] = 1,  [CUV_DTYPE_I32] = 4, [CUV_DTYPE_U32] = 4,
    [CUV_DTYPE_I64] = 8, [CUV_DTYPE_U64] = 8,
};

CUV_EXTERN size_t cuv_dtype_size(cuv_dtype_t dtype) {
  return (unsigned)dtype < CUV_DTYPE_COUNT ? dtype_sizes[dtype] : 0;
}

bool cuv__shape_bytes(const size_t *shape, size_t ndim, size_t esize, size_t *bytes) {
  if (!shape || ndim == 0 || ndim > CUV_TENSOR_MAX_DIMS || esize == 0)
    return false;
  size_t n = esize;
  for (size_t i = 0; i < ndim; i++)
    if (shape[i] == 0 || __builtin_mul_overflow(n, shape[i], &n))
      return false;
  *bytes = n;
  return true;
}

/* The last element's index in elements, or false when it overflows. */
static bool last_element(const size_t *shape, const size_t *strides, size_t ndim, size_t *last) {
  size_t sum = 0, term;
  for (size_t i = 0; i < ndim; i++)
    if (strides[i] == 0 || __builtin_mul_overflow(shape[i] - 1, strides[i], &term) ||
        __builtin_add_overflow(sum, term, &sum))
      return false;
  *last = sum;
  return true;
}

/* No two indices reach one element: ordered by stride, each dimension steps past everything the
 * smaller ones span (a sufficient test, exact for every row-major or permuted layout). */
static bool strides_injective(const size_t *shape, const size_t *strides, size_t ndim) {
  bool used[CUV_TENSOR_MAX_DIMS] = {false};
  size_t reach = 0; /* elements spanned by the dimensions taken so far, minus one */
  for (size_t k = 0; k < ndim; k++) {
    size_t best = ndim;
    for (size_t i = 0; i < ndim; i++)
      if (!used[i] && shape[i] > 1 && (best == ndim || strides[i] < strides[best]))
        best = i;
    if (best == ndim)
      break;
    used[best] = true;
    if (strides[best] <= reach)
      return false;
    reach += (shape[best] - 1) * strides[best];
  }
  return true;
}

static void row_major(const size_t *shape, size_t ndim, size_t *strides) {
  size_t s = 1;
  for (size_t i = ndim; i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
}

static int tensor_new(cuv_tensor_t **out, cuv_buffer_t *buf, size_t offset, cuv_dtype_t dtype,
                      const size_t *shape, const size_t *strides, size_t ndim) {
  size_t esize = cuv_dtype_size(dtype), bytes, last;
  if (!out || !buf || !strides || !cuv__shape_bytes(shape, ndim, esize, &bytes) ||
      offset % esize != 0 || !last_element(shape, strides, ndim, &last) ||
      __builtin_mul_overflow(last + 1, esize, &bytes))
    return CUV_EINVAL;
  size_t size = cuv_buffer_size(buf);
  if (offset > size || bytes > size - offset)
    return CUV_ERANGE;
  cuv_tensor_t *t = calloc(1, sizeof *t);
  if (!t)
    return CUV_ENOMEM;
  atomic_init(&t->refs, 1);
  t->buf = cuv_buffer_ref(buf);
  t->offset = t->root_offset = offset;
  t->dtype = dtype;
  t->ndim = ndim;
  memcpy(t->shape, shape, ndim * sizeof *shape);
  memcpy(t->strides, strides, ndim * sizeof *strides);
  t->span = bytes;
  t->injective = strides_injective(shape, strides, ndim);
  *out = t;
  return 0;
}

CUV_EXTERN int cuv_tensor_create(cuv_tensor_t **out, cuv_buffer_t *buf, size_t offset,
                                 cuv_dtype_t dtype, const size_t *shape, size_t ndim) {
  size_t strides[CUV_TENSOR_MAX_DIMS];
  if (!shape || ndim == 0 || ndim > CUV_TENSOR_MAX_DIMS)
    return CUV_EINVAL;
  row_major(shape, ndim, strides);
  return tensor_new(out, buf, offset, dtype, shape, strides, ndim);
}

CUV_EXTERN int cuv_tensor_create_strided(cuv_tensor_t **out, cuv_buffer_t *buf, size_t offset,
                                         cuv_dtype_t dtype, const size_t *shape,
                                         const size_t *strides, size_t ndim) {
  return tensor_new(out, buf, offset, dtype, shape, strides, ndim);
}

CUV_EXTERN cuv_tensor_t *cuv_tensor_ref(cuv_tensor_t *t) {
  if (t)
    atomic_fetch_add(&t->refs, 1);
  return t;
}

CUV_EXTERN void cuv_tensor_unref(cuv_tensor_t *t) {
  if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
    return;
  cuv_buffer_unref(t->buf);
  free(t);
}

CUV_EXTERN cuv_dtype_t cuv_tensor_dtype(const cuv_tensor_t *t) {
  return t ? t->dtype : CUV_DTYPE_COUNT;
}

CUV_EXTERN size_t cuv_tensor_ndim(const cuv_tensor_t *t) { return t ? t->ndim : 0; }

CUV_EXTERN size_t cuv_tensor_shape(const cuv_tensor_t *t, size_t dim) {
  return t && dim < t->ndim ? t->shape[dim] : 0;
}

CUV_EXTERN size_t cuv_tensor_stride(const cuv_tensor_t *t, size_t dim) {
  return t && dim < t->ndim ? t->strides[dim] : 0;
}

CUV_EXTERN size_t cuv_tensor_numel(const cuv_tensor_t *t) {
  if (!t)
    return 0;
  size_t n = 1;
  for (size_t i = 0; i < t->ndim; i++)
    n *= t->shape[i];
  return n;
}

CUV_EXTERN size_t cuv_tensor_bytes(const cuv_tensor_t *t) {
  return t ? cuv_tensor_numel(t) * cuv_dtype_size(t->dtype) : 0;
}

CUV_EXTERN bool cuv_tensor_is_contiguous(const cuv_tensor_t *t) {
  if (!t)
    return false;
  size_t want = 1;
  for (size_t i = t->ndim; i-- > 0;) {
    if (t->shape[i] != 1 && t->strides[i] != want)
      return false;
    want *= t->shape[i];
  }
  return true;
}

CUV_EXTERN cuv_buffer_t *cuv_tensor_buffer(const cuv_tensor_t *t) { return t ? t->buf : NULL; }

CUV_EXTERN size_t cuv_tensor_offset(const cuv_tensor_t *t) { return t ? t->offset : 0; }

CUV_EXTERN cuv_deviceptr_t cuv_tensor_ptr(const cuv_tensor_t *t) {
  return t ? cuv_buffer_ptr(t->buf) + t->offset : 0;
}

CUV_EXTERN int cuv_tensor_reshape(cuv_tensor_t **out, const cuv_tensor_t *t, const size_t *shape,
                                  size_t ndim) {
  size_t bytes;
  if (!out || !t || !cuv__shape_bytes(shape, ndim, cuv_dtype_size(t->dtype), &bytes) ||
      bytes != cuv_tensor_bytes(t))
    return CUV_EINVAL;
  if (!cuv_tensor_is_contiguous(t))
    return CUV_ENOTSUP;
  return cuv_tensor_create(out, t->buf, t->offset, t->dtype, shape, ndim);
}

CUV_EXTERN int cuv_tensor_slice(cuv_tensor_t **out, const cuv_tensor_t *t, const size_t *start,
                                const size_t *shape, size_t ndim) {
  if (!out || !t || !start || !shape || ndim != t->ndim)
    return CUV_EINVAL;
  size_t offset = t->offset, esize = cuv_dtype_size(t->dtype);
  for (size_t i = 0; i < ndim; i++) {
    if (shape[i] == 0)
      return CUV_EINVAL;
    if (start[i] > t->shape[i] || shape[i] > t->shape[i] - start[i])
      return CUV_ERANGE;
    offset += start[i] * t->strides[i] * esize;
  }
  int rc = tensor_new(out, t->buf, offset, t->dtype, shape, t->strides, ndim);
  if (rc != 0)
    return rc;
  (*out)->root_offset = t->root_offset;
  for (size_t i = 0; i < ndim; i++)
    (*out)->origin[i] = t->origin[i] + start[i];
  return 0;
}

CUV_EXTERN void cuv_tensor_output_release(void *tensor) { cuv_tensor_unref(tensor); }

CUV_EXTERN cuv_tensor_t *cuv_output_tensor(const cuv_output_t *out) {
  if (!out || !out->data || out->release != cuv_tensor_output_release ||
      out->release_arg != out->data)
    return NULL;
  return out->data;
}
