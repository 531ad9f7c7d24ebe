/* The submission engine: a ring per device that any thread pushes jobs onto without a lock, and
 * submitter threads (cuv-submit-N) that claim them in push order and make their driver calls.
 *
 * Order. Claims happen under the engine's lock, in ring order, and a claimed job joins the list
 * of running jobs. Before it runs, a job waits until no job claimed before it that it conflicts
 * with is still running (same stream, a buffer one of them writes, or unknown touches). So two
 * jobs that one thread pushed in turn reach a stream, and the hazard tracker, in that order,
 * while unrelated jobs run side by side on several threads: the driver takes work from several
 * threads faster than from one (docs/engine.md).
 *
 * The latency path. A job runs on the submitting thread when the engine is idle (nothing queued,
 * nothing running) and nothing else is in flight on its stream: a lone submission, whose inline
 * spin may then see it finish (the caller may forbid it: submit.c). A blocking
 * executor runs its job itself whenever nothing is queued.
 *
 * A full ring never makes a pusher wait for another thread: it claims the oldest queued job and
 * runs it itself, as a submitter would, until its own job fits.
 *
 * Jobs that may wait for the GPU (a then/map callback over a device-to-host copy waits until the
 * copy landed) run only on threads that may block: submitter threads, and a blocking executor's
 * caller. A submitting thread that claims one (helping, or as its own job's follower) hands it
 * to the submitters instead, so a loop thread never waits for the GPU.
 *
 * Jobs over several devices (a tree with ops of several devices, a peer copy) are pushed to the
 * engine of their stream's device, and a stand-in holds their place in the engine of each other
 * device they touch: a job of no stream that conflicts with every job there (the streams the job
 * uses on that device are picked as it runs). The job runs once its own turn came and each of
 * its stand-ins arrived (was claimed, and no earlier job that conflicts still runs), and lets
 * them go when it ends. So on every device it is ordered after the conflicting jobs claimed
 * before it and before those claimed after, as if one engine had them all. Nothing waits on a
 * thread for that: a stand-in only arrives, a job whose stand-ins are not all there yet is left
 * among the running jobs, and the last of them to arrive hands it to its engine's threads (a
 * thread that waited instead could hold, in its list of followers to run, the very job an
 * earlier stand-in waits for). The stand-ins and the job of one submission are pushed under one
 * lock (cross_lock), so two such jobs reach every engine in the same order and never wait for
 * each other in a cycle. A job that submits from its own run (then_unchecked) is the exception,
 * as for a full ring below: its nested job of several devices is not ordered against the other
 * devices' engines.
 *
 * Spinning. At most one submitter spins at a time: it watches the queued count for SPIN_NS after
 * its last job, then parks on a condition variable; any other thread with nothing to do parks at
 * once. The spinner that claims a job of driver calls stays counted as spinning while it runs
 * it (it is back at the ring within microseconds), so the pushing thread (a loop) pays no
 * wake-up and one thread serves a steady stream; it wakes a parked thread only when more is
 * queued than it took (a burst still finds threads) or when its job may wait for the GPU.
 * A driver call of a busy thread may block (a launch behind a full queue), so while one is busy a
 * parked thread keeps watch: it waits with a timeout of WATCH_NS, and when jobs are queued and
 * no job finished since its last look, it claims them. A job behind a stuck thread waits at most
 * about twice WATCH_NS, at the cost of one timed wake-up per WATCH_NS while a thread is busy,
 * not of a wake-up per push (a pusher wakes a parked thread for a busy one's backlog only when
 * none keeps watch).
 * Several spinners only read the line each push writes and burn cores (bench/RESULTS.md: four
 * of them at 80 % of a core each in clock_gettime behind one loop), and a spinner woken per
 * claim costs a wake-up per job. A pusher signals only when a thread is parked and none is
 * spinning (the counts and the queued number are sequentially consistent, so a parking thread
 * and a pusher cannot miss each other). */
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "internal.h"
#include "engine.h"
#include "ring.h"

#define SPIN_NS 200000ull /* a submitter's linger after its last job before it parks */
#define MAX_DEVICES 64
#define SHARED_NS 10000000ull /* how long a second submitting thread makes the engine shared */
#define WAIT_SPIN_NS 20000ull /* a waiter's busy spin before it starts yielding */
#define WATCH_NS 1000000ull   /* a watching parked thread's look at a busy thread's backlog */

