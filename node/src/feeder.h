/* The feeder: a thread per environment that makes the cuv_uv_submit calls of its jobs while many
 * are in flight, so that the JavaScript thread only builds each op and its Promise, and settles
 * it. cuv's submission (the queue's count, the stream's pick, the hand-off to the engine) was a
 * fifth of that thread's time per saxpy with 64 Promises in flight (bench/RESULTS.md).
 *
 * When few jobs are in flight and the thread is parked, the JavaScript thread submits itself:
 * waking a thread would add its wake-up to each call's latency. The feeder is woken, and then
 * takes every job, once CUV_NODE_FEED_FROM of the bridge's submissions are in flight; it spins
 * while jobs come and parks after a while without. Jobs are submitted in the order they were
 * made, whichever thread submits them: the JavaScript thread submits itself only once the feeder
 * submitted everything it was given (cuv orders conflicting accesses in submission order).
 *
 * A job the bridge refused comes back to the JavaScript thread, through an async handle, to be
 * rejected there. Closing submits what the feeder still holds, then joins it. CUV_NODE_FEEDER=0
 * turns the feeder off (every job submitted by the JavaScript thread, as before it existed). */
#ifndef CUV_NODE_FEEDER_H
#define CUV_NODE_FEEDER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include <cuv.h>
#include <cuv/uv.h>

/* How many of the bridge's submissions in flight make the JavaScript thread hand jobs over. */
#define CUV_NODE_FEED_FROM 4

/* Bytes of a recipe (below): a kernel, two buffers and two scalars. */
#define CUV_NODE_RECIPE_MAX 40

typedef struct cuv_node_feed cuv_node_feed_t;
/* A job to submit: embedded in its owner's job. Its op, or a recipe that `build` makes into the
 * op on whichever thread submits it (the JavaScript thread checks a call's arguments and takes
 * the references the op will need; the feeder then builds it: cuv_launch was a tenth of the
 * JavaScript thread's time per saxpy). `build` consumes the recipe's references. */
struct cuv_node_feed {
  cuv_node_feed_t *next;
  cuv_op_t *op;
  cuv_op_t *(*build)(void *recipe);
  _Alignas(8) unsigned char recipe[CUV_NODE_RECIPE_MAX];
  cuv_done_fn done;
  void *arg;
  int status; /* a refusal's code, when the job comes back */
};

/* The job's op: its own, or the one its recipe makes (once). Any thread. */
cuv_op_t *cuv_node_feed_op(cuv_node_feed_t *job);

typedef struct cuv_node_feeder {
  cuv_uv_t *bridge;
  uv_async_t refusals;  /* wakes the loop for jobs the bridge refused */
  void (*refused)(cuv_node_feed_t *job, void *arg); /* on the loop thread */
  void *refused_arg;
  /* 64 bytes apart, so never on one cache line (padding, not _Alignas: the state is calloc'd):
   * the loop writes `incoming` and reads `parked` per job, the feeder writes `submitted` per job
   * and `parked` per sleep. */
  char apart0[64];
  _Atomic(cuv_node_feed_t *) incoming; /* pushed by the loop, newest first */
  char apart1[64];
  atomic_uint_fast64_t submitted; /* of the pushed: by the feeder */
  char apart2[64];
  atomic_bool parked;
  atomic_bool stop;
  char apart3[64];
  _Atomic(cuv_node_feed_t *) returned; /* refused, pushed by the feeder */
  uint64_t pushed;                     /* loop thread only */
  unsigned outstanding; /* pushed and not yet finished (cuv_node_feeder_finished): loop only */
  pthread_mutex_t park_lock;
  pthread_cond_t park_cond;
  pthread_t thread;
  bool enabled, started, open;
  void (*closed)(void *arg);
  void *closed_arg;
  atomic_uint_fast64_t fed; /* jobs the feeder submitted, for tests (cuv_node_feeder_fed) */
} cuv_node_feeder_t;

/* Prepares f for the bridge on loop; the thread starts at the first job it takes. Loop thread. */
void cuv_node_feeder_open(cuv_node_feeder_t *f, uv_loop_t *loop, cuv_uv_t *bridge,
                          void (*refused)(cuv_node_feed_t *job, void *arg), void *arg);
/* Submits job: hands it to the feeder when that is wanted (then job->done runs, or refused, and
 * the owner calls cuv_node_feeder_finished once it settled it), else submits it here and returns
 * cuv_uv_submit's result (with `opts`). `own` forbids the hand-off (a caller that needs the
 * ticket at once): the call then first waits until the feeder submitted everything it holds.
 * Returns 1 when handed over. Loop thread. */
int cuv_node_feeder_submit(cuv_node_feeder_t *f, cuv_node_feed_t *job, bool own,
                           cuv_submit_opts_t *opts);
/* A job handed over has settled. Loop thread. */
void cuv_node_feeder_finished(cuv_node_feeder_t *f);
/* Stops the thread after it submitted what it holds, gives back what the bridge refused
 * (`refused`, here), closes the async handle, then calls closed(arg) (from the handle's close
 * callback; at once when it was never opened). Loop thread, before the bridge closes. */
void cuv_node_feeder_close(cuv_node_feeder_t *f, void (*closed)(void *arg), void *arg);
/* Returns once the feeder submitted every job handed over (to the bridge, which counts them in
 * flight from then on). Loop thread. */
void cuv_node_feeder_catch_up(cuv_node_feeder_t *f);
/* How many jobs the feeder thread submitted. */
uint64_t cuv_node_feeder_fed(const cuv_node_feeder_t *f);

#ifdef CUV_NODE_FEEDER_TEST_HOOK
/* Only in a build that defines CUV_NODE_FEEDER_TEST_HOOK (tests/uv/node-feeder.c, which defines
 * this): called on the thread after each look for jobs that found none, before the thread
 * decides whether the stop ends it, so a test can push a job and stop in that window. */
void cuv_node_feeder_test_looked(cuv_node_feeder_t *f);
#endif

#endif
