/* Launches over tensors and partitions: unique storage checked element by element, then
 * cuv_launch with each tensor as its first element's address and the bytes it spans. cuv_launch's
 * own byte-range check would refuse disjoint tiles whose rows interleave, so the writable ranges
 * handed to it are marked CUV_ARG_FLAG_MAY_ALIAS once this file has checked them exactly. One
 * pass checks and lowers the arguments and collects the writable tensors; only those are compared
 * pairwise (bench/RESULTS.md: the layer's cost per launch).
 *
 * Op arguments (CUV_TARG_OP) run first, zipped with a host value holding the rest of the launch
 * (the kernel, its configuration, copies of the scalars, references on the tensors and
 * partitions); a then callback builds the launch from the tensors they output, through
 * cuv_tensor_launch again, followed by those tensors as the output: the caller gets back what the
 * arguments were. */
#include <string.h>

#include "internal.h"
#include "tensor.h"

/* Arguments kept on the stack up to this many; more are allocated. DEFERRED: lower met an op
 * argument, which runs first (launch_deferred). */
enum { LOCAL_ARGS = 16, DEFERRED = 1 };

/* Slices of one root (or views laid out alike) are compared by index boxes. */
static bool same_layout(const cuv_tensor_t *a, const cuv_tensor_t *b) {
  return a->root_offset == b->root_offset && a->dtype == b->dtype && a->ndim == b->ndim &&
         memcmp(a->strides, b->strides, a->ndim * sizeof a->strides[0]) == 0;
}

static bool share_elements(const cuv_tensor_t *a, const cuv_tensor_t *b) {
  if (a->buf != b->buf)
    return false;
  if (same_layout(a, b)) {
    for (size_t i = 0; i < a->ndim; i++)
      if (a->origin[i] + a->shape[i] <= b->origin[i] || b->origin[i] + b->shape[i] <= a->origin[i])
        return false;
    return true;
  }
  /* other views: by the bytes they span, which may refuse views whose elements interleave */
  return a->offset < b->offset + b->span && b->offset < a->offset + a->span;
}

static int check_writers(const cuv_tensor_t **writers, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (share_elements(writers[i], writers[j]))
        return CUV_EARGS;
  return 0;
}

/* Lowers tensor t accessed as `access` into *out, appending it to writers when writable. */
static inline __attribute__((always_inline)) int
lower_tensor(const cuv_tensor_t *t, enum cuv_arg_kind access, cuv_arg_t *out,
             const cuv_tensor_t **writers, size_t *nwriters) {
  if (!t || access == CUV_ARG_KIND_SCALAR)
    return CUV_EINVAL;
  unsigned flags = 0;
  if (access == CUV_ARG_KIND_WRITE || access == CUV_ARG_KIND_RW) {
    if (!t->injective)
      return CUV_EARGS;
    writers[(*nwriters)++] = t;
    flags = CUV_ARG_FLAG_MAY_ALIAS;
  }
  *out = (cuv_arg_t){access, t->buf, t->offset, NULL, 0, t->span, flags, NULL};
  return 0;
}

/* Lowers one argument into *out, appending a writable tensor to writers. What cuv_launch checks
 * again (a scalar's value and size, an access that is no buffer access) is left to it, with the
 * same CUV_EINVAL: checked twice it would cost every launch for nothing. */
static int lower(const cuv_targ_t *a, cuv_arg_t *out, const cuv_tensor_t **writers,
                 size_t *nwriters) {
  if (a->kind == CUV_TARG_SCALAR) {
    *out = CUV_ARG_SCALAR(a->scalar, a->size);
    return 0;
  }
  const cuv_tensor_t *t = NULL;
  if (a->kind == CUV_TARG_TENSOR)
    t = a->tensor;
  else if (a->kind == CUV_TARG_PARTITION && a->partition)
    t = a->partition->tensor;
  else if (a->kind == CUV_TARG_LAZY)
    return a->op ? DEFERRED : CUV_EINVAL;
  return lower_tensor(t, a->access, out, writers, nwriters);
}

/* Destroys every op argument (the failure paths consume them). */
static void drop_ops(const cuv_targ_t *args, size_t nargs) {
  for (size_t i = 0; args && i < nargs; i++)
    if (args[i].kind == CUV_TARG_LAZY)
      cuv_op_destroy(args[i].op);
}

static cuv_op_t *refused(const cuv_targ_t *args, size_t nargs, int rc) {
  drop_ops(args, nargs);
  return cuv_fail(rc);
}

typedef struct deferred {
  cuv_kernel_t *kernel;
  cuv_launch_config_t config;
  size_t nargs, nops;
  cuv_targ_t *args;       /* scalars point into storage, partitions into parts */
  cuv_partition_t *parts; /* copies, each holding its tensor */
  unsigned char *storage;
} deferred_t;