typedef struct engine {
  pthread_mutex_t lock; /* claims, and the running list */
  cuv__ring_t *ring;
  atomic_uint queued;            /* pushed and not yet claimed */
  cuv__job_t *head, *tail;       /* claimed and still running, in claim order */
  atomic_uint_fast64_t finishes; /* bumped by every job that leaves the running list */
  pthread_mutex_t park_lock;
  pthread_cond_t park_cond;
  atomic_uint parked;
  atomic_uint spinning;     /* awake submitters looking for work: a push needs no wake-up */
  atomic_uint busy;         /* of them, those running a job of driver calls (back soon) */
  atomic_bool want_spinner; /* a parked thread is woken to spin, with nothing queued yet */
  atomic_bool watching;     /* a parked thread looks at the backlog every WATCH_NS (park) */
  atomic_uint running;      /* jobs on the running list, read without the lock by claim_here */
  _Atomic(const void *) last_pusher; /* the thread that submitted last, and when */
  atomic_uint_fast64_t last_push_ns;
  atomic_uint_fast64_t shared_until; /* until then, several threads are submitting */
  cuv__job_t *handoff, *handoff_tail; /* claimed, ready jobs for a thread that may block */
  atomic_bool stop;
  unsigned n_threads;
  pthread_t *threads;
} engine_t;

static struct {
  pthread_mutex_t lock;
  _Atomic(engine_t *) of[MAX_DEVICES];
  int status[MAX_DEVICES]; /* a failed start, kept: every later job runs inline */
  pthread_mutex_t cross_lock; /* pushes of a job over several devices and its stand-ins */
} E = {.lock = PTHREAD_MUTEX_INITIALIZER, .cross_lock = PTHREAD_MUTEX_INITIALIZER};

/* A job's stand-in in the engine of another device it touches. */
typedef struct stand_in {
  cuv__job_t job;
  int ordinal;
  engine_t *e; /* where it was pushed; NULL when that engine cannot start */
  struct cuv__cross *cross;
} stand_in_t;

struct cuv__cross {
  atomic_uint pending;   /* stand-ins yet to arrive, plus one for the job's own turn */
  atomic_bool handed;    /* the last stand-in handed the job back: its turn was taken */
  engine_t *home;        /* the job's engine and the job, set when its turn came */
  cuv__job_t *job;
  unsigned n;
  stand_in_t in[];
};

/* What claim_locked claimed: a job that counts in the statistics, or one that does not (a
 * stand-in, or a job of several devices handed back by its last stand-in). */
enum { CLAIM_NONE, CLAIM_JOB, CLAIM_AGAIN };

/* Set while this thread runs a job: a job that submits (then_unchecked) must not wait on the
 * engine it is part of. */
static _Thread_local bool in_job;
/* Set on submitter threads, and on a blocking executor's caller while it waits: they may run a
 * job that waits for the GPU. */
static _Thread_local bool may_block;
/* The engine whose spinning submitters count this thread, NULL when none does (set_spinning),
 * and whether it counts among their busy ones too (set_busy). */
static _Thread_local engine_t *counted_in;
static _Thread_local bool counted_busy;

void cuv__touch(cuv__touches_t *t, const void *buf, bool write) {
  if (!buf || t->all)
    return;
  for (unsigned i = 0; i < t->n; i++)
    if (t->buf[i] == buf) {
      t->write[i] = t->write[i] || write;
      return;
    }
  if (t->n == CUV__TOUCH_MAX) {
    t->all = true;
    return;
  }
  t->buf[t->n] = buf;
  t->write[t->n++] = write;
}

/* ---- conflicts and the running list (under the engine's lock) ---- */

static bool touches_conflict(const cuv__touches_t *a, const cuv__touches_t *b) {
  if (a->all || b->all)
    return true;
  for (unsigned i = 0; i < a->n; i++)
    for (unsigned j = 0; j < b->n; j++)
      if (a->buf[i] == b->buf[j] && (a->write[i] || b->write[j]))
        return true;
  return false;
}

