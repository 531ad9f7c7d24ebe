/* Cross-stream hazards. A submission that touches a buffer records the access (stream, read or
 * write) on the buffer until it retires. A new access from another stream that conflicts (a write
 * against anything, or a read against a write) is ordered after what that stream has enqueued so
 * far, with an event wait, which covers the conflicting access; the same stream needs nothing, its
 * order is the stream's.
 *
 * A stream capture runs nothing, and inside it a wait on work outside the capture is an isolation
 * error: the capture only notes what it touches, and each replay of the graph holds those buffers
 * like a launch does, so replays are ordered and tracked on whatever stream they run. */
#include "internal.h"
#include "hazard.h"

/* What one stream has in flight on one buffer: counts, not a list of the accesses, so that a new
 * access looks at each stream once however many submissions use the buffer (a buffer that 10 000
 * launches in flight read was a list of 10 000 to scan per launch: O(n) per submission). Freed
 * when its counts reach 0. The links are guarded by the buffer's lock, and so is every count that
 * goes from 0 to 1 or from 1 to 0; a count above 1 may go down without it (count_out_unlocked), so
 * whether a count is 0 only ever changes under the lock. */
struct cuv__tally {
  cuv__tally_t *next, **pprev;
  cuv_stream_t *stream;
  atomic_uint reads, writes;
};

/* One submission's access, counted in its stream's tally until the submission retires. */
struct cuv__access {
  cuv_buffer_t *buf;
  cuv__tally_t *tally;
  cuv__submission_t *sub; /* the holder (its accesses are released before it is freed) */
  bool write;
};

CUV_EXTERN int cuv_buffer_set_hazard_mode(cuv_buffer_t *buf, int mode) {
  if (!buf || mode < CUV_HAZARD_ORDER || mode > CUV_HAZARD_NONE)
    return CUV_EINVAL;
  atomic_store_explicit(&buf->hazard_mode, mode, memory_order_relaxed);
  return 0;
}

static atomic_uint *count_of(const cuv__access_t *a) {
  return a->write ? &a->tally->writes : &a->tally->reads;
}

/* Counts the access out of its tally, under the buffer's lock; the tally when it emptied (the
 * caller unlinked it and frees it). */
static cuv__tally_t *count_out(cuv_buffer_t *buf, cuv__access_t *a) {
  cuv__tally_t *t = a->tally;
  cuv__access_t *latest = a;
  atomic_compare_exchange_strong(&buf->latest, &latest, NULL);
  atomic_fetch_sub(count_of(a), 1);
  if (atomic_load(&t->reads) || atomic_load(&t->writes))
    return NULL;
  *t->pprev = t->next;
  if (t->next)
    t->next->pprev = t->pprev;
  return t;
}

/* Counts the access out without the buffer's lock where that empties nothing and changes no
 * latest: its count stays above 0, and it is not the latest access (which it cannot become again:
 * only its own counting in made it that). A buffer that many streams' launches read, retired on
 * one thread while others count new reads in, then costs no lock (with 64 Promises in flight on
 * one x, the lock's waits and wake-ups were 12 % of the loop thread's time, bench/RESULTS.md). */
static bool count_out_unlocked(cuv_buffer_t *buf, cuv__access_t *a) {
  if (atomic_load_explicit(&buf->latest, memory_order_relaxed) == a)
    return false;
  atomic_uint *count = count_of(a);
  unsigned seen = atomic_load_explicit(count, memory_order_relaxed);
  while (seen > 1)
    if (atomic_compare_exchange_weak_explicit(count, &seen, seen - 1, memory_order_release,
                                              memory_order_relaxed))
      return true;
  return false;
}

/* The access ends with its submission: counted out, and the buffer reference dropped. */
static void access_release(void *arg) {
  cuv__access_t *a = arg;
  cuv_buffer_t *buf = a->buf;
  cuv__tally_t *gone = NULL;
  if (!count_out_unlocked(buf, a)) {
    pthread_mutex_lock(&buf->lock);
    gone = count_out(buf, a);
    pthread_mutex_unlock(&buf->lock);
  }
  if (gone) {
    cuv__stream_unref(gone->stream);
    cuv__pool_free(gone);
  }
  cuv__pool_free(a);
  cuv_buffer_unref(buf);
}

/* Whether tally t (of another stream) conflicts with a new access. */
static bool tally_conflicts(const cuv__tally_t *t, cuv_stream_t *stream, bool write) {
  return t->stream != stream &&
         (atomic_load_explicit(&t->writes, memory_order_relaxed) ||
          (write && atomic_load_explicit(&t->reads, memory_order_relaxed)));
}

/* The streams (other than `stream`) whose in-flight access conflicts with a new one, referenced,
 * in a new array (*out; NULL when none); the caller holds buf->lock. One tally per stream: each
 * stream comes once. */
