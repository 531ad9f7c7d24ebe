#ifndef CUV_SIM_INTERNAL_H
#define CUV_SIM_INTERNAL_H

/* Internal header of libcuv-sim, the CPU implementation of the CUDA driver entry points cuv uses.
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

#include "driver_funcs.h"

#define SIM_HIDDEN __attribute__((visibility("hidden")))

/* ---- Entry points (proc.c) ------------------------------------------------------------------- */

/* Every base name the simulator answers to, for call counting and failure injection: the names of
 * internal/driver_funcs.h plus the variants the real driver also resolves
 * (cuGraphInstantiateWithFlags) and cuGetProcAddress itself, and the NCCL entry points of
 * internal/nccl_funcs.h (sim/nccl.c; an injected result is their ncclResult_t). Kept separate
 * from CUV__DRIVER_FUNCS so that renaming an entry there does not change the ids used inside the
 * simulator. */
#define SIM_ENTRY_POINTS(X)                                                                      \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)      \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain)          \
  X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxReset) X(cuCtxSetCurrent) X(cuCtxGetCurrent)  \
  X(cuCtxSynchronize) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamQuery)                      \
  X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess) X(cuCtxDisablePeerAccess)                    \
  X(cuMemcpyPeerAsync)                                                                           \
  X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventDestroy)                 \
  X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize) X(cuMemAlloc) X(cuMemFree)              \
  X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemHostAlloc) X(cuMemFreeHost)                        \
  X(cuMemHostGetDevicePointer) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync)    \
  X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuModuleLoadData)                 \
  X(cuModuleUnload)                                                                              \
  X(cuModuleGetFunction) X(cuFuncGetParamInfo) X(cuLaunchKernel) X(cuLaunchHostFunc)             \
  X(cuStreamWriteValue32) X(cuStreamWriteValue64) X(cuStreamWaitValue32)                         \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuStreamIsCapturing) X(cuGraphInstantiate)     \
  X(cuGraphInstantiateWithFlags) X(cuGraphUpload) X(cuGraphLaunch) X(cuGraphDestroy)             \
  X(cuGraphExecDestroy) X(cuGetProcAddress)                                                     \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommGetAsyncError)        \
  X(ncclCommFinalize) X(ncclCommDestroy) X(ncclCommAbort) X(ncclGroupStart) X(ncclGroupEnd)      \
  X(ncclAllReduce) X(ncclBroadcast) X(ncclReduce) X(ncclAllGather) X(ncclReduceScatter)          \
  X(ncclSend) X(ncclRecv)

/* One id per entry point. The ## keeps cuda.h's renaming macros (cuMemAlloc -> cuMemAlloc_v2)
 * from expanding, so the ids carry the base names. */
enum sim_entry_id {
#define SIM__ID(name) SIM_ID_##name,
  SIM_ENTRY_POINTS(SIM__ID)
#undef SIM__ID
  SIM_ID_COUNT
};

/* How much an entry point checks before it acts. */
enum sim_enter_checks {
  SIM_CHECK_NONE,   /* works before cuInit (cuInit, cuGetErrorName, cuGetProcAddress, ...) */
  SIM_CHECK_INIT,   /* needs cuInit: devices, primary contexts, current context */
  SIM_CHECK_CTX,    /* also fails at once when the current context is destroyed
                       (CUDA_ERROR_CONTEXT_IS_DESTROYED) or has a sticky fault: every call that
                       works on a context, destroy calls included, as the real driver */
  SIM_CHECK_SYNC,   /* as SIM_CHECK_CTX, but a synchronize call returning a sticky fault first
                       waits until no command of the context is in progress, so that its caller
                       may free what the work used (a GPU kills its kernels; a twin runs on) */
};

/* Counts the call, applies failure injection, then the checks. Returns CUDA_SUCCESS to proceed,
 * or the result the entry point must return. */