static bool jobs_conflict(const cuv__job_t *a, const cuv__job_t *b) {
  return a->stream == b->stream || touches_conflict(&a->touches, &b->touches);
}

/* The latest job claimed before `job` (which is on the running list) that conflicts with it and
 * still runs; NULL when none. Looked for backwards from job: a job of a stream with thousands
 * claimed finds the one just before it, where a walk from the head crossed them all, once per
 * claim and once per follower let go. */
static cuv__job_t *blocker(const cuv__job_t *job) {
  for (cuv__job_t *j = job->prev; j; j = j->prev)
    if (jobs_conflict(j, job))
      return j;
  return NULL;
}

static bool blocked(const cuv__job_t *job) { return blocker(job) != NULL; }

/* Hands a blocked job to the thread running its blocker: that thread runs it next (leave), so
 * no thread spins while another finishes, and jobs of one stream tend to stay on one thread. */
static void follow(cuv__job_t *blocking, cuv__job_t *job) {
  job->next_follower = NULL;
  if (blocking->last_follower)
    blocking->last_follower->next_follower = job;
  else
    blocking->followers = job;
  blocking->last_follower = job;
}

/* Appends job to the running list; true when it must wait for an earlier one. */
static bool enter(engine_t *e, cuv__job_t *job) {
  job->touches = (cuv__touches_t){0};
  job->followers = job->last_follower = NULL;
  job->describe(job, &job->touches);
  job->next = NULL;
  job->prev = e->tail;
  if (e->tail)
    e->tail->next = job;
  else
    e->head = job;
  e->tail = job;
  atomic_fetch_add_explicit(&e->running, 1, memory_order_relaxed);
  return blocked(job);
}

/* A claimed job handed over by a thread that must not run it (it may wait for the GPU). */
static cuv__job_t *take_handoff_locked(engine_t *e) {
  cuv__job_t *job = e->handoff;
  if (job) {
    e->handoff = job->next_follower;
    if (!e->handoff)
      e->handoff_tail = NULL;
    atomic_fetch_sub(&e->queued, 1);
  }
  return job;
}

/* Claims the oldest queued job: NULL when there is none, or when it waits for an earlier one
 * (then that one's thread runs it). Jobs handed over come first, when `handoffs`. The caller
 * holds the lock. */
static cuv__job_t *claim_locked(engine_t *e, unsigned *claimed, bool handoffs) {
  cuv__job_t *job = handoffs ? take_handoff_locked(e) : NULL;
  if (job) {
    *claimed = job->cross && atomic_load(&job->cross->handed) ? CLAIM_AGAIN : CLAIM_JOB;
    return job; /* claimed before, and no longer blocked */
  }
  job = cuv__ring_pop(e->ring);
  *claimed = !job ? CLAIM_NONE : job->stand_in ? CLAIM_AGAIN : CLAIM_JOB;
  if (!job)
    return NULL;
  atomic_fetch_sub(&e->queued, 1);
  if (enter(e, job)) {
    follow(blocker(job), job);
    return NULL;
  }
  return job;
}

static void yield_a_while(uint64_t since) {
  if (cuv__now_ns() - since > WAIT_SPIN_NS)
    sched_yield();
}

/* Waits until no earlier conflicting job runs. */
static void wait_turn(engine_t *e, cuv__job_t *job) {
  uint64_t since = cuv__now_ns();
  for (;;) {
    uint_fast64_t seen = atomic_load(&e->finishes);
    pthread_mutex_lock(&e->lock);
    bool still = blocked(job);
    pthread_mutex_unlock(&e->lock);
    if (!still)
      return;
    while (atomic_load(&e->finishes) == seen)
      yield_a_while(since);
  }
}

/* Takes job off the running list and hands it back to its owner. Returns its followers that no
 * longer wait for anything, in claim order, for this thread to run; the others follow their next
 * blocker. */
