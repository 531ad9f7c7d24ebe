/* Buffer helpers: ops that allocate a buffer on the executing stream (cuv_alloc) and fill it there
 * (a byte, 16- or 32-bit pattern, an iota, a copy of another buffer), and cuv_free, which frees
 * one there. A new buffer is the output. The submission holds it as written, so hazard tracking
 * orders another stream's use of it after the fill, and an output dropped early (by seq) cannot
 * free it under the fill. */
#include "internal.h"
#include "hazard.h"
#include "staging.h"

enum make_kind { MAKE_SET8, MAKE_SET16, MAKE_SET32, MAKE_IOTA_U32, MAKE_IOTA_F32, MAKE_DUP };

typedef union word {
  uint32_t u;
  float f;
} word_t;

typedef struct make_op {
  struct cuv_op_s op;
  enum make_kind kind;
  cuv_device_t *dev;
  cuv_buffer_t *src;   /* what MAKE_DUP copies */
  size_t count, width; /* elements, and bytes each */
  word_t start, step;  /* a set's pattern is start */
} make_op_t;

static void make_drop(cuv_op_t *op) {
  make_op_t *m = (make_op_t *)op;
  cuv_buffer_unref(m->src);
  cuv__device_unref(m->dev);
}

static void write_iota(const make_op_t *m, void *dst) {
  if (m->kind == MAKE_IOTA_U32) {
    uint32_t *u = dst;
    for (size_t i = 0; i < m->count; i++)
      u[i] = m->start.u + (uint32_t)i * m->step.u; /* modulo 2^32 */
  } else {
    float *f = dst;
    for (size_t i = 0; i < m->count; i++) /* rounded to float once */
      f[i] = (float)((double)m->start.f + (double)i * (double)m->step.f);
  }
}

/* Computed on the host into pinned staging that the submission holds until the copy is done. */
static int upload_iota(const make_op_t *m, cuv__exec_t *ex, CUdeviceptr dst) {
  size_t bytes = m->count * m->width;
  cuv__staging_t *block = cuv__staging_alloc(m->dev, bytes);
  int rc = block ? cuv__sub_hold(ex->sub, cuv__staging_free, block) : CUV_ENOMEM;
  if (rc < 0) {
    if (block)
      cuv__staging_free(block);
    return rc;
  }
  write_iota(m, block->data);
  return cuv__cu(cuv__drv.cuMemcpyHtoDAsync(dst, block->data, bytes, ex->stream->cu));
}

static int fill(const make_op_t *m, cuv__exec_t *ex, CUdeviceptr dst) {
  CUstream s = ex->stream->cu;
  switch (m->kind) {
  case MAKE_SET8: return cuv__cu(cuv__drv.cuMemsetD8Async(dst, (uint8_t)m->start.u, m->count, s));
  case MAKE_SET16:
    return cuv__cu(cuv__drv.cuMemsetD16Async(dst, (uint16_t)m->start.u, m->count, s));
  case MAKE_SET32: return cuv__cu(cuv__drv.cuMemsetD32Async(dst, m->start.u, m->count, s));
  case MAKE_DUP: return cuv__cu(cuv__drv.cuMemcpyDtoDAsync(dst, m->src->ptr, m->count, s));
  case MAKE_IOTA_U32:
  case MAKE_IOTA_F32: return upload_iota(m, ex, dst);
  }
  return CUV_EINVAL;
}

/* A graph replays what its capture enqueued, and a captured cuMemAllocAsync or cuMemFreeAsync
 * would become a node of the graph that cuv's buffers do not model (the same memory again at each
 * replay, a free behind the graph's back): allocating and freeing ops refuse to be captured. */
static int refuse_capture(const cuv__exec_t *ex) {
  return cuv__hazard_capturing(ex->sub) ? CUV_ENOTSUP : 0;
}

