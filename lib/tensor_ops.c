/* Lazy ops producing tensors (zeros, ones, dup, reshape) and copying them to the host, built from
 * the buffer ops below them: the buffer op runs zipped with a host value carrying the shape, and
 * a then (or map) callback wraps the new buffer in a tensor. The shape travels as a value of the
 * tuple, so it is freed with the output whether or not the op ever runs. */
#include <string.h>

#include "internal.h"
#include "tensor.h"

/* What the callback needs to make the tensor. */
typedef struct tensor_spec {
  cuv_dtype_t dtype;
  size_t ndim;
  size_t shape[CUV_TENSOR_MAX_DIMS];
  size_t bytes;
  uint64_t fill64; /* for 8-byte ones: the element, copied in from the host */
  bool fill_from_host;
  cuv_tensor_t *src; /* dup: the tensor copied */
} tensor_spec_t;

static void spec_free(void *arg) {
  tensor_spec_t *spec = arg;
  cuv_tensor_unref(spec->src);
  free(spec);
}

static tensor_spec_t *spec_new(cuv_dtype_t dtype, const size_t *shape, size_t ndim, int *rc) {
  size_t bytes;
  if (!cuv__shape_bytes(shape, ndim, cuv_dtype_size(dtype), &bytes)) {
    *rc = CUV_EINVAL;
    return NULL;
  }
  tensor_spec_t *spec = calloc(1, sizeof *spec);
  if (!spec) {
    *rc = CUV_ENOMEM;
    return NULL;
  }
  spec->dtype = dtype;
  spec->ndim = ndim;
  memcpy(spec->shape, shape, ndim * sizeof *shape);
  spec->bytes = bytes;
  *rc = 0;
  return spec;
}

/* A staged copy of bytes / 8 copies of `word` into buf. */
static cuv_op_t *fill_from_host(cuv_buffer_t *buf, size_t bytes, uint64_t word) {
  size_t n = bytes / sizeof word;
  uint64_t *host = malloc(bytes);
  if (!host)
    return cuv_fail(CUV_ENOMEM);
  for (size_t i = 0; i < n; i++)
    host[i] = word;
  cuv_op_t *op = cuv_memcpy_htod(buf, 0, host, bytes, CUV_COPY_STAGE);
  free(host); /* staged: copied into pinned memory already */
  return op;
}

/* then: (buffer, spec) -> the copy spec asks for, if any, then the tensor over the buffer. */
static cuv_op_t *wrap_buffer(cuv_output_t *pair, void *arg) {
  CUV__UNUSED(arg);
  cuv_buffer_t *buf = cuv_output_buffer(cuv_tuple_get(pair, 0));
  const tensor_spec_t *spec = cuv_tuple_get(pair, 1)->data;
  cuv_tensor_t *t = NULL;
  int rc = cuv_tensor_create(&t, buf, 0, spec->dtype, spec->shape, spec->ndim);
  cuv_op_t *fill = NULL;
  if (rc == 0 && spec->fill_from_host)
    fill = fill_from_host(buf, spec->bytes, spec->fill64);
  else if (rc == 0 && spec->src)
    fill = cuv_memcpy_dtod(buf, 0, spec->src->buf, spec->src->offset, spec->bytes);
  cuv_output_release(pair);
  if (rc != 0)
    return cuv_fail(rc);
  cuv_op_t *value = cuv_value(t, cuv_tensor_output_release);
  return fill ? cuv_seq(fill, value) : value;
}

/* make (a buffer op), then the tensor of spec over its buffer. */
static cuv_op_t *tensor_from(cuv_op_t *make, tensor_spec_t *spec) {
  cuv_op_t *pair[] = {make, cuv_value(spec, spec_free)};
  return cuv_then(cuv_zip(pair, 2), wrap_buffer, NULL);
}

/* The bits of one in dtype. */
static uint64_t one_bits(cuv_dtype_t dtype) {
  switch (dtype) {
  case CUV_DTYPE_F32: return 0x3f800000u;
  case CUV_DTYPE_F64: return 0x3ff0000000000000u;
  case CUV_DTYPE_F16: return 0x3c00u;
  case CUV_DTYPE_BF16: return 0x3f80u;
  default: return 1;
  }
}

/* The buffer op that makes spec's memory: zeros, or ones by a memset of the element's width (a
 * 64-bit element is copied in from the host by wrap_buffer: there is no 64-bit memset). */
static cuv_op_t *make_filled(cuv_device_t *dev, tensor_spec_t *spec, bool ones) {
  size_t esize = cuv_dtype_size(spec->dtype), n = spec->bytes / esize;
  uint64_t one = one_bits(spec->dtype);
  if (!ones)
    return cuv_zeros(dev, spec->bytes);
  if (esize == 1)
    return cuv_fill8(dev, n, (uint8_t)one);
  if (esize == 2)
    return cuv_fill16(dev, n, (uint16_t)one);
  if (esize == 4)
    return cuv_fill32(dev, n, (uint32_t)one);
  spec->fill_from_host = true;
  spec->fill64 = one;
  return cuv_alloc(dev, spec->bytes);
}