static int conflicts(cuv_buffer_t *buf, cuv_stream_t *stream, bool write, cuv_stream_t ***out,
                     size_t *n) {
  size_t max = 0;
  *out = NULL;
  *n = 0;
  for (const cuv__tally_t *t = buf->tallies; t; t = t->next)
    max += tally_conflicts(t, stream, write);
  if (max == 0)
    return 0;
  if (!(*out = malloc(max * sizeof **out)))
    return CUV_ENOMEM;
  for (const cuv__tally_t *t = buf->tallies; t; t = t->next)
    if (tally_conflicts(t, stream, write))
      (*out)[(*n)++] = cuv__stream_ref(t->stream);
  return 0;
}

/* Makes `stream` wait for the conflicting streams, or refuses in strict mode. */
static int order_after(cuv__submission_t *sub, cuv_stream_t *stream, cuv_stream_t **others,
                       size_t n, int mode) {
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    if (rc == 0 && mode == CUV_HAZARD_STRICT)
      rc = CUV_ECONFLICT;
    else if (rc == 0 && (rc = cuv__sub_order(sub, others[i], stream)) == 0)
      CUV__STAT_ADD(waits_inserted, 1);
    cuv__stream_unref(others[i]);
  }
  return rc;
}

/* The stream's tally on buf, a new one for its first access; NULL without memory. The caller
 * holds buf->lock. */
static cuv__tally_t *tally_of(cuv_buffer_t *buf, cuv_stream_t *stream) {
  cuv__tally_t *t = buf->tallies;
  while (t && t->stream != stream)
    t = t->next;
  if (t || !(t = cuv__pool_zalloc(sizeof *t)))
    return t;
  t->stream = cuv__stream_ref(stream);
  t->next = buf->tallies;
  t->pprev = &buf->tallies;
  if (t->next)
    t->next->pprev = &t->next;
  buf->tallies = t;
  return t;
}

/* Counts the access in and makes it the buffer's latest (already_held). The caller holds
 * buf->lock. */
static int access_link_locked(cuv__access_t *a, cuv_buffer_t *buf, cuv__exec_t *ex, bool write) {
  cuv__tally_t *t = tally_of(buf, ex->stream);
  if (t) {
    *a = (cuv__access_t){cuv_buffer_ref(buf), t, ex->sub, write};
    atomic_fetch_add(count_of(a), 1);
    atomic_store(&buf->latest, a);
  }
  return t ? 0 : CUV_ENOMEM;
}

static int access_link(cuv__access_t *a, cuv_buffer_t *buf, cuv__exec_t *ex, bool write) {
  pthread_mutex_lock(&buf->lock);
  int rc = access_link_locked(a, buf, ex, write);
  pthread_mutex_unlock(&buf->lock);
  return rc;
}

/* ---- stream capture ---- */

struct cuv__uses {
  size_t n, cap;
  struct cuv__use {
    cuv_buffer_t *buf;
    bool write;
  } *items;
};

/* The capture this thread is executing (its submission: another submission executed meanwhile,
 * from a then_unchecked callback, is tracked as usual), and where its accesses go. */
static _Thread_local struct {
  cuv__submission_t *sub;
  cuv__uses_t *uses;
} capturing;

int cuv__hazard_capture_begin(cuv__submission_t *capture, cuv__uses_t **uses) {
  if (!(*uses = calloc(1, sizeof **uses)))
    return CUV_ENOMEM;
  capturing.sub = capture;
  capturing.uses = *uses;
  return 0;
}

void cuv__hazard_capture_end(void) {
  capturing.sub = NULL;
  capturing.uses = NULL;
}

bool cuv__hazard_capturing(const cuv__submission_t *sub) { return capturing.sub == sub; }

static int note_use(cuv__uses_t *uses, cuv_buffer_t *buf, bool write) {
  for (size_t i = 0; i < uses->n; i++) {
    if (uses->items[i].buf == buf) {
      uses->items[i].write = uses->items[i].write || write;
      return 0;
    }
  }
  if (uses->n == uses->cap) {
    size_t cap = uses->cap ? uses->cap * 2 : 4;
    struct cuv__use *grown = realloc(uses->items, cap * sizeof *grown);
    if (!grown)
      return CUV_ENOMEM;
    uses->items = grown;
    uses->cap = cap;
  }
  uses->items[uses->n++] = (struct cuv__use){cuv_buffer_ref(buf), write};
  return 0;
}

static int hazard_mode(cuv_buffer_t *buf) {
  return atomic_load_explicit(&buf->hazard_mode, memory_order_relaxed);
}

/* A buffer that tracks nothing needs nothing from a replay: the graph holds it, and the replay
 * holds the graph. */
