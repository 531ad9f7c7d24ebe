/* The flag-write reactor. Arming a slot enqueues cuStreamWriteValue32(slot, generation) behind a
 * submission's work; one thread, cuv-reactor, scans the armed slots with plain loads and completes
 * the (function, token) pair its armer registered once the slot's generation landed. Generations,
 * not a bare 1, so a late write can never complete a reused slot. The reactor knows streams, not
 * what runs on them: whoever arms decides what a firing means (completion.c).
 *
 * Order (model/slots.pml checks it): reset the flag before the write is enqueued; publish the
 * slot's pair and expected value, count it armed, and only then set its active bit (release);
 * the scanner loads the bit (acquire) before reading what it guards. The thread spins while work
 * makes progress, backs off with sleeps that grow with how long nothing finished while armed work
 * is slow (probing the streams about every 2 ms for a sticky fault), and parks when nothing is
 * armed; a registrant wakes it only on the idle-to-active transition, under the park lock, so no
 * wake-up is lost. */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "internal.h"
#include "reactor.h"

#define SPIN_NS 200000ull       /* keep scanning this long after the last progress */
#define PARK_SPIN_NS 50000ull   /* with nothing armed, linger this long before parking */
#define PROBE_NS 2000000ull     /* probe streams of stuck work this often */
/* The back-off sleep grows to 1/AGE_SHARE of how long no armed work has finished, between the
 * floor and the ceiling: work that runs for T is seen at most about T/64 late (and never more
 * than 20 us late below 1.3 ms), while a kernel of seconds costs the thread a few hundred short
 * wake-ups a second instead of tens of thousands. */
#define BACKOFF_FLOOR_NS 20000ull
#define BACKOFF_CEIL_NS 2000000ull
#define AGE_SHARE 64u

typedef struct slot {
  cuv_stream_t *stream; /* where the write was enqueued (kept alive by the armer until it fires) */
  cuv__reactor_fn fn;
  void *token;
  uint32_t expect;
  uint32_t generation;  /* the last generation handed out */
  uint32_t next_free;
  bool idle_seen;       /* the last probe found the stream idle but the flag not landed */
} slot_t;

static struct {
  pthread_once_t once;
  int init_status;
  uint32_t *flags;            /* pinned, device-mapped; written by the GPU */
  CUdeviceptr flags_dev;
  CUcontext owner;            /* the context the flags were allocated in */
  slot_t *slots;
  uint32_t nslots;
  _Atomic uint64_t *active;   /* one bit per armed slot */
  uint32_t nwords;
  pthread_mutex_t scan_lock;  /* one scanner at a time: the thread, or a cuv_poll caller */
  pthread_mutex_t free_lock;
  uint32_t free_head;         /* UINT32_MAX when empty */
  atomic_uint armed;          /* slots armed + host-callback submissions watched */
  pthread_mutex_t park_lock;
  pthread_cond_t park_cond;
  bool parked, started;
  atomic_bool stop;
  pthread_t thread;
  pthread_mutex_t watch_lock;
  cuv__watch_t *watch_head;
} R = {.once = PTHREAD_ONCE_INIT,
       .scan_lock = PTHREAD_MUTEX_INITIALIZER,
       .free_lock = PTHREAD_MUTEX_INITIALIZER,
       .park_lock = PTHREAD_MUTEX_INITIALIZER,
       .park_cond = PTHREAD_COND_INITIALIZER,
       .watch_lock = PTHREAD_MUTEX_INITIALIZER};

static void *reactor_main(void *arg);

/* ---- set-up (first arm; the caller's context is current) ---- */

