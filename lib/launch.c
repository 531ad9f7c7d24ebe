/* Kernel launches with annotated arguments. Buffer arguments become device pointers when the op
 * is built (the buffer already exists) and are held with their access mode when it executes;
 * scalars are copied into the op, so the caller's argument memory is free at once. An op argument
 * runs first and gives its buffer then (lib/arg_ops.c). */
#include <string.h>

#include "internal.h"
#include "module.h"
#include "hazard.h"
#include "args.h"
#include "arg_ops.h"

typedef struct launch_op {
  struct cuv_op_s op;
  cuv_kernel_t *kernel;
  cuv_dim3_t grid, block;
  unsigned shared_bytes;
  size_t nargs;
  size_t nops;             /* op arguments (arg_ops.c): run first, their buffers are the output */
  cuv__karg_t *args;       /* these two point into the node's own allocation (one per op) */
  unsigned char *storage;
} launch_op_t;

static void launch_drop(cuv_op_t *op) {
  launch_op_t *l = (launch_op_t *)op;
  for (size_t i = 0; i < l->nargs; i++) {
    cuv_buffer_unref(l->args[i].buffer);
    cuv__op_drop(l->args[i].op); /* an op argument that never ran */
  }
  cuv__kernel_drop(l->kernel);
}

/* The node retires with the submission (op.h): its kernel and buffer references hold them until
 * then, and only a buffer whose accesses are tracked needs a hold of its own. */
static int launch_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  launch_op_t *l = (launch_op_t *)op;
  cuv_kernel_t *kernel = l->kernel;
  void *params_inline[16];
  void **params = l->nargs <= 16 ? params_inline : malloc(l->nargs * sizeof *params);
  int rc = params ? 0 : CUV_ENOMEM;
  if (rc == 0 && kernel->mod->dev != ex->stream->dev)
    rc = CUV_EDEVICE;
  if (rc == 0 && l->nops)
    rc = cuv__arg_ops_run(l->args, l->nargs, l->nops, l->storage, ex, out);
  for (size_t i = 0; rc == 0 && i < l->nargs; i++) {
    params[i] = l->storage + l->args[i].at;
    if (l->args[i].buffer)
      rc = cuv__hold_buffer_kept(ex, l->args[i].buffer, l->args[i].kind);
  }
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuLaunchKernel(kernel->fn, l->grid.x, l->grid.y, l->grid.z,
                                         l->block.x, l->block.y, l->block.z, l->shared_bytes,
                                         ex->stream->cu, l->nargs ? params : NULL, NULL));
  if (params != params_inline)
    free(params);
  return rc;
}

static void launch_touches(const cuv_op_t *op, cuv__touches_t *t) {
  const launch_op_t *l = (const launch_op_t *)op;
  for (size_t i = 0; i < l->nargs; i++)
    cuv__touch(t, l->args[i].buffer, l->args[i].kind != CUV_ARG_KIND_READ);
  if (l->nops)
    cuv__arg_ops_touches(l->args, l->nargs, t);
}

static const cuv__op_vt_t launch_vt = {"launch", launch_execute, launch_drop, launch_touches};

/* Bytes of argument storage: each argument aligned to 8 (sizes are at most 8 or a scalar's). */
static size_t storage_size(const cuv_arg_t *args, size_t nargs) {
  size_t total = 0;
  for (size_t i = 0; i < nargs; i++)
    total += (cuv__arg_size(&args[i]) + 7) & ~(size_t)7;
  return total;
}

/* The node, its argument table and the storage in one allocation: a launch is the most frequent
 * op, and three mallocs and frees per launch were most of its host cost. The table and the
 * storage are cleared (pack_args fills them in part); the node's own fields are set by
 * cuv_launch, each of them, so it is not cleared first. */
static launch_op_t *launch_new(size_t nargs, size_t storage) {
  size_t head = sizeof(launch_op_t) + nargs * sizeof(cuv__karg_t);
  head = (head + 7) & ~(size_t)7;
  launch_op_t *l = (launch_op_t *)cuv__op_new_unset(&launch_vt, head + storage);
  if (l) {
    l->nargs = 0; /* pack_args counts them in */
    l->args = (cuv__karg_t *)(l + 1);
    l->storage = (unsigned char *)l + head;
    if (head + storage > sizeof *l)
      memset(l->args, 0, head + storage - sizeof *l);
  }
  return l;
}

