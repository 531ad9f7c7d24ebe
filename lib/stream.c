/* Streams: non-blocking CUstreams that cuv creates, or the application's own, wrapped. A stream is
 * reference counted; every submission on it holds a reference, so destroying it with work in
 * flight is safe. */
#include "internal.h"

static int stream_init(cuv_stream_t **out, cuv_device_t *dev, CUstream cu, bool owned,
                       bool holds_device) {
  cuv_stream_t *stream = cuv__lines_zalloc(sizeof *stream);
  if (!stream)
    return CUV_ENOMEM;
  atomic_init(&stream->refs, 1);
  atomic_init(&stream->in_flight, 0);
  pthread_mutex_init(&stream->lock, NULL);
  pthread_mutex_init(&stream->timeline.lock, NULL);
  atomic_init(&stream->timeline.head_seq, UINT64_MAX);
  stream->dev = holds_device ? cuv__device_ref(dev) : dev;
  stream->holds_device = holds_device;
  stream->cu = cu;
  stream->owned = owned;
  *out = stream;
  return 0;
}

int cuv__stream_create(cuv_stream_t **out, cuv_device_t *dev, bool holds_device) {
  int rc = cuv__bind(dev);
  CUstream cu = NULL;
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuStreamCreate(&cu, CU_STREAM_NON_BLOCKING));
  if (rc == 0 && (rc = stream_init(out, dev, cu, true, holds_device)) < 0)
    cuv__drv.cuStreamDestroy(cu);
  return rc;
}

CUV_EXTERN int cuv_stream_create(cuv_stream_t **stream, cuv_device_t *dev) {
  if (!stream || !dev)
    return CUV_EINVAL;
  return cuv__stream_create(stream, dev, true);
}

CUV_EXTERN int cuv_stream_wrap(cuv_stream_t **stream, cuv_device_t *dev, struct CUstream_st *raw) {
  if (!stream || !dev)
    return CUV_EINVAL;
  return stream_init(stream, dev, raw, false, true);
}

void cuv__stream_reap(cuv_stream_t *stream) {
  pthread_mutex_lock(&stream->lock);
  void (*reap)(cuv_stream_t *) = stream->reap;
  pthread_mutex_unlock(&stream->lock);
  if (reap)
    reap(stream);
}

/* cuv_enqueue_on work holds the stream until it is reaped, and only a later use of the stream
 * reaps it: without this, the caller's last handle would leave the stream, the work and all it
 * holds alive for good. The caller synchronizes enqueue_on work; here that is waited for. */
static void stream_settle_detached(cuv_stream_t *stream) {
  cuv__stream_reap(stream);
  if (!stream->detached)
    return;
  if (cuv__bind(stream->dev) == 0)
    cuv__drv.cuStreamSynchronize(stream->cu);
  cuv__stream_reap(stream);
}

void cuv__stream_unref_last(cuv_stream_t *stream) {
  /* Last reference: no submission uses it any more, so detached work is all that may remain. */
  stream_settle_detached(stream);
  if (stream->owned && cuv__bind(stream->dev) == 0)
    cuv__drv.cuStreamDestroy(stream->cu);
  /* No submission is left on the stream; a write of it still to land carries a number no
   * higher than its last, and the word's next stream numbers above that (reactor.c). */
  if (stream->timeline_release)
    stream->timeline_release(stream);
  pthread_mutex_destroy(&stream->timeline.lock);
  pthread_mutex_destroy(&stream->lock);
  if (stream->holds_device)
    cuv__device_unref(stream->dev);
  free(stream);
}

CUV_EXTERN void cuv_stream_destroy(cuv_stream_t *stream) {
  if (!stream)
    return;
  stream_settle_detached(stream);
  cuv__stream_unref(stream);
}

CUV_EXTERN struct CUstream_st *cuv_stream_handle(const cuv_stream_t *stream) {
  return stream ? stream->cu : NULL;
}

CUV_EXTERN cuv_device_t *cuv_stream_device(const cuv_stream_t *stream) {
  return stream ? stream->dev : NULL;
}

CUV_EXTERN unsigned cuv_stream_in_flight(const cuv_stream_t *stream) {
  return stream ? atomic_load(&stream->in_flight) : 0;
}

CUV_EXTERN int cuv_stream_synchronize(cuv_stream_t *stream) {
  if (!stream)
    return CUV_EINVAL;
  int rc = cuv__bind(stream->dev);
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuStreamSynchronize(stream->cu));
  cuv__stream_reap(stream);
  return rc;
}
