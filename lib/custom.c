/* Custom ops (include/cuv/custom.h): the caller's execute function, run with the buffers it
 * declared held and ordered like a launch's arguments, and a context through which it retains
 * whatever its GPU work uses until the submission's completion is proven. */
#include "internal.h"
#include "hazard.h"
#include "queue.h"

struct cuv_custom_ctx_s {
  cuv__exec_t *ex;
};

typedef struct custom_op {
  struct cuv_op_s op;
  cuv_custom_fn execute;
  void *arg;
  cuv_release_fn drop;
  size_t naccesses;
  cuv_access_t accesses[]; /* each with the op's own buffer reference */
} custom_op_t;

static void unref_buffers(custom_op_t *c) {
  for (size_t i = 0; i < c->naccesses; i++)
    cuv_buffer_unref(c->accesses[i].buffer);
  c->naccesses = 0;
}

static void custom_drop(cuv_op_t *op) {
  custom_op_t *c = (custom_op_t *)op;
  unref_buffers(c);
  if (c->drop)
    c->drop(c->arg);
}

/* Holds every declared buffer (ordered after conflicting work on other streams) before execute
 * enqueues anything, as a launch holds its arguments. */
static int hold_accesses(const custom_op_t *c, cuv__exec_t *ex) {
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < c->naccesses; i++)
    rc = cuv__hold_buffer(ex, c->accesses[i].buffer, c->accesses[i].kind);
  return rc;
}

static int custom_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  custom_op_t *c = (custom_op_t *)op;
  int rc = hold_accesses(c, ex);
  if (rc == 0) /* not once the submission was cancelled (lib/queue.c) */
    rc = cuv__queue_call_begin(ex->sub);
  if (rc < 0) {
    custom_drop(op); /* execute never runs: arg goes to drop */
    return rc;
  }
  cuv_custom_ctx_t ctx = {ex};
  cuv__exec_lock(); /* as then's: execute must not run ops */
  rc = c->execute(&ctx, out, c->arg);
  cuv__exec_unlock();
  cuv__queue_call_end(ex->sub);
  ex->landing = true; /* execute's calls may have been a copy to the host */
  unref_buffers(c); /* the submission holds them now */
  return rc < 0 ? rc : 0;
}

static void custom_touches(const cuv_op_t *op, cuv__touches_t *t) {
  const custom_op_t *c = (const custom_op_t *)op;
  for (size_t i = 0; i < c->naccesses; i++)
    cuv__touch(t, c->accesses[i].buffer, c->accesses[i].kind != CUV_ARG_KIND_READ);
}

static const cuv__op_vt_t custom_vt = {"custom", custom_execute, custom_drop, custom_touches};

/* The bytes an access names (bytes 0: to the buffer's end). */
static size_t access_bytes(const cuv_access_t *a) {
  return a->bytes ? a->bytes : a->buffer->size - a->offset;
}

static int check_access(const cuv_access_t *a, int *device) {
  if (!a->buffer || (a->kind != CUV_ARG_KIND_READ && a->kind != CUV_ARG_KIND_WRITE &&
                     a->kind != CUV_ARG_KIND_RW))
    return CUV_EINVAL;
  if (a->offset > a->buffer->size)
    return CUV_ERANGE;
  int rc = cuv__buffer_check_range(a->buffer, a->offset, access_bytes(a));
  return rc < 0 ? rc : cuv__op_join_device(device, a->buffer->dev->ordinal);
}

static bool overlap(const cuv_access_t *a, const cuv_access_t *b) {
  return cuv__buffer_ranges_overlap(a->buffer, a->offset, access_bytes(a), b->buffer, b->offset,
                                    access_bytes(b));
}

/* Unique storage: what the op writes is no other declared access's (work that reads and writes
 * the same bytes declares them once, RW). Ops declare a handful of accesses: every pair is
 * compared. */
static int check_unique(const cuv_access_t *accesses, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if ((accesses[i].kind != CUV_ARG_KIND_READ || accesses[j].kind != CUV_ARG_KIND_READ) &&
          overlap(&accesses[i], &accesses[j]))
        return CUV_EOVERLAP;
  return 0;
}

static int check_accesses(const cuv_access_t *accesses, size_t n, int *device) {
  if (n && !accesses)
    return CUV_EINVAL;
  if (n > (SIZE_MAX - sizeof(custom_op_t)) / sizeof(cuv_access_t))
    return CUV_ENOMEM;
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = check_access(&accesses[i], device);
  return rc < 0 ? rc : check_unique(accesses, n);
}

CUV_EXTERN cuv_op_t *cuv_custom(cuv_custom_fn execute, void *arg, cuv_release_fn drop,
                                const cuv_access_t *accesses, size_t naccesses) {
  int device = -1;
  int rc = execute ? check_accesses(accesses, naccesses, &device) : CUV_EINVAL;
  custom_op_t *c = NULL;
  if (rc == 0 &&
      !(c = (custom_op_t *)cuv__op_new(&custom_vt, sizeof *c + naccesses * sizeof *accesses)))
    rc = CUV_ENOMEM;
  if (rc < 0) {
    if (drop)
      drop(arg);
    return cuv__op_fail(rc);
  }
  c->execute = execute;
  c->arg = arg;
  c->drop = drop;
  if (device >= 0)
    cuv__op_set_device(&c->op, device);
  c->op.host = CUV__OP_LANDS; /* as with_context's: the caller's calls are unknown */
  for (size_t i = 0; i < naccesses; i++, c->naccesses++) {
    c->accesses[i] = accesses[i];
    cuv_buffer_ref(accesses[i].buffer);
  }
  return &c->op;
}

CUV_EXTERN cuv_stream_t *cuv_custom_stream(const cuv_custom_ctx_t *ctx) {
  return ctx ? ctx->ex->stream : NULL;
}

CUV_EXTERN struct CUstream_st *cuv_custom_cu_stream(const cuv_custom_ctx_t *ctx) {
  return ctx ? ctx->ex->stream->cu : NULL;
}

CUV_EXTERN cuv_device_t *cuv_custom_device(const cuv_custom_ctx_t *ctx) {
  return ctx ? ctx->ex->stream->dev : NULL;
}

CUV_EXTERN int cuv_custom_retain(cuv_custom_ctx_t *ctx, void *object, cuv_release_fn release) {
  if (!ctx || !release)
    return CUV_EINVAL;
  return cuv__sub_hold(ctx->ex->sub, release, object);
}
