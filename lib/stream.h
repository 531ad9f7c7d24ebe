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
  pthread_mutex_t lock;          /* guards `detached` and `reap` */
  cuv__submission_t *detached;   /* cuv_enqueue_on work waiting for its event (reaped lazily) */
  /* Retires finished detached work; set by enqueue.c with the first detached submission. */
  void (*reap)(struct cuv_stream_s *stream);
};

/* A stream for cuv's own use; holds_device false for streams the device itself owns. */
int cuv__stream_create(cuv_stream_t **stream, cuv_device_t *dev, bool holds_device);
cuv_stream_t *cuv__stream_ref(cuv_stream_t *stream);
void cuv__stream_unref(cuv_stream_t *stream);
/* Runs the reap hook, if the stream ever carried detached work. */
void cuv__stream_reap(cuv_stream_t *stream);

#endif
