#ifndef CUV_LIB_POOL_H
#define CUV_LIB_POOL_H

/* pool.c: the small objects made per op that one thread makes and another frees (an op node
 * made by a loop thread is freed by the submitter thread that ran it; a buffer access made there
 * is freed by the loop that retires its submission). Through malloc, every such free locks the
 * maker's arena against the maker's own mallocs: on the GPU, with 64 saxpys in flight from one
 * Node loop, a third of the loop thread's time was glibc's arena lock and its futex calls
 * (bench/RESULTS.md, cuv-node). Here each thread keeps its blocks: it reuses its own without a
 * lock, and a block freed by another thread goes back to its maker through one atomic push.
 *
 * A block comes from the pool and goes back to it (never to free(); never pool memory from
 * malloc). Sanitized builds (ASan) pass every call to malloc and free, so that a use after free
 * stays visible.
 *
 * The common cases (a block of this thread's free list, a block freed by its maker) are inline
 * here: a submission allocates and frees two blocks, and the calls into pool.c were some 60 of
 * its instructions (bench/RESULTS.md, cuv-bench-submit). Everything else is pool.c's. */

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define CUV__POOL_PASS_THROUGH 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUV__POOL_PASS_THROUGH 1
#endif
#endif

/* Size bytes, aligned as malloc aligns; NULL without memory. Any case (pool.c). */
void *cuv__pool_alloc_slow(size_t size);
/* Any thread; NULL does nothing. Any case (pool.c). */
void cuv__pool_free_slow(void *p);

#ifdef CUV__POOL_PASS_THROUGH

static inline void *cuv__pool_alloc(size_t size) { return cuv__pool_alloc_slow(size); }
static inline void cuv__pool_free(void *p) { cuv__pool_free_slow(p); }

#else

#define CUV__POOL_GRAIN 16u   /* sizes round up to a multiple of this */
#define CUV__POOL_CLASSES 64u /* pooled sizes: up to CLASSES * GRAIN bytes; larger: malloc's */
#define CUV__POOL_KEEP 4096u  /* free blocks a thread keeps per class; more go back to malloc */

typedef struct cuv__pool_cache cuv__pool_cache_t;

typedef struct cuv__pool_block {
  cuv__pool_cache_t *owner; /* NULL: not pooled (large, or made without a cache): malloc's */
  size_t cls;
  struct cuv__pool_block *next; /* the first bytes of the caller's: only while it is free */
} cuv__pool_block_t;

#define CUV__POOL_HEADER offsetof(cuv__pool_block_t, next)
_Static_assert(CUV__POOL_HEADER % alignof(max_align_t) == 0,
               "the caller's bytes stay aligned as malloc's");

/* A thread's cache: a free list per size class, which only it touches, and a stack of blocks
 * that other threads freed (pool.c). */
struct cuv__pool_cache {
  cuv__pool_block_t *free[CUV__POOL_CLASSES + 1];
  uint32_t n_free[CUV__POOL_CLASSES + 1];
  atomic_size_t refs;
  alignas(64) _Atomic(cuv__pool_block_t *) returned; /* its own line: other threads write it */
};

/* This thread's cache (NULL until its first allocation). */
extern _Thread_local cuv__pool_cache_t *cuv__pool_mine;

/* The head of this thread's free list of the size's class, taken; else pool.c's way (no cache
 * yet, an empty list, blocks other threads gave back, a large size). */
static inline void *cuv__pool_alloc(size_t size) {
  size_t cls = size ? (size + CUV__POOL_GRAIN - 1) / CUV__POOL_GRAIN : 1;
  cuv__pool_cache_t *c = cuv__pool_mine;
  cuv__pool_block_t *b;
  if (cls > CUV__POOL_CLASSES || !c || !(b = c->free[cls]))
    return cuv__pool_alloc_slow(size);
  c->free[cls] = b->next;
  c->n_free[cls]--;
  return (char *)b + CUV__POOL_HEADER;
}

/* A block this thread made goes onto its free list; else pool.c's way. */
static inline void cuv__pool_free(void *p) {
  cuv__pool_block_t *b = p ? (cuv__pool_block_t *)((char *)p - CUV__POOL_HEADER) : NULL;
  cuv__pool_cache_t *c = cuv__pool_mine;
  if (!b || !c || b->owner != c || c->n_free[b->cls] >= CUV__POOL_KEEP) {
    cuv__pool_free_slow(p);
    return;
  }
  b->next = c->free[b->cls];
  c->free[b->cls] = b;
  c->n_free[b->cls]++;
}

#endif /* CUV__POOL_PASS_THROUGH */

/* The same, cleared. */
static inline void *cuv__pool_zalloc(size_t size) {
  void *p = cuv__pool_alloc(size);
  if (p)
    memset(p, 0, size);
  return p;
}

#endif
