#ifndef CUV_LIB_STAGING_H
#define CUV_LIB_STAGING_H

/* staging.c: pinned host blocks (data) with their bookkeeping; given back with _free(block).
 * A public host buffer (host_buffer.c) is one such block. */
typedef struct cuv_host_buffer_s {
  void *data;
  size_t cap;
  size_t size;          /* the size asked for (a host buffer's) */
  unsigned cls;         /* size class; 0 when not pooled */
  atomic_uint refs;     /* given back at the last _free (a download's: output and submission) */
  cuv_device_t *dev;
  struct cuv_host_buffer_s *next;
} cuv__staging_t;
cuv__staging_t *cuv__staging_alloc(cuv_device_t *dev, size_t bytes);
cuv__staging_t *cuv__staging_ref(cuv__staging_t *block);
void cuv__staging_free(void *block);
void cuv__staging_pool_destroy(cuv_device_t *dev);

#endif
