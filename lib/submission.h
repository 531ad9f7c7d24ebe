#ifndef CUV_LIB_SUBMISSION_H
#define CUV_LIB_SUBMISSION_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reactor.h"

/* One execution of an op tree: the streams it ran on and everything it touched, held until its
 * completion is proven (cuv__sub_retire), or leaked on purpose when it cannot be
 * (cuv__sub_leak). */

typedef struct cuv__hold {
  cuv_release_fn release;
  void *arg;
} cuv__hold_t;

enum cuv__path {
  CUV__PATH_NONE,
  CUV__PATH_SPIN,     /* inline spin saw the work finish */
  CUV__PATH_REACTOR,  /* the reactor saw the stream's word reach it */
  CUV__PATH_HOSTFN,   /* a host function marked it */
  CUV__PATH_SYNC,     /* a blocking executor waited */
  CUV__PATH_EVENT,    /* an event behind enqueue_on work was found complete */
};

/* A request's op (an upload, two launches, a download) takes 5 holds: its nodes and the
 * download's block (tcp-infer). */
#define CUV__INLINE_HOLDS 8

/* An event the submission keeps, and the device whose pool it goes back to (referenced when it
 * is not the submission's own). */
typedef struct cuv__sub_event {
  CUevent event;
  cuv_device_t *dev;
} cuv__sub_event_t;

/* Three parts, by how a new submission's fields get their values (cuv__sub_new, below):
 * the first set one by one there, the second cleared there with one memset (CUV__SUB_CLEARED),
 * the last never cleared, each field written before it is read by whoever uses it. Clearing the
 * whole 304 bytes before was some 40 instructions of each submission (bench/RESULTS.md,
 * cuv-bench-submit). */
struct cuv__submission {
  /* ---- set by cuv__sub_new ---- */
  cuv_device_t *dev;     /* the executing device: sub->stream's */
  cuv_stream_t *stream;  /* the stream the op tree ran on; completion is proven on it */
  /* The devices the tree may touch (the op's, and the executing one): an op of another device
   * runs only where the engine ordered the submission (engine.c), else CUV_EDEVICE. */
  uint64_t devices;
  cuv__hold_t *holds;
  size_t cap_holds;
  /* The ends it waits for before its completion is delivered: its stream's, and one for each
   * cuv__sub_gate (a communicator's creation: lib/comm.c). Starts at 1. */
  atomic_int gates;
  /* Who still uses the block: the submission until its retirement, plus one while its owner's
   * bytes after it (cuv__sub_extra) are in use past that (cuv__sub_extra_keep). */
  atomic_uint users;
  bool part; /* a device part of a multi-device op (lib/collective.c): not in the statistics */
  /* ---- cleared by cuv__sub_new, from n_holds to the end of callback_ran ---- */
  size_t n_holds;
  CUevent done_event;    /* recorded behind the work, when a path needs one */
  cuv__sub_event_t *events; /* join and ordering events, back to their pools at retirement */
  size_t n_events;
  /* One stream of each device other than sub->dev whose work one of its streams waits for (a
   * part's join, a hazard wait across devices: cuv__sub_order), referenced until retirement. A
   * sticky fault there leaves that wait unfinished for good, so whatever waits for this
   * submission's end also asks these (lib/completion.c, lib/reactor.c). */
  cuv_stream_t **across;
  uint64_t across_devices; /* their devices' bits */
  unsigned n_across;
  int status;            /* execution status, then completion status */
  cuv_output_t output;
  enum cuv__path path;
  /* A failure learned after the work was enqueued, by whoever watches it besides the stream (a
   * collective's communicator: lib/comm.c): set before the work can be proven complete, it is
   * the submission's status unless the execution or the stream failed first. */
  atomic_int late_status;
  atomic_uint calls;        /* user callbacks running now, and cancel flags (lib/queue.c) */
  /* Shared ops whose value the tree is producing now (lib/shared.c): their callbacks serve every
   * clone, so a cancel refuses none of them. Only the thread running the tree touches it. */
  unsigned producing;
  /* asynchronous delivery (exec.c, completion.c, queue.c); NULL for the blocking executors */
  cuv_queue_t *queue;
  /* Stage times for a caller that asked for them (cuv_submit_opts_t.trace): filled in here by
   * whichever thread passes a stage, copied out to *trace_out by the drain just before the
   * callback, after the last write (a cancel's early callback gets only what cuv_submit knew). */
  cuv_trace_t *trace; /* &trace_data when traced, else NULL */
  atomic_bool claimed;      /* set by the one path that completes it (completion.c) */
  bool cancelled;           /* under the queue's lock */
  /* Found by cuv_cancel through the queue's ticket index, or (the index out of memory) its live
   * list; pushed finished. All three under the queue's lock. */
  bool indexed, in_live, in_done;
  bool callback_ran;        /* cancelled and called back before it finished (drain only) */
  /* ---- not cleared: each written before it is read ---- */
  cuv_done_fn done;         /* these two by cuv_submit, read by the drain of its queue */
  void *done_arg;
  cuv__submission_t *next;  /* link in a queue or a stream's detached list: set as it joins */
  /* The queue's live list, and the ticket: set by cuv__queue_accept for a submission that asked
   * for its ticket, and read only for those. */
  cuv__submission_t *live_prev, *live_next;
  cuv_ticket_t ticket;
  uint64_t submitted_ns;    /* cuv__now_ns() of a submission to a polled queue, else 0 */
  cuv__submission_t *cancel_next; /* link in the queue's list of cancellations to deliver */
  cuv__tl_entry_t tl;       /* its place on its stream's timeline (reactor.c): set as it arms */
  /* Only n_holds of these are ever read, the watch only once arm_hostfn (lib/completion.c) has
   * set it whole, and the last two only when `trace` is set (cuv_submit sets them then). */
  cuv__hold_t inline_holds[CUV__INLINE_HOLDS];
  cuv__watch_t watch; /* the reactor's fault watch of host-callback work */
  cuv_trace_t *trace_out;
  cuv_trace_t trace_data;
};

