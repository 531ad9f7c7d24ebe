/* Devices. Each ordinal has one object, alive while opened by the application or referenced by a
 * cuv object (stream, buffer, module). Its primary context is retained for that whole time, so
 * any thread can bind it and work submitted from anywhere lands in the same context. */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "staging.h"

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static cuv_device_t *devices[CUV__MAX_DEVICES];

CUV_EXTERN int cuv_device_count(int *count) {
  if (!count)
    return CUV_EINVAL;
  int rc = cuv__driver_init();
  if (rc < 0)
    return rc;
  return cuv__cu(cuv__drv.cuDeviceGetCount(count));
}

static int device_create(cuv_device_t **out, int ordinal) {
  cuv_device_t *dev = cuv__lines_zalloc(sizeof *dev);
  if (!dev)
    return CUV_ENOMEM;
  dev->ordinal = ordinal;
  int rc = cuv__cu(cuv__drv.cuDeviceGet(&dev->cu, ordinal));
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuDeviceGetName(dev->name, sizeof dev->name, dev->cu));
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuDevicePrimaryCtxRetain(&dev->ctx, dev->cu));
  if (rc < 0) {
    free(dev);
    return rc;
  }
  pthread_mutex_init(&dev->lock, NULL);
  atomic_init(&dev->refs, 1);
  *out = dev;
  return 0;
}

/* An open device, with one more reference; NULL when the ordinal has none open. Every executor
 * without a policy comes through here (for the device's default policy): an open device needs
 * no driver call to count devices again. */
static cuv_device_t *device_find(int ordinal) {
  if (ordinal < 0 || ordinal >= CUV__MAX_DEVICES)
    return NULL;
  pthread_mutex_lock(&devices_lock);
  cuv_device_t *dev = devices[ordinal];
  if (dev)
    atomic_fetch_add(&dev->refs, 1);
  pthread_mutex_unlock(&devices_lock);
  return dev;
}

int cuv__device_get(cuv_device_t **out, int ordinal) {
  int rc = cuv__driver_init();
  if (rc < 0)
    return rc;
  cuv_device_t *open = device_find(ordinal);
  if (open) {
    *out = open;
    return 0;
  }
  int count = 0;
  rc = cuv__cu(cuv__drv.cuDeviceGetCount(&count));
  if (rc < 0)
    return rc;
  if (ordinal < 0 || ordinal >= count || ordinal >= CUV__MAX_DEVICES)
    return CUV_ENODEV;
  pthread_mutex_lock(&devices_lock);
  cuv_device_t *dev = devices[ordinal];
  if (dev)
    atomic_fetch_add(&dev->refs, 1);
  else if ((rc = device_create(&dev, ordinal)) == 0)
    devices[ordinal] = dev;
  pthread_mutex_unlock(&devices_lock);
  if (rc == 0)
    *out = dev;
  return rc;
}

static void device_destroy(cuv_device_t *dev) {
  /* The default policy's streams do not reference the device (that would be a cycle), so it
   * is torn down here, when the last real reference is gone. */
  cuv_policy_destroy(atomic_load(&dev->policy));
  cuv__bind(dev);
  for (size_t i = 0; i < dev->n_free_events; i++)
    cuv__drv.cuEventDestroy(dev->free_events[i]);
  free(dev->free_events);
  cuv__staging_pool_destroy(dev);
  cuv__drv.cuDevicePrimaryCtxRelease(dev->cu);
  pthread_mutex_destroy(&dev->lock);
  free(dev);
}

/* What may be the last reference, under the global lock; out of line, so the common drop saves
 * no registers for it. */
void cuv__device_unref_last(cuv_device_t *dev) {
  pthread_mutex_lock(&devices_lock);
  bool last = atomic_fetch_sub(&dev->refs, 1) == 1;
  if (last)
    devices[dev->ordinal] = NULL;
  pthread_mutex_unlock(&devices_lock);
  if (last)
    device_destroy(dev);
}

CUV_EXTERN int cuv_device_open(cuv_device_t **dev, int ordinal) {
  if (!dev)
    return CUV_EINVAL;
  return cuv__device_get(dev, ordinal);
}

CUV_EXTERN cuv_device_t *cuv_device_ref(cuv_device_t *dev) {
  return dev ? cuv__device_ref(dev) : NULL;
}

CUV_EXTERN void cuv_device_unref(cuv_device_t *dev) { cuv__device_unref(dev); }

CUV_EXTERN int cuv_device_ordinal(const cuv_device_t *dev) {
  return dev ? dev->ordinal : CUV_EINVAL;
}

CUV_EXTERN const char *cuv_device_name(const cuv_device_t *dev) { return dev ? dev->name : NULL; }

CUV_EXTERN struct CUctx_st *cuv_device_context(const cuv_device_t *dev) {
  return dev ? dev->ctx : NULL;
}

CUV_EXTERN int cuv_device_attribute(const cuv_device_t *dev, int attribute, int *value) {
  if (!dev || !value)
    return CUV_EINVAL;
  return cuv__cu(cuv__drv.cuDeviceGetAttribute(value, (CUdevice_attribute)attribute, dev->cu));
}

int cuv__bind(cuv_device_t *dev) {
  CUcontext current = NULL;
  if (cuv__drv.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == dev->ctx)
    return 0;
  return cuv__cu(cuv__drv.cuCtxSetCurrent(dev->ctx));
}

CUV_EXTERN int cuv_device_bind(cuv_device_t *dev) { return dev ? cuv__bind(dev) : CUV_EINVAL; }

int cuv__event_get(cuv_device_t *dev, CUevent *event) {
  pthread_mutex_lock(&dev->lock);
  bool pooled = dev->n_free_events > 0;
  if (pooled)
    *event = dev->free_events[--dev->n_free_events];
  pthread_mutex_unlock(&dev->lock);
  if (pooled)
    return 0;
  int rc = cuv__bind(dev);
  return rc < 0 ? rc : cuv__cu(cuv__drv.cuEventCreate(event, CU_EVENT_DISABLE_TIMING));
}

void cuv__event_put(cuv_device_t *dev, CUevent event) {
  pthread_mutex_lock(&dev->lock);
  if (dev->n_free_events == dev->cap_free_events) {
    size_t cap = dev->cap_free_events ? dev->cap_free_events * 2 : 16;
    CUevent *grown = realloc(dev->free_events, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&dev->lock);
      cuv__drv.cuEventDestroy(event);
      return;
    }
    dev->free_events = grown;
    dev->cap_free_events = cap;
  }
  dev->free_events[dev->n_free_events++] = event;
  pthread_mutex_unlock(&dev->lock);
}