static cuv__job_t *leave(engine_t *e, cuv__job_t *job) {
  cuv__job_t *ready = NULL, **ready_tail = &ready;
  pthread_mutex_lock(&e->lock);
  if (job->prev)
    job->prev->next = job->next;
  else
    e->head = job->next;
  if (job->next)
    job->next->prev = job->prev;
  else
    e->tail = job->prev;
  atomic_fetch_sub_explicit(&e->running, 1, memory_order_relaxed);
  for (cuv__job_t *f = job->followers, *next; f; f = next) {
    next = f->next_follower;
    cuv__job_t *b = blocker(f);
    if (b) {
      follow(b, f);
    } else {
      f->next_follower = NULL;
      *ready_tail = f;
      ready_tail = &f->next_follower;
    }
  }
  pthread_mutex_unlock(&e->lock);
  atomic_fetch_add(&e->finishes, 1);
  if (job->release)
    job->release(job);
  else
    atomic_store_explicit(&job->finished, true, memory_order_release);
  return ready;
}

static bool cross_turn(engine_t *e, cuv__job_t *job, struct cuv__cross *cross);
static void cross_finish(struct cuv__cross *cross);

/* A stand-in only arrives: it stays among the running jobs until its job lets it go. A job of
 * several devices whose stand-ins are not all there stays too, until the last one hands it back
 * (above). */
static cuv__job_t *run_one(engine_t *e, cuv__job_t *job, bool queued) {
  struct cuv__cross *cross = job->cross;
  if (cross && !cross_turn(e, job, cross))
    return NULL;
  bool stand_in = job->stand_in; /* an arrived stand-in may be let go and freed at once */
  bool nested = in_job;
  in_job = true;
  job->run(job, queued);
  in_job = nested;
  if (stand_in)
    return NULL;
  cuv__job_t *ready = leave(e, job); /* job may be gone from here on */
  if (cross)
    cross_finish(cross);
  return ready;
}

static void wake_one(engine_t *e);

/* Counts this thread in or out of the spinning submitters: those that look at the ring soon,
 * so a pusher needs to wake nobody (wake_one). */
static void set_spinning(engine_t *e, bool now) {
  if ((counted_in != NULL) != now)
    now ? atomic_fetch_add(&e->spinning, 1) : atomic_fetch_sub(&e->spinning, 1);
  counted_in = now ? e : NULL;
}

/* Counts this thread in or out of the busy ones: running a job, back at the ring soon. */
static void set_busy(engine_t *e, bool now) {
  if (counted_busy != now)
    now ? atomic_fetch_add(&e->busy, 1) : atomic_fetch_sub(&e->busy, 1);
  counted_busy = now;
}

/* A spinning thread's pause between looks: the core's sibling and the line's other readers get
 * their share. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/* Gives a claimed, ready job to the submitter threads (this thread must not wait for the GPU). */
static void hand_off(engine_t *e, cuv__job_t *job) {
  job->next_follower = NULL;
  pthread_mutex_lock(&e->lock);
  if (e->handoff_tail)
    e->handoff_tail->next_follower = job;
  else
    e->handoff = job;
  e->handoff_tail = job;
  atomic_fetch_add(&e->queued, 1);
  pthread_mutex_unlock(&e->lock);
  wake_one(e);
}

/* Runs a claimed job on this thread, in its turn, then the followers it leaves ready (they
 * were queued: a submitter's work, whichever thread this is). */
static void run_claimed(engine_t *e, cuv__job_t *job, bool wait, bool queued) {
  if (wait)
    wait_turn(e, job);
  cuv__job_t *ready = run_one(e, job, queued);
  while (ready) {
    cuv__job_t *f = ready;
    ready = f->next_follower;
    if (f->may_wait && !may_block) {
      hand_off(e, f);
      continue;
    }
    if (f->may_wait && counted_in == e) { /* it may wait for the GPU: not back soon */
      set_busy(e, false);
      set_spinning(e, false);
      wake_one(e);
    }
    cuv__job_t *more = run_one(e, f, true);
    if (more) { /* they go after the rest of this list: claimed later than all of it */
      cuv__job_t **tail = &ready;
      while (*tail)
        tail = &(*tail)->next_follower;
      *tail = more;
    }
  }
}

/* ---- submitter threads ---- */

/* No wake-up while a thread looks at the ring, nor while one running a job will take the next
 * one and a parked thread keeps watch in case its driver call blocks (park), nor while a thread
 * woken to spin is on its way: it takes want_spinner after this thread read it set, so after
 * this thread's push, and looks at the ring then; a backlog its claim leaves wakes the next. A
 * loop that pushed while its wake-up was in flight signalled again per push, and woke every
 * parked thread in turn (bench/RESULTS.md). */
