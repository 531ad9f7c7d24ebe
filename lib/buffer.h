#ifndef CUV_LIB_BUFFER_H
#define CUV_LIB_BUFFER_H

typedef struct cuv__access cuv__access_t;

struct cuv_buffer_s {
  atomic_int refs;
  cuv_device_t *dev;
  CUdeviceptr ptr;
  size_t size;
  cuv_stream_t *alloc_stream;  /* stream-ordered allocations are freed on a stream too */
  pthread_mutex_t lock;        /* guards accesses (hazard.c) */
  cuv__access_t *accesses;     /* in flight: by which stream, read or write */
  int hazard_mode;             /* CUV_HAZARD_* */
  unsigned epoch;              /* the device epoch its memory belongs to */
};

/* Checks [offset, offset + bytes) lies in buf. */
int cuv__buffer_check_range(const cuv_buffer_t *buf, size_t offset, size_t bytes);
/* hazard.c: holds a reference on buf in the submission and records the access; an access that
 * conflicts with one in flight on another stream is ordered after it (an event wait), or refused
 * with CUV_ECONFLICT in strict mode. Call before enqueuing the access. */
int cuv__hold_buffer(cuv__exec_t *ex, cuv_buffer_t *buf, enum cuv_arg_kind access);
/* hazard.c, for graph.c: while `capture` executes into a stream capture on this thread, its
 * buffer accesses are noted in *uses (each buffer once, with the strongest access) instead of
 * being ordered and tracked; each replay holds them again with cuv__hazard_replay. */
typedef struct cuv__uses cuv__uses_t;
int cuv__hazard_capture_begin(cuv__submission_t *capture, cuv__uses_t **uses);
void cuv__hazard_capture_end(void);
int cuv__hazard_replay(cuv__exec_t *ex, const cuv__uses_t *uses);
void cuv__hazard_uses_free(cuv__uses_t *uses);
void cuv__buffer_release(void *buf);

#endif
