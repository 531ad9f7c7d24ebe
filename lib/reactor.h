#ifndef CUV_LIB_REACTOR_H
#define CUV_LIB_REACTOR_H

/* The timeline reactor (reactor.c): one pinned, device-mapped 64-bit word per stream that the GPU
 * raises to each armed submission's sequence number behind its work; one process-wide thread that
 * fires a (function, token) pair when its stream's word reached its number, or when a stream it
 * watches faulted. It knows streams, not submissions. */

/* Called once, on the reactor thread or a cuv__reactor_poll caller, with 0 (the work before the
 * write ran) or the stream's fault. */
typedef void (*cuv__reactor_fn)(void *token, int status);

/* An armed submission's place on its stream's timeline. Owned by the armer (embedded in what it
 * completes); in the stream's pending list from the time it joins until it fires. */
typedef struct cuv__tl_entry {
  uint64_t seq;
  cuv__reactor_fn fn;
  void *token;
  /* Streams of other devices whose work the entry's stream waits for before its write (kept
   * alive by the armer until the entry fires): a sticky fault of theirs leaves that wait, and so
   * the write, unfinished for good, so it fails the entry too. */
  cuv_stream_t *const *also;
  unsigned n_also;
  struct cuv__tl_entry *next;
} cuv__tl_entry_t;

/* A stream whose work completes through a host function, watched for faults (a dead context never
 * runs host functions). Owned by the watcher, linked into the reactor while watched. */
typedef struct cuv__watch {
  cuv_stream_t *stream;
  cuv__reactor_fn fn;
  void *token;
  cuv_stream_t *const *also; /* as an entry's: their faults fire the watch too */
  unsigned n_also;
  struct cuv__watch *prev, *next;
  bool watched;
} cuv__watch_t;

/* Enqueues, behind the work on `stream`, the write of the stream's next sequence number to its
 * word (taking a word from the pool at the stream's first one) and stores the number in e->seq.
 * With `join`, e (whose fn, token and also the caller set) also joins the stream's pending list
 * under the same lock, so the list is in the order of the writes and the reactor fires the
 * entries in that order; without it the caller may look for its number itself
 * (cuv__reactor_landed) and then hand e over with cuv__reactor_register. Safe from any number of
 * threads on one stream. A driver error when the write could not be enqueued (nothing is then
 * armed), CUV_ENOMEM when no word could be had. */
int cuv__reactor_arm(cuv_stream_t *stream, cuv__tl_entry_t *e, bool join);
/* Whether the stream's word reached the armed entry's number (a plain load). */
bool cuv__reactor_landed(cuv_stream_t *stream, const cuv__tl_entry_t *e);
/* The armer saw the stream fault: its writes may still land, so its word never goes back to the
 * pool. */
void cuv__reactor_faulted(cuv_stream_t *stream);
/* Hands an entry armed without `join` to the reactor, which fires e->fn(e->token, status) once:
 * after the stream's word reached e->seq, or with the stream's fault (or one of e->also's). It
 * takes its place in the list by number, behind entries that joined meanwhile with higher ones
 * only if they fired already: it may fire after them. */
void cuv__reactor_register(cuv_stream_t *stream, cuv__tl_entry_t *e);
/* One scan on the calling thread (cuv_queue_poll's, for young work), unless the thread is
 * scanning at this moment: the number of entries it fired. */
unsigned cuv__reactor_poll(void);
/* Watches w->stream until cuv__reactor_unwatch; fires w's pair if the stream, or one of w->also,
 * faults first (then w is unwatched). */
void cuv__reactor_watch(cuv__watch_t *w);
void cuv__reactor_unwatch(cuv__watch_t *w);

#endif
