#ifndef CUV_LIB_STREAM_H
#define CUV_LIB_STREAM_H

typedef struct cuv__submission cuv__submission_t;
struct cuv__tl_entry;

/* A stream's completion timeline (lib/reactor.c keeps it; model/timeline.pml is its protocol):
 * one pinned 64-bit word from the reactor's pool that the GPU raises to each armed submission's
 * sequence number behind its work, and the submissions still waiting for it, in sequence order.
 * `lock` guards the numbering, the write's enqueueing, the list and `active`; the scanner's
 * fields are the reactor's alone (under its scan lock). */
typedef struct cuv__timeline {
  pthread_mutex_t lock;
  uint64_t *word; /* host view of the word; NULL until the first armed submission */
  CUdeviceptr word_dev;
  uint32_t word_index; /* in the reactor's pool */
  bool faulted;        /* a write may still land: the word is never given back */
  bool active;         /* linked in the reactor's active list */
  uint64_t seq;        /* the last sequence number handed out */
  struct cuv__tl_entry *head, *tail;
  _Atomic uint64_t head_seq; /* head's seq, UINT64_MAX when empty: the scanner's cheap test */
  struct cuv__timeline *active_prev, *active_next;
  /* the scanner's */
  uint64_t probe_word; /* the word at the last probe */
  uint64_t idle_upto;  /* the last probe found the stream idle with this seq armed */
} cuv__timeline_t;

struct cuv_stream_s {
  cuv_device_t *dev;
  CUstream cu;
  bool owned;          /* created by cuv (destroyed by cuv) or wrapped (never destroyed) */
  bool holds_device;   /* false for the default policy's streams: the device owns them */
  pthread_mutex_t lock;          /* guards `detached` and `reap` */
  cuv__submission_t *detached;   /* cuv_enqueue_on work waiting for its event (reaped lazily) */
  /* Retires finished detached work; set by enqueue.c with the first detached submission. */
  void (*reap)(struct cuv_stream_s *stream);
  cuv__timeline_t timeline;
  /* Gives the timeline's word back to the reactor's pool; set by reactor.c with the word. */
  void (*timeline_release)(struct cuv_stream_s *stream);
  /* One more and one less of each per submission (lines.h). */
  CUV__OWN_LINE atomic_int refs;
  atomic_uint in_flight;
};

/* A stream for cuv's own use; holds_device false for streams the device itself owns. */
int cuv__stream_create(cuv_stream_t **stream, cuv_device_t *dev, bool holds_device);
/* A reference more and less, inline as the device's (device.h); the last one's drop tears the
 * stream down (cuv__stream_unref_last, stream.c). */
static inline cuv_stream_t *cuv__stream_ref(cuv_stream_t *stream) {
  atomic_fetch_add(&stream->refs, 1);
  return stream;
}
void cuv__stream_unref_last(cuv_stream_t *stream);
static inline void cuv__stream_unref(cuv_stream_t *stream) {
  if (stream && atomic_fetch_sub(&stream->refs, 1) == 1)
    cuv__stream_unref_last(stream);
}
/* Runs the reap hook, if the stream ever carried detached work. */
void cuv__stream_reap(cuv_stream_t *stream);

#endif