static int make_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  make_op_t *m = (make_op_t *)op;
  cuv_buffer_t *buf = NULL;
  int rc = m->dev == ex->stream->dev ? refuse_capture(ex) : CUV_EDEVICE;
  if (rc == 0)
    rc = cuv__buffer_alloc_async(&buf, m->dev, m->count * m->width, ex->stream);
  if (rc == 0)
    rc = cuv__hold_buffer(ex, buf, CUV_ARG_KIND_WRITE);
  if (rc == 0 && m->src)
    rc = cuv__hold_buffer(ex, m->src, CUV_ARG_KIND_READ);
  if (rc == 0)
    rc = fill(m, ex, buf->ptr);
  if (buf) /* released by the caller on failure: freed on the stream, behind what was enqueued */
    *out = cuv__output(buf, cuv__buffer_release, buf);
  make_drop(op);
  return rc;
}

static void make_touches(const cuv_op_t *op, cuv__touches_t *t) {
  cuv__touch(t, ((const make_op_t *)op)->src, false); /* the new buffer: nobody else's yet */
}

static const cuv__op_vt_t make_vt = {"make", make_execute, make_drop, make_touches};

static cuv_op_t *make_new(enum make_kind kind, cuv_device_t *dev, size_t count, size_t width,
                          word_t start, word_t step) {
  if (!dev || count == 0 || count > SIZE_MAX / width)
    return cuv__op_fail(CUV_EINVAL);
  make_op_t *m = (make_op_t *)cuv__op_new(&make_vt, sizeof *m);
  if (!m)
    return cuv__op_fail(CUV_ENOMEM);
  m->kind = kind;
  m->dev = cuv__device_ref(dev);
  m->count = count;
  m->width = width;
  m->start = start;
  m->step = step;
  cuv__op_set_device(&m->op, dev->ordinal);
  m->op.fresh_buffer = true;
  return &m->op;
}

static cuv_op_t *make_set(enum make_kind kind, cuv_device_t *dev, size_t count, size_t width,
                          uint32_t pattern) {
  return make_new(kind, dev, count, width, (word_t){.u = pattern}, (word_t){0});
}

CUV_EXTERN cuv_op_t *cuv_fill8(cuv_device_t *dev, size_t count, uint8_t value) {
  return make_set(MAKE_SET8, dev, count, 1, value);
}

CUV_EXTERN cuv_op_t *cuv_fill16(cuv_device_t *dev, size_t count, uint16_t value) {
  return make_set(MAKE_SET16, dev, count, 2, value);
}

CUV_EXTERN cuv_op_t *cuv_fill32(cuv_device_t *dev, size_t count, uint32_t value) {
  return make_set(MAKE_SET32, dev, count, 4, value);
}

CUV_EXTERN cuv_op_t *cuv_zeros(cuv_device_t *dev, size_t bytes) {
  return make_set(MAKE_SET8, dev, bytes, 1, 0);
}

CUV_EXTERN cuv_op_t *cuv_ones_f32(cuv_device_t *dev, size_t count) {
  word_t one = {.f = 1.0f};
  return make_set(MAKE_SET32, dev, count, 4, one.u);
}

CUV_EXTERN cuv_op_t *cuv_iota_u32(cuv_device_t *dev, size_t count, uint32_t start, uint32_t step) {
  return make_new(MAKE_IOTA_U32, dev, count, 4, (word_t){.u = start}, (word_t){.u = step});
}

CUV_EXTERN cuv_op_t *cuv_iota_f32(cuv_device_t *dev, size_t count, float start, float step) {
  return make_new(MAKE_IOTA_F32, dev, count, 4, (word_t){.f = start}, (word_t){.f = step});
}

CUV_EXTERN cuv_op_t *cuv_dup(cuv_buffer_t *src) {
  if (!src)
    return cuv__op_fail(CUV_EINVAL);
  cuv_op_t *op = make_set(MAKE_DUP, src->dev, src->size, 1, 0);
  if (!op->error)
    ((make_op_t *)op)->src = cuv_buffer_ref(src);
  return op;
}