/* The bytes cuv__sub_new clears. */
#define CUV__SUB_CLEARED_AT offsetof(cuv__submission_t, n_holds)
#define CUV__SUB_CLEARED                                                                           \
  (offsetof(cuv__submission_t, callback_ran) + sizeof(bool) - CUV__SUB_CLEARED_AT)

/* Where the extra bytes of cuv__sub_create start: after the submission, aligned as malloc's. */
#define CUV__SUB_EXTRA_AT                                                                          \
  ((sizeof(cuv__submission_t) + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1))
/* A new submission (a part when `part`); NULL without memory. Inline, with cuv__sub_create:
 * once per submission, and a call into submission.c for it was some 20 instructions of each
 * (bench/RESULTS.md, cuv-bench-submit). */
static inline cuv__submission_t *cuv__sub_new(cuv_stream_t *stream, bool part, size_t extra) {
  cuv__submission_t *sub = cuv__pool_alloc(CUV__SUB_EXTRA_AT + extra);
  if (!sub)
    return NULL;
  memset((char *)sub + CUV__SUB_CLEARED_AT, 0, CUV__SUB_CLEARED);
  atomic_init(&sub->users, 1);
  sub->holds = sub->inline_holds;
  sub->cap_holds = CUV__INLINE_HOLDS;
  sub->dev = cuv__device_ref(stream->dev);
  sub->stream = cuv__stream_ref(stream);
  sub->devices = (uint64_t)1 << stream->dev->ordinal;
  sub->part = part;
  atomic_init(&sub->gates, 1);
  atomic_fetch_add(&stream->in_flight, 1);
  if (!part)
    CUV__STAT_ADD(in_flight, 1);
  return sub;
}
/* A submission on `stream` (which it references and counts in flight), with `extra` bytes of its
 * creator's after it in the same block (cuv__sub_extra): cuv_submit's job lives there, so a
 * submission costs one allocation, not one for it and one for its job. */