int cuv__hazard_replay(cuv__exec_t *ex, const cuv__uses_t *uses) {
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < uses->n; i++)
    if (hazard_mode(uses->items[i].buf) != CUV_HAZARD_NONE)
      rc = cuv__hold_buffer(ex, uses->items[i].buf,
                            uses->items[i].write ? CUV_ARG_KIND_RW : CUV_ARG_KIND_READ);
  return rc;
}

void cuv__hazard_uses_free(cuv__uses_t *uses) {
  if (!uses)
    return;
  for (size_t i = 0; i < uses->n; i++)
    cuv_buffer_unref(uses->items[i].buf);
  free(uses->items);
  free(uses);
}

size_t cuv__hazard_uses_count(const cuv__uses_t *uses) { return uses ? uses->n : 0; }

const cuv_buffer_t *cuv__hazard_uses_get(const cuv__uses_t *uses, size_t i, bool *write) {
  *write = uses->items[i].write;
  return uses->items[i].buf;
}

/* ---- holding a buffer ---- */

/* The buffer's latest access is this submission's, on this stream, at least as strong: nothing
 * was counted since, so nothing new can conflict, and the buffer is held already. Without this a
 * chain of n launches on one buffer holds it n times. The caller holds buf->lock. */
static bool already_held(cuv_buffer_t *buf, const cuv__exec_t *ex, bool write) {
  const cuv__access_t *a = atomic_load(&buf->latest);
  return a && a->sub == ex->sub && a->tally->stream == ex->stream && (a->write || !write);
}

/* CUV_HAZARD_NONE: no access record, only the buffer held until retirement (once per
 * submission where the latest holds show it already). */
static int hold_untracked(cuv__submission_t *sub, cuv_buffer_t *buf) {
  int rc = cuv__sub_hold_unique(sub, cuv__buffer_release, buf);
  if (rc == 0)
    cuv_buffer_ref(buf);
  return rc < 0 ? rc : 0;
}

/* Counts a new access of ex's submission in: ordered after the other streams' conflicting ones
 * first, when there are any; without any (a buffer only read, or used by one stream), checked
 * and counted in under one hold of the buffer's lock, which the submitter threads of a buffer
 * every launch reads (a model's weights) otherwise take twice per launch. */
static int hold_tracked(cuv__exec_t *ex, cuv_buffer_t *buf, bool write) {
  cuv_stream_t **others = NULL;
  size_t n = 0;
  cuv__access_t *a = cuv__pool_alloc(sizeof *a);
  pthread_mutex_lock(&buf->lock);
  int mode = atomic_load_explicit(&buf->hazard_mode, memory_order_relaxed);
  bool held = already_held(buf, ex, write);
  int rc = held ? 0 : conflicts(buf, ex->stream, write, &others, &n);
  bool linked = rc == 0 && !held && n == 0 && a && access_link_locked(a, buf, ex, write) == 0;
  pthread_mutex_unlock(&buf->lock);
  if (held) {
    cuv__pool_free(a);
    return 0;
  }
  if (!linked) {
    if (rc == 0)
      rc = order_after(ex->sub, ex->stream, others, n, mode);
    if (rc == 0 && !a)
      rc = CUV_ENOMEM;
    if (rc == 0)
      rc = access_link(a, buf, ex, write);
  }
  free(others);
  if (rc == 0 && (rc = cuv__sub_hold(ex->sub, access_release, a)) < 0) {
    access_release(a); /* counted in, not held: counted out again */
    return rc;
  }
  if (rc < 0)
    cuv__pool_free(a);
  return rc;
}

/* Whether buf tracks nothing: read without its lock (a mode set meanwhile applies to the
 * submissions after it). */
static bool untracked(cuv_buffer_t *buf) {
  return atomic_load_explicit(&buf->hazard_mode, memory_order_relaxed) == CUV_HAZARD_NONE;
}

int cuv__hold_buffer_peer(cuv__exec_t *ex, cuv_buffer_t *buf, enum cuv_arg_kind kind) {
  bool write = kind != CUV_ARG_KIND_READ;
  if (capturing.sub && capturing.sub == ex->sub)
    return note_use(capturing.uses, buf, write);
  return untracked(buf) ? hold_untracked(ex->sub, buf) : hold_tracked(ex, buf, write);
}

int cuv__hold_buffer(cuv__exec_t *ex, cuv_buffer_t *buf, enum cuv_arg_kind kind) {
  if (buf->dev != ex->stream->dev)
    return CUV_EDEVICE;
  return cuv__hold_buffer_peer(ex, buf, kind);
}

int cuv__hold_buffer_kept(cuv__exec_t *ex, cuv_buffer_t *buf, enum cuv_arg_kind kind) {
  if (buf->dev != ex->stream->dev)
    return CUV_EDEVICE;
  if (untracked(buf) && !(capturing.sub && capturing.sub == ex->sub))
    return 0; /* the caller's reference is the hold */
  return cuv__hold_buffer_peer(ex, buf, kind);
}