/* The flags, pinned and mapped, in the current context. */
static int alloc_flags(void) {
  void *host = NULL;
  int rc = cuv__cu(cuv__drv.cuMemHostAlloc(&host, (size_t)R.nslots * sizeof(uint32_t),
                                           CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  if (rc == 0 && (rc = cuv__cu(cuv__drv.cuMemHostGetDevicePointer(&R.flags_dev, host, 0))) < 0)
    cuv__drv.cuMemFreeHost(host);
  if (rc < 0)
    return rc;
  R.flags = host;
  memset(R.flags, 0, (size_t)R.nslots * sizeof(uint32_t));
  cuv__drv.cuCtxGetCurrent(&R.owner);
  return 0;
}

/* Every slot free, in index order. */
static void reset_free_list(void) {
  for (uint32_t i = 0; i < R.nslots; i++)
    R.slots[i].next_free = i + 1 < R.nslots ? i + 1 : UINT32_MAX;
  R.free_head = 0;
}

static int alloc_slots(void) {
  R.nslots = cuv__config.reactor_slots ? cuv__config.reactor_slots : 1;
  R.nwords = (R.nslots + 63) / 64;
  int rc = alloc_flags();
  if (rc < 0)
    return rc;
  R.slots = calloc(R.nslots, sizeof *R.slots);
  R.active = calloc(R.nwords, sizeof *R.active);
  if (!R.slots || !R.active)
    return CUV_ENOMEM;
  reset_free_list();
  return 0;
}

/* The device whose context the first arm runs in (init_once runs on that thread). */
static __thread CUdevice arming_device;

/* The flags live in the primary context of the device that armed first. Closing the last
 * cuv_device_t of that device releases cuv's hold on its context, and a context whose last hold
 * goes is destroyed with its memory: the flags would be freed under the next arm (another device
 * still using them, or the same device opened again). So the reactor holds that context itself,
 * for the life of the process, like the flags. */
static int keep_owner_context(void) {
  CUcontext ctx;
  return cuv__cu(cuv__drv.cuDevicePrimaryCtxRetain(&ctx, arming_device));
}

static void init_once(void) {
  R.init_status = alloc_slots();
  if (R.init_status == 0)
    R.init_status = keep_owner_context();
  if (R.init_status == 0 && pthread_create(&R.thread, NULL, reactor_main, NULL) != 0)
    R.init_status = CUV_ETHREAD;
  if (R.init_status == 0) {
    pthread_setname_np(R.thread, "cuv-reactor");
    R.started = true;
  }
}

/* Stops the thread when the library goes away (dlclose or exit), so it never runs unmapped code. */
__attribute__((destructor)) static void reactor_shutdown(void) {
  if (!R.started)
    return;
  pthread_mutex_lock(&R.park_lock);
  atomic_store(&R.stop, true);
  pthread_cond_signal(&R.park_cond);
  pthread_mutex_unlock(&R.park_lock);
  pthread_join(R.thread, NULL);
  R.started = false;
}

/* ---- the slot pool ---- */

static uint32_t slot_take(void) {
  pthread_mutex_lock(&R.free_lock);
  uint32_t i = R.flags ? R.free_head : UINT32_MAX;
  if (i != UINT32_MAX)
    R.free_head = R.slots[i].next_free;
  pthread_mutex_unlock(&R.free_lock);
  return i;
}

static void slot_put(uint32_t i) {
  R.slots[i].stream = NULL;
  R.slots[i].fn = NULL;
  pthread_mutex_lock(&R.free_lock);
  R.slots[i].next_free = R.free_head;
  R.free_head = i;
  pthread_mutex_unlock(&R.free_lock);
}

int cuv__reactor_arm(cuv_stream_t *stream, uint32_t *armed) {
  arming_device = stream->dev->cu;
  pthread_once(&R.once, init_once);
  if (R.init_status < 0)
    return R.init_status;
  uint32_t i = slot_take();
  if (i == UINT32_MAX)
    return CUV_EBUSY;
  slot_t *slot = &R.slots[i];
  uint32_t gen = slot->generation + 1;
  gen += gen == 0; /* 0 is the reset value, never a generation */
  slot->generation = gen;
  slot->expect = gen;
  slot->idle_seen = false;
  __atomic_store_n(&R.flags[i], 0, __ATOMIC_RELAXED);
  CUresult r = cuv__drv.cuStreamWriteValue32(stream->cu, R.flags_dev + i * sizeof(uint32_t), gen,
                                             CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r != CUDA_SUCCESS) {
    slot_put(i);
    return cuv__cu(r);
  }
  slot->stream = stream;
  *armed = i;
  return 0;
}

bool cuv__reactor_landed(uint32_t slot) {
  return __atomic_load_n(&R.flags[slot], __ATOMIC_ACQUIRE) == R.slots[slot].expect;
}

void cuv__reactor_disarm(uint32_t slot) { slot_put(slot); }

/* Wakes the thread if it parked. Called by whoever moved `armed` from 0: the thread parks only
 * while armed is 0, checked under the park lock, so taking that lock here cannot miss it. */
static void wake(void) {
  pthread_mutex_lock(&R.park_lock);
  if (R.parked)
    pthread_cond_signal(&R.park_cond);
  pthread_mutex_unlock(&R.park_lock);
}

void cuv__reactor_register(uint32_t i, cuv__reactor_fn fn, void *token) {
  R.slots[i].fn = fn;
  R.slots[i].token = token;
  CUV__STAT_ADD(slots_in_use, 1);
  unsigned before = atomic_fetch_add(&R.armed, 1); /* counted before the bit is set */
  atomic_fetch_or_explicit(&R.active[i / 64], 1ull << (i % 64), memory_order_release);
  if (before == 0)
    wake();
}

void cuv__reactor_watch(cuv__watch_t *w) {
  pthread_once(&R.once, init_once);
  if (R.init_status < 0)
    return; /* no thread to probe: host callbacks still complete work that does not fault */
  /* Counted before it is linked, as a slot before its bit: the probe may unlink it at once. */
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

/* ---- the thread ---- */

/* Retires armed slot i: clears its bit and fires its pair with `status`. A slot whose write may
 * still land (a fault) is not reused. */
static void slot_retire(uint32_t i, int status, bool reuse, bool polled) {
  atomic_fetch_and_explicit(&R.active[i / 64], ~(1ull << (i % 64)), memory_order_relaxed);
  cuv__reactor_fn fn = R.slots[i].fn;
  void *token = R.slots[i].token;
  if (reuse)
    slot_put(i);
  CUV__STAT_SUB(slots_in_use, 1);
  atomic_fetch_sub(&R.armed, 1);
  if (polled)
    CUV__STAT_ADD(completed_polled, 1);
  fn(token, status);
}

/* Completes every armed slot whose write landed. The caller holds scan_lock. */
static unsigned scan(bool polled) {
  unsigned done = 0;
  for (uint32_t w = 0; w < R.nwords; w++) {
    uint64_t bits = atomic_load_explicit(&R.active[w], memory_order_acquire);
    while (bits) {
      uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);
      bits &= bits - 1;
      if (__atomic_load_n(&R.flags[i], __ATOMIC_ACQUIRE) == R.slots[i].expect) {
        slot_retire(i, 0, true, polled);
        done++;
      }
    }
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

/* Armed work made no progress for a while: a sticky fault never lets its flags land, so ask the
 * driver about the streams. An idle stream whose flag has not landed twice in a row completes
 * too (its write is behind the work, so it ran). */
static void probe_slots(void) {
  for (uint32_t w = 0; w < R.nwords; w++) {
    uint64_t bits = atomic_load_explicit(&R.active[w], memory_order_acquire);
    while (bits) {
      uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);
      bits &= bits - 1;
      int state = stream_state(R.slots[i].stream);
      if (state < 0)
        slot_retire(i, state, false, false);
      else if (state == 0 && R.slots[i].idle_seen)
        slot_retire(i, 0, true, false);
      else
        R.slots[i].idle_seen = state == 0;
    }
  }
}

/* The distinct streams of watched work, referenced (they may retire while we ask the driver). */
static size_t watched_streams(cuv_stream_t ***out) {
  size_t max = 0, n = 0;
  pthread_mutex_lock(&R.watch_lock);
  for (cuv__watch_t *w = R.watch_head; w; w = w->next)
    max++;
  cuv_stream_t **streams = max ? malloc(max * sizeof *streams) : NULL;
  for (cuv__watch_t *w = R.watch_head; streams && w; w = w->next) {
    bool seen = false;
    for (size_t i = 0; i < n && !seen; i++)
      seen = streams[i] == w->stream;
    if (!seen)
      streams[n++] = cuv__stream_ref(w->stream);
  }
  pthread_mutex_unlock(&R.watch_lock);
  *out = streams;
  return n;
}

/* Fires the watches of a faulted stream. No driver call under watch_lock: a host function
 * takes that lock, and the driver may hold a query of its stream until the function returns.
 * (Completing under it nests the queue's lock inside; nothing takes them the other way round.) */
static void complete_watched_on(cuv_stream_t *stream, int status) {
  pthread_mutex_lock(&R.watch_lock);
  for (cuv__watch_t *w = R.watch_head, *next; w; w = next) {
    next = w->next;
    if (w->stream == stream) {
      unlink_watched(w);
      w->fn(w->token, status);
    }
  }
  pthread_mutex_unlock(&R.watch_lock);
}

/* Host-callback work on a faulted stream never gets its callback: complete it here. */
static void probe_watched(void) {
  cuv_stream_t **streams;
  size_t n = watched_streams(&streams);
  for (size_t i = 0; i < n; i++) {
    int state =
        cuv__bind(streams[i]->dev) < 0 ? 1 : cuv__cu(cuv__drv.cuStreamQuery(streams[i]->cu));
    if (cuv_status_is_fault(state)) /* a transient error: its host function still runs */
      complete_watched_on(streams[i], state);
    cuv__stream_unref(streams[i]);
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
  /* Nothing armed: nothing to find (and the flags may not exist yet). A registration counts
   * itself in before it sets its bit, so armed work is never missed by this test. */
  if (atomic_load(&R.armed) == 0 || pthread_mutex_trylock(&R.scan_lock) != 0)
    return 0; /* or the thread is scanning right now: it sees the same flags */
  unsigned done = R.flags ? scan(true) : 0;
  pthread_mutex_unlock(&R.scan_lock);
  return done;
}

static unsigned locked_scan(void) {
  pthread_mutex_lock(&R.scan_lock);
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
  while (!atomic_load_explicit(&R.stop, memory_order_relaxed)) {
    uint64_t now = cuv__now_ns();
    if (locked_scan()) {
      last_progress = last_probe = now;
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
    if (now - last_progress < SPIN_NS)
      continue;
    if (now - last_probe >= PROBE_NS) {
      pthread_mutex_lock(&R.scan_lock);
      probe_slots();
      pthread_mutex_unlock(&R.scan_lock);
      probe_watched();
      last_probe = now;
    }
    uint64_t limit = backoff_limit(now - last_progress);
    backoff = backoff ? (backoff * 2 > limit ? limit : backoff * 2) : 1000;
    sleep_ns(backoff);
  }
  return NULL;
}
