/* The timeline reactor. Each stream that arms work gets one pinned, device-mapped 64-bit word from
 * a process-wide pool; arming a submission, under the stream's timeline lock, takes the stream's
 * next sequence number and enqueues cuStreamWriteValue64(word, seq) behind the submission's work,
 * so the word only ever rises and word >= seq proves every armed submission of the stream up to
 * seq. A registered submission waits in its stream's pending list, in sequence order; a stream
 * whose list is non-empty is active. One thread, cuv-reactor, scans the active streams: it reads
 * each word once and fires, in order, the (function, token) pair of every pending entry it
 * covers, deactivating a stream whose list it emptied under that stream's lock. The reactor knows
 * streams, not what runs on them: whoever arms decides what a firing means (completion.c).
 *
 * model/timeline.pml checks this protocol: numbering and the write's enqueueing under one lock
 * (else a later number can reach the word first and the word goes back), activation counted
 * before the stream is linked, the wake-up of a parked reactor under the park lock on the
 * 0 -> 1 transition of the count, and the count re-checked under that lock before parking.
 *
 * A word outlives its stream: given back to the pool with the stream's last number, it is taken
 * by the next stream with its numbering continuing from there, so a write of the old stream still
 * to land (the probe below completes work whose write had not landed) carries a number below
 * anything the new stream waits for. A stream that faulted keeps its word out of the pool for
 * good.
 *
 * The thread spins while work makes progress, backs off with sleeps that grow with how long
 * nothing finished while work is armed, probes the active streams whose word did not move about
 * every 2 ms (at each wake-up of a longer back-off) for a sticky fault (theirs, or that of
 * another device whose work their oldest entry waits for), and parks when nothing is armed. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "internal.h"
#include "reactor.h"

#define SPIN_NS 200000ull     /* keep scanning this long after the last progress */
#define PARK_SPIN_NS 50000ull /* with nothing armed, linger this long before parking */
#define PROBE_NS 2000000ull   /* probe streams of stuck work this often */
/* A poller (cuv__reactor_poll: a loop polling its young work) scanned within COVER_NS: the thread
 * leaves the scanning to it and sleeps COVER_SLEEP_NS at a time. Both read the same words, and a
 * second scanner spinning beside a polling loop only fights it for the scan and stream locks (the
 * loop's cost per request, bench/RESULTS.md); the thread takes over within about COVER_NS +
 * COVER_SLEEP_NS of the loop's last poll, and keeps probing for faults meanwhile. */
#define COVER_NS 100000ull
#define COVER_SLEEP_NS 100000ull
/* While work completes on more than one stream, the thread naps between empty scans for a
 * quarter of the mean gap between the scans that fired something, from NAP_MIN_NS (a shorter nap
 * costs about what spinning through it does) up to NAP_MAX_NS: completions 20 us apart cost it a
 * few naps each instead of thousands of empty scans, each taking the locks that arming takes
 * (bench/RESULTS.md: the reactor at 90-100 % of a core beside one loop, most of it in those
 * locks). Each completion is then seen at most a quarter of that gap late; closer ones keep it
 * spinning. Work on one stream alone keeps it spinning too: one submission in flight at a time
 * waits out each nap in full (cuv-bench-latency's reactor row: 1.8x -> 3.6x raw sync). */
#define NAP_MIN_NS 4000ull
#define NAP_MAX_NS 20000ull
/* The back-off sleep grows to 1/AGE_SHARE of how long no armed work has finished, between the
 * floor and the ceiling: work that runs for T is seen at most about T/64 late (and never more
 * than 20 us late below 1.3 ms), while a kernel of seconds costs the thread a few hundred short
 * wake-ups a second instead of tens of thousands. Each of those wake-ups also probes the
 * streams (PROBE_NS has passed), which costs the driver's stream queries: with a 2 ms ceiling
 * one 2 s kernel cost the thread 1.0-1.5 % of a core on the GPU (bench/RESULTS.md), with 4 ms
 * half the wake-ups, for a kernel of seconds seen at most 4 ms late. */
#define BACKOFF_FLOOR_NS 20000ull
#define BACKOFF_CEIL_NS 4000000ull
#define AGE_SHARE 64u

/* The word pool grows by chunks of pinned memory, never freed (the GPU may write a word late). */
#define CHUNK_WORDS 4096u
#define MAX_CHUNKS 4096u

