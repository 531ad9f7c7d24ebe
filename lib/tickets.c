/* The ticket index: open addressing with linear probing, kept at most half full, and removal by
 * shifting the entries after a freed slot back (no tombstones, so a lookup never walks slots
 * that were freed long ago). Tickets are handed out in sequence, so a multiplicative hash spreads
 * neighbours over the table. */
#include <stdlib.h>

#include "internal.h"
#include "tickets.h"

#define MIN_CAP 64u

struct cuv__ticket_slot {
  uint64_t ticket; /* 0: free */
  void *value;
};

static size_t home(uint64_t ticket, size_t cap) {
  return (size_t)((ticket * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static void put(struct cuv__ticket_slot *slots, size_t cap, uint64_t ticket, void *value) {
  size_t i = home(ticket, cap);
  while (slots[i].ticket)
    i = (i + 1) & (cap - 1);
  slots[i] = (struct cuv__ticket_slot){ticket, value};
}

static int grow(cuv__tickets_t *t) {
  size_t cap = t->cap ? t->cap * 2 : MIN_CAP;
  struct cuv__ticket_slot *slots = calloc(cap, sizeof *slots);
  if (!slots)
    return CUV_ENOMEM;
  for (size_t i = 0; i < t->cap; i++)
    if (t->slots[i].ticket)
      put(slots, cap, t->slots[i].ticket, t->slots[i].value);
  free(t->slots);
  t->slots = slots;
  t->cap = cap;
  return 0;
}

int cuv__tickets_add(cuv__tickets_t *t, uint64_t ticket, void *value) {
  /* Past half full it grows; failing that, it takes entries until one slot is left, so that a
   * lookup of an absent ticket still ends at a free slot. */
  if (2 * (t->n + 1) > t->cap && grow(t) < 0 && t->n + 1 >= t->cap)
    return CUV_ENOMEM;
  put(t->slots, t->cap, ticket, value);
  t->n++;
  return 0;
}

static size_t find_slot(const cuv__tickets_t *t, uint64_t ticket) {
  if (!t->cap || !ticket)
    return SIZE_MAX;
  for (size_t i = home(ticket, t->cap);; i = (i + 1) & (t->cap - 1)) {
    if (t->slots[i].ticket == ticket)
      return i;
    if (!t->slots[i].ticket)
      return SIZE_MAX;
  }
}

void *cuv__tickets_find(const cuv__tickets_t *t, uint64_t ticket) {
  size_t i = find_slot(t, ticket);
  return i == SIZE_MAX ? NULL : t->slots[i].value;
}

/* Whether the entry at j, whose home is h, may move back into the free slot at i: it may when i
 * lies cyclically within [h, j), that is when its probe from h passed i. */
static bool may_fill(size_t h, size_t i, size_t j) {
  return i <= j ? (h <= i || h > j) : (h <= i && h > j);
}

void cuv__tickets_remove(cuv__tickets_t *t, uint64_t ticket) {
  size_t i = find_slot(t, ticket);
  if (i == SIZE_MAX)
    return;
  t->n--;
  size_t mask = t->cap - 1;
  for (size_t j = (i + 1) & mask; t->slots[j].ticket; j = (j + 1) & mask) {
    if (may_fill(home(t->slots[j].ticket, t->cap), i, j)) {
      t->slots[i] = t->slots[j];
      i = j;
    }
  }
  t->slots[i].ticket = 0;
}

void cuv__tickets_free(cuv__tickets_t *t) {
  free(t->slots);
  *t = (cuv__tickets_t){0};
}
