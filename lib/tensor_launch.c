/* Launches over tensors and partitions: unique storage checked element by element, then
 * cuv_launch with each tensor as its first element's address and the bytes it spans. cuv_launch's
 * own byte-range check would refuse disjoint tiles whose rows interleave, so the writable ranges
 * handed to it are marked CUV_ARG_FLAG_MAY_ALIAS once this file has checked them exactly. One
 * pass checks and lowers the arguments and collects the writable tensors; only those are compared
 * pairwise (bench/RESULTS.md: the layer's cost per launch). */
#include <string.h>

#include "internal.h"
#include "tensor.h"

/* Arguments kept on the stack up to this many; more are allocated. */
enum { LOCAL_ARGS = 16 };

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

static int check_writers(const cuv_tensor_t *const *writers, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (share_elements(writers[i], writers[j]))
        return CUV_EARGS;
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
  if (!t || a->access == CUV_ARG_KIND_SCALAR)
    return CUV_EINVAL;
  unsigned flags = 0;
  if (a->access == CUV_ARG_KIND_WRITE || a->access == CUV_ARG_KIND_RW) {
    if (!t->injective)
      return CUV_EARGS;
    writers[(*nwriters)++] = t;
    flags = CUV_ARG_FLAG_MAY_ALIAS;
  }
  *out = (cuv_arg_t){a->access, t->buf, t->offset, NULL, 0, t->span, flags, NULL};
  return 0;
}

CUV_EXTERN cuv_op_t *cuv_tensor_launch(cuv_kernel_t *kernel, cuv_launch_config_t config,
                                       const cuv_targ_t *args, size_t nargs) {
  if (!kernel || (!args && nargs > 0))
    return cuv_fail(CUV_EINVAL);
  cuv_arg_t local[LOCAL_ARGS], *lowered = local;
  const cuv_tensor_t *local_writers[LOCAL_ARGS], **writers = local_writers;
  if (nargs > LOCAL_ARGS) {
    lowered = malloc(nargs * (sizeof *lowered + sizeof *writers));
    if (!lowered)
      return cuv_fail(CUV_ENOMEM);
    writers = (const cuv_tensor_t **)(lowered + nargs);
  }
  size_t nwriters = 0;
  int rc = 0;
  for (size_t i = 0; i < nargs && rc == 0; i++)
    rc = lower(&args[i], &lowered[i], writers, &nwriters);
  if (rc == 0)
    rc = check_writers(writers, nwriters);
  cuv_op_t *op = rc == 0 ? cuv_launch(kernel, config.grid, config.block, config.shared_bytes,
                                      nargs > 0 ? lowered : NULL, nargs)
                         : cuv_fail(rc);
  if (lowered != local)
    free(lowered);
  return op;
}
