/* Kernel launches with annotated arguments. Buffer arguments become device pointers when the op
 * is built (the buffer already exists) and are held with their access mode when it executes;
 * scalars are copied into the op, so the caller's argument memory is free at once. */
#include <string.h>

#include "internal.h"
#include "module.h"

typedef struct launch_arg {
  enum cuv_arg_kind kind;
  cuv_buffer_t *buffer;
  size_t offset;  /* into the op's storage */
} launch_arg_t;

typedef struct launch_op {
  struct cuv_op_s op;
  cuv_kernel_t *kernel;
  cuv_dim3_t grid, block;
  unsigned shared_bytes;
  size_t nargs;
  launch_arg_t *args;
  unsigned char *storage;
} launch_op_t;

static void launch_drop(cuv_op_t *op) {
  launch_op_t *l = (launch_op_t *)op;
  for (size_t i = 0; i < l->nargs; i++)
    cuv_buffer_unref(l->args[i].buffer);
  cuv_kernel_release(l->kernel);
  free(l->args);
  free(l->storage);
}

static int launch_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  launch_op_t *l = (launch_op_t *)op;
  void *params_inline[16];
  void **params = l->nargs <= 16 ? params_inline : malloc(l->nargs * sizeof *params);
  int rc = params ? 0 : CUV_ENOMEM;
  if (rc == 0 && l->kernel->mod->dev != ex->sub->dev)
    rc = CUV_EDEVICE;
  for (size_t i = 0; rc == 0 && i < l->nargs; i++) {
    params[i] = l->storage + l->args[i].offset;
    if (l->args[i].buffer)
      rc = cuv__hold_buffer(ex, l->args[i].buffer, l->args[i].kind);
  }
  if (rc == 0 && (rc = cuv__sub_hold(ex->sub, cuv__kernel_release, l->kernel)) == 0)
    cuv__kernel_ref(l->kernel);
  CUfunction fn = NULL;
  if (rc == 0)
    rc = cuv__kernel_function(l->kernel, &fn);
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuLaunchKernel(fn, l->grid.x, l->grid.y, l->grid.z,
                                         l->block.x, l->block.y, l->block.z, l->shared_bytes,
                                         ex->stream->cu, l->nargs ? params : NULL, NULL));
  if (params != params_inline)
    free(params);
  launch_drop(op);
  return rc;
}

static const cuv__op_vt_t launch_vt = {"launch", launch_execute, launch_drop};

static size_t arg_size(const cuv_arg_t *arg) {
  return arg->kind == CUV_ARG_KIND_SCALAR ? arg->size : sizeof(CUdeviceptr);
}

/* Argument count and sizes against what the driver reports for the kernel. */
static int check_args(const cuv_kernel_t *k, const cuv_arg_t *args, size_t nargs, int device) {
  for (size_t i = 0; i < nargs; i++) {
    const cuv_arg_t *a = &args[i];
    if (a->kind > CUV_ARG_KIND_RW)
      return CUV_EINVAL;
    if (a->kind == CUV_ARG_KIND_SCALAR && (!a->scalar || a->size == 0))
      return CUV_EINVAL;
    if (a->kind != CUV_ARG_KIND_SCALAR) {
      if (!a->buffer)
        return CUV_EINVAL;
      if (a->offset > a->buffer->size)
        return CUV_ERANGE;
      if (a->buffer->dev->ordinal != device)
        return CUV_EDEVICE;
    }
  }
  if (k->nparams < 0)
    return 0;
  if ((size_t)k->nparams != nargs)
    return CUV_EARGS;
  for (size_t i = 0; i < nargs; i++)
    if (k->param_size[i] != arg_size(&args[i]))
      return CUV_EARGS;
  return 0;
}

/* Lays the arguments out in storage, each aligned to its size (at most 8). */
static int pack_args(launch_op_t *l, const cuv_arg_t *args, size_t nargs) {
  size_t total = 0;
  for (size_t i = 0; i < nargs; i++)
    total += arg_size(&args[i]) + 8;
  l->args = calloc(nargs ? nargs : 1, sizeof *l->args);
  l->storage = malloc(total ? total : 1);
  if (!l->args || !l->storage)
    return CUV_ENOMEM;
  size_t at = 0;
  for (size_t i = 0; i < nargs; i++, l->nargs++) {
    at = (at + 7) & ~(size_t)7;
    l->args[i].kind = args[i].kind;
    l->args[i].offset = at;
    if (args[i].kind == CUV_ARG_KIND_SCALAR) {
      memcpy(l->storage + at, args[i].scalar, args[i].size);
    } else {
      CUdeviceptr ptr = args[i].buffer->ptr + args[i].offset;
      memcpy(l->storage + at, &ptr, sizeof ptr);
      l->args[i].buffer = cuv_buffer_ref(args[i].buffer);
    }
    at += arg_size(&args[i]);
  }
  return 0;
}

CUV_EXTERN cuv_op_t *cuv_launch(cuv_kernel_t *kernel, cuv_dim3_t grid, cuv_dim3_t block,
                                unsigned shared_bytes, const cuv_arg_t *args, size_t nargs) {
  if (!kernel || (nargs && !args) || !grid.x || !grid.y || !grid.z || !block.x || !block.y ||
      !block.z)
    return cuv__op_fail(CUV_EINVAL);
  int device = kernel->mod->dev->ordinal;
  int rc = check_args(kernel, args, nargs, device);
  if (rc < 0)
    return cuv__op_fail(rc);
  launch_op_t *l = (launch_op_t *)cuv__op_new(&launch_vt, sizeof *l);
  if (!l)
    return cuv__op_fail(CUV_ENOMEM);
  l->kernel = cuv__kernel_ref(kernel);
  l->grid = grid;
  l->block = block;
  l->shared_bytes = shared_bytes;
  l->op.device = device;
  if (pack_args(l, args, nargs) < 0) {
    cuv_op_free(&l->op);
    return cuv__op_fail(CUV_ENOMEM);
  }
  return &l->op;
}