static struct {
  pthread_mutex_t lock;
  uint64_t *host[MAX_CHUNKS]; /* pinned, device-mapped, portable; written by the GPU */
  CUdeviceptr dev[MAX_CHUNKS];
  uint64_t *last_seq[MAX_CHUNKS]; /* per word: the last number its streams handed out */
  uint32_t nchunks;
  uint32_t fresh; /* words below this index were handed out at least once */
  uint32_t *free; /* given-back words, taken last in, first out */
  uint32_t nfree, cap_free;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct {
  pthread_once_t once;
  int init_status;
  pthread_mutex_t scan_lock;    /* one scanner at a time: the thread, or a poller */
  pthread_mutex_t active_lock;  /* guards the links of the active list */
  cuv__timeline_t *active_head; /* streams with pending entries; only scanners unlink */
  atomic_uint armed;            /* active streams + host-callback submissions watched */
  /* Bumped by every arming and by every cuv__reactor_poll that completed something: the thread's
   * back-off restarts when work is coming and going, even when pollers see it finish first. */
  atomic_uint_fast64_t activity;
  atomic_uint_fast64_t polled_ns; /* cuv__now_ns() of the last scan by a poller */
  pthread_mutex_t park_lock;
  pthread_cond_t park_cond;
  bool parked, started;
  atomic_bool stop;
  pthread_t thread;
  pthread_mutex_t watch_lock;
  cuv__watch_t *watch_head;
} R = {.once = PTHREAD_ONCE_INIT,
       .scan_lock = PTHREAD_MUTEX_INITIALIZER,
       .active_lock = PTHREAD_MUTEX_INITIALIZER,
       .park_lock = PTHREAD_MUTEX_INITIALIZER,
       .park_cond = PTHREAD_COND_INITIALIZER,
       .watch_lock = PTHREAD_MUTEX_INITIALIZER};

static void *reactor_main(void *arg);

static cuv_stream_t *stream_of(cuv__timeline_t *t) {
  return (cuv_stream_t *)((char *)t - offsetof(cuv_stream_t, timeline));
}

/* ---- set-up (first arm) ---- */

/* Under park_lock, like the destructor: a process may exit while a submitter's first arm is
 * starting the thread, and a library going away stops a start that has not begun. */
static void init_once(void) {
  pthread_mutex_lock(&R.park_lock);
  if (atomic_load(&R.stop) || pthread_create(&R.thread, NULL, reactor_main, NULL) != 0) {
    R.init_status = CUV_ETHREAD;
  } else {
    pthread_setname_np(R.thread, "cuv-reactor");
    R.started = true;
  }
  pthread_mutex_unlock(&R.park_lock);
}

/* Stops the thread when the library goes away (dlclose or exit), so it never runs unmapped code. */
__attribute__((destructor)) static void reactor_shutdown(void) {
  pthread_mutex_lock(&R.park_lock);
  bool started = R.started;
  atomic_store(&R.stop, true);
  pthread_cond_signal(&R.park_cond);
  pthread_mutex_unlock(&R.park_lock);
  if (started)
    pthread_join(R.thread, NULL);
  R.started = false;
}

/* ---- the word pool ---- */

/* Another chunk of words, pinned and mapped, in the current context (the arming stream's device).
 * Portable, so every context's streams may write them. Closing the last cuv_device_t of that
 * device releases cuv's hold on its primary context, and a context whose last hold goes is
 * destroyed with its memory: the words would be freed under streams of other devices (or of the
 * same device opened again). So the pool holds that context itself, for the life of the process,
 * like the words. The caller holds P.lock. */
static int grow_pool(cuv_device_t *dev) {
  if (P.nchunks == MAX_CHUNKS)
    return CUV_ENOMEM;
  uint64_t *last = calloc(CHUNK_WORDS, sizeof *last);
  if (!last)
    return CUV_ENOMEM;
  void *host = NULL;
  CUdeviceptr devptr = 0;
  CUcontext ctx;
  int rc = cuv__cu(cuv__drv.cuMemHostAlloc(&host, CHUNK_WORDS * sizeof(uint64_t),
                                           CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  if (rc == 0 && (rc = cuv__cu(cuv__drv.cuMemHostGetDevicePointer(&devptr, host, 0))) == 0)
    rc = cuv__cu(cuv__drv.cuDevicePrimaryCtxRetain(&ctx, dev->cu));
  if (rc < 0) {
    if (host)
      cuv__drv.cuMemFreeHost(host);
    free(last);
    return rc;
  }
  memset(host, 0, CHUNK_WORDS * sizeof(uint64_t));
  P.host[P.nchunks] = host;
  P.dev[P.nchunks] = devptr;
  P.last_seq[P.nchunks] = last;
  P.nchunks++;
  return 0;
}

static void release_word(cuv_stream_t *stream);

/* Gives the stream a word: the last one given back, else a fresh one. Its numbering continues
 * from the word's last number. The caller holds the stream's timeline lock. */
static int take_word(cuv_stream_t *stream) {
  cuv__timeline_t *t = &stream->timeline;
  pthread_mutex_lock(&P.lock);
  int rc = 0;
  uint32_t i;
  if (P.nfree)
    i = P.free[--P.nfree];
  else if (P.fresh < P.nchunks * CHUNK_WORDS || (rc = grow_pool(stream->dev)) == 0)
    i = P.fresh++;
  if (rc == 0) {
    t->word_index = i;
    t->word = &P.host[i / CHUNK_WORDS][i % CHUNK_WORDS];
    t->word_dev = P.dev[i / CHUNK_WORDS] + (i % CHUNK_WORDS) * sizeof(uint64_t);
    t->seq = P.last_seq[i / CHUNK_WORDS][i % CHUNK_WORDS];
    t->probe_word = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);
    stream->timeline_release = release_word;
  }
  pthread_mutex_unlock(&P.lock);
  return rc;
}

/* The stream's last reference went (stream.c): its word goes back with its last number, unless
 * a fault left writes of it possibly still to land. */
static void release_word(cuv_stream_t *stream) {
  cuv__timeline_t *t = &stream->timeline;
  if (!t->word || t->faulted)
    return;
  pthread_mutex_lock(&P.lock);
  uint32_t i = t->word_index;
  P.last_seq[i / CHUNK_WORDS][i % CHUNK_WORDS] = t->seq;
  if (P.nfree == P.cap_free) {
    uint32_t cap = P.cap_free ? 2 * P.cap_free : 64;
    uint32_t *grown = realloc(P.free, cap * sizeof *grown);
    if (grown) {
      P.free = grown;
      P.cap_free = cap;
    }
  }
  if (P.nfree < P.cap_free) /* else the word is lost: harmless */
    P.free[P.nfree++] = i;
  pthread_mutex_unlock(&P.lock);
  t->word = NULL;
}

/* ---- arming ---- */

bool cuv__reactor_landed(cuv_stream_t *stream, const cuv__tl_entry_t *e) {
  return __atomic_load_n(stream->timeline.word, __ATOMIC_ACQUIRE) >= e->seq;
}

void cuv__reactor_faulted(cuv_stream_t *stream) {
  pthread_mutex_lock(&stream->timeline.lock);
  stream->timeline.faulted = true;
  pthread_mutex_unlock(&stream->timeline.lock);
}

/* Wakes the thread if it parked. Called by whoever moved `armed` from 0: the thread parks only
 * while armed is 0, checked under the park lock, so taking that lock here cannot miss it. */
static void wake(void) {
  pthread_mutex_lock(&R.park_lock);
  if (R.parked)
    pthread_cond_signal(&R.park_cond);
  pthread_mutex_unlock(&R.park_lock);
}

/* Links e into t's list in sequence order. An armer that spun first registers after later numbers
 * of the stream may have, so it walks from the head; everyone else appends. The caller holds
 * t->lock. */
static void insert_sorted(cuv__timeline_t *t, cuv__tl_entry_t *e) {
  if (!t->tail || t->tail->seq < e->seq) {
    if (t->tail)
      t->tail->next = e;
    else
      t->head = e;
    t->tail = e;
  } else if (t->head->seq > e->seq) {
    e->next = t->head;
    t->head = e;
  } else {
    cuv__tl_entry_t *at = t->head;
    while (at->next->seq < e->seq)
      at = at->next;
    e->next = at->next;
    at->next = e;
  }
  atomic_store_explicit(&t->head_seq, t->head->seq, memory_order_release);
}

/* Puts e in t's pending list and activates t if it was not: the caller holds t->lock. The armed
 * count before, when this activated t (the caller wakes the reactor on 0), else 1. */
static unsigned enlist(cuv__timeline_t *t, cuv__tl_entry_t *e) {
  e->next = NULL;
  atomic_fetch_add_explicit(&R.activity, 1, memory_order_relaxed);
  CUV__STAT_ADD(reactor_waiting, 1);
  insert_sorted(t, e);
  if (t->active)
    return 1;
  /* Counted before it is linked, as the model has it (model/timeline.pml). */
  unsigned before = atomic_fetch_add(&R.armed, 1);
  t->active = true;
  pthread_mutex_lock(&R.active_lock);
  t->active_prev = NULL;
  t->active_next = R.active_head;
  if (R.active_head)
    R.active_head->active_prev = t;
  R.active_head = t;
  pthread_mutex_unlock(&R.active_lock);
  return before;
}

int cuv__reactor_arm(cuv_stream_t *stream, cuv__tl_entry_t *e, bool join) {
  pthread_once(&R.once, init_once);
  if (R.init_status < 0)
    return R.init_status;
  cuv__timeline_t *t = &stream->timeline;
  unsigned before = 1;
  pthread_mutex_lock(&t->lock);
  int rc = t->word ? 0 : take_word(stream);
  if (rc == 0) {
    /* Numbered, enqueued and listed under the one lock: numbers reach the word in order, and
     * the list is in the order of the writes. */
    uint64_t seq = t->seq + 1;
    rc = cuv__cu(
        cuv__drv.cuStreamWriteValue64(stream->cu, t->word_dev, seq, CU_STREAM_WRITE_VALUE_DEFAULT));
    if (rc == 0) {
      t->seq = e->seq = seq;
      if (join)
        before = enlist(t, e);
    } else if (cuv_status_is_fault(rc)) {
      t->faulted = true;
    }
  }
  pthread_mutex_unlock(&t->lock);
  if (before == 0)
    wake();
  return rc;
}

void cuv__reactor_register(cuv_stream_t *stream, cuv__tl_entry_t *e) {
  cuv__timeline_t *t = &stream->timeline;
  pthread_mutex_lock(&t->lock);
  unsigned before = enlist(t, e);
  pthread_mutex_unlock(&t->lock);
  if (before == 0) /* the 0 -> 1 transition: the reactor may be parked */
    wake();
}

void cuv__reactor_watch(cuv__watch_t *w) {
  pthread_once(&R.once, init_once);
  if (R.init_status < 0)
    return; /* no thread to probe: host callbacks still complete work that does not fault */
  /* Counted before it is linked, as a stream before its link: the probe may unlink it at once. */
  unsigned before = atomic_fetch_add(&R.armed, 1);
  pthread_mutex_lock(&R.watch_lock);
  w->watched = true;
  w->prev = NULL;
  w->next = R.watch_head;
  if (R.watch_head)
    R.watch_head->prev = w;
  R.watch_head = w;
  pthread_mutex_unlock(&R.watch_lock);
  if (before == 0)
    wake();
}

/* Unlinks a watch; the caller holds watch_lock. */
static void unlink_watched(cuv__watch_t *w) {
  if (w->prev)
    w->prev->next = w->next;
  else
    R.watch_head = w->next;
  if (w->next)
    w->next->prev = w->prev;
  w->prev = w->next = NULL;
  w->watched = false;
  atomic_fetch_sub(&R.armed, 1);
}

void cuv__reactor_unwatch(cuv__watch_t *w) {
  pthread_mutex_lock(&R.watch_lock);
  if (w->watched)
    unlink_watched(w);
  pthread_mutex_unlock(&R.watch_lock);
}

/* ---- scanning (the thread, or a cuv__reactor_poll caller; the caller holds scan_lock) ---- */

/* The first active stream. Later links are read without active_lock: only scanners unlink, and a
 * link reached from this head was written before the head was read. */
static cuv__timeline_t *active_first(void) {
  pthread_mutex_lock(&R.active_lock);
  cuv__timeline_t *t = R.active_head;
  pthread_mutex_unlock(&R.active_lock);
  return t;
}

/* Unlinks an emptied stream. The caller holds t->lock; the scanner's fields start afresh for
 * the stream's next activation. */
static void deactivate(cuv__timeline_t *t, uint64_t word) {
  pthread_mutex_lock(&R.active_lock);
  if (t->active_prev)
    t->active_prev->active_next = t->active_next;
  else
    R.active_head = t->active_next;
  if (t->active_next)
    t->active_next->active_prev = t->active_prev;
  pthread_mutex_unlock(&R.active_lock);
  t->active_prev = t->active_next = NULL;
  t->active = false;
  t->probe_word = word;
  t->idle_upto = 0;
  atomic_fetch_sub(&R.armed, 1);
}

/* Takes t's pending entries numbered up to `upto` (all of them when `fault`, which also keeps the
 * word out of the pool), deactivating t if that empties it, then fires them in order with
 * `status`. After the last firing t may be gone (its stream's last submission retired): t is not
 * touched again. The number fired. */
static unsigned fire_upto(cuv__timeline_t *t, uint64_t upto, int status, bool fault, bool polled) {
  uint64_t word = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);
  pthread_mutex_lock(&t->lock);
  cuv__tl_entry_t *first = t->head, *last = NULL;
  unsigned n = 0;
  while (t->head && (fault || t->head->seq <= upto)) {
    last = t->head;
    t->head = t->head->next;
    n++;
  }
  if (!t->head)
    t->tail = NULL;
  atomic_store_explicit(&t->head_seq, t->head ? t->head->seq : UINT64_MAX, memory_order_release);
  if (fault)
    t->faulted = true;
  if (!t->head && t->active)
    deactivate(t, word);
  pthread_mutex_unlock(&t->lock);
  if (last)
    last->next = NULL;
  for (cuv__tl_entry_t *e = n ? first : NULL, *next; e; e = next) {
    next = e->next;
    CUV__STAT_SUB(reactor_waiting, 1);
    if (polled)
      CUV__STAT_ADD(completed_polled, 1);
    e->fn(e->token, status); /* e may be freed from here on */
  }
  return n;
}

/* Fires every pending entry the words of the active streams cover: each word read once. */
static unsigned scan(bool polled) {
  unsigned done = 0;
  for (cuv__timeline_t *t = active_first(), *next; t; t = next) {
    next = t->active_next; /* read first: t may be gone once its entries fired */
    uint64_t word = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);
    if (word >= atomic_load_explicit(&t->head_seq, memory_order_acquire))
      done += fire_upto(t, word, 0, false, polled);
  }
  return done;
}

