#ifndef CUV_LIB_OP_H
#define CUV_LIB_OP_H

/* The lazy op tree. An op node is one allocation that starts with struct cuv_op_s; its vtable
 * says how to enqueue it (execute) and how to drop it unexecuted (drop). Both consume the node's
 * children and captured resources; the node's memory itself is freed by op.c. */

/* What an op executes against: the stream, and the submission that retains what it touches. */
typedef struct cuv__exec {
  cuv__submission_t *sub;
  cuv_stream_t *stream;
  cuv_policy_t *policy;  /* where fork finds more streams */
  /* A device-to-host copy was enqueued since the last wait for one: the next then/map callback
   * waits until the stream got there (combinators.c), so it sees the data. */
  bool landing;
} cuv__exec_t;

typedef struct cuv__op_vt {
  const char *name;
  int (*execute)(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out);
  void (*drop)(cuv_op_t *op);
  /* Adds the buffers executing the op touches to t (the engine orders conflicting jobs by them);
   * NULL when that is unknown before execution (a callback builds more work). */
  void (*touches)(const cuv_op_t *op, cuv__touches_t *t);
} cuv__op_vt_t;

/* What executing an op may do on the host (struct cuv_op_s.host), known when it is built. */
enum {
  /* it may enqueue a device-to-host copy whose data a host callback over it must see */
  CUV__OP_LANDS = 1u << 0,
  /* it may wait for the GPU (a then/map callback over such a copy): the engine runs it on a
   * submitter thread, never on a thread that must not block */
  CUV__OP_WAITS = 1u << 1,
};

struct cuv_op_s {
  const cuv__op_vt_t *vt;
  int error;   /* a failed constructor's error: executing reports it */
  /* The device the op executes on: its own, or for a tree the first op's that has one; -1 for
   * none (it runs where the executor or its parent runs it). */
  int device;
  /* That device when a reference the op holds keeps it open (a launch's kernel, a copy's
   * buffers), else NULL: an executor then takes its default policy from here, with no lookup
   * under the devices' lock and no reference of its own (lib/exec.c). Borrowed, read only before
   * the op executes. */
  cuv_device_t *dev;
  unsigned char taken; /* OP_FREE, or held by a combinator or shared (op.c) */
  unsigned char host;  /* CUV__OP_* */
  /* Its output is a buffer it allocates when it runs, which no other job can touch before: the
   * engine needs no buffer address for it (a launch's op argument, lib/arg_ops.c). */
  bool fresh_buffer;
  /* Every device the op's work touches (CUV__DEVICE_BIT of each): known when it is built, so the
   * engine orders a submission against every device it touches before it runs (engine.c). */
  uint64_t devices;
  /* The node outlives its execution: held by the submission, it is dropped and freed when that
   * retires (cuv__op_execute), and its execute neither drops nor frees it. A node built on a loop
   * thread and executed on a submitter thread is then only read there: its references and its
   * memory go back on the thread that made them (a request's launches and copies otherwise
   * moved a dozen cache lines between cores per request, bench/RESULTS.md). */
  bool retires_with_submission;
};

/* An ordinal's bit in a device set (ordinals are below CUV__MAX_DEVICES, 64). */
#define CUV__DEVICE_BIT(ordinal) ((uint64_t)1 << (ordinal))

/* A new node of `size` bytes (zeroed) with `vt`; NULL when out of memory. */
cuv_op_t *cuv__op_new(const cuv__op_vt_t *vt, size_t size);
/* The same with only its struct cuv_op_s set (as cuv__op_new sets it): the node's own bytes after
 * it are the caller's to set, every one. For the launch, built once per submission: clearing it
 * whole cost a memset call (bench/RESULTS.md, cuv-bench-submit). */
static inline cuv_op_t *cuv__op_new_unset(const cuv__op_vt_t *vt, size_t size) {
  cuv_op_t *op = cuv__pool_alloc(size);
  if (op)
    *op = (struct cuv_op_s){.vt = vt, .device = -1};
  return op;
}
/* An op that carries `error` (never NULL: out of memory yields a static error op). */
cuv_op_t *cuv__op_fail(int error);
/* Executes and consumes op; on failure *out is left cleared. */
int cuv__op_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out);
/* Adds what op touches to t (unknown: t->all). */
void cuv__op_touches(const cuv_op_t *op, cuv__touches_t *t);
/* A touches hook for ops that touch no buffer. */
void cuv__touches_none(const cuv_op_t *op, cuv__touches_t *t);
/* Frees an op this code owns, executed or not (cuv_op_destroy refuses an op a combinator holds). */
void cuv__op_drop(cuv_op_t *op);
/* Drops n ops (NULLs allowed). */
void cuv__op_drop_all(cuv_op_t *const *ops, size_t n);
/* Takes a non-NULL op into a new owner (a combinator, a shared op): CUV_ECONSUMED when another
 * owner holds it already; the op then stays with that owner and the caller must not free it. */
int cuv__op_take(cuv_op_t *op);
/* Gives back an op taken by cuv__op_take that the caller returns as it is (an error op). */
void cuv__op_untake(cuv_op_t *op);
/* Takes n ops into one new owner. On failure (a NULL: CUV_EINVAL; an op another owner holds, or
 * the same op twice in the list: CUV_ECONSUMED) the ops this call could take are dropped, each
 * once, and the others are left to their owners. */
int cuv__op_take_all(cuv_op_t *const *ops, size_t n);
/* Makes `ordinal` the op's device and its only one. */
void cuv__op_set_device(cuv_op_t *op, int ordinal);
/* The same for `dev`, which a reference the op holds keeps open until the op is dropped. */
void cuv__op_set_held_device(cuv_op_t *op, cuv_device_t *dev);
/* Merges a part's device into a leaf op's (a launch's op arguments, a custom op's accesses): one
 * launch or custom op runs on one device, so CUV_EDEVICE when they differ. */
int cuv__op_join_device(int *device, int child_device);
/* Adds a child's devices to a parent's: the parent executes on its first child's device that has
 * one (in the order children are joined). */
void cuv__op_join(cuv_op_t *parent, const cuv_op_t *child);
/* The first error among n ops (NULL counts as CUV_EINVAL), or 0. */
int cuv__op_first_error(cuv_op_t *const *ops, size_t n);

/* A tuple output of n cleared items; NULL data when out of memory. */
cuv_output_t cuv__tuple_new(size_t n);

/* The execution lock: held while a then/with_context callback runs on this thread. */
extern _Thread_local unsigned cuv__exec_lock_depth; /* op.c's */
static inline bool cuv__exec_locked(void) { return cuv__exec_lock_depth > 0; }
void cuv__exec_lock(void);
void cuv__exec_unlock(void);

/* Output helpers. */
static inline cuv_output_t cuv__output(void *data, cuv_release_fn release, void *release_arg) {
  cuv_output_t out = {data, release, release_arg};
  return out;
}

#endif