static void wake_one(engine_t *e) {
  unsigned spinning = atomic_load(&e->spinning), busy = atomic_load(&e->busy);
  if (atomic_load(&e->parked) == 0 || spinning > busy || (busy > 0 && atomic_load(&e->watching)) ||
      atomic_load(&e->want_spinner))
    return;
  pthread_mutex_lock(&e->park_lock);
  atomic_store(&e->want_spinner, true);
  pthread_cond_signal(&e->park_cond);
  pthread_mutex_unlock(&e->park_lock);
}

/* A watching thread's wait: WATCH_NS, or until woken. True when jobs are queued and no job
 * finished meanwhile (a busy thread's driver call blocks: this thread claims them). The caller
 * holds park_lock. */
static bool watch(engine_t *e) {
  uint_fast64_t finishes = atomic_load(&e->finishes);
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_nsec += (long)WATCH_NS;
  until.tv_sec += until.tv_nsec / 1000000000L;
  until.tv_nsec %= 1000000000L;
  bool timed_out = pthread_cond_timedwait(&e->park_cond, &e->park_lock, &until) != 0;
  return timed_out && atomic_load(&e->queued) > 0 && atomic_load(&e->finishes) == finishes;
}

/* Parks until something is queued that no busy thread takes; false when the engine stops. While
 * a thread is busy, one parked thread keeps watch (watch); the others, and all of them while none
 * is busy (an idle engine costs no CPU), wait until woken. */
static bool park(engine_t *e) {
  pthread_mutex_lock(&e->park_lock);
  atomic_fetch_add(&e->parked, 1);
  bool watcher = false;
  for (;;) {
    if (atomic_load(&e->stop) || atomic_exchange(&e->want_spinner, false))
      break;
    bool busy = atomic_load(&e->busy) > 0;
    if (atomic_load(&e->queued) > 0 && !(busy && watcher))
      break; /* a watcher leaves only for a stuck backlog (below) */
    if (busy && (watcher || !atomic_exchange(&e->watching, true))) {
      watcher = true;
      if (watch(e))
        break;
    } else {
      if (watcher)
        atomic_store(&e->watching, false);
      watcher = false;
      pthread_cond_wait(&e->park_cond, &e->park_lock);
    }
  }
  if (watcher)
    atomic_store(&e->watching, false);
  atomic_fetch_sub(&e->parked, 1);
  pthread_mutex_unlock(&e->park_lock);
  return !atomic_load(&e->stop);
}


static void *submitter_main(void *arg) {
  engine_t *e = arg;
  may_block = true;
  uint64_t last = cuv__now_ns();
  while (!atomic_load_explicit(&e->stop, memory_order_relaxed)) {
    cuv__job_t *job = NULL;
    unsigned claimed = CLAIM_NONE;
    if (atomic_load_explicit(&e->queued, memory_order_relaxed) > 0) {
      pthread_mutex_lock(&e->lock);
      job = claim_locked(e, &claimed, true);
      /* Counted under the lock: a job that follows another may run (and be drained) on the
       * other's thread as soon as the lock goes. */
      if (claimed == CLAIM_JOB)
        CUV__STAT_ADD(engine_queued, 1);
      pthread_mutex_unlock(&e->lock);
    }
    if (claimed) {
      /* A job of driver calls alone brings this thread back to the ring within microseconds,
       * so it stays counted as spinning and a push meanwhile wakes nobody: one thread serves a
       * steady stream of jobs, rather than each claim waking the next spinner (a wake-up per
       * job, bench/RESULTS.md). A thread joins only for a backlog, or in place of one whose job
       * may wait for the GPU. */
      bool back_soon = job && !job->may_wait;
      if (!back_soon || atomic_load(&e->queued) > 0) {
        set_spinning(e, false);
        wake_one(e);
      }
      set_spinning(e, back_soon);
      set_busy(e, back_soon);
      if (job)
        run_claimed(e, job, false, true);
      set_busy(e, false);
      last = cuv__now_ns();
    } else {
      set_spinning(e, true);
      if (atomic_load(&e->spinning) > 1 || cuv__now_ns() - last > SPIN_NS) {
        set_spinning(e, false); /* before parking: see wake_one */
        if (!park(e))
          break;
        last = cuv__now_ns();
      } else {
        cpu_relax();
      }
    }
  }
  return NULL;
}