static inline int cuv__sub_create(cuv__submission_t **out, cuv_stream_t *stream, size_t extra) {
  *out = extra <= SIZE_MAX - CUV__SUB_EXTRA_AT ? cuv__sub_new(stream, false, extra) : NULL;
  return *out ? 0 : CUV_ENOMEM;
}
/* The extra bytes of cuv__sub_create. Inline, as the next one: once per submission each. */
static inline void *cuv__sub_extra(cuv__submission_t *sub) {
  return (char *)sub + CUV__SUB_EXTRA_AT;
}
/* The extra bytes stay in use past the submission's retirement until cuv__sub_extra_done (a job
 * the engine still holds when its completion may already have been delivered): the block is
 * freed at the later of the two. Any thread. */
static inline void cuv__sub_extra_keep(cuv__submission_t *sub) {
  atomic_fetch_add_explicit(&sub->users, 1, memory_order_relaxed);
}
void cuv__sub_extra_done(cuv__submission_t *sub);
/* A part of a submission on another device's stream (lib/collective.c): it holds that stream,
 * the hazard records and events of its device, and is retired or leaked with the submission that
 * holds it. Not counted in cuv_stats. */
int cuv__sub_create_part(cuv__submission_t **part, cuv_stream_t *stream);
/* Holds back the delivery of a queued submission's completion until cuv__complete_gate_open
 * (completion.h); call during its execution. */
void cuv__sub_gate(cuv__submission_t *sub);
/* One of its ends came: true for the last (the caller then delivers it). */
bool cuv__sub_gate_pass(cuv__submission_t *sub);
/* Whether a gate is still closed (besides the stream's end). */
bool cuv__sub_gated(cuv__submission_t *sub);
/* Records a failure of work already enqueued (the first one sticks); call only while the work
 * cannot have been proven complete. */
void cuv__sub_fail_late(cuv__submission_t *sub, int status);
/* The status a completed submission reports: `status` (the execution's or the stream's) when it
 * is a failure, else the late one, if any. */
int cuv__sub_verdict(cuv__submission_t *sub, int status);
/* Holds `arg` until retirement, then calls release(arg). On failure nothing is held and the
 * caller still owns arg. */
int cuv__sub_hold(cuv__submission_t *sub, cuv_release_fn release, void *arg);
/* As cuv__sub_hold, unless one of the latest holds is (release, arg) already: then nothing is
 * added and it returns 1 (the caller keeps its reference to arg and drops it itself). */
int cuv__sub_hold_unique(cuv__submission_t *sub, cuv_release_fn release, void *arg);
/* Counts another stream (a fork branch, a stream of another device) in flight for this
 * submission and holds it. */
int cuv__sub_use_stream(cuv__submission_t *sub, cuv_stream_t *stream);
/* An event from dev's pool, kept by the submission until retirement. */
int cuv__sub_event(cuv__submission_t *sub, cuv_device_t *dev, CUevent *event);
/* Makes `waiter` wait for everything enqueued on `producer` so far (an event of the producer's
 * device that the submission keeps). Across devices it binds the producer's context to record
 * and returns with the waiter's current, and a producer of another device than sub->dev's joins
 * sub->across. */
int cuv__sub_order(cuv__submission_t *sub, cuv_stream_t *producer, cuv_stream_t *waiter);
/* Records sub->done_event behind the work on sub->stream. */
int cuv__sub_record(cuv__submission_t *sub);
/* Completion proven: releases every hold (in reverse order) and frees sub (its block once its
 * extra bytes are done too). Output untouched. */
void cuv__sub_retire(cuv__submission_t *sub);
/* Completion unprovable (a fault): the holds are leaked on purpose, counted and reported once. */
void cuv__sub_leak(cuv__submission_t *sub);
/* Retires, or leaks when status says the context faulted (cuv__sub_fault, which counts it).
 * Inline: a success costs no call to ask. */
void cuv__sub_fault(cuv__submission_t *sub);
static inline void cuv__sub_finish(cuv__submission_t *sub, int status) {
  if (status < 0 && cuv_status_is_fault(status))
    cuv__sub_fault(sub);
  else
    cuv__sub_retire(sub);
}

#endif
