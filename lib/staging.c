/* Pinned host staging blocks, pooled per device by power-of-two size class. Pinned memory is what
 * lets an async copy stay async (a pageable source makes the driver synchronize first), and
 * cuMemHostAlloc is far too slow to call per copy. Each block carries a header in front of its
 * data, so a data pointer alone is enough to give it back. */
#include <string.h>

#include "internal.h"

#define MIN_CLASS 8   /* 256 bytes */
#define MAX_CLASS 26  /* 64 MiB; larger blocks are not pooled */
#define KEEP_PER_CLASS 32
#define HEADER 64     /* keeps the data 64-byte aligned */

typedef struct block {
  cuv_device_t *dev;
  struct block *next;
  size_t cap;
  unsigned cls; /* 0 when not pooled */
} block_t;

struct cuv__staging_pool {
  block_t *free[MAX_CLASS + 1];
  unsigned n_free[MAX_CLASS + 1];
};

static unsigned size_class(size_t bytes) {
  unsigned cls = MIN_CLASS;
  while (cls <= MAX_CLASS && ((size_t)1 << cls) < bytes)
    cls++;
  return cls <= MAX_CLASS ? cls : 0;
}

static block_t *pool_take(cuv_device_t *dev, unsigned cls) {
  block_t *blk = NULL;
  pthread_mutex_lock(&dev->lock);
  if (dev->staging && dev->staging->free[cls]) {
    blk = dev->staging->free[cls];
    dev->staging->free[cls] = blk->next;
    dev->staging->n_free[cls]--;
  }
  pthread_mutex_unlock(&dev->lock);
  return blk;
}

void *cuv__staging_alloc(cuv_device_t *dev, size_t bytes) {
  unsigned cls = size_class(bytes);
  block_t *blk = cls ? pool_take(dev, cls) : NULL;
  if (!blk) {
    size_t cap = cls ? (size_t)1 << cls : bytes;
    void *mem = NULL;
    if (cuv__bind(dev) < 0 ||
        cuv__drv.cuMemHostAlloc(&mem, cap + HEADER, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
      return NULL;
    blk = mem;
    blk->cap = cap;
    blk->cls = cls;
  }
  blk->dev = cuv__device_ref(dev);
  blk->next = NULL;
  return (char *)blk + HEADER;
}

static bool pool_give(cuv_device_t *dev, block_t *blk) {
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

void cuv__staging_free(void *data) {
  if (!data)
    return;
  block_t *blk = (block_t *)((char *)data - HEADER);
  cuv_device_t *dev = blk->dev;
  if (!pool_give(dev, blk))
    cuv__drv.cuMemFreeHost(blk);
  cuv__device_unref(dev);
}

void cuv__staging_pool_destroy(cuv_device_t *dev) {
  if (!dev->staging)
    return;
  for (unsigned cls = 0; cls <= MAX_CLASS; cls++) {
    while (dev->staging->free[cls]) {
      block_t *blk = dev->staging->free[cls];
      dev->staging->free[cls] = blk->next;
      cuv__drv.cuMemFreeHost(blk);
    }
  }
  free(dev->staging);
  dev->staging = NULL;
}