SIM_HIDDEN CUresult sim_enter(enum sim_entry_id id, enum sim_enter_checks checks);
/* Whether CUV_SIM_HIDE names the entry point: lookups of it fail as on a library without it. */
SIM_HIDDEN bool sim_entry_hidden(const char *name);

/* Every entry point starts with one of these: the call is counted and may be failed by
 * cuv_sim_fail before it acts. */
#define SIM__ENTER(id, checks)                                                                   \
  do {                                                                                           \
    CUresult sim__r = sim_enter((id), (checks));                                                 \
    if (sim__r != CUDA_SUCCESS)                                                                  \
      return sim__r;                                                                             \
  } while (0)
#define SIM_ENTER(name) SIM__ENTER(SIM_ID_##name, SIM_CHECK_CTX)
#define SIM_ENTER_SYNC(name) SIM__ENTER(SIM_ID_##name, SIM_CHECK_SYNC)
#define SIM_ENTER_NOCTX(name) SIM__ENTER(SIM_ID_##name, SIM_CHECK_INIT)
#define SIM_ENTER_NOINIT(name) SIM__ENTER(SIM_ID_##name, SIM_CHECK_NONE)

/* Entry-point variants resolved by cuGetProcAddress for some versions (the real driver's
 * versioned symbols, whose prototypes differ from cuda.h's): cuCtxSynchronize at 13000 takes the
 * context; cuGraphInstantiate is the legacy five-argument cuGraphInstantiate_v2. */
SIM_HIDDEN CUresult CUDAAPI sim_cuCtxSynchronize_v2(CUcontext ctx);
SIM_HIDDEN CUresult CUDAAPI sim_cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                      CUgraphNode *phErrorNode, char *logBuffer,
                                                      size_t bufferSize);

/* ---- Global lock ----------------------------------------------------------------------------- */

SIM_HIDDEN void sim_lock(void);
SIM_HIDDEN void sim_unlock(void);
/* Waits on the global condition (lock held); returns with the lock held. */
SIM_HIDDEN void sim_wait(void);
/* Wakes every sim_wait()er (lock held). */
SIM_HIDDEN void sim_wake_all(void);
/* Waits on another condition variable with the global lock (lock held). */
SIM_HIDDEN void sim_wait_on(pthread_cond_t *cond);
/* Starts a detached internal thread with every signal blocked (signals are the application's). */
SIM_HIDDEN bool sim_thread_start(void *(*fn)(void *), void *arg);

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

/* All with the lock held. */
SIM_HIDDEN bool sim_handle_add(struct sim_obj *obj);
SIM_HIDDEN void sim_handle_remove(struct sim_obj *obj);
/* The object behind handle h if it is live and of type t, else NULL. */
SIM_HIDDEN struct sim_obj *sim_handle_get(const void *h, enum sim_obj_type t);
/* Unregisters every live object of ctx of type t and returns them in a malloc'd array (*count
 * entries; NULL when none). */
SIM_HIDDEN struct sim_obj **sim_handle_take_all(struct sim_ctx *ctx, enum sim_obj_type t,
                                                size_t *count);

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

SIM_HIDDEN bool sim_initialized(void);
/* The SIM_CHECK_CTX / SIM_CHECK_SYNC checks on the calling thread's current context (lock not
 * held). */
SIM_HIDDEN CUresult sim_ctx_entry_check(bool settle);
/* The calling thread's current context (NULL when none). */
SIM_HIDDEN struct sim_ctx *sim_ctx_current(void);
/* The context behind a CUcontext handle, initialized or not; NULL for anything else. */
SIM_HIDDEN struct sim_ctx *sim_ctx_from_handle(CUcontext h);
/* The context of device `dev` (0 <= dev < the device count); no lock needed. */
SIM_HIDDEN struct sim_ctx *sim_ctx_of_device(int dev);
/* The number of devices fixed by cuInit (0 before). */
SIM_HIDDEN int sim_device_count(void);
/* Makes device's primary context current on the calling thread, as the CUDA runtime's
 * cudaSetDevice does inside NCCL (sim/nccl.c). */
