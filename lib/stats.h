#ifndef CUV_LIB_STATS_H
#define CUV_LIB_STATS_H

/* Process-wide counters behind cuv_stats(); relaxed atomics, they are for observation only.
 * The list must name the fields of cuv_stats_t. */
#define CUV__STATS_FIELDS(X)                                                                       \
  X(submitted)                                                                                     \
  X(completed)                                                                                     \
  X(completed_spin) X(completed_reactor) X(completed_polled) X(completed_hostfn) X(completed_sync) \
      X(completed_event) X(fallbacks) X(faults) X(waits_inserted) X(leaked) X(in_flight)           \
          X(reactor_waiting) X(reactor_wakeups) X(engine_inline) X(engine_queued) X(engine_helped)

typedef struct cuv__stats {
#define CUV__STAT_MEMBER(name) atomic_uint_fast64_t name;
  CUV__STATS_FIELDS(CUV__STAT_MEMBER)
#undef CUV__STAT_MEMBER
} cuv__stats_t;

extern cuv__stats_t cuv__stats;

#define CUV__STAT_ADD(name, n)                                                                     \
  atomic_fetch_add_explicit(&cuv__stats.name, (n), memory_order_relaxed)
#define CUV__STAT_SUB(name, n)                                                                     \
  atomic_fetch_sub_explicit(&cuv__stats.name, (n), memory_order_relaxed)

#endif
