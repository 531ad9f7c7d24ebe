#ifndef CUV_LIB_DEVICE_H
#define CUV_LIB_DEVICE_H

/* A device: its primary context, retained while the device is open, and what cuv keeps per
 * device (default policy, event pool, pinned staging pool). One object per ordinal. */

#define CUV__MAX_DEVICES 64

typedef struct cuv__staging_pool cuv__staging_pool_t;

struct cuv_device_s {
  int ordinal;
  CUdevice cu;
  CUcontext ctx;
  atomic_int refs;
  char name[256];
  pthread_mutex_t lock;          /* guards policy creation and the pools */
  cuv_policy_t *policy;          /* default policy, created on first use */
  CUevent *free_events;          /* event pool (CU_EVENT_DISABLE_TIMING) */
  size_t n_free_events, cap_free_events;
  cuv__staging_pool_t *staging;  /* pinned host blocks by size class (staging.c) */
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



/* staging.c: pinned host blocks; the pointer returned is the data, given back with _free. */
void *cuv__staging_alloc(cuv_device_t *dev, size_t bytes);
void cuv__staging_free(void *data);
void cuv__staging_pool_destroy(cuv_device_t *dev);
#endif