SIM_HIDDEN void sim_ctx_make_current(int device);
/* Current context usable for new work, or the error to return (lock held). */
SIM_HIDDEN CUresult sim_ctx_require(struct sim_ctx **out);
/* The sticky fault of ctx, CUDA_SUCCESS when none (no lock needed). */
SIM_HIDDEN CUresult sim_ctx_fault(const struct sim_ctx *ctx);
/* Makes ctx's sticky fault (lock held); the first fault wins. `by` is the stream whose command
 * faulted (NULL when none). */
SIM_HIDDEN void sim_ctx_set_fault(struct sim_ctx *ctx, CUresult result,
                                  const struct sim_stream *by);
/* Is no worker of ctx in the middle of a command (host functions aside)? (lock held) */
SIM_HIDDEN bool sim_ctx_idle(const struct sim_ctx *ctx);
/* Returns ctx's sticky fault, first waiting (lock held) until no command of ctx is in progress
 * when there is one: what a synchronize call does before it reports the fault. */
SIM_HIDDEN CUresult sim_ctx_settle(struct sim_ctx *ctx);
/* Waits until all work submitted so far to every stream of ctx completed, or (after a fault)
 * until no command is in progress (lock held). Returns the fault or CUDA_SUCCESS. */
SIM_HIDDEN CUresult sim_ctx_drain(struct sim_ctx *ctx);

/* ---- Commands and streams (stream.c) --------------------------------------------------------- */

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

SIM_HIDDEN void *sim_cmd_new(const struct sim_cmd_ops *ops, size_t size);
/* Memberwise copy + dup (lock held); NULL when out of memory. */
SIM_HIDDEN struct sim_cmd *sim_cmd_clone(const struct sim_cmd *cmd);
/* release + free (lock held). */
SIM_HIDDEN void sim_cmd_free(struct sim_cmd *cmd);

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

/* Resolves a stream handle (NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD mean the current
 * context's NULL stream) with the lock held. */
SIM_HIDDEN CUresult sim_stream_get(CUstream h, struct sim_stream **out);
/* sim_stream_get + the sticky fault check: the stream may take new work. */
SIM_HIDDEN CUresult sim_stream_get_live(CUstream h, struct sim_stream **out);
/* Enqueues cmd on s, or appends it to s's capture graph (lock held). On failure cmd is freed. */
SIM_HIDDEN CUresult sim_stream_submit(struct sim_stream *s, struct sim_cmd *cmd);
/* Resolves h and submits cmd to it: the common tail of every enqueueing entry point. Takes and
 * releases the lock; frees cmd on failure. */
SIM_HIDDEN CUresult sim_submit(CUstream h, struct sim_cmd *cmd);
/* Pushes an already bound command to the FIFO (lock held). */
SIM_HIDDEN void sim_stream_push(struct sim_stream *s, struct sim_cmd *cmd);
SIM_HIDDEN void sim_stream_ref(struct sim_stream *s);
SIM_HIDDEN void sim_stream_unref(struct sim_stream *s);
/* Has s finished the work up to `target` as far as a synchronize call must wait (lock held)?
 * After a sticky fault, queued commands are dropped (host functions and flag writes aside), so it
 * is enough that the worker is not in the middle of one: no kernel, copy or memset touches memory
 * after the call returns. */
SIM_HIDDEN bool sim_stream_settled(struct sim_stream *s, uint64_t target);
/* Returns once the copy just queued on h (and everything before it) has run, as the real driver
 * does for a copy into pageable host memory; nothing while h is capturing (lock not held). */
SIM_HIDDEN CUresult sim_stream_wait_copy(CUstream h);
/* Creates a stream of ctx with its worker (lock held). */
SIM_HIDDEN CUresult sim_stream_create(struct sim_ctx *ctx, unsigned flags, bool is_null,
                                      struct sim_stream **out);
/* Tells every worker of ctx to stop and waits until all exited (lock held). */
SIM_HIDDEN void sim_stream_stop_all(struct sim_ctx *ctx);

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

