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
cuv_device_t *cuv__device_ref(cuv_device_t *dev);
void cuv__device_unref(cuv_device_t *dev);
/* Makes dev's context current on this thread if it is not. */
int cuv__bind(cuv_device_t *dev);
/* Events from the device's pool (created on demand) and back. */
int cuv__event_get(cuv_device_t *dev, CUevent *event);
void cuv__event_put(cuv_device_t *dev, CUevent event);
#endif