/* The stream's state for a probe: 0 idle, 1 busy, or the fault. A transient error proves
 * nothing: busy. */
static int stream_state(cuv_stream_t *stream) {
  if (cuv__bind(stream->dev) < 0)
    return 1;
  int status = cuv__cu(cuv__drv.cuStreamQuery(stream->cu));
  return status == 0 ? 0 : cuv_status_is_fault(status) ? status : 1;
}

/* The first sticky fault among `n` streams, else 0. */
static int first_fault(cuv_stream_t *const *streams, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    int state = stream_state(streams[i]);
    if (state < 0)
      return state;
  }
  return 0;
}

/* A busy stream's state once its oldest pending entry's other streams are asked too: the fault
 * of a device whose work that entry waits for, else 1 (busy). The wait for an event of a dead
 * context never ends (sim/event.c), so neither the entry's write nor any after it ever lands.
 * The oldest only, so that entries still fire in order: those before it have their writes ahead
 * of its waits. Only scanners fire entries, so the head stays valid under scan_lock. */
static int busy_state(cuv__timeline_t *t) {
  pthread_mutex_lock(&t->lock);
  cuv__tl_entry_t *head = t->head;
  pthread_mutex_unlock(&t->lock);
  int fault = head ? first_fault(head->also, head->n_also) : 0;
  return fault < 0 ? fault : 1;
}

