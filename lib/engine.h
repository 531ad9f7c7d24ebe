#ifndef CUV_LIB_ENGINE_H
#define CUV_LIB_ENGINE_H

/* engine.c: the submission engine. Executors hand jobs (the driver calls of one submission) to a
 * device's engine: a bounded ring that submitter threads drain, or the submitting thread itself
 * when the engine is idle. Jobs are claimed in the order they were pushed; a claimed job waits
 * for every earlier claimed job it conflicts with (same stream, a buffer one of them writes, or
 * one whose touches are unknown) to finish its driver calls, so stream order and the hazard
 * tracker see what they would see if every call had been made on one thread. The engine knows
 * streams and buffer addresses, not ops or submissions. */

#define CUV__TOUCH_MAX 8

/* What a job's driver calls touch besides its stream: buffer addresses (compared, never
 * dereferenced) and whether it writes them. `all` means unknown: it conflicts with every job. */
typedef struct cuv__touches {
  bool all;
  unsigned n;
  const void *buf[CUV__TOUCH_MAX];
  bool write[CUV__TOUCH_MAX];
} cuv__touches_t;

/* Adds a buffer (NULL is ignored); more than CUV__TOUCH_MAX distinct ones make the set `all`. */
void cuv__touch(cuv__touches_t *t, const void *buf, bool write);

typedef struct cuv__job cuv__job_t;
struct cuv__job {
  /* Makes the job's driver calls on the claiming thread; `queued` says whether that is a
   * submitter thread (or a helping pusher) rather than the submitting thread itself. */
  void (*run)(cuv__job_t *job, bool queued);
  /* Fills in what the job touches; called once, when the job is claimed. */
  void (*describe)(cuv__job_t *job, cuv__touches_t *touches);
  /* Called once the engine no longer uses the job (after run): the job's owner may free it.
   * NULL for a blocking job: its waiter learns of the end through `finished`. */
  void (*release)(cuv__job_t *job);
  cuv_stream_t *stream; /* where the job's driver calls go (its forks may use others) */
  /* Every device the job's calls touch (CUV__DEVICE_BIT of each; its stream's at least): a job
   * of several devices is ordered in the engine of each (engine.c). */
  uint64_t devices;
  /* It may wait for the GPU (a then/map callback over a device-to-host copy): it runs only on a
   * thread that may block (a submitter thread, a blocking executor's caller), never on a
   * submitting thread that helps or runs followers. */
  bool may_wait;
  /* the engine's: set as it takes the job (enter in engine.c, cuv__engine_prepare,
   * cuv__engine_run_blocking), so an owner need not clear them; stand_in false but in a
   * stand-in */
  cuv__touches_t touches;
  cuv__job_t *prev, *next; /* the claimed, unfinished jobs, in claim order */
  cuv__job_t *followers, *last_follower, *next_follower; /* jobs waiting for this one */
  atomic_bool finished;    /* a blocking job's end, the engine's last touch of it */
  struct cuv__cross *cross; /* its stand-ins in the other devices' engines (cuv__engine_prepare) */
  bool stand_in;           /* the job is one: a place held in an engine for a job of another */
};

/* Hands an asynchronous job to the engine of the stream's device. The job runs on this thread
 * when `may_inline` (never for a job that may wait) and the engine is idle (nothing queued,
 * nothing running, nothing else in flight on the stream), else on a submitter thread; when the
 * ring is full this thread runs the oldest queued jobs itself until the job fits. `busy` says
 * the thread would rather hand the job over (a loop whose own driver calls would take most of
 * its time): it holds only while this thread alone submits to the engine, since several
 * submitting threads make their calls side by side faster than the submitters make them for
 * all (shared() below). `now_ns` is the caller's cuv__now_ns() of this submission (one clock
 * read serves both). Returns 0, or a negative status when the engine cannot start (the job has
 * not run; the caller runs it). */
int cuv__engine_submit(cuv__job_t *job, bool may_inline, bool busy, uint64_t now_ns);
/* Runs a job whose caller waits for it (a blocking executor): on this thread when nothing is
 * queued, else on a submitter thread while this one waits for its release. */
void cuv__engine_run_blocking(cuv__job_t *job);
/* Whether executors use an engine at all (the configuration's submit_threads and submit_inline);
 * when not, they run jobs themselves. Inline: asked once per submission. */
static inline bool cuv__engine_enabled(void) {
  return cuv__config.submit_threads > 0 && cuv__config.submit_inline != CUV_SUBMIT_INLINE_ALWAYS;
}

/* The stand-ins of a job of several devices (engine.c): out of line. */
int cuv__engine_prepare_cross(cuv__job_t *job, uint64_t others);
/* Readies a job whose `devices` name other devices than its stream's: its stand-ins are made
 * here, so that handing it over cannot fail for want of memory. 0, or CUV_ENOMEM (the job must
 * then not be handed over). Nothing to do for a job of one device; inline, once per submission. */
static inline int cuv__engine_prepare(cuv__job_t *job) {
  uint64_t others = job->devices & ~((uint64_t)1 << job->stream->dev->ordinal);
  job->cross = NULL;
  if (!others || !cuv__engine_enabled())
    return 0;
  return cuv__engine_prepare_cross(job, others);
}

#endif
