#ifndef CUV_LIB_BUFFER_H
#define CUV_LIB_BUFFER_H

typedef struct cuv__access cuv__access_t;
typedef struct cuv__tally cuv__tally_t;

struct cuv_buffer_s {
  cuv_device_t *dev;
  CUdeviceptr ptr;
  size_t size;
  cuv_stream_t *alloc_stream; /* stream-ordered allocations are freed on a stream too */
  atomic_int hazard_mode;     /* CUV_HAZARD_*: read without the lock */
  bool adopted;               /* cuv_buffer_adopt: the caller's memory, never freed by cuv */
  cuv_release_fn release;     /* ... given back with release(release_arg), when not NULL */
  void *release_arg;
  /* Written by every access (hazard.c), apart from what launches read (lines.h). */
  CUV__OWN_LINE pthread_mutex_t lock; /* guards tallies and the setting of latest */
  cuv__tally_t *tallies;              /* accesses in flight, counted per stream, read or write */
  _Atomic(cuv__access_t *) latest;    /* the access counted last, while in flight */
  CUV__OWN_LINE atomic_int refs;      /* one more and one less per access */
};

/* Checks [offset, offset + bytes) lies in buf. */
int cuv__buffer_check_range(const cuv_buffer_t *buf, size_t offset, size_t bytes);
/* Whether bytes [a_offset, a_offset + a_bytes) of a and [b_offset, b_offset + b_bytes) of b share
 * device memory, compared by address: two buffers adopted over one allocation overlap too. Empty
 * ranges overlap nothing. The ranges must lie in their buffers (cuv__buffer_check_range). */
bool cuv__buffer_ranges_overlap(const cuv_buffer_t *a, size_t a_offset, size_t a_bytes,
                                const cuv_buffer_t *b, size_t b_offset, size_t b_bytes);
/* The release function of every output that is a buffer (cuv_output_buffer recognises it). */
void cuv__buffer_release(void *buf);
/* A new buffer from stream-ordered allocation on `stream` (of dev: else CUV_EDEVICE), freed on that
 * stream at its last reference. */
int cuv__buffer_alloc_async(cuv_buffer_t **out, cuv_device_t *dev, size_t bytes,
                            cuv_stream_t *stream);
/* Drops one reference to buf; the last frees its memory on `stream` (stream-ordered). */
void cuv__buffer_unref_on(cuv_buffer_t *buf, cuv_stream_t *stream);

#endif
