/* Device recovery after a sticky fault. A fault kills the context: every submission on it
 * resolves with the error (completion.c, reactor.c) and its resources are leaked on purpose. Once
 * nothing is in flight on the device, recovery resets the primary context and starts a new epoch:
 * what cuv owns there is rebuilt (the default policy's streams, lazily; the event and staging
 * pools; the reactor's flags; modules, reloaded from their images on first use), and objects of
 * the old epoch (buffers, streams, graphs) report CUV_ELOST when used. */
#include "internal.h"
#include "reactor.h"

/* Drops what the device pools hold from the dead context, without driver calls on it. The
 * default policy is retired, not destroyed: a submitter may have just read it (its streams are
 * of the old epoch, so that submission fails with CUV_ELOST). */
static void drop_owned(cuv_device_t *dev) {
  pthread_mutex_lock(&dev->lock);
  cuv__policy_retire(dev, atomic_exchange(&dev->policy, NULL));
  dev->n_free_events = 0; /* their handles died with the context */
  pthread_mutex_unlock(&dev->lock);
}

/* *reset: whether the old context is gone (also when a later step failed). */
static int reset_context(cuv_device_t *dev, bool *reset) {
  int rc = cuv__cu(cuv__drv.cuDevicePrimaryCtxReset(dev->cu));
  *reset = rc == 0;
  CUcontext ctx = NULL;
  /* The primary context comes back on next use; take its (possibly new) handle. */
  if (rc == 0 && (rc = cuv__cu(cuv__drv.cuDevicePrimaryCtxRetain(&ctx, dev->cu))) == 0) {
    cuv__drv.cuDevicePrimaryCtxRelease(dev->cu); /* we keep the retain taken at open */
    dev->ctx = ctx;
    rc = cuv__cu(cuv__drv.cuCtxSetCurrent(ctx));
  }
  return rc;
}

CUV_EXTERN int cuv_device_recover(cuv_device_t *dev) {
  if (!dev)
    return CUV_EINVAL;
  if (atomic_load(&dev->in_flight) != 0)
    return CUV_EBUSY; /* wait for nothing: retry once the faulted work was delivered */
  if (cuv__reactor_flags_busy(dev->ctx))
    return CUV_EBUSY; /* other devices' work writes flags that live in this context */
  CUcontext old = dev->ctx;
  /* A new epoch first: from here on, objects of the old one skip driver calls on release. */
  atomic_fetch_add_explicit(&dev->epoch, 1, memory_order_release);
  drop_owned(dev);
  cuv__staging_pool_destroy(dev);
  bool reset;
  int rc = reset_context(dev, &reset);
  /* The reactor's flags went with the old context even if taking the new one failed: without
   * a rebuild the reactor would go on writing and scanning freed memory. */
  int rebuilt = reset ? cuv__reactor_rebuild(old) : 0;
  if (rc == 0)
    rc = rebuilt;
  if (rc == 0) {
    atomic_store(&dev->faulted, false);
    CUV__STAT_ADD(recoveries, 1);
  }
  return rc;
}

CUV_EXTERN int cuv_device_set_auto_recover(cuv_device_t *dev, int enable) {
  if (!dev)
    return CUV_EINVAL;
  atomic_store(&dev->auto_recover, enable != 0);
  return 0;
}

CUV_EXTERN unsigned cuv_device_epoch(const cuv_device_t *dev) {
  return dev ? atomic_load(&((cuv_device_t *)dev)->epoch) : 0;
}

void cuv__device_sub_done(cuv_device_t *dev, bool faulted) {
  if (faulted)
    atomic_store(&dev->faulted, true);
  if (atomic_fetch_sub(&dev->in_flight, 1) == 1 && atomic_load(&dev->auto_recover) &&
      atomic_load(&dev->faulted))
    cuv_device_recover(dev); /* on the thread that finished the last submission */
}
