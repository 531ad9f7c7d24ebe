#ifndef CUV_LIB_HOST_BUFFER_H
#define CUV_LIB_HOST_BUFFER_H

/* host_buffer.c: pinned host memory as a public, reference-counted object (a staging block). */

/* 0, or why [offset, offset + bytes) of buf cannot be used (CUV_EINVAL for NULL,
 * CUV_ERANGE). */
int cuv__host_buffer_check(const cuv_host_buffer_t *buf, size_t offset, size_t bytes);

#endif