static void engine_stop(engine_t *e) {
  pthread_mutex_lock(&e->park_lock);
  atomic_store(&e->stop, true);
  pthread_cond_broadcast(&e->park_cond);
  pthread_mutex_unlock(&e->park_lock);
  for (unsigned i = 0; i < e->n_threads; i++)
    pthread_join(e->threads[i], NULL);
  e->n_threads = 0;
}

/* Stops the threads when the library goes away (dlclose or exit), so they never run unmapped
 * code. Jobs still queued then are dropped with the process. */
__attribute__((destructor)) static void engines_shutdown(void) {
  for (int i = 0; i < MAX_DEVICES; i++) {
    engine_t *e = atomic_load(&E.of[i]);
    if (e)
      engine_stop(e);
  }
}

static int start_threads(engine_t *e, int ordinal) {
  e->threads = calloc(cuv__config.submit_threads, sizeof *e->threads);
  if (!e->threads)
    return CUV_ENOMEM;
  for (unsigned i = 0; i < cuv__config.submit_threads; i++) {
    if (pthread_create(&e->threads[i], NULL, submitter_main, e) != 0) {
      engine_stop(e);
      return CUV_ETHREAD;
    }
    e->n_threads++;
    char name[16];
    snprintf(name, sizeof name, "cuv-submit-%u", ordinal * 100 + i);
    pthread_setname_np(e->threads[i], name);
  }
  return 0;
}

static engine_t *engine_new(int ordinal, int *status) {
  engine_t *e = calloc(1, sizeof *e);
  *status = e ? cuv__ring_create(&e->ring, cuv__config.submit_ring) : CUV_ENOMEM;
  if (*status == 0) {
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->park_lock, NULL);
    pthread_condattr_t attr; /* a watcher's timeout counts on the clock cuv__now_ns reads */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&e->park_cond, &attr);
    pthread_condattr_destroy(&attr);
    *status = start_threads(e, ordinal);
  }
  if (*status == 0)
    return e;
  if (e) {
    cuv__ring_destroy(e->ring);
    free(e->threads);
    free(e);
  }
  return NULL;
}

/* The first use of device `ordinal`'s engine: started here, under the lock. Out of line, so the
 * lookup of every other use saves no registers for it (about 20 instructions a submission). */
static __attribute__((noinline, cold)) engine_t *engine_start(int ordinal, int *status) {
  pthread_mutex_lock(&E.lock);
  engine_t *e = atomic_load(&E.of[ordinal]);
  if (!e && E.status[ordinal] == 0) {
    e = engine_new(ordinal, &E.status[ordinal]);
    atomic_store_explicit(&E.of[ordinal], e, memory_order_release);
  }
  *status = E.status[ordinal];
  pthread_mutex_unlock(&E.lock);
  return e;
}

/* The engine of device `ordinal`, started on first use; NULL when it cannot start. */
static engine_t *engine_at(int ordinal, int *status) {
  *status = 0;
  if (ordinal < 0 || ordinal >= MAX_DEVICES)
    return NULL;
  engine_t *e = atomic_load_explicit(&E.of[ordinal], memory_order_acquire);
  return e ? e : engine_start(ordinal, status);
}

static engine_t *engine_of(cuv_stream_t *stream, int *status) {
  return engine_at(stream->dev->ordinal, status);
}

/* ---- pushing ---- */

/* Runs the oldest queued job on this thread (the ring was full). */
static void help(engine_t *e) {
  unsigned claimed = CLAIM_NONE;
  pthread_mutex_lock(&e->lock);
  cuv__job_t *job = claim_locked(e, &claimed, false);
  if (claimed == CLAIM_JOB)
    CUV__STAT_ADD(engine_helped, 1); /* under the lock, as in submitter_main */
  pthread_mutex_unlock(&e->lock);
  if (!claimed)
    return; /* a submitter took it meanwhile: the ring has room again */
  if (job && job->may_wait && !may_block)
    hand_off(e, job);
  else if (job)
    run_claimed(e, job, false, true);
}