/* Armed work made no progress for a while: a sticky fault never lets a word rise, so ask the
 * driver about each active stream whose word did not move since the last probe, and about the
 * streams of other devices that its oldest entry waits for. A fault fails every pending entry of
 * the stream. An idle stream has passed every write enqueued before the query; when the next
 * probe finds it idle again with its word still behind, the entries armed before the first look
 * complete (their writes are behind their work, so it ran; the second look gives a write on its
 * way time to land first). */
static void probe_timelines(void) {
  for (cuv__timeline_t *t = active_first(), *next; t; t = next) {
    next = t->active_next;
    uint64_t word = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);
    if (word != t->probe_word) {
      t->probe_word = word;
      t->idle_upto = 0;
      continue;
    }
    pthread_mutex_lock(&t->lock);
    uint64_t armed_upto = t->seq; /* numbers enqueued before the query */
    pthread_mutex_unlock(&t->lock);
    int state = stream_state(stream_of(t));
    if (state == 1)
      state = busy_state(t);
    if (state < 0) {
      fire_upto(t, UINT64_MAX, state, true, false);
    } else if (state == 0) {
      uint64_t idle_before = t->idle_upto;
      t->idle_upto = armed_upto;
      if (idle_before)
        fire_upto(t, idle_before, 0, false, false);
    } else {
      t->idle_upto = 0;
    }
  }
}