/* Lays the arguments out in storage, each aligned to 8. An over-aligned scalar (a struct
 * __align__(32)) needs no more: the driver copies each parameter's bytes from its pointer into the
 * layout the kernel's PTX gives it (cuFuncGetParamInfo's offsets), wherever they sit on the host
 * (tests/ops/args-aligned.c). */
static void pack_args(launch_op_t *l, const cuv_arg_t *args, size_t nargs) {
  size_t at = 0;
  for (size_t i = 0; i < nargs; i++, l->nargs++) {
    cuv__karg_t *k = &l->args[i];
    k->kind = args[i].kind;
    k->at = at;
    if (args[i].kind == CUV_ARG_KIND_SCALAR) {
      memcpy(l->storage + at, args[i].scalar, args[i].size);
    } else {
      if (args[i].buffer) { /* an op argument's pointer is written when its op ran */
        CUdeviceptr ptr = args[i].buffer->ptr + args[i].offset;
        memcpy(l->storage + at, &ptr, sizeof ptr);
      }
      k->buffer = cuv_buffer_ref(args[i].buffer);
      k->op = args[i].op;
      k->offset = args[i].offset;
      k->length = args[i].length;
      k->flags = args[i].flags;
    }
    at += (cuv__arg_size(&args[i]) + 7) & ~(size_t)7;
  }
}

/* What makes a launch an error op, in the order a caller would look for it: its own shape, its
 * arguments, then an error an op argument carries. */
static int check_launch(const cuv_kernel_t *kernel, cuv_dim3_t grid, cuv_dim3_t block,
                        const cuv_arg_t *args, size_t nargs, size_t *nops, unsigned char *host) {
  *nops = 0;
  *host = 0;
  if (!kernel || (nargs && !args) || !grid.x || !grid.y || !grid.z || !block.x || !block.y ||
      !block.z)
    return CUV_EINVAL;
  int rc = cuv__args_check(kernel, args, nargs);
  return rc < 0 || !nargs ? rc : cuv__arg_ops_error(args, nargs, nops, host);
}

CUV_EXTERN cuv_op_t *cuv_launch(cuv_kernel_t *kernel, cuv_dim3_t grid, cuv_dim3_t block,
                                unsigned shared_bytes, const cuv_arg_t *args, size_t nargs) {
  /* Without arguments (an empty kernel) there is nothing to take, and nothing to check but the
   * kernel's parameter count: the calls for them are skipped. */
  int rc = nargs ? cuv__arg_ops_take(args, nargs) : 0; /* consumed from here on, whatever happens */
  if (rc < 0)
    return cuv__op_fail(rc);
  size_t nops;
  unsigned char host;
  rc = check_launch(kernel, grid, block, args, nargs, &nops, &host);
  launch_op_t *l = rc == 0 ? launch_new(nargs, storage_size(args, nargs)) : NULL;
  if (!l) {
    cuv__arg_ops_drop(args, nargs);
    return cuv__op_fail(rc < 0 ? rc : CUV_ENOMEM);
  }
  l->kernel = cuv__kernel_ref(kernel);
  l->grid = grid;
  l->block = block;
  l->shared_bytes = shared_bytes;
  l->nops = nops;
  l->op.host = host;
  l->op.retires_with_submission = true; /* launch_execute leaves the node to it */
  cuv__op_set_held_device(&l->op, kernel->mod->dev); /* held by the kernel's module */
  for (size_t i = 0; i < nargs; i++)
    if (args[i].op)
      l->op.devices |= args[i].op->devices; /* trees on other devices among them */
  pack_args(l, args, nargs); /* the op arguments move into the node */
  if (nargs && (rc = cuv__kargs_unique(l->args, l->nargs)) < 0) {
    cuv_op_destroy(&l->op);
    return cuv__op_fail(rc);
  }
  return &l->op;
}
