#ifndef CUV_LIB_RING_H
#define CUV_LIB_RING_H

/* ring.c: a bounded ring of pointers that any number of threads push to and one thread pops
 * from, without a lock: the hand-off from submitting threads to a submitter thread. */

#include <stdbool.h>
#include <stdint.h>

typedef struct cuv__ring cuv__ring_t;

/* A ring of `capacity` slots, a power of two from 2 to 2^24: CUV_EINVAL otherwise. */
int cuv__ring_create(cuv__ring_t **ring, uint32_t capacity);
/* Frees the ring; the items still in it are the caller's (pop them first). */
void cuv__ring_destroy(cuv__ring_t *ring);
/* Any thread: appends item (non-NULL); false when the ring is full (nothing was added). */
bool cuv__ring_push(cuv__ring_t *ring, void *item);
/* The one consumer thread: the oldest published item, or NULL when there is none yet. A push
 * that has taken its slot but not yet published it holds back the items behind it until it
 * does, so items leave in the order their pushes took slots. */
void *cuv__ring_pop(cuv__ring_t *ring);

#endif