/* Adds `stream` to the n distinct ones, referenced, unless it is there. The device too: a default
 * policy's stream does not hold it, and this may be the last reference of a stream whose device
 * the application dropped meanwhile (its unref binds the device). The watched submission still
 * holds both here. */
static void add_distinct(cuv_stream_t **streams, size_t *n, cuv_stream_t *stream) {
  for (size_t i = 0; i < *n; i++)
    if (streams[i] == stream)
      return;
  cuv__device_ref(stream->dev);
  streams[(*n)++] = cuv__stream_ref(stream);
}

/* The distinct streams of watched work and those it waits for, referenced (they may retire while
 * we ask the driver). */
static size_t watched_streams(cuv_stream_t ***out) {
  size_t max = 0, n = 0;
  pthread_mutex_lock(&R.watch_lock);
  for (cuv__watch_t *w = R.watch_head; w; w = w->next)
    max += 1 + w->n_also;
  cuv_stream_t **streams = max ? malloc(max * sizeof *streams) : NULL;
  for (cuv__watch_t *w = R.watch_head; streams && w; w = w->next) {
    add_distinct(streams, &n, w->stream);
    for (unsigned i = 0; i < w->n_also; i++)
      add_distinct(streams, &n, w->also[i]);
  }
  pthread_mutex_unlock(&R.watch_lock);
  *out = streams;
  return n;
}

