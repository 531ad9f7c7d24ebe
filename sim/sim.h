#ifndef CUV_SIM_INTERNAL_H
#define CUV_SIM_INTERNAL_H

/* The objects of libcuv-sim, the CPU implementation of the CUDA driver entry points cuv uses:
 * the types every file shares, and no function. Each file's functions are declared in the header
 * of its name (stream.h: stream.c's), and a file calls only files below it (docs/design.md).
 *
 * Locking model: one process-wide mutex (sim_lock) guards every piece of simulator state (handle
 * registry, contexts, stream queues, events, allocations, modules, graphs). Work itself (copies,
 * kernel twins, host functions, wait-value polling) runs with the lock released, so streams still
 * execute in parallel. One global condition variable (sim_cond) is broadcast whenever something
 * completes or changes state; every blocking wait (synchronize calls, event waits inside streams,
 * a worker waiting for its host function) waits on it and re-checks its own predicate. A single
 * lock makes lock ordering a non-issue, and with the handful of threads a test runs it costs
 * nothing measurable. Fields documented "atomic" are also read without the lock (polling loops).
 *
 * Object lifetime: every handle handed to the application is registered in the handle registry
 * (handle.c) so stale or foreign handles are rejected with CUDA_ERROR_INVALID_HANDLE instead of
 * being dereferenced. Objects that queued work may still reference after the application destroyed
 * them (streams, events, capture sequences, completion tokens) are reference counted under the
 * lock. */

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuv/sim.h>

#define SIM_HIDDEN __attribute__((visibility("hidden")))

/* The CUDA version the simulator reports (cuDriverGetVersion) and resolves up to
 * (cuGetProcAddress): 13.2, whose cuLaunchHostFunc_v2 it implements (hostfn.c); every other entry
 * point keeps the ABI of the cuda.h it was built with (13.0: proc.c). */
#define SIM_DRIVER_VERSION 13020

/* ---- Handle registry (handle.c) -------------------------------------------------------------- */

enum sim_obj_type {
  SIM_OBJ_STREAM = 1,
  SIM_OBJ_EVENT,
  SIM_OBJ_MODULE,
  SIM_OBJ_FUNCTION,
  SIM_OBJ_GRAPH,
  SIM_OBJ_GRAPH_EXEC,
};

struct sim_ctx;

/* First member of every object handed out as a handle. */
struct sim_obj {
  enum sim_obj_type type;
  struct sim_ctx *ctx;
};

/* ---- Contexts (context.c) -------------------------------------------------------------------- */

#define SIM_MAX_DEVICES 16

struct sim_stream;

struct sim_ctx {
  int device;
  int retain;                 /* primary-context retain count */
  _Atomic bool active;        /* initialized: by a retain, until a reset or the last release */
  _Atomic int fault;          /* sticky CUresult, 0 while healthy; never cleared (atomic) */
  /* The stream whose command made the fault (NULL: cuv_sim_fault); only compared, never
   * dereferenced: nothing behind the fault on it runs, host functions and writes included. */
  const struct sim_stream *fault_stream;
  struct sim_stream *streams; /* every stream whose worker is alive, incl. draining and null */
  struct sim_stream *null_stream;
  int workers;     /* live worker threads of this context */
  bool resetting;  /* a reset is tearing the context down: no new workers */
  /* Peer access enabled from this context to the context of device i (peer.c; lock held). */
  bool peer[SIM_MAX_DEVICES];
};

/* ---- Commands (cmd.c) and streams (stream.c) ------------------------------------------------- */

struct sim_cmd;

/* A kind of stream command. Commands are small malloc'd structs embedding struct sim_cmd first;
 * `size` lets a captured command be cloned for each graph launch. */
