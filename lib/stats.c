#include "internal.h"

cuv__stats_t cuv__stats;

CUV_EXTERN void cuv_stats(cuv_stats_t *out) {
  if (!out)
    return;
#define CUV__STAT_LOAD(name)                                                                       \
  out->name = atomic_load_explicit(&cuv__stats.name, memory_order_relaxed);
  CUV__STATS_FIELDS(CUV__STAT_LOAD)
#undef CUV__STAT_LOAD
}
