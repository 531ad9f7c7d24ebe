/* Handle registry: the set of live objects handed out as CUstream, CUevent, CUmodule, CUfunction,
 * CUgraph and CUgraphExec. Entry points look a handle up here before dereferencing it, so a
 * destroyed, reset or made-up handle gives CUDA_ERROR_INVALID_HANDLE instead of a crash.
 * An open-addressing hash set keyed by address (linear probing, backward-shift deletion);
 * every function runs with the global lock held. */

#include <stdlib.h>

#include "handle.h"

static struct sim_obj **slots;
static size_t capacity; /* power of two, or 0 before the first insert */
static size_t used;

static size_t slot_of(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x & (capacity - 1);
}

/* Index of p's slot, or of the empty slot where it would go. */
static size_t probe(const void *p) {
  size_t i = slot_of(p);
  while (slots[i] && (const void *)slots[i] != p)
    i = (i + 1) & (capacity - 1);
  return i;
}

static bool grow(void) {
  size_t old_cap = capacity;
  struct sim_obj **old = slots;
  size_t new_cap = old_cap ? old_cap * 2 : 64;
  struct sim_obj **fresh = calloc(new_cap, sizeof *fresh);
  if (!fresh)
    return false;
  slots = fresh;
  capacity = new_cap;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i])
      slots[probe(old[i])] = old[i];
  free(old);
  return true;
}

bool sim_handle_add(struct sim_obj *obj) {
  if ((used + 1) * 2 > capacity && !grow())
    return false;
  size_t i = probe(obj);
  if (!slots[i]) {
    slots[i] = obj;
    used++;
  }
  return true;
}

/* Is slot k's home position h outside the cyclic range (hole, k]? Then the entry at k may move
 * back into the hole. */
static bool may_fill(size_t hole, size_t k, size_t h) {
  if (hole <= k)
    return h <= hole || h > k;
  return h <= hole && h > k;
}

void sim_handle_remove(struct sim_obj *obj) {
  if (!capacity)
    return;
  size_t hole = probe(obj);
  if (!slots[hole])
    return;
  slots[hole] = NULL;
  used--;
  for (size_t k = (hole + 1) & (capacity - 1); slots[k]; k = (k + 1) & (capacity - 1)) {
    if (may_fill(hole, k, slot_of(slots[k]))) {
      slots[hole] = slots[k];
      slots[k] = NULL;
      hole = k;
    }
  }
}

struct sim_obj *sim_handle_get(const void *h, enum sim_obj_type t) {
  if (!h || !capacity)
    return NULL;
  struct sim_obj *obj = slots[probe(h)];
  return obj && obj->type == t ? obj : NULL;
}

struct sim_obj **sim_handle_take_all(struct sim_ctx *ctx, enum sim_obj_type t, size_t *count) {
  *count = 0;
  size_t n = 0;
  for (size_t i = 0; i < capacity; i++)
    if (slots[i] && slots[i]->type == t && slots[i]->ctx == ctx)
      n++;
  if (!n)
    return NULL;
  struct sim_obj **out = malloc(n * sizeof *out);
  if (!out)
    return NULL; /* objects stay registered: leaked but never dangling */
  for (size_t i = 0; i < capacity; i++)
    if (slots[i] && slots[i]->type == t && slots[i]->ctx == ctx)
      out[(*count)++] = slots[i];
  for (size_t i = 0; i < n; i++)
    sim_handle_remove(out[i]);
  return out;
}