static void deferred_free(void *arg) {
  deferred_t *d = arg;
  for (size_t i = 0; i < d->nargs; i++)
    if (d->args[i].kind == CUV_TARG_TENSOR)
      cuv_tensor_unref((cuv_tensor_t *)d->args[i].tensor);
    else if (d->args[i].kind == CUV_TARG_PARTITION)
      cuv_partition_release(&d->parts[i]);
  cuv_kernel_unref(d->kernel);
  free(d);
}

/* Copies arg into d's slot i: a scalar's bytes, a reference on a tensor, a partition's copy. */
static int keep(deferred_t *d, size_t i, const cuv_targ_t *arg, size_t *at) {
  cuv_targ_t *k = &d->args[i];
  *k = *arg;
  if (arg->kind == CUV_TARG_SCALAR && arg->scalar && arg->size > 0) {
    memcpy(d->storage + *at, arg->scalar, arg->size);
    k->scalar = d->storage + *at;
    *at += arg->size;
  } else if (arg->kind == CUV_TARG_TENSOR && arg->tensor) {
    cuv_tensor_ref((cuv_tensor_t *)arg->tensor);
  } else if (arg->kind == CUV_TARG_PARTITION && arg->partition && arg->partition->tensor) {
    d->parts[i] = *arg->partition;
    cuv_tensor_ref(d->parts[i].tensor);
    k->partition = &d->parts[i];
  } else if (arg->kind == CUV_TARG_LAZY && arg->op) {
    k->op = NULL;
    d->nops++;
  } else {
    k->kind = CUV_TARG_SCALAR; /* nothing held: dropped as a scalar */
    return CUV_EINVAL;
  }
  return 0;
}

static deferred_t *deferred_new(cuv_kernel_t *kernel, cuv_launch_config_t config,
                                const cuv_targ_t *args, size_t nargs, int *rc) {
  size_t bytes = 0;
  for (size_t i = 0; i < nargs; i++)
    if (args[i].kind == CUV_TARG_SCALAR && args[i].scalar)
      bytes += args[i].size;
  deferred_t *d = calloc(1, sizeof *d + nargs * (sizeof *d->args + sizeof *d->parts) + bytes);
  if (!d) {
    *rc = CUV_ENOMEM;
    return NULL;
  }
  d->args = (cuv_targ_t *)(d + 1); /* zeroed: scalars, which hold nothing */
  d->parts = (cuv_partition_t *)(d->args + nargs);
  d->storage = (unsigned char *)(d->parts + nargs);
  d->kernel = cuv_kernel_ref(kernel);
  d->config = config;
  d->nargs = nargs;
  size_t at = 0;
  *rc = 0;
  for (size_t i = 0; i < nargs && *rc == 0; i++)
    *rc = keep(d, i, &args[i], &at);
  if (*rc != 0) {
    deferred_free(d);
    return NULL;
  }
  return d;
}

/* The tensors of the op arguments, in order, as the launch's output. */
static cuv_op_t *given_back(const deferred_t *d, const cuv_targ_t *now) {
  cuv_op_t *values[d->nops];
  for (size_t i = 0, j = 0; i < d->nargs; i++)
    if (d->args[i].kind == CUV_TARG_LAZY)
      values[j++] =
          cuv_value(cuv_tensor_ref((cuv_tensor_t *)now[i].tensor), cuv_tensor_output_release);
  return d->nops == 1 ? values[0] : cuv_zip(values, d->nops);
}

/* then: (the ops' tensors..., the deferred launch) -> the launch, then the tensors. */
static cuv_op_t *launch_ran(cuv_output_t *ran, void *arg) {
  CUV__UNUSED(arg);
  const deferred_t *d = cuv_tuple_get(ran, ((cuv_tuple_t *)ran->data)->n - 1)->data;
  cuv_targ_t now[d->nargs]; /* the arguments with each op's tensor in its place */
  int rc = 0;
  for (size_t i = 0, j = 0; i < d->nargs; i++) {
    now[i] = d->args[i];
    if (d->args[i].kind != CUV_TARG_LAZY)
      continue;
    now[i].kind = CUV_TARG_TENSOR;
    now[i].tensor = cuv_output_tensor(cuv_tuple_get(ran, j++));
    if (!now[i].tensor)
      rc = CUV_EARGS;
  }
  cuv_op_t *op = NULL;
  if (rc == 0)
    op = cuv_tensor_launch(d->kernel, d->config, now, d->nargs);
  op = rc == 0 ? cuv_seq(op, given_back(d, now)) : cuv_fail(rc);
  cuv_output_release(ran); /* the launch and the values hold what they need */
  return op;
}

