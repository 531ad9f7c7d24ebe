#ifndef CUV_LIB_STREAM_H
#define CUV_LIB_STREAM_H

typedef struct cuv__submission cuv__submission_t;

struct cuv_stream_s {
  atomic_int refs;
  cuv_device_t *dev;
  CUstream cu;
  bool owned;          /* created by cuv (destroyed by cuv) or wrapped (never destroyed) */
  bool holds_device;   /* false for the default policy's streams: the device owns them */
  atomic_uint in_flight;
  unsigned epoch;      /* the device epoch it was made in (stale after a recovery) */
  pthread_mutex_t lock;          /* guards `detached` */
  cuv__submission_t *detached;   /* cuv_enqueue_on work waiting for its event (reaped lazily) */
};

/* A stream for cuv's own use; holds_device false for streams the device itself owns. */
int cuv__stream_create(cuv_stream_t **stream, cuv_device_t *dev, bool holds_device);
cuv_stream_t *cuv__stream_ref(cuv_stream_t *stream);
void cuv__stream_unref(cuv_stream_t *stream);
/* Retires cuv_enqueue_on submissions of this stream whose events have completed. */
void cuv__stream_reap(cuv_stream_t *stream);

#endif
