/* Copies and sets. One op type covers them all: what differs is the driver call. Host data to
 * upload is staged in pinned memory when the op is built (unless borrowed); downloads land in a
 * pinned block that becomes the output. */
#include <string.h>

#include "internal.h"
#include "hazard.h"
#include "staging.h"
#include "host_buffer.h"

enum copy_kind { COPY_HTOD, COPY_DTOH, COPY_DTOD, SET8, SET16, SET32, DOWNLOAD };

typedef struct copy_op {
  struct cuv_op_s op;
  enum copy_kind kind;
  cuv_buffer_t *dst, *src;  /* device sides (NULL for host sides) */
  size_t dst_offset, src_offset, bytes;
  void *host;               /* htod source, dtoh destination */
  cuv__staging_t *staged;   /* the staging block host points into, owned by the op */
  uint32_t value;
} copy_op_t;

static void copy_drop(cuv_op_t *op) {
  copy_op_t *c = (copy_op_t *)op;
  cuv_buffer_unref(c->dst);
  cuv_buffer_unref(c->src);
  cuv__staging_free(c->staged);
}

static CUresult enqueue(copy_op_t *c, CUstream stream, void *download) {
  CUdeviceptr dst = c->dst ? c->dst->ptr + c->dst_offset : 0;
  CUdeviceptr src = c->src ? c->src->ptr + c->src_offset : 0;
  switch (c->kind) {
  case COPY_HTOD: return cuv__drv.cuMemcpyHtoDAsync(dst, c->host, c->bytes, stream);
  case COPY_DTOH: return cuv__drv.cuMemcpyDtoHAsync(c->host, src, c->bytes, stream);
  case DOWNLOAD: return cuv__drv.cuMemcpyDtoHAsync(download, src, c->bytes, stream);
  case COPY_DTOD: return cuv__drv.cuMemcpyDtoDAsync(dst, src, c->bytes, stream);
  case SET8: return cuv__drv.cuMemsetD8Async(dst, (unsigned char)c->value, c->bytes, stream);
  case SET16:
    return cuv__drv.cuMemsetD16Async(dst, (unsigned short)c->value, c->bytes / 2, stream);
  case SET32: return cuv__drv.cuMemsetD32Async(dst, c->value, c->bytes / 4, stream);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

/* The node retires with the submission (op.h): its buffer references and its staging block stay
 * until then, and only a buffer whose accesses are tracked needs a hold of its own. */
static int hold_all(copy_op_t *c, cuv__exec_t *ex) {
  int rc = 0;
  if (c->dst && (rc = cuv__hold_buffer_kept(ex, c->dst, CUV_ARG_KIND_WRITE)) < 0)
    return rc;
  if (c->src)
    rc = cuv__hold_buffer_kept(ex, c->src, CUV_ARG_KIND_READ);
  return rc;
}

static int copy_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  copy_op_t *c = (copy_op_t *)op;
  cuv__staging_t *download = NULL;
  int rc = hold_all(c, ex);
  if (rc == 0 && c->kind == DOWNLOAD) {
    /* The submission holds the block too: an output dropped early (by seq or then, by a failure
     * midway, by an enqueue_on caller) must not give it back while the copy into it is pending. */
    download = cuv__staging_alloc(ex->stream->dev, c->bytes);
    rc = download ? cuv__sub_hold(ex->sub, cuv__staging_free, download) : CUV_ENOMEM;
    if (rc == 0)
      cuv__staging_ref(download); /* the output's reference */
    else if (download)
      cuv__staging_free(download);
    if (rc < 0)
      download = NULL;
  }
  if (rc == 0 && c->bytes > 0)
    rc = cuv__cu(enqueue(c, ex->stream->cu, download ? download->data : NULL));
  if (c->op.host & CUV__OP_LANDS)
    ex->landing = true;
  if (download) {
    /* The output owns the block; on failure it is released by the caller. The GPU never saw
     * the block when the enqueue failed, and otherwise its release waits for delivery. */
    *out = cuv__output(download->data, cuv__staging_free, download);
  }
  return rc;
}

static void copy_touches(const cuv_op_t *op, cuv__touches_t *t) {
  const copy_op_t *c = (const copy_op_t *)op;
  cuv__touch(t, c->dst, true);
  cuv__touch(t, c->src, false);
}

static const cuv__op_vt_t copy_vt = {"copy", copy_execute, copy_drop, copy_touches};

/* Builds the node; takes references on the buffers. */
static cuv_op_t *copy_new(enum copy_kind kind, cuv_buffer_t *dst, size_t dst_offset,
                          cuv_buffer_t *src, size_t src_offset, size_t bytes) {
  int rc = 0;
  if ((dst && (rc = cuv__buffer_check_range(dst, dst_offset, bytes)) < 0) ||
      (src && (rc = cuv__buffer_check_range(src, src_offset, bytes)) < 0))
    return cuv__op_fail(rc);
  if (dst && src && dst->dev != src->dev)
    return cuv__op_fail(CUV_EDEVICE);
  /* Unique storage: the driver leaves an overlapping copy undefined. */
  if (dst && src && cuv__buffer_ranges_overlap(dst, dst_offset, bytes, src, src_offset, bytes))
    return cuv__op_fail(CUV_EOVERLAP);
  copy_op_t *c = (copy_op_t *)cuv__op_new(&copy_vt, sizeof *c);
  if (!c)
    return cuv__op_fail(CUV_ENOMEM);
  c->kind = kind;
  c->op.retires_with_submission = true; /* copy_execute leaves the node to it */
  c->dst = cuv_buffer_ref(dst);
  c->src = cuv_buffer_ref(src);
  c->dst_offset = dst_offset;
  c->src_offset = src_offset;
  c->bytes = bytes;
  cuv__op_set_held_device(&c->op, (dst ? dst : src)->dev); /* held by the buffer */
  if (kind == COPY_DTOH || kind == DOWNLOAD)
    c->op.host = CUV__OP_LANDS;
  return &c->op;
}

CUV_EXTERN cuv_op_t *cuv_memcpy_htod(cuv_buffer_t *dst, size_t dst_offset, const void *src,
                                     size_t bytes, unsigned flags) {
  if (!dst || (!src && bytes) || flags > CUV_COPY_BORROW)
    return cuv__op_fail(CUV_EINVAL);
  cuv_op_t *op = copy_new(COPY_HTOD, dst, dst_offset, NULL, 0, bytes);
  if (op->error)
    return op;
  copy_op_t *c = (copy_op_t *)op;
  if (flags == CUV_COPY_BORROW || bytes == 0) {
    c->host = (void *)src;
    return op;
  }
  c->staged = cuv__staging_alloc(dst->dev, bytes);
  if (!c->staged) {
    cuv_op_destroy(op);
    return cuv__op_fail(CUV_ENOMEM);
  }
  c->host = c->staged->data;
  memcpy(c->host, src, bytes);
  return op;
}

CUV_EXTERN cuv_op_t *cuv_memcpy_dtoh(void *dst, cuv_buffer_t *src, size_t src_offset,
                                     size_t bytes) {
  if (!src || (!dst && bytes))
    return cuv__op_fail(CUV_EINVAL);
  cuv_op_t *op = copy_new(COPY_DTOH, NULL, 0, src, src_offset, bytes);
  if (!op->error)
    ((copy_op_t *)op)->host = dst;
  return op;
}

CUV_EXTERN cuv_op_t *cuv_memcpy_dtod(cuv_buffer_t *dst, size_t dst_offset, cuv_buffer_t *src,
                                     size_t src_offset, size_t bytes) {
  if (!dst || !src)
    return cuv__op_fail(CUV_EINVAL);
  return copy_new(COPY_DTOD, dst, dst_offset, src, src_offset, bytes);
}

CUV_EXTERN cuv_op_t *cuv_memset8(cuv_buffer_t *dst, size_t offset, uint8_t value, size_t bytes) {
  if (!dst)
    return cuv__op_fail(CUV_EINVAL);
  cuv_op_t *op = copy_new(SET8, dst, offset, NULL, 0, bytes);
  if (!op->error)
    ((copy_op_t *)op)->value = value;
  return op;
}

/* A set of `count` elements of `width` bytes, each at its own alignment as the driver wants. */
static cuv_op_t *set_wide(enum copy_kind kind, cuv_buffer_t *dst, size_t offset, uint32_t value,
                          size_t count, size_t width) {
  if (!dst || offset % width != 0 || count > SIZE_MAX / width)
    return cuv__op_fail(CUV_EINVAL);
  cuv_op_t *op = copy_new(kind, dst, offset, NULL, 0, count * width);
  if (!op->error)
    ((copy_op_t *)op)->value = value;
  return op;
}

CUV_EXTERN cuv_op_t *cuv_memset16(cuv_buffer_t *dst, size_t offset, uint16_t value, size_t count) {
  return set_wide(SET16, dst, offset, value, count, 2);
}

CUV_EXTERN cuv_op_t *cuv_memset32(cuv_buffer_t *dst, size_t offset, uint32_t value, size_t count) {
  return set_wide(SET32, dst, offset, value, count, 4);
}

/* A copy whose host side is a host buffer: the op holds a reference on it (as `staged`, which the
 * submission takes over until completion), and nothing is staged. */
static cuv_op_t *host_buffer_copy(enum copy_kind kind, cuv_buffer_t *dev_buf, size_t dev_offset,
                                  cuv_host_buffer_t *host, size_t host_offset, size_t bytes) {
  int rc = dev_buf ? cuv__host_buffer_check(host, host_offset, bytes) : CUV_EINVAL;
  if (rc < 0)
    return cuv__op_fail(rc);
  cuv_op_t *op = kind == COPY_HTOD ? copy_new(kind, dev_buf, dev_offset, NULL, 0, bytes)
                                   : copy_new(kind, NULL, 0, dev_buf, dev_offset, bytes);
  if (op->error)
    return op;
  copy_op_t *c = (copy_op_t *)op;
  c->staged = cuv__staging_ref(host);
  c->host = (char *)host->data + host_offset;
  return op;
}

CUV_EXTERN cuv_op_t *cuv_upload(cuv_buffer_t *dst, size_t dst_offset, cuv_host_buffer_t *src,
                                size_t src_offset, size_t bytes) {
  return host_buffer_copy(COPY_HTOD, dst, dst_offset, src, src_offset, bytes);
}

CUV_EXTERN cuv_op_t *cuv_download_into(cuv_host_buffer_t *dst, size_t dst_offset,
                                       cuv_buffer_t *src, size_t src_offset, size_t bytes) {
  return host_buffer_copy(COPY_DTOH, src, src_offset, dst, dst_offset, bytes);
}

CUV_EXTERN cuv_op_t *cuv_download(cuv_buffer_t *src, size_t src_offset, size_t bytes) {
  if (!src || bytes == 0)
    return cuv__op_fail(CUV_EINVAL);
  return copy_new(DOWNLOAD, NULL, 0, src, src_offset, bytes);
}
