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
 * stays visible. */

#include <stddef.h>

/* Size bytes, aligned as malloc aligns; NULL without memory. */
void *cuv__pool_alloc(size_t size);
/* The same, cleared. */
void *cuv__pool_zalloc(size_t size);
/* Any thread; NULL does nothing. */
void cuv__pool_free(void *p);

#endif