/* The op arguments first, zipped with the rest of the launch; launch_ran builds it. */
static cuv_op_t *launch_deferred(cuv_kernel_t *kernel, cuv_launch_config_t config,
                                 const cuv_targ_t *args, size_t nargs) {
  int rc;
  deferred_t *d = deferred_new(kernel, config, args, nargs, &rc);
  if (!d)
    return refused(args, nargs, rc);
  cuv_op_t *ops[d->nops + 1];
  for (size_t i = 0, j = 0; i < nargs; i++)
    if (args[i].kind == CUV_TARG_LAZY)
      ops[j++] = args[i].op;
  ops[d->nops] = cuv_value(d, deferred_free);
  return cuv_then(cuv_zip(ops, d->nops + 1), launch_ran, NULL);
}

CUV_EXTERN cuv_op_t *cuv_tensor_launch(cuv_kernel_t *kernel, cuv_launch_config_t config,
                                       const cuv_targ_t *args, size_t nargs) {
  if (!kernel || (!args && nargs > 0))
    return refused(args, nargs, CUV_EINVAL);
  cuv_arg_t local[LOCAL_ARGS], *lowered = local;
  const cuv_tensor_t *local_writers[LOCAL_ARGS], **writers = local_writers;
  if (nargs > LOCAL_ARGS) {
    lowered = malloc(nargs * (sizeof *lowered + sizeof *writers));
    if (!lowered)
      return refused(args, nargs, CUV_ENOMEM);
    writers = (const cuv_tensor_t **)(lowered + nargs);
  }
  size_t nwriters = 0;
  int rc = 0;
  for (size_t i = 0; i < nargs && rc == 0; i++)
    rc = lower(&args[i], &lowered[i], writers, &nwriters);
  if (rc == 0)
    rc = check_writers(writers, nwriters);
  cuv_op_t *op;
  if (rc == 0)
    op = cuv_launch(kernel, config.grid, config.block, config.shared_bytes,
                    nargs > 0 ? lowered : NULL, nargs);
  else if (rc == DEFERRED)
    op = launch_deferred(kernel, config, args, nargs);
  else
    op = refused(args, nargs, rc);
  if (lowered != local)
    free(lowered);
  return op;
}

static bool writable(enum cuv_arg_kind access) {
  return access == CUV_ARG_KIND_WRITE || access == CUV_ARG_KIND_RW;
}

/* Whether two of the writable tensors of a slot table share an element: the pairwise check of
 * check_writers without a list of them, so that the launch keeps no array on its stack. Out of
 * line: with one writer, the common case, it is not called, and inlined its registers would be
 * saved and restored by every launch. */
static __attribute__((noinline)) int
slots_share(const cuv_tensor_t *const *tensors, const cuv_tensor_slot_t *slots, size_t ntensors) {
  for (size_t i = 0; i < ntensors; i++)
    for (size_t j = i + 1; writable(slots[i].access) && j < ntensors; j++)
      if (writable(slots[j].access) && share_elements(tensors[i], tensors[j]))
        return CUV_EARGS;
  return 0;
}

/* Only the tensor slots are visited, straight from the generated launcher's table: the scalars
 * between them are the caller's, which cuv_launch checks (bench/RESULTS.md: the layer's cost). */
CUV_EXTERN cuv_op_t *cuv_tensor_launch_args(cuv_kernel_t *kernel, cuv_launch_config_t config,
                                            cuv_arg_t *args, size_t nargs,
                                            const cuv_tensor_t *const *tensors,
                                            const cuv_tensor_slot_t *slots, size_t ntensors) {
  if (!kernel || (nargs > 0 && !args) || (ntensors > 0 && (!tensors || !slots)))
    return cuv_fail(CUV_EINVAL);
  size_t nwriters = 0;
  int rc = 0;
  for (size_t j = 0; j < ntensors && rc == 0; j++) {
    const cuv_tensor_t *t = tensors[j];
    size_t i = slots[j].index;
    enum cuv_arg_kind access = slots[j].access;
    if (i >= nargs || !t || access == CUV_ARG_KIND_SCALAR)
      rc = CUV_EINVAL;
    else if (t->dtype != slots[j].dtype || (writable(access) && !t->injective))
      rc = CUV_EARGS;
    else
      args[i] = (cuv_arg_t){access, t->buf, t->offset, NULL, 0, t->span,
                            writable(access) ? CUV_ARG_FLAG_MAY_ALIAS : 0, NULL};
    nwriters += writable(access);
  }
  if (rc == 0 && nwriters > 1) /* one writer shares with no other: the common case, no call */
    rc = slots_share(tensors, slots, ntensors);
  if (rc != 0)
    return cuv_fail(rc);
  return cuv_launch(kernel, config.grid, config.block, config.shared_bytes, args, nargs);
}