/* Whether w's work runs on, or waits for, `stream`. */
static bool watch_uses(const cuv__watch_t *w, const cuv_stream_t *stream) {
  bool uses = w->stream == stream;
  for (unsigned i = 0; i < w->n_also && !uses; i++)
    uses = w->also[i] == stream;
  return uses;
}

/* Fires the watches of work on, or waiting for, a faulted stream. No driver call under
 * watch_lock: a host function takes that lock, and the driver may hold a query of its stream
 * until the function returns. (Completing under it nests the queue's lock inside; nothing takes
 * them the other way round.) */
static void complete_watched_on(cuv_stream_t *stream, int status) {
  pthread_mutex_lock(&R.watch_lock);
  for (cuv__watch_t *w = R.watch_head, *next; w; w = next) {
    next = w->next;
    if (watch_uses(w, stream)) {
      unlink_watched(w);
      w->fn(w->token, status);
    }
  }
  pthread_mutex_unlock(&R.watch_lock);
}

/* Host-callback work on a faulted stream, or waiting for one, never gets its callback: complete
 * it here. */
static void probe_watched(void) {
  cuv_stream_t **streams;
  size_t n = watched_streams(&streams);
  for (size_t i = 0; i < n; i++) {
    int state =
        cuv__bind(streams[i]->dev) < 0 ? 1 : cuv__cu(cuv__drv.cuStreamQuery(streams[i]->cu));
    if (cuv_status_is_fault(state)) /* a transient error: its host function still runs */
      complete_watched_on(streams[i], state);
    cuv_device_t *dev = streams[i]->dev;
    cuv__stream_unref(streams[i]);
    cuv__device_unref(dev);
  }
  free(streams);
}

/* The longest back-off sleep while armed work has made no progress for `quiet` ns. */
static uint64_t backoff_limit(uint64_t quiet) {
  uint64_t limit = quiet / AGE_SHARE;
  return limit < BACKOFF_FLOOR_NS ? BACKOFF_FLOOR_NS
                                  : limit > BACKOFF_CEIL_NS ? BACKOFF_CEIL_NS : limit;
}

