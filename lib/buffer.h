#ifndef CUV_LIB_BUFFER_H
#define CUV_LIB_BUFFER_H

struct cuv_buffer_s {
  atomic_int refs;
  cuv_device_t *dev;
  CUdeviceptr ptr;
  size_t size;
  cuv_stream_t *alloc_stream;  /* stream-ordered allocations are freed on a stream too */
};

/* Checks [offset, offset + bytes) lies in buf. */
int cuv__buffer_check_range(const cuv_buffer_t *buf, size_t offset, size_t bytes);
/* Holds a reference on buf in the submission (the hazard-tracking point for an access). */
int cuv__sub_hold_buffer(cuv__submission_t *sub, cuv_buffer_t *buf, enum cuv_arg_kind access);
void cuv__buffer_release(void *buf);

#endif