static cuv_op_t *filled(cuv_device_t *dev, cuv_dtype_t dtype, const size_t *shape, size_t ndim,
                        bool ones) {
  int rc = CUV_EINVAL;
  tensor_spec_t *spec = dev ? spec_new(dtype, shape, ndim, &rc) : NULL;
  if (!spec)
    return cuv_fail(rc);
  return tensor_from(make_filled(dev, spec, ones), spec);
}

CUV_EXTERN cuv_op_t *cuv_tensor_zeros(cuv_device_t *dev, cuv_dtype_t dtype, const size_t *shape,
                                      size_t ndim) {
  return filled(dev, dtype, shape, ndim, false);
}

CUV_EXTERN cuv_op_t *cuv_tensor_ones(cuv_device_t *dev, cuv_dtype_t dtype, const size_t *shape,
                                     size_t ndim) {
  return filled(dev, dtype, shape, ndim, true);
}

/* t's elements as the one range a copy takes: refused unless contiguous. */
static int contiguous_range(const cuv_tensor_t *t) {
  if (!t)
    return CUV_EINVAL;
  return cuv_tensor_is_contiguous(t) ? 0 : CUV_ENOTSUP;
}

CUV_EXTERN cuv_op_t *cuv_tensor_dup(cuv_tensor_t *t) {
  int rc = contiguous_range(t);
  tensor_spec_t *spec = rc == 0 ? spec_new(t->dtype, t->shape, t->ndim, &rc) : NULL;
  if (!spec)
    return cuv_fail(rc);
  spec->src = cuv_tensor_ref(t);
  return tensor_from(cuv_alloc(cuv_buffer_device(t->buf), spec->bytes), spec);
}

CUV_EXTERN cuv_op_t *cuv_tensor_to_host(cuv_tensor_t *t) {
  int rc = contiguous_range(t);
  if (rc != 0)
    return cuv_fail(rc);
  return cuv_download(t->buf, t->offset, cuv_tensor_bytes(t));
}

CUV_EXTERN cuv_op_t *cuv_tensor_to_host_into(void *dst, size_t bytes, cuv_tensor_t *t) {
  int rc = contiguous_range(t);
  if (rc == 0 && (!dst || bytes != cuv_tensor_bytes(t)))
    rc = CUV_EINVAL;
  if (rc != 0)
    return cuv_fail(rc);
  return cuv_memcpy_dtoh(dst, t->buf, t->offset, bytes);
}

/* map: (tensor, spec) -> the tensor reshaped to spec's shape. */
static int reshape_output(cuv_output_t *pair, void *arg) {
  CUV__UNUSED(arg);
  cuv_tensor_t *t = cuv_output_tensor(cuv_tuple_get(pair, 0)), *shaped = NULL;
  const tensor_spec_t *spec = cuv_tuple_get(pair, 1)->data;
  int rc = t ? cuv_tensor_reshape(&shaped, t, spec->shape, spec->ndim) : CUV_EARGS;
  cuv_output_release(pair);
  if (rc == 0)
    *pair = cuv__output(shaped, cuv_tensor_output_release, shaped);
  return rc;
}

CUV_EXTERN cuv_op_t *cuv_tensor_reshape_op(cuv_op_t *op, const size_t *shape, size_t ndim) {
  int rc = op ? 0 : CUV_EINVAL;
  /* the element size is checked again by the reshape; 1 here checks the shape alone */
  tensor_spec_t *spec = rc == 0 ? spec_new(CUV_DTYPE_U8, shape, ndim, &rc) : NULL;
  if (!spec) {
    cuv_op_destroy(op);
    return cuv_fail(rc);
  }
  cuv_op_t *pair[] = {op, cuv_value(spec, spec_free)};
  return cuv_map(cuv_zip(pair, 2), reshape_output, NULL);
}

/* map: the tensor, kept when its element type is the one passed as arg. */
static int typed_output(cuv_output_t *out, void *arg) {
  const cuv_tensor_t *t = cuv_output_tensor(out);
  if (t && t->dtype == (cuv_dtype_t)(uintptr_t)arg)
    return 0;
  cuv_output_release(out);
  return CUV_EARGS;
}

CUV_EXTERN cuv_op_t *cuv_tensor_typed_op(cuv_op_t *op, cuv_dtype_t dtype) {
  if (!op || cuv_dtype_size(dtype) == 0) {
    cuv_op_destroy(op);
    return cuv_fail(CUV_EINVAL);
  }
  return cuv_map(op, typed_output, (void *)(uintptr_t)dtype);
}
