/* Kernel arguments: what cuv_launch checks before it builds a launch (kinds, scalars, flags,
 * buffer ranges and devices, the kernel's parameter count and sizes), and the unique storage of
 * writable arguments, checked again once op arguments gave their buffers. Two writable arguments
 * of one launch may not name overlapping bytes of one buffer unless one says it may alias; a read
 * may overlap a write, as an in-place kernel's input and output do. */
#include "internal.h"
#include "args.h"

#define KNOWN_FLAGS CUV_ARG_FLAG_MAY_ALIAS

size_t cuv__arg_size(const cuv_arg_t *arg) {
  return arg->kind == CUV_ARG_KIND_SCALAR ? arg->size : sizeof(CUdeviceptr);
}

static int check_scalar(const cuv_arg_t *a) {
  if (!a->scalar || a->size == 0 || a->length || a->flags || a->op)
    return CUV_EINVAL;
  return 0;
}

/* A buffer argument names a buffer or an op whose output is one (checked when it ran). */
static int check_buffer(const cuv_arg_t *a, int device) {
  if (!a->buffer == !a->op || a->flags & ~(unsigned)KNOWN_FLAGS)
    return CUV_EINVAL;
  if (a->op)
    return cuv__op_join_device(&device, a->op->device);
  if (a->offset > a->buffer->size || a->length > a->buffer->size - a->offset)
    return CUV_ERANGE;
  if (a->buffer->dev->ordinal != device)
    return CUV_EDEVICE;
  return 0;
}

/* Count and sizes against what the driver reports for the kernel (nothing when it cannot tell). */
static int check_params(const cuv_kernel_t *k, const cuv_arg_t *args, size_t nargs) {
  if (k->nparams < 0)
    return 0;
  if ((size_t)k->nparams != nargs)
    return CUV_EARGS;
  for (size_t i = 0; i < nargs; i++)
    if (k->param_size[i] != cuv__arg_size(&args[i]))
      return CUV_EARGS;
  return 0;
}

int cuv__args_check(const cuv_kernel_t *k, const cuv_arg_t *args, size_t nargs) {
  int device = k->mod->dev->ordinal;
  for (size_t i = 0; i < nargs; i++) {
    const cuv_arg_t *a = &args[i];
    int rc = a->kind > CUV_ARG_KIND_RW        ? CUV_EINVAL
             : a->kind == CUV_ARG_KIND_SCALAR ? check_scalar(a)
                                              : check_buffer(a, device);
    if (rc < 0)
      return rc;
  }
  return check_params(k, args, nargs);
}

/* The end of an argument's bytes in its buffer. */
static size_t range_end(const cuv__karg_t *a) {
  return a->length ? a->offset + a->length : a->buffer->size;
}

static bool may_conflict(const cuv__karg_t *a) {
  return a->buffer && a->kind != CUV_ARG_KIND_READ && !(a->flags & CUV_ARG_FLAG_MAY_ALIAS);
}

/* Launches have a handful of arguments: comparing every pair costs less than sorting them. */
int cuv__kargs_unique(const cuv__karg_t *args, size_t nargs) {
  for (size_t i = 0; i < nargs; i++) {
    if (!may_conflict(&args[i]))
      continue;
    for (size_t j = i + 1; j < nargs; j++) {
      const cuv__karg_t *a = &args[i], *b = &args[j];
      if (may_conflict(b) && a->buffer == b->buffer && a->offset < range_end(b) &&
          b->offset < range_end(a))
        return CUV_EARGS;
    }
  }
  return 0;
}
