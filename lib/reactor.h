#ifndef CUV_LIB_REACTOR_H
#define CUV_LIB_REACTOR_H

/* The flag-write reactor (reactor.c): pinned, device-mapped slots; one process-wide thread that
 * fires a (function, token) pair when the GPU reached a slot's write, or when a stream it watches
 * faulted. It knows streams, not submissions. */

/* Called once, on the reactor thread or a cuv_poll caller, with 0 (the work before the write ran)
 * or the stream's fault. */
typedef void (*cuv__reactor_fn)(void *token, int status);

/* A stream whose work completes through a host function, watched for faults (a dead context never
 * runs host functions). Owned by the watcher, linked into the reactor while watched. */
typedef struct cuv__watch {
  cuv_stream_t *stream;
  cuv__reactor_fn fn;
  void *token;
  struct cuv__watch *prev, *next;
  bool watched;
} cuv__watch_t;

/* Takes a free slot and enqueues the write of its new generation behind the work on `stream`
 * (which must stay alive until the slot fires or is disarmed). CUV_EBUSY when the pool is
 * exhausted; a driver error when the write could not be enqueued (the slot is back in the pool). */
int cuv__reactor_arm(cuv_stream_t *stream, uint32_t *slot);
/* Whether the armed slot's write has landed (a plain load). */
bool cuv__reactor_landed(uint32_t slot);
/* Gives an armed slot back without registering it (the caller saw it land). */
void cuv__reactor_disarm(uint32_t slot);
/* Hands the armed slot to the reactor thread, which fires fn(token, status) once. */
void cuv__reactor_register(uint32_t slot, cuv__reactor_fn fn, void *token);
/* One scan on the calling thread (cuv_poll), unless the thread is scanning at this moment: the
 * number of slots it fired. */
unsigned cuv__reactor_poll(void);
/* Watches w->stream until cuv__reactor_unwatch; fires w's pair if the stream faults first (then
 * w is unwatched). */
void cuv__reactor_watch(cuv__watch_t *w);
void cuv__reactor_unwatch(cuv__watch_t *w);

#endif
