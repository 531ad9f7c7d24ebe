/* Launches over tensors and partitions: unique storage checked element by element, then
 * cuv_launch with each tensor as its first element's address and the bytes it spans. cuv_launch's
 * own byte-range check would refuse disjoint tiles whose rows interleave, so the writable ranges
 * handed to it are marked CUV_ARG_FLAG_MAY_ALIAS once this file has checked them exactly. */
#include <string.h>

#include "internal.h"
#include "tensor.h"

/* Arguments kept on the stack up to this many; more are allocated. */
enum { LOCAL_ARGS = 16 };

static const cuv_tensor_t *targ_tensor(const cuv_targ_t *a) {
  if (a->kind == CUV_TARG_TENSOR)
    return a->tensor;
  return a->partition ? a->partition->tensor : NULL;
}

static bool writable(enum cuv_arg_kind access) {
  return access == CUV_ARG_KIND_WRITE || access == CUV_ARG_KIND_RW;
}

static int targ_check(const cuv_targ_t *a) {
  if (a->kind == CUV_TARG_SCALAR)
    return a->scalar && a->size > 0 ? 0 : CUV_EINVAL;
  if (a->kind != CUV_TARG_TENSOR && a->kind != CUV_TARG_PARTITION)
    return CUV_EINVAL;
  if (a->access != CUV_ARG_KIND_READ && !writable(a->access))
    return CUV_EINVAL;
  const cuv_tensor_t *t = targ_tensor(a);
  if (!t)
    return CUV_EINVAL;
  return writable(a->access) && !t->injective ? CUV_EARGS : 0;
}

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
  return a->offset < b->offset + cuv__tensor_span(b) && b->offset < a->offset + cuv__tensor_span(a);
}

static int check_args(const cuv_targ_t *args, size_t nargs) {
  for (size_t i = 0; i < nargs; i++) {
    int rc = targ_check(&args[i]);
    if (rc != 0)
      return rc;
  }
  for (size_t i = 0; i < nargs; i++)
    for (size_t j = i + 1; j < nargs && writable(args[i].access); j++)
      if (writable(args[j].access) && args[j].kind != CUV_TARG_SCALAR &&
          share_elements(targ_tensor(&args[i]), targ_tensor(&args[j])))
        return CUV_EARGS;
  return 0;
}

static cuv_arg_t lower(const cuv_targ_t *a) {
  if (a->kind == CUV_TARG_SCALAR)
    return CUV_ARG_SCALAR(a->scalar, a->size);
  const cuv_tensor_t *t = targ_tensor(a);
  cuv_arg_t arg = {a->access, t->buf, t->offset, NULL, 0, cuv__tensor_span(t), 0, NULL};
  if (writable(a->access))
    arg.flags = CUV_ARG_FLAG_MAY_ALIAS;
  return arg;
}

CUV_EXTERN cuv_op_t *cuv_tensor_launch(cuv_kernel_t *kernel, cuv_launch_config_t config,
                                       const cuv_targ_t *args, size_t nargs) {
  if (!kernel || (!args && nargs > 0))
    return cuv_fail(CUV_EINVAL);
  int rc = check_args(args, nargs);
  if (rc != 0)
    return cuv_fail(rc);
  cuv_arg_t local[LOCAL_ARGS], *lowered = local;
  if (nargs > LOCAL_ARGS && !(lowered = malloc(nargs * sizeof *lowered)))
    return cuv_fail(CUV_ENOMEM);
  for (size_t i = 0; i < nargs; i++)
    lowered[i] = lower(&args[i]);
  cuv_op_t *op = cuv_launch(kernel, config.grid, config.block, config.shared_bytes,
                            nargs > 0 ? lowered : NULL, nargs);
  if (lowered != local)
    free(lowered);
  return op;
}
