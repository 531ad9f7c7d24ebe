/* Peer copies (cuv_memcpy_peer): device memory of one device into another's. The copy runs on a
 * stream of the destination's device and reads the source across devices with
 * cuMemcpyPeerAsync, which works with or without peer access. Peer access lets the copy read the
 * source over the link between the devices rather than through the driver's own staging: cuv
 * enables it once per ordered pair of devices where cuDeviceCanAccessPeer says the destination's
 * device can reach the source's. Where the driver refuses the peer copy itself, the copy is staged
 * through pinned host memory: a stream of the source's device copies into it, the destination's
 * stream waits for that and copies out of it.
 *
 * Both buffers are held until the submission retires and tracked as accesses of the destination's
 * stream (lib/hazard.c): a writer of the source on its own device waits for the copy, and the
 * copy waits for a writer of the source in flight there, through events across contexts. */
#include "internal.h"
#include "cross.h"
#include "hazard.h"
#include "staging.h"

typedef struct peer_op {
  struct cuv_op_s op;
  cuv_buffer_t *dst, *src;
  size_t dst_offset, src_offset, bytes;
} peer_op_t;

/* ---- peer access, once per ordered pair of devices ---- */

enum { ACCESS_UNKNOWN, ACCESS_ENABLED, ACCESS_NONE };

static atomic_uchar access[CUV__MAX_DEVICES][CUV__MAX_DEVICES]; /* [reader][owner] */
static pthread_mutex_t access_lock = PTHREAD_MUTEX_INITIALIZER;

/* What cuCtxEnablePeerAccess's answer makes of the pair: a transient failure is asked again at
 * the next copy; the copy goes on either way. */
static unsigned char access_after(CUresult r) {
  switch (r) {
  case CUDA_SUCCESS:
  case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: return ACCESS_ENABLED;
  case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED:
  case CUDA_ERROR_TOO_MANY_PEERS: return ACCESS_NONE;
  default: return ACCESS_UNKNOWN;
  }
}

/* With the reader's context current (the executing stream's). The lock makes one thread ask the
 * driver per pair; the others see the answer. */
static void access_enable(cuv_device_t *reader, cuv_device_t *owner) {
  atomic_uchar *state = &access[reader->ordinal][owner->ordinal];
  if (atomic_load_explicit(state, memory_order_acquire) != ACCESS_UNKNOWN)
    return;
  pthread_mutex_lock(&access_lock);
  if (atomic_load_explicit(state, memory_order_relaxed) == ACCESS_UNKNOWN) {
    int can = 0;
    CUresult r = cuv__drv.cuDeviceCanAccessPeer(&can, reader->cu, owner->cu);
    if (r == CUDA_SUCCESS && !can)
      atomic_store_explicit(state, ACCESS_NONE, memory_order_release);
    else if (r == CUDA_SUCCESS)
      atomic_store_explicit(state, access_after(cuv__drv.cuCtxEnablePeerAccess(owner->ctx, 0)),
                            memory_order_release);
  }
  pthread_mutex_unlock(&access_lock);
}

/* ---- the copy ---- */

/* The driver refuses to copy between the two devices itself (no path it can take). */
static bool refused(CUresult r) {
  return r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_NOT_PERMITTED ||
         r == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
}

/* The source's device copies into pinned memory on a stream of its own forked from the
 * executing stream; the executing stream joins it and copies out. */
static int staged_copy(peer_op_t *p, cuv__exec_t *ex, CUdeviceptr dst, CUdeviceptr src) {
  cuv__staging_t *block = cuv__staging_alloc(ex->stream->dev, p->bytes);
  int rc = block ? cuv__sub_hold(ex->sub, cuv__staging_free, block) : CUV_ENOMEM;
  if (rc < 0) {
    cuv__staging_free(block);
    return rc;
  }
  cuv_stream_t *near;
  rc = cuv__cross_stream(ex, p->src->dev->ordinal, &near);
  if (rc == 0)
    rc = cuv__cross_fork(ex, near);
  if (rc < 0)
    return rc;
  rc = cuv__bind(near->dev);
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuMemcpyDtoHAsync(block->data, src, p->bytes, near->cu));
  int bound = cuv__bind(ex->stream->dev);
  int join = cuv__cross_join(ex, near);
  rc = rc < 0 ? rc : bound < 0 ? bound : join;
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuMemcpyHtoDAsync(dst, block->data, p->bytes, ex->stream->cu));
  return rc;
}

static int peer_copy(peer_op_t *p, cuv__exec_t *ex) {
  CUdeviceptr dst = p->dst->ptr + p->dst_offset, src = p->src->ptr + p->src_offset;
  access_enable(p->dst->dev, p->src->dev);
  CUresult r = cuv__drv.cuMemcpyPeerAsync(dst, p->dst->dev->ctx, src, p->src->dev->ctx, p->bytes,
                                          ex->stream->cu);
  return refused(r) ? staged_copy(p, ex, dst, src) : cuv__cu(r);
}

static void peer_drop(cuv_op_t *op) {
  peer_op_t *p = (peer_op_t *)op;
  cuv_buffer_unref(p->dst);
  cuv_buffer_unref(p->src);
}

static int peer_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  peer_op_t *p = (peer_op_t *)op;
  int rc = ex->sub->devices & CUV__DEVICE_BIT(p->src->dev->ordinal) ? 0 : CUV_EDEVICE;
  if (rc == 0 && cuv__hazard_capturing(ex->sub))
    rc = CUV_ENOTSUP; /* graph.c: a capture is not ordered in the source device's engine */
  if (rc == 0)
    rc = cuv__hold_buffer(ex, p->dst, CUV_ARG_KIND_WRITE);
  if (rc == 0)
    rc = cuv__hold_buffer_peer(ex, p->src, CUV_ARG_KIND_READ);
  if (rc == 0 && p->bytes > 0)
    rc = peer_copy(p, ex);
  peer_drop(op);
  return rc;
}

static void peer_touches(const cuv_op_t *op, cuv__touches_t *t) {
  const peer_op_t *p = (const peer_op_t *)op;
  cuv__touch(t, p->dst, true);
  cuv__touch(t, p->src, false);
}

static const cuv__op_vt_t peer_vt = {"memcpy_peer", peer_execute, peer_drop, peer_touches};

CUV_EXTERN cuv_op_t *cuv_memcpy_peer(cuv_buffer_t *dst, size_t dst_offset, cuv_buffer_t *src,
                                     size_t src_offset, size_t bytes) {
  if (!dst || !src)
    return cuv__op_fail(CUV_EINVAL);
  if (dst->dev == src->dev)
    return cuv_memcpy_dtod(dst, dst_offset, src, src_offset, bytes);
  int rc = cuv__buffer_check_range(dst, dst_offset, bytes);
  if (rc == 0)
    rc = cuv__buffer_check_range(src, src_offset, bytes);
  peer_op_t *p = rc < 0 ? NULL : (peer_op_t *)cuv__op_new(&peer_vt, sizeof *p);
  if (!p)
    return cuv__op_fail(rc < 0 ? rc : CUV_ENOMEM);
  p->dst = cuv_buffer_ref(dst);
  p->src = cuv_buffer_ref(src);
  p->dst_offset = dst_offset;
  p->src_offset = src_offset;
  p->bytes = bytes;
  cuv__op_set_device(&p->op, dst->dev->ordinal);
  p->op.devices |= CUV__DEVICE_BIT(src->dev->ordinal);
  return &p->op;
}