static void sleep_ns(uint64_t ns) {
  struct timespec t = {0, (long)ns};
  nanosleep(&t, NULL);
}

/* Parks until something is armed; false when asked to stop. */
static bool park(void) {
  pthread_mutex_lock(&R.park_lock);
  R.parked = true;
  while (atomic_load(&R.armed) == 0 && !R.stop)
    pthread_cond_wait(&R.park_cond, &R.park_lock);
  R.parked = false;
  bool go_on = !R.stop;
  pthread_mutex_unlock(&R.park_lock);
  if (go_on)
    CUV__STAT_ADD(reactor_wakeups, 1);
  return go_on;
}

unsigned cuv__reactor_poll(void) {
  /* Nothing armed: nothing to find. A registration counts its stream in before it links it, so
   * armed work is never missed by this test. */
  if (atomic_load(&R.armed) == 0 || pthread_mutex_trylock(&R.scan_lock) != 0)
    return 0; /* or the thread is scanning right now: it reads the same words */
  unsigned done = scan(true);
  pthread_mutex_unlock(&R.scan_lock);
  atomic_store_explicit(&R.polled_ns, cuv__now_ns(), memory_order_relaxed);
  if (done)
    atomic_fetch_add_explicit(&R.activity, 1, memory_order_relaxed);
  return done;
}

/* The thread's scan. A poller scanning right now reads the same words: the thread does not wait
 * for it (a waiter would make the poller's unlock a futex wake-up, on the loop thread: 5 % of its
 * time with 64 Promises in flight, bench/RESULTS.md). */
static unsigned thread_scan(void) {
  if (pthread_mutex_trylock(&R.scan_lock) != 0)
    return 0;
  unsigned done = scan(false);
  pthread_mutex_unlock(&R.scan_lock);
  return done;
}

static void *reactor_main(void *arg) {
  (void)arg;
  /* Accurate back-off sleeps: the default 50 us of timer slack would make each "1 us" sleep a
   * 50 us one, and long work would be seen that much later. */
  prctl(PR_SET_TIMERSLACK, 1000ul, 0, 0, 0);
  uint64_t last_progress = cuv__now_ns(), last_probe = last_progress, backoff = 0;
  uint64_t last_fired = 0, fire_gap = 0; /* when a scan last fired, and the mean gap between */
  uint_fast64_t seen_activity = 0;
  while (!atomic_load_explicit(&R.stop, memory_order_relaxed)) {
    uint64_t now = cuv__now_ns();
    uint_fast64_t activity = atomic_load_explicit(&R.activity, memory_order_relaxed);
    if (activity != seen_activity) { /* work armed, or completed by a poller: not quiet */
      seen_activity = activity;
      last_progress = now;
      backoff = 0;
    }
    /* Per stream and whatever the others do: a faulted stream is found while other streams
     * keep completing (the probe skips the streams whose word moved). */
    if (now - last_probe >= PROBE_NS && atomic_load(&R.armed) != 0) {
      pthread_mutex_lock(&R.scan_lock);
      probe_timelines();
      pthread_mutex_unlock(&R.scan_lock);
      probe_watched();
      last_probe = now;
    }
    if (now - atomic_load_explicit(&R.polled_ns, memory_order_relaxed) < COVER_NS) {
      sleep_ns(COVER_SLEEP_NS);
      continue;
    }
    if (thread_scan()) {
      if (last_fired)
        fire_gap = (3 * fire_gap + (now - last_fired)) / 4;
      last_fired = last_progress = now;
      backoff = 0;
      continue;
    }
    if (atomic_load(&R.armed) == 0) {
      if (now - last_progress < PARK_SPIN_NS)
        continue;
      if (!park())
        return NULL;
      last_progress = last_probe = cuv__now_ns();
      continue;
    }
    if (now - last_progress < SPIN_NS) {
      uint64_t nap = fire_gap / 4;
      if (nap >= NAP_MIN_NS && atomic_load_explicit(&R.armed, memory_order_relaxed) > 1)
        sleep_ns(nap < NAP_MAX_NS ? nap : NAP_MAX_NS);
      continue;
    }
    uint64_t limit = backoff_limit(now - last_progress);
    backoff = backoff ? (backoff * 2 > limit ? limit : backoff * 2) : 1000;
    sleep_ns(backoff);
  }
  return NULL;
}
