/* Partitions: a tensor split into tiles of one shape, and the launch configuration that gives
 * each tile a block and each tile element a thread, computed once when the partition is made so
 * that a launch only copies it. */
#include <limits.h>
#include <string.h>

#include "internal.h"
#include "tensor.h"

/* counts as x (the last), y (the one before) and z (the product of the others); false when one
 * does not fit an unsigned. */
static bool fold_dims(const size_t *counts, size_t ndim, cuv_dim3_t *dim) {
  size_t x = counts[ndim - 1], y = ndim > 1 ? counts[ndim - 2] : 1, z = 1;
  for (size_t i = 0; i + 2 < ndim; i++)
    if (__builtin_mul_overflow(z, counts[i], &z))
      return false;
  if (x > UINT_MAX || y > UINT_MAX || z > UINT_MAX)
    return false;
  *dim = CUV_DIM3((unsigned)x, (unsigned)y, (unsigned)z);
  return true;
}

static cuv_launch_config_t tile_config(const cuv_partition_t *part, size_t ndim) {
  cuv_launch_config_t folded = {{0, 0, 0}, {0, 0, 0}, 0}, none = folded;
  if (fold_dims(part->tiles, ndim, &folded.grid) && fold_dims(part->tile, ndim, &folded.block))
    return folded;
  return none;
}

CUV_EXTERN int cuv_tensor_partition(cuv_partition_t *out, cuv_tensor_t *t, const size_t *tile,
                                    size_t ndim) {
  if (!out || !t || !tile || ndim != t->ndim)
    return CUV_EINVAL;
  for (size_t i = 0; i < ndim; i++)
    if (tile[i] == 0 || t->shape[i] % tile[i] != 0)
      return CUV_EINVAL;
  memset(out, 0, sizeof *out);
  out->tensor = cuv_tensor_ref(t);
  for (size_t i = 0; i < ndim; i++) {
    out->tile[i] = tile[i];
    out->tiles[i] = t->shape[i] / tile[i];
  }
  out->config = tile_config(out, ndim);
  return 0;
}

CUV_EXTERN void cuv_partition_release(cuv_partition_t *part) {
  if (!part)
    return;
  cuv_tensor_unref(part->tensor);
  memset(part, 0, sizeof *part);
}

CUV_EXTERN cuv_launch_config_t cuv_partition_launch_config(const cuv_partition_t *part) {
  cuv_launch_config_t none = {{0, 0, 0}, {0, 0, 0}, 0};
  return part && part->tensor ? part->config : none;
}
