/* Per-thread pools of small blocks (pool.h).
 *
 * Each thread that allocates has a cache: a free list per size class, which only it touches, and
 * a stack of blocks that other threads freed, which they push with one compare-and-swap and the
 * owner takes whole with one exchange (so no block is popped by two threads: no ABA). A block's
 * header names its owner. When a thread exits, its free blocks go back to malloc and its stack is
 * closed: a block freed after that goes to malloc directly. The cache itself is freed by whoever
 * releases its last block, counted in refs (the blocks that exist, plus one while the thread runs),
 * which changes only when a block is made or goes back to malloc, never when one is reused. */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

#ifdef CUV__POOL_PASS_THROUGH

void *cuv__pool_alloc_slow(size_t size) { return malloc(size ? size : 1); }

void cuv__pool_free_slow(void *p) { free(p); }

#else

/* The header's names (pool.h), short. */
#define GRAIN CUV__POOL_GRAIN
#define CLASSES CUV__POOL_CLASSES
#define KEEP CUV__POOL_KEEP
#define HEADER CUV__POOL_HEADER
typedef cuv__pool_cache_t cache_t;
typedef cuv__pool_block_t block_t;

static char closed_mark;
#define CLOSED ((block_t *)&closed_mark) /* `returned` once the owner has exited */

_Thread_local cache_t *cuv__pool_mine; /* read inline by pool.h */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static bool exit_key_made;

static void *payload(block_t *b) { return (char *)b + HEADER; }
static block_t *block_of(void *p) { return (block_t *)((char *)p - HEADER); }

/* Back to malloc; the owner's cache goes too with its last block. */
static void release(block_t *b) {
  cache_t *owner = b->owner;
  free(b);
  if (atomic_fetch_sub_explicit(&owner->refs, 1, memory_order_acq_rel) == 1)
    free(owner);
}

/* The owner's thread: onto its free list, or back to malloc beyond KEEP. */
static void keep(cache_t *c, block_t *b) {
  if (c->n_free[b->cls] >= KEEP) {
    release(b);
    return;
  }
  b->next = c->free[b->cls];
  c->free[b->cls] = b;
  c->n_free[b->cls]++;
}

/* Another thread: onto the owner's stack, or back to malloc once the owner has exited. The
 * release ordering publishes the block's last writes to the owner that reuses it. */
static void give_back(cache_t *owner, block_t *b) {
  block_t *head = atomic_load_explicit(&owner->returned, memory_order_relaxed);
  do {
    if (head == CLOSED) {
      release(b);
      return;
    }
    b->next = head;
  } while (!atomic_compare_exchange_weak_explicit(&owner->returned, &head, b,
                                                  memory_order_release, memory_order_relaxed));
}

/* Takes the blocks other threads gave back; `end` (CLOSED at exit) replaces them. */
static block_t *take_returned(cache_t *c, block_t *end) {
  return atomic_exchange_explicit(&c->returned, end, memory_order_acquire);
}

static void thread_exit(void *arg) {
  cache_t *c = arg;
  cuv__pool_mine = NULL; /* a free later in this thread's exit takes the other threads' way */
  for (size_t cls = 1; cls <= CLASSES; cls++) {
    while (c->free[cls]) {
      block_t *b = c->free[cls];
      c->free[cls] = b->next;
      release(b);
    }
  }
  for (block_t *b = take_returned(c, CLOSED), *next; b; b = next) {
    next = b->next;
    release(b);
  }
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
    free(c);
}

static void make_exit_key(void) {
  exit_key_made = pthread_key_create(&exit_key, thread_exit) == 0;
}

/* A library unloaded (dlclose) must not leave its destructor to threads that exit later. */
__attribute__((destructor)) static void delete_exit_key(void) {
  if (exit_key_made)
    pthread_key_delete(exit_key);
}

/* This thread's first cache, made at its first allocation; NULL without memory. Out of line, so
 * every later allocation saves no registers for it. */
static __attribute__((noinline, cold)) cache_t *make_cache(void) {
  pthread_once(&exit_key_once, make_exit_key);
  cache_t *c = NULL;
  if (!exit_key_made || posix_memalign((void **)&c, alignof(cache_t), sizeof *c) != 0)
    return NULL;
  memset(c, 0, sizeof *c);
  atomic_init(&c->refs, 1);
  atomic_init(&c->returned, NULL);
  if (pthread_setspecific(exit_key, c) != 0) {
    free(c);
    return NULL;
  }
  return cuv__pool_mine = c;
}

static cache_t *my_cache(void) { return cuv__pool_mine ? cuv__pool_mine : make_cache(); }

/* A free block of class cls from c, taking back what other threads returned when c has none. */
static block_t *reuse(cache_t *c, size_t cls) {
  if (!c->free[cls] && atomic_load_explicit(&c->returned, memory_order_relaxed)) {
    for (block_t *b = take_returned(c, NULL), *next; b; b = next) {
      next = b->next;
      keep(c, b);
    }
  }
  block_t *b = c->free[cls];
  if (b) {
    c->free[cls] = b->next;
    c->n_free[cls]--;
  }
  return b;
}

/* A new block from malloc: c's, of class cls, or (c NULL) malloc's alone, of `bytes`. Out of
 * line, as make_cache. */
static __attribute__((noinline)) block_t *fresh(cache_t *c, size_t cls, size_t bytes) {
  block_t *b = malloc(HEADER + bytes);
  if (!b)
    return NULL;
  b->owner = c;
  b->cls = cls;
  if (c)
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
  return b;
}

void *cuv__pool_alloc_slow(size_t size) {
  if (size > SIZE_MAX - HEADER - GRAIN)
    return NULL;
  size_t cls = size ? (size + GRAIN - 1) / GRAIN : 1;
  cache_t *c = cls <= CLASSES ? my_cache() : NULL;
  block_t *b = c ? reuse(c, cls) : NULL;
  if (!b)
    b = fresh(c, cls, c ? cls * GRAIN : size);
  return b ? payload(b) : NULL;
}

void cuv__pool_free_slow(void *p) {
  if (!p)
    return;
  block_t *b = block_of(p);
  if (!b->owner)
    free(b);
  else if (b->owner == cuv__pool_mine)
    keep(b->owner, b);
  else
    give_back(b->owner, b);
}

#endif /* CUV__POOL_PASS_THROUGH */
