#ifndef CUV_LIB_DEVICE_H
#define CUV_LIB_DEVICE_H

/* A device: its primary context, retained while the device is open, and what cuv keeps per
 * device (default policy, event pool, pinned staging pool). One object per ordinal. */

#define CUV__MAX_DEVICES 64

typedef struct cuv__staging_pool cuv__staging_pool_t; /* staging.c */

struct cuv_device_s {
  int ordinal;
  CUdevice cu;
  CUcontext ctx;
  char name[256];
  pthread_mutex_t lock;          /* guards policy creation and the pools */
  /* The default policy, created on first use under the lock and read without it (every
   * submission without a policy reads it); destroyed with the device. */
  _Atomic(cuv_policy_t *) policy;
  CUevent *free_events;          /* event pool (CU_EVENT_DISABLE_TIMING) */
  size_t n_free_events, cap_free_events;
  cuv__staging_pool_t *staging;  /* pinned host blocks by size class (staging.c) */
  CUV__OWN_LINE atomic_int refs; /* one more and one less per submission (lines.h) */
};

/* The device of `ordinal`, opened (one more reference). */
int cuv__device_get(cuv_device_t **dev, int ordinal);
/* A reference more and less. Inline, as the stream's and the kernel's: each runs once or twice per
 * submission, and a call of another file costs more than the atomic itself (bench/RESULTS.md,
 * cuv-bench-submit). */
static inline cuv_device_t *cuv__device_ref(cuv_device_t *dev) {
  atomic_fetch_add(&dev->refs, 1);
  return dev;
}
/* The drop of what may be the last reference, which takes the devices' lock (device.c). */
void cuv__device_unref_last(cuv_device_t *dev);
/* Not the last reference: dropped without the global lock (every submission's retirement comes
 * here). Only the drop to zero, which must not race a cuv__device_get finding the device in the
 * table, takes it. */
static inline void cuv__device_unref(cuv_device_t *dev) {
  if (!dev)
    return;
  int refs = atomic_load(&dev->refs);
  while (refs > 1)
    if (atomic_compare_exchange_weak(&dev->refs, &refs, refs - 1))
      return;
  cuv__device_unref_last(dev);
}
/* Makes dev's context current on this thread if it is not. */
int cuv__bind(cuv_device_t *dev);
/* Events from the device's pool (created on demand) and back. */
int cuv__event_get(cuv_device_t *dev, CUevent *event);
void cuv__event_put(cuv_device_t *dev, CUevent event);
#endif