static void push(engine_t *e, cuv__job_t *job) {
  while (!cuv__ring_push(e->ring, job))
    help(e);
  atomic_fetch_add(&e->queued, 1);
  wake_one(e);
}

/* Whether several threads submit to this engine now: another thread than this one submitted
 * within the last SHARED_NS. Those threads then feed the driver themselves: they already make
 * its calls side by side, and a hand-off only adds a hop to each (bench/RESULTS.md: four
 * batching loops served 3x the thread pool making their own calls, 0.6-0.9x through the
 * engine; one loop served 2x more through it). */
static bool shared(engine_t *e, uint64_t now) {
  static _Thread_local char me;
  uint64_t before = atomic_exchange_explicit(&e->last_push_ns, now, memory_order_relaxed);
  if (atomic_load_explicit(&e->last_pusher, memory_order_relaxed) != &me) {
    atomic_store_explicit(&e->last_pusher, &me, memory_order_relaxed);
    if (now - before < SHARED_NS) /* the other thread was submitting a moment ago */
      atomic_store_explicit(&e->shared_until, now + SHARED_NS, memory_order_relaxed);
  }
  return now < atomic_load_explicit(&e->shared_until, memory_order_relaxed);
}

/* ---- jobs over several devices (atop this file) ---- */

/* One more of the job's stand-ins arrived, or its own turn came: the last of them lets the job
 * run. The turn's caller runs it itself; an arrival hands it to the job's engine. */
static bool cross_arrive(struct cuv__cross *cross) {
  return atomic_fetch_sub_explicit(&cross->pending, 1, memory_order_acq_rel) == 1;
}

static void stand_in_run(cuv__job_t *job, bool queued) {
  (void)queued;
  struct cuv__cross *cross = ((stand_in_t *)job)->cross;
  if (!cross_arrive(cross))
    return;
  atomic_store_explicit(&cross->handed, true, memory_order_release);
  hand_off(cross->home, cross->job);
}

/* The job's turn in its own engine came (it is claimed, nothing earlier in its way); true when it
 * runs now. Handed back by its last stand-in, it runs. */
static bool cross_turn(engine_t *e, cuv__job_t *job, struct cuv__cross *cross) {
  if (atomic_load_explicit(&cross->handed, memory_order_acquire))
    return true;
  cross->home = e;
  cross->job = job;
  return cross_arrive(cross);
}

static void stand_in_describe(cuv__job_t *job, cuv__touches_t *touches) {
  (void)job;
  touches->all = true;
}

/* The stand-ins of a job of several devices; out of line, so a job of one device (nearly every
 * one) saves no registers for them. */
int cuv__engine_prepare_cross(cuv__job_t *job, uint64_t others) {
  unsigned n = (unsigned)__builtin_popcountll(others);
  struct cuv__cross *cross = calloc(1, sizeof *cross + n * sizeof cross->in[0]);
  if (!cross)
    return CUV_ENOMEM;
  cross->n = n;
  atomic_init(&cross->pending, n + 1);
  atomic_init(&cross->handed, false);
  for (unsigned i = 0; i < n; i++, others &= others - 1) {
    stand_in_t *s = &cross->in[i];
    s->ordinal = __builtin_ctzll(others);
    s->job = (cuv__job_t){.run = stand_in_run, .describe = stand_in_describe, .stand_in = true};
    s->cross = cross;
  }
  job->cross = cross;
  return 0;
}


/* The job runs outside the engines (on its submitting thread): its stand-ins are not needed. */
static void cross_drop(cuv__job_t *job) {
  free(job->cross);
  job->cross = NULL;
}

/* Pushes the job's stand-ins and returns with cross_lock held, for the caller to hand the job
 * itself to its engine before cross_end; false (no lock) for a job of one device. An engine that
 * cannot start orders nothing: its device's jobs run on their submitting threads. */
static bool cross_begin(cuv__job_t *job) {
  struct cuv__cross *cross = job->cross;
  if (!cross)
    return false;
  pthread_mutex_lock(&E.cross_lock);
  for (unsigned i = 0; i < cross->n; i++) {
    stand_in_t *s = &cross->in[i];
    int status;
    s->e = engine_at(s->ordinal, &status);
    if (s->e)
      push(s->e, &s->job);
    else
      cross_arrive(cross); /* never the last: the job's own turn is still to come */
  }
  return true;
}

