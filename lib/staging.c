/* Pinned host staging blocks, pooled per device by power-of-two size class. Pinned memory is what
 * lets an async copy stay async (a pageable source makes the driver synchronize first), and
 * cuMemHostAlloc is far too slow to call per copy. A block's bookkeeping lives in ordinary memory
 * beside the pinned data. */
#include <string.h>

#include "internal.h"
#include "staging.h"

#define MIN_CLASS 8   /* 256 bytes */
#define MAX_CLASS 26  /* 64 MiB; larger blocks are not pooled */
#define KEEP_PER_CLASS 256 /* a server keeps hundreds of requests in flight */

struct cuv__staging_pool {
  cuv__staging_t *free[MAX_CLASS + 1];
  unsigned n_free[MAX_CLASS + 1];
};

static unsigned size_class(size_t bytes) {
  unsigned cls = MIN_CLASS;
  while (cls <= MAX_CLASS && ((size_t)1 << cls) < bytes)
    cls++;
  return cls <= MAX_CLASS ? cls : 0;
}

static cuv__staging_t *pool_take(cuv_device_t *dev, unsigned cls) {
  cuv__staging_t *blk = NULL;
  pthread_mutex_lock(&dev->lock);
  if (dev->staging && dev->staging->free[cls]) {
    blk = dev->staging->free[cls];
    dev->staging->free[cls] = blk->next;
    dev->staging->n_free[cls]--;
  }
  pthread_mutex_unlock(&dev->lock);
  return blk;
}

static cuv__staging_t *block_new(cuv_device_t *dev, size_t bytes, unsigned cls) {
  cuv__staging_t *blk = calloc(1, sizeof *blk);
  if (!blk)
    return NULL;
  blk->cap = cls ? (size_t)1 << cls : bytes;
  blk->cls = cls;
  if (cuv__bind(dev) < 0 ||
      cuv__drv.cuMemHostAlloc(&blk->data, blk->cap, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) {
    free(blk);
    return NULL;
  }
  return blk;
}

static void block_destroy(cuv__staging_t *blk) {
  cuv__drv.cuMemFreeHost(blk->data);
  free(blk);
}

cuv__staging_t *cuv__staging_alloc(cuv_device_t *dev, size_t bytes) {
  unsigned cls = size_class(bytes);
  cuv__staging_t *blk = cls ? pool_take(dev, cls) : NULL;
  if (!blk && !(blk = block_new(dev, bytes, cls)))
    return NULL;
  blk->dev = cuv__device_ref(dev);
  blk->size = bytes;
  blk->next = NULL;
  atomic_init(&blk->refs, 1);
  return blk;
}

cuv__staging_t *cuv__staging_ref(cuv__staging_t *blk) {
  atomic_fetch_add(&blk->refs, 1);
  return blk;
}

static bool pool_give(cuv_device_t *dev, cuv__staging_t *blk) {
  bool kept = false;
  pthread_mutex_lock(&dev->lock);
  if (!dev->staging)
    dev->staging = calloc(1, sizeof *dev->staging);
  if (dev->staging && blk->cls && dev->staging->n_free[blk->cls] < KEEP_PER_CLASS) {
    blk->next = dev->staging->free[blk->cls];
    dev->staging->free[blk->cls] = blk;
    dev->staging->n_free[blk->cls]++;
    kept = true;
  }
  pthread_mutex_unlock(&dev->lock);
  return kept;
}

void cuv__staging_free(void *arg) {
  cuv__staging_t *blk = arg;
  if (!blk || atomic_fetch_sub(&blk->refs, 1) != 1)
    return;
  cuv_device_t *dev = blk->dev;
  if (!pool_give(dev, blk))
    block_destroy(blk);
  cuv__device_unref(dev);
}

/* Drops the pool, at device destruction. */
void cuv__staging_pool_destroy(cuv_device_t *dev) {
  pthread_mutex_lock(&dev->lock);
  cuv__staging_pool_t *pool = dev->staging;
  dev->staging = NULL;
  pthread_mutex_unlock(&dev->lock);
  if (!pool)
    return;
  for (unsigned cls = 0; cls <= MAX_CLASS; cls++) {
    while (pool->free[cls]) {
      cuv__staging_t *blk = pool->free[cls];
      pool->free[cls] = blk->next;
      block_destroy(blk);
    }
  }
  free(pool);
}
