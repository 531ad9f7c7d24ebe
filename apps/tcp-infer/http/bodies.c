/* tcp-infer: request bodies, from free lists of their loop by size class (loop thread).
 *
 * Bodies of up to BODY_CACHE_MAX bytes are allocated in size classes of 256 << k bytes and go back
 * to a free list of their loop: glibc serves blocks over 1 KiB (8 rows and more) from its bins,
 * not its per-thread cache, which cost the loop about 1,500 instructions per request's body
 * (bench/tcp-infer-callgrind.sh). conn.c frees a request's body here (request_free), never earlier
 * on the GPU path, so that it comes back; kserve.c swaps a request's HTTP body for its rows here
 * too. One that another file frees (isolate.c) is a plain block. Each class keeps up to 1 MiB
 * (1024 bodies of one row, 512 of 8 rows, 16 of 256 rows): enough for a loop's 64 workspaces'
 * requests and those waiting behind them. */
#include <stdlib.h>
#include <string.h>

#include "bodies.h"
#include "server.h"

#define BODY_CACHE_MAX (256u << (BODY_CLASSES - 1)) /* bodies up to this size are recycled */
#define BODY_CACHE_BYTES (1u << 20) /* ... at most this much per size class and loop */

static unsigned body_class(size_t bytes) {
  unsigned k = 0;
  while (((size_t)256 << k) < bytes)
    k++;
  return k;
}

char *body_alloc(loop_t *lp, size_t bytes) {
  if (bytes > BODY_CACHE_MAX)
    return malloc(bytes);
  unsigned k = body_class(bytes);
  char *body = lp->body_cache[k];
  if (!body)
    return malloc((size_t)256 << k);
  memcpy(&lp->body_cache[k], body, sizeof(char *));
  lp->body_cached[k]--;
  return body;
}

void body_free(loop_t *lp, char *body, size_t cap) {
  if (!body || cap > BODY_CACHE_MAX || lp->stopping) {
    free(body);
    return;
  }
  unsigned k = body_class(cap);
  unsigned depth = BODY_CACHE_BYTES >> (8 + k) < 1024 ? BODY_CACHE_BYTES >> (8 + k) : 1024;
  if (lp->body_cached[k] >= depth) {
    free(body);
    return;
  }
  memcpy(body, &lp->body_cache[k], sizeof(char *));
  lp->body_cache[k] = body;
  lp->body_cached[k]++;
}

void bodies_free(loop_t *lp) {
  for (unsigned k = 0; k < BODY_CLASSES; k++) {
    while (lp->body_cache[k]) {
      char *body = lp->body_cache[k];
      memcpy(&lp->body_cache[k], body, sizeof(char *));
      free(body);
    }
    lp->body_cached[k] = 0;
  }
}

char *body_grow(loop_t *lp, char *body, size_t len, size_t *cap, size_t need, size_t max) {
  size_t grown = *cap ? *cap : 256;
  while (grown < need)
    grown *= 2;
  if (grown > max && need <= max)
    grown = max;
  char *bigger = body_alloc(lp, grown);
  if (!bigger)
    return NULL;
  if (len)
    memcpy(bigger, body, len);
  body_free(lp, body, *cap);
  *cap = grown;
  return bigger;
}