static void cross_end(bool locked) {
  if (locked)
    pthread_mutex_unlock(&E.cross_lock);
}

/* The job's calls are made: its stand-ins leave, and the jobs they held up go to their engines'
 * threads. */
static void cross_finish(struct cuv__cross *cross) {
  for (unsigned i = 0; i < cross->n; i++) {
    stand_in_t *s = &cross->in[i];
    for (cuv__job_t *f = s->e ? leave(s->e, &s->job) : NULL, *next; f; f = next) {
      next = f->next_follower;
      hand_off(s->e, f);
    }
  }
  free(cross);
}

/* Claims job for this thread when `idle` holds; the caller then runs it. */
static bool claim_here(engine_t *e, cuv__job_t *job, bool need_idle, bool *wait) {
  /* Looked at without the lock first: under load the answer is no, and the lock is the one the
   * submitters claim and leave under. */
  if (atomic_load(&e->queued) != 0 || (need_idle && atomic_load(&e->running) != 0))
    return false;
  pthread_mutex_lock(&e->lock);
  bool here = atomic_load(&e->queued) == 0 &&
              (!need_idle || (!e->head && atomic_load(&job->stream->in_flight) <= 1));
  if (here)
    *wait = enter(e, job);
  pthread_mutex_unlock(&e->lock);
  return here;
}

/* A job submitting from its own run (then_unchecked): it must not help drain a full ring behind
 * itself; queued, or run here when the ring is full. Out of line, as cuv__engine_prepare_cross. */
static __attribute__((noinline)) void submit_nested(engine_t *e, cuv__job_t *job) {
  if (cuv__ring_push(e->ring, job)) {
    atomic_fetch_add(&e->queued, 1);
    wake_one(e);
  } else {
    job->run(job, true);
    if (job->release)
      job->release(job);
  }
}

int cuv__engine_submit(cuv__job_t *job, bool may_inline, bool busy, uint64_t now_ns) {
  int status;
  engine_t *e = engine_of(job->stream, &status);
  if (!e || in_job)
    cross_drop(job);
  if (!e)
    return status < 0 ? status : CUV_EINVAL;
  if (in_job) {
    submit_nested(e, job);
    return 0;
  }
  bool wait = false;
  bool across = cross_begin(job);
  bool sharing = shared(e, now_ns); /* every push counts: it tells who submits */
  if (may_inline && (!busy || sharing) && cuv__config.submit_inline == CUV_SUBMIT_INLINE_IDLE &&
      claim_here(e, job, !sharing, &wait)) {
    cross_end(across);
    CUV__STAT_ADD(engine_inline, 1);
    run_claimed(e, job, wait, false);
    return 0;
  }
  push(e, job); /* from here on the job may run and be gone */
  cross_end(across);
  return 0;
}

void cuv__engine_run_blocking(cuv__job_t *job) {
  int status;
  engine_t *e = cuv__engine_enabled() && !in_job ? engine_of(job->stream, &status) : NULL;
  bool wait = false;
  job->release = NULL;
  atomic_store(&job->finished, false);
  if (!e)
    cross_drop(job);
  bool across = e && cross_begin(job);
  if (!e ||
      (cuv__config.submit_inline != CUV_SUBMIT_INLINE_NEVER && claim_here(e, job, false, &wait))) {
    cross_end(across);
    CUV__STAT_ADD(engine_inline, 1);
    bool could_block = may_block;
    may_block = true; /* this caller blocks anyway */
    if (e)
      run_claimed(e, job, wait, false);
    else
      job->run(job, false);
    may_block = could_block;
    /* A job of several devices may be left for its last stand-in to hand on (run_one). */
    uint64_t since = cuv__now_ns();
    while (e && !atomic_load_explicit(&job->finished, memory_order_acquire))
      yield_a_while(since);
    return;
  }
  push(e, job);
  cross_end(across);
  uint64_t since = cuv__now_ns();
  while (!atomic_load_explicit(&job->finished, memory_order_acquire))
    yield_a_while(since);
}