SIM_HIDDEN void sim_token_unref(struct sim_token *t);
SIM_HIDDEN void sim_event_unref(struct sim_event *e);
/* Destroys every event of ctx (reset; lock held). */
SIM_HIDDEN void sim_event_reset_ctx(struct sim_ctx *ctx);

/* ---- Memory (memory.c) ----------------------------------------------------------------------- */

/* Is [addr, addr+n) inside one live allocation (device or host) of the simulator? (lock held) */
SIM_HIDDEN bool sim_mem_valid(uintptr_t addr, size_t n);
/* Frees every allocation of ctx (reset; lock held, no worker of ctx running). */
SIM_HIDDEN void sim_mem_reset_ctx(struct sim_ctx *ctx);

/* Is [addr, addr+n) inside one live device allocation (not pinned host memory) of ctx? (lock
 * held) */
SIM_HIDDEN bool sim_mem_valid_device(const struct sim_ctx *ctx, uintptr_t addr, size_t n);

/* ---- Peer access (peer.c) -------------------------------------------------------------------- */

/* Forgets every peer access from and to ctx (reset; lock held). */
SIM_HIDDEN void sim_peer_reset_ctx(struct sim_ctx *ctx);

/* ---- Modules and kernels (module.c) ---------------------------------------------------------- */

SIM_HIDDEN void sim_module_reset_ctx(struct sim_ctx *ctx);

/* ---- Host functions (hostfn.c) --------------------------------------------------------------- */

/* Runs fn(data) on the driver callback thread and returns when it returned, also after a sticky
 * fault (as the GPU runs host functions queued before one); not during a reset (lock NOT held). */
SIM_HIDDEN void sim_hostfn_call(struct sim_ctx *ctx, CUhostFn fn, void *data);
/* Drops queued, not yet started host functions of ctx (reset; lock held). */
SIM_HIDDEN void sim_hostfn_reset_ctx(struct sim_ctx *ctx);

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

/* Appends cmd (unbound) to s's capture graph (lock held; s->cap set). Frees cmd on failure. */
SIM_HIDDEN CUresult sim_capture_append(struct sim_stream *s, struct sim_cmd *cmd);
/* Marks s's capture invalidated (lock held; no-op when s is not capturing). */
SIM_HIDDEN void sim_capture_invalidate(struct sim_stream *s);
/* Makes s join capture c (fork through an event; lock held). */
SIM_HIDDEN CUresult sim_capture_join(struct sim_stream *s, struct sim_capture *c);
/* Detaches s from its capture (stream destroyed or context reset; lock held). */
SIM_HIDDEN void sim_capture_leave(struct sim_stream *s);
SIM_HIDDEN void sim_capture_unref(struct sim_capture *c);
/* Does ctx have a live capture that forbids context-wide synchronization? (lock held) */
SIM_HIDDEN bool sim_capture_block_ctx_sync(struct sim_ctx *ctx);
/* A "potentially unsafe" call (allocation, synchronous free, query or synchronize of work outside
 * the capture) made while capturing: prohibited on a thread with its own non-relaxed capture, and
 * on every thread while some thread has a CU_STREAM_CAPTURE_MODE_GLOBAL capture. Then the
 * captures that prohibit it are invalidated and CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED returned
 * (lock held). */
SIM_HIDDEN CUresult sim_capture_check_unsafe(void);

SIM_HIDDEN struct sim_graph *sim_graph_new(struct sim_ctx *ctx, enum sim_obj_type type);
SIM_HIDDEN void sim_graph_free(struct sim_graph *g);
SIM_HIDDEN void sim_graph_reset_ctx(struct sim_ctx *ctx);

/* ---- Small helpers --------------------------------------------------------------------------- */

/* Monotonic time in nanoseconds. */
SIM_HIDDEN uint64_t sim_now_ns(void);
/* Sleeps about ns nanoseconds. */
SIM_HIDDEN void sim_sleep_ns(uint64_t ns);

#endif
