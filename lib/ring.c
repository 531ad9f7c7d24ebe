/* A bounded multi-producer, single-consumer ring of pointers: the bounded queue in which each slot
 * carries a sequence number that says whose turn it is. A producer claims a slot by
 * moving the tail with one compare-and-swap, writes the item, then publishes it by storing the
 * slot's sequence (release); the consumer reads the sequence (acquire) before the item, and
 * hands the slot back to the producers one lap later. No lock, no allocation after creation;
 * a full ring refuses at once, so a pushing loop thread never blocks. */
#include <stdatomic.h>
#include <stdlib.h>

#include <cuv/errors.h>

#include "ring.h"

typedef struct slot {
  _Atomic uint64_t seq; /* == position: free for the push at it; == position + 1: published */
  void *item;
} slot_t;

struct cuv__ring {
  _Atomic uint64_t tail; /* next position a producer claims */
  char pad[56];          /* the consumer's head on a cache line of its own */
  uint64_t head;         /* next position the consumer reads (consumer only) */
  uint64_t mask;
  slot_t slots[];
};

int cuv__ring_create(cuv__ring_t **out, uint32_t capacity) {
  if (!out || capacity < 2 || capacity > (1u << 24) || (capacity & (capacity - 1)) != 0)
    return CUV_EINVAL;
  cuv__ring_t *r = calloc(1, sizeof *r + capacity * sizeof(slot_t));
  if (!r)
    return CUV_ENOMEM;
  r->mask = capacity - 1;
  for (uint64_t i = 0; i < capacity; i++)
    atomic_init(&r->slots[i].seq, i);
  atomic_init(&r->tail, 0);
  *out = r;
  return 0;
}

void cuv__ring_destroy(cuv__ring_t *r) { free(r); }

bool cuv__ring_push(cuv__ring_t *r, void *item) {
  uint64_t pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
  for (;;) {
    slot_t *s = &r->slots[pos & r->mask];
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    int64_t lag = (int64_t)(seq - pos);
    if (lag < 0)
      return false; /* the slot still holds the item of the lap before: full */
    if (lag > 0) {  /* another producer took pos: look again */
      pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
      continue;
    }
    if (atomic_compare_exchange_weak_explicit(&r->tail, &pos, pos + 1, memory_order_relaxed,
                                              memory_order_relaxed)) {
      s->item = item;
      atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
      return true;
    }
  }
}

void *cuv__ring_pop(cuv__ring_t *r) {
  slot_t *s = &r->slots[r->head & r->mask];
  if (atomic_load_explicit(&s->seq, memory_order_acquire) != r->head + 1)
    return NULL; /* empty, or the next push has not published yet */
  void *item = s->item;
  atomic_store_explicit(&s->seq, r->head + r->mask + 1, memory_order_release);
  r->head++;
  return item;
}