struct sim_cmd_ops {
  /* Executes the command on the stream's worker, lock NOT held. Not called after a sticky fault,
   * unless after_fault (and then only as that flag says). */
  void (*run)(struct sim_cmd *cmd, struct sim_stream *s);
  /* Called (lock held) when the command is really enqueued, at the API call or at graph launch:
   * resolves things that are fixed at submission time (event record generations). May be NULL. */
  void (*bind)(struct sim_cmd *cmd);
  /* Deep-copies owned resources after a memberwise copy (lock held). May be NULL. */
  bool (*dup)(struct sim_cmd *copy);
  /* Releases owned resources, not the struct itself (lock held). May be NULL. */
  void (*release)(struct sim_cmd *cmd);
  /* Runs application code (host functions): synchronize calls after a sticky fault do not wait
   * for it, as the real driver does not. */
  bool app_code;
  /* Still runs when its stream reaches it after a sticky fault (it was queued before: nothing is
   * queued after one), unless its stream is the one whose command faulted or dropped a command
   * since the fault. Host functions and flag writes behind a kernel that was running when the
   * fault hit, as the GPU runs them (tests/errors/fault.c); queued kernels, copies, memsets and
   * waits are dropped. */
  bool after_fault;
  /* Graph memory nodes (memory.c), lock held; may be NULL. instantiated(+1) is called for each
   * node when its graph is instantiated (it may refuse), instantiated(-1) when the executable
   * graph is destroyed; launch_check before each launch of the executable graph. */
  CUresult (*instantiated)(struct sim_cmd *cmd, int delta);
  CUresult (*launch_check)(const struct sim_cmd *cmd);
};

struct sim_cmd {
  struct sim_cmd *next;
  const struct sim_cmd_ops *ops;
  size_t size;
  bool skipped; /* dropped after the sticky fault without running (set by its worker) */
};

struct sim_capture;

struct sim_stream {
  struct sim_obj obj;
  unsigned flags;
  int refs;             /* handle + worker + waiters + capture/event references */
  bool is_null;         /* the context's NULL stream */
  bool destroyed;       /* cuStreamDestroy was called: drain, then exit */
  _Atomic bool stop;    /* context reset: drop everything and exit now (atomic) */
  bool busy;            /* the worker is running a command other than a host function */
  bool dropped;         /* a command was dropped after the sticky fault: no host function or
                           flag write behind it runs either (it would report work done that was
                           not) */
  struct sim_cmd *head; /* FIFO of queued commands */
  struct sim_cmd *tail;
  uint64_t submitted; /* commands enqueued */
  uint64_t completed; /* commands executed or dropped */
  pthread_cond_t wake;
  struct sim_stream *next; /* in ctx->streams */
  /* Stream capture (capture.c). */
  struct sim_capture *cap;
  uint64_t cap_ops;    /* captured operations of this stream in cap (join counts as one) */
  uint64_t cap_joined; /* cap_ops value up to which another capturing stream waited on us */
};

/* ---- Events (event.c) ------------------------------------------------------------------------ */

/* The work captured by one cuEventRecord: done once the stream passed the record. */
struct sim_token {
  int refs;
  bool done;
  struct sim_ctx *ctx;
};

struct sim_event {
  struct sim_obj obj;
  unsigned flags;
  int refs;               /* handle + captured external waits */
  struct sim_token *last; /* most recent record; NULL = never recorded */
  /* Last recorded into a capture sequence (internal capture event, no node), else NULL. */
  struct sim_capture *cap;
  struct sim_stream *cap_stream;
  uint64_t cap_ops;
};

/* ---- Stream capture (capture.c) and graphs (graph.c) ----------------------------------------- */

struct sim_graph {
  struct sim_obj obj; /* SIM_OBJ_GRAPH or SIM_OBJ_GRAPH_EXEC */
  struct sim_cmd *head;
  struct sim_cmd *tail;
  size_t count;
};

struct sim_capture {
  int refs;                   /* member streams + events recorded into it + the live list */
  struct sim_capture *live_next; /* in the list of captures not yet ended */
  bool invalidated;           /* an illegal call happened: EndCapture fails */
  bool ended;                 /* cuStreamEndCapture was called */
  CUstreamCaptureMode mode;
  pthread_t thread;           /* thread that began it (non-relaxed modes end on it) */
  struct sim_stream *origin;  /* stream that began it */
  struct sim_graph *graph;    /* commands recorded so far, in call order */
  struct sim_stream **members; /* streams capturing into it, origin first */
  size_t nmembers;
  size_t capacity;
};

#endif
