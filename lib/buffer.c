/* Device buffers: reference counted device memory. The memory is freed only at the last
 * reference, and every submission that touches a buffer holds one until its completion is
 * proven, so the free can never overtake GPU work. */
#include "internal.h"

static int buffer_new(cuv_buffer_t **out, cuv_device_t *dev, CUdeviceptr ptr, size_t bytes,
                      cuv_stream_t *alloc_stream) {
  cuv_buffer_t *buf = cuv__lines_zalloc(sizeof *buf);
  if (!buf)
    return CUV_ENOMEM;
  atomic_init(&buf->refs, 1);
  buf->dev = cuv__device_ref(dev);
  buf->ptr = ptr;
  buf->size = bytes;
  buf->alloc_stream = alloc_stream ? cuv__stream_ref(alloc_stream) : NULL;
  buf->hazard_mode = cuv__config.strict_hazards ? CUV_HAZARD_STRICT : CUV_HAZARD_ORDER;
  pthread_mutex_init(&buf->lock, NULL);
  *out = buf;
  return 0;
}

/* Frees the memory on `stream` (stream-ordered) or at once; adopted memory goes back to its
 * owner's release, which runs whether or not the context could be bound (exactly once). */
static void buffer_destroy(cuv_buffer_t *buf, cuv_stream_t *stream) {
  int bound = cuv__bind(buf->dev);
  if (buf->adopted) {
    if (buf->release)
      buf->release(buf->release_arg);
  } else if (bound == 0) {
    if (stream)
      cuv__drv.cuMemFreeAsync(buf->ptr, stream->cu);
    else
      cuv__drv.cuMemFree(buf->ptr);
  }
  if (buf->alloc_stream)
    cuv__stream_unref(buf->alloc_stream);
  cuv__device_unref(buf->dev);
  pthread_mutex_destroy(&buf->lock);
  free(buf);
}

CUV_EXTERN int cuv_buffer_create(cuv_buffer_t **out, cuv_device_t *dev, size_t bytes) {
  if (!out || !dev || bytes == 0)
    return CUV_EINVAL;
  int rc = cuv__bind(dev);
  CUdeviceptr ptr = 0;
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuMemAlloc(&ptr, bytes));
  if (rc == 0 && (rc = buffer_new(out, dev, ptr, bytes, NULL)) < 0)
    cuv__drv.cuMemFree(ptr);
  return rc;
}

CUV_EXTERN int cuv_buffer_adopt(cuv_buffer_t **out, cuv_device_t *dev, cuv_deviceptr_t ptr,
                                size_t bytes, cuv_release_fn release, void *release_arg) {
  if (!out || !dev || !ptr || bytes == 0 || bytes - 1 > UINT64_MAX - ptr)
    return CUV_EINVAL;
  int rc = buffer_new(out, dev, ptr, bytes, NULL);
  if (rc == 0) {
    (*out)->adopted = true;
    (*out)->release = release;
    (*out)->release_arg = release_arg;
  }
  return rc;
}

CUV_EXTERN cuv_buffer_t *cuv_buffer_ref(cuv_buffer_t *buf) {
  if (buf)
    atomic_fetch_add(&buf->refs, 1);
  return buf;
}

CUV_EXTERN void cuv_buffer_unref(cuv_buffer_t *buf) {
  if (buf && atomic_fetch_sub(&buf->refs, 1) == 1)
    buffer_destroy(buf, buf->alloc_stream);
}

void cuv__buffer_release(void *buf) { cuv_buffer_unref(buf); }

CUV_EXTERN cuv_deviceptr_t cuv_buffer_ptr(const cuv_buffer_t *buf) { return buf ? buf->ptr : 0; }
CUV_EXTERN size_t cuv_buffer_size(const cuv_buffer_t *buf) { return buf ? buf->size : 0; }
CUV_EXTERN cuv_device_t *cuv_buffer_device(const cuv_buffer_t *buf) {
  return buf ? buf->dev : NULL;
}

int cuv__buffer_check_range(const cuv_buffer_t *buf, size_t offset, size_t bytes) {
  if (offset > buf->size || bytes > buf->size - offset)
    return CUV_ERANGE;
  return 0;
}

bool cuv__buffer_ranges_overlap(const cuv_buffer_t *a, size_t a_offset, size_t a_bytes,
                                const cuv_buffer_t *b, size_t b_offset, size_t b_bytes) {
  CUdeviceptr a_start = a->ptr + a_offset, b_start = b->ptr + b_offset;
  return a_bytes && b_bytes && a_start < b_start + b_bytes && b_start < a_start + a_bytes;
}

int cuv__buffer_alloc_async(cuv_buffer_t **out, cuv_device_t *dev, size_t bytes,
                            cuv_stream_t *stream) {
  CUdeviceptr ptr = 0;
  int rc = dev == stream->dev ? 0 : CUV_EDEVICE;
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuMemAllocAsync(&ptr, bytes, stream->cu));
  if (rc == 0 && (rc = buffer_new(out, dev, ptr, bytes, stream)) < 0)
    cuv__drv.cuMemFreeAsync(ptr, stream->cu);
  return rc;
}

CUV_EXTERN cuv_buffer_t *cuv_output_buffer(const cuv_output_t *out) {
  if (!out || !out->data || out->release != cuv__buffer_release || out->release_arg != out->data)
    return NULL;
  return out->data;
}

/* Drops one reference; the last frees the memory on `stream`, behind what is enqueued there. */
void cuv__buffer_unref_on(cuv_buffer_t *buf, cuv_stream_t *stream) {
  if (atomic_fetch_sub(&buf->refs, 1) == 1)
    buffer_destroy(buf, stream);
}