/* ---- cuv_alloc: stream-ordered allocation ---- */

typedef struct alloc_op {
  struct cuv_op_s op;
  cuv_device_t *dev;
  size_t bytes;
} alloc_op_t;

static void alloc_drop(cuv_op_t *op) { cuv__device_unref(((alloc_op_t *)op)->dev); }

static int alloc_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  alloc_op_t *a = (alloc_op_t *)op;
  cuv_buffer_t *buf = NULL;
  int rc = refuse_capture(ex);
  if (rc == 0)
    rc = cuv__buffer_alloc_async(&buf, a->dev, a->bytes, ex->stream);
  if (rc == 0)
    *out = cuv__output(buf, cuv__buffer_release, buf);
  alloc_drop(op);
  return rc;
}

static const cuv__op_vt_t alloc_vt = {"alloc", alloc_execute, alloc_drop, cuv__touches_none};

CUV_EXTERN cuv_op_t *cuv_alloc(cuv_device_t *dev, size_t bytes) {
  if (!dev || bytes == 0)
    return cuv__op_fail(CUV_EINVAL);
  alloc_op_t *a = (alloc_op_t *)cuv__op_new(&alloc_vt, sizeof *a);
  if (!a)
    return cuv__op_fail(CUV_ENOMEM);
  a->dev = cuv__device_ref(dev);
  a->bytes = bytes;
  cuv__op_set_device(&a->op, dev->ordinal);
  a->op.fresh_buffer = true;
  return &a->op;
}

/* ---- cuv_free: stream-ordered free of the last reference ---- */

typedef struct free_op {
  struct cuv_op_s op;
  cuv_buffer_t *buf;
} free_op_t;

static void free_drop(cuv_op_t *op) { cuv_buffer_unref(((free_op_t *)op)->buf); }

/* Adopted memory has no stream-ordered free: the reference goes to the submission, so its
 * release runs once the work enqueued before it is proven complete. Without memory for the hold,
 * the stream is waited for instead. */
static int free_adopted(cuv_buffer_t *buf, cuv__exec_t *ex) {
  int rc = cuv__sub_hold(ex->sub, cuv__buffer_release, buf);
  if (rc < 0) {
    cuv__drv.cuStreamSynchronize(ex->stream->cu);
    cuv_buffer_unref(buf);
  }
  return rc;
}

static int free_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  cuv_buffer_t *buf = ((free_op_t *)op)->buf;
  if (buf->dev != ex->stream->dev) {
    cuv_buffer_unref(buf);
    return CUV_EDEVICE;
  }
  if (refuse_capture(ex) < 0) {
    /* Released once the capture ended (with the graph or its failure), so that a last reference
     * frees nothing into the capture; without memory for that, now. */
    if (cuv__sub_hold(ex->sub, cuv__buffer_release, buf) < 0)
      cuv_buffer_unref(buf);
    return CUV_ENOTSUP;
  }
  if (buf->adopted)
    return free_adopted(buf, ex);
  /* Earlier work of this submission on this stream may still use the memory: the free is
   * enqueued behind it. Other holders (submissions on other streams) make this not the last. */
  cuv__buffer_unref_on(buf, ex->stream);
  return 0;
}

static void free_touches(const cuv_op_t *op, cuv__touches_t *t) {
  cuv__touch(t, ((const free_op_t *)op)->buf, true);
}

static const cuv__op_vt_t free_vt = {"free", free_execute, free_drop, free_touches};

CUV_EXTERN cuv_op_t *cuv_free(cuv_buffer_t *buf) {
  if (!buf)
    return cuv__op_fail(CUV_EINVAL);
  free_op_t *f = (free_op_t *)cuv__op_new(&free_vt, sizeof *f);
  if (!f) {
    cuv_buffer_unref(buf);
    return cuv__op_fail(CUV_ENOMEM);
  }
  f->buf = buf;
  cuv__op_set_device(&f->op, buf->dev->ordinal);
  return &f->op;
}
