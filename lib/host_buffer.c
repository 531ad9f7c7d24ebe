/* Host buffers: the public face of a pinned staging block (staging.c). The block's reference
 * count is the buffer's, so an op holds one the same way an upload holds its staged copy, and the
 * last unref gives the block back to the device's pool. */
#include "internal.h"
#include "staging.h"
#include "host_buffer.h"

CUV_EXTERN int cuv_host_buffer_create(cuv_host_buffer_t **out, cuv_device_t *dev, size_t bytes) {
  if (!out)
    return CUV_EINVAL;
  *out = NULL;
  if (!dev || bytes == 0)
    return CUV_EINVAL;
  int rc = cuv__driver_init();
  if (rc < 0)
    return rc;
  *out = cuv__staging_alloc(dev, bytes);
  return *out ? 0 : CUV_ENOMEM;
}

CUV_EXTERN void *cuv_host_buffer_data(const cuv_host_buffer_t *buf) {
  return buf ? buf->data : NULL;
}

CUV_EXTERN size_t cuv_host_buffer_size(const cuv_host_buffer_t *buf) { return buf ? buf->size : 0; }

CUV_EXTERN cuv_host_buffer_t *cuv_host_buffer_ref(cuv_host_buffer_t *buf) {
  return buf ? cuv__staging_ref(buf) : NULL;
}

CUV_EXTERN void cuv_host_buffer_unref(cuv_host_buffer_t *buf) { cuv__staging_free(buf); }

int cuv__host_buffer_check(const cuv_host_buffer_t *buf, size_t offset, size_t bytes) {
  if (!buf)
    return CUV_EINVAL;
  if (offset > buf->size || bytes > buf->size - offset)
    return CUV_ERANGE;
  return 0;
}
