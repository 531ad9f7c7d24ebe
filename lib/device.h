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
  /* The default policy, created on first use under the lock and read without it (every
   * submission without a policy reads it). A recovery replaces it but keeps the old one in
   * `retired` until the device goes: a submitter may have read it just before. */
  _Atomic(cuv_policy_t *) policy;
  cuv_policy_t *retired;         /* the default policies of earlier epochs (policy.c) */
  CUevent *free_events;          /* event pool (CU_EVENT_DISABLE_TIMING) */
  size_t n_free_events, cap_free_events;
  cuv__staging_pool_t *staging;  /* pinned host blocks by size class (staging.c) */
  atomic_uint epoch;             /* bumped by each recovery (recover.c) */
  atomic_uint in_flight;         /* submissions on this device not yet finished or leaked */
  atomic_bool faulted;           /* a submission saw a sticky fault since the last recovery */
  atomic_bool auto_recover;
};

/* Whether an object made in device epoch `epoch` is gone (a recovery reset its context). */
static inline bool cuv__stale(cuv_device_t *dev, unsigned epoch) {
  return atomic_load_explicit(&dev->epoch, memory_order_acquire) != epoch;
}
/* recover.c: counts a finished submission; recovers when the device is faulted, idle and set to
 * recover automatically. */
void cuv__device_sub_done(cuv_device_t *dev, bool faulted);

/* policy.c: keeps a replaced default policy until the device goes (under dev->lock), and
 * destroys those kept (when the device goes). */
void cuv__policy_retire(cuv_device_t *dev, cuv_policy_t *p);
void cuv__policy_destroy_retired(cuv_device_t *dev);
/* The device of `ordinal`, opened (one more reference). */
int cuv__device_get(cuv_device_t **dev, int ordinal);
cuv_device_t *cuv__device_ref(cuv_device_t *dev);
void cuv__device_unref(cuv_device_t *dev);
/* Makes dev's context current on this thread if it is not. */
int cuv__bind(cuv_device_t *dev);
/* Events from the device's pool (created on demand) and back. */
int cuv__event_get(cuv_device_t *dev, CUevent *event);
void cuv__event_put(cuv_device_t *dev, CUevent event);



/* staging.c: pinned host blocks (data) with their bookkeeping; given back with _free(block).
 * A public host buffer (host_buffer.c) is one such block. */
typedef struct cuv_host_buffer_s {
  void *data;
  size_t cap;
  size_t size;          /* the size asked for (a host buffer's) */
  unsigned cls;         /* size class; 0 when not pooled */
  unsigned epoch;       /* the device epoch its pinned memory belongs to */
  atomic_uint refs;     /* given back at the last _free (a download's: output and submission) */
  cuv_device_t *dev;
  struct cuv_host_buffer_s *next;
} cuv__staging_t;
cuv__staging_t *cuv__staging_alloc(cuv_device_t *dev, size_t bytes);
cuv__staging_t *cuv__staging_ref(cuv__staging_t *block);
void cuv__staging_free(void *block);
void cuv__staging_pool_destroy(cuv_device_t *dev);
/* host_buffer.c: 0, or why [offset, offset + bytes) of buf cannot be used (CUV_EINVAL for NULL,
 * CUV_ERANGE, CUV_ELOST after a recovery of its device). */
int cuv__host_buffer_check(const cuv_host_buffer_t *buf, size_t offset, size_t bytes);
#endif
