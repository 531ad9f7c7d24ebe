/* Words a stream waits on until the host sets them (a communicator's creation: lib/comm.c).
 * Pinned, device-mapped and portable, so any context's stream may wait on any word; cut from
 * chunks that are never freed, for two reasons: cuMemFreeHost waits for the whole device, whose
 * streams may be waiting on a word the freeing thread itself is to set, and a chunk lives in the
 * context it was made in, which the pool therefore holds for the life of the process (as the
 * reactor's words do: lib/reactor.c). */
#include <string.h>

#include "internal.h"
#include "wait_word.h"

#define CHUNK_WORDS 1024u

static struct {
  pthread_mutex_t lock;
  cuv__wait_word_t *free; /* given back, and the rest of the last chunk */
  size_t nfree, cap;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Another chunk's words on the free list. The caller holds P.lock. */
static int grow(cuv_device_t *dev) {
  cuv__wait_word_t *grown = realloc(P.free, (P.cap + CHUNK_WORDS) * sizeof *grown);
  if (!grown)
    return CUV_ENOMEM;
  P.free = grown;
  P.cap += CHUNK_WORDS;
  void *host = NULL;
  CUdeviceptr base = 0;
  CUcontext ctx;
  int rc = cuv__bind(dev);
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuMemHostAlloc(&host, CHUNK_WORDS * sizeof(uint32_t),
                                         CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  if (rc == 0 && (rc = cuv__cu(cuv__drv.cuMemHostGetDevicePointer(&base, host, 0))) == 0)
    rc = cuv__cu(cuv__drv.cuDevicePrimaryCtxRetain(&ctx, dev->cu));
  if (rc < 0) {
    if (host)
      cuv__drv.cuMemFreeHost(host); /* nothing waits on it yet */
    return rc;
  }
  for (uint32_t i = 0; i < CHUNK_WORDS; i++)
    P.free[P.nfree++] = (cuv__wait_word_t){(uint32_t *)host + i, base + i * sizeof(uint32_t)};
  return 0;
}

int cuv__wait_word_get(cuv_device_t *dev, cuv__wait_word_t *word) {
  pthread_mutex_lock(&P.lock);
  int rc = P.nfree ? 0 : grow(dev);
  if (rc == 0)
    *word = P.free[--P.nfree];
  pthread_mutex_unlock(&P.lock);
  if (rc == 0)
    __atomic_store_n(word->host, 0u, __ATOMIC_RELEASE);
  return rc;
}

void cuv__wait_word_put(const cuv__wait_word_t *word) {
  pthread_mutex_lock(&P.lock);
  P.free[P.nfree++] = *word; /* room: every word handed out has its place */
  pthread_mutex_unlock(&P.lock);
}
