#ifndef CUV_LIB_TICKETS_H
#define CUV_LIB_TICKETS_H

/* An index from a ticket (a non-zero 64-bit number) to a pointer (lib/tickets.c): a completion
 * queue's submissions whose owner asked for their ticket, so that cuv_cancel finds one without
 * walking every submission in flight. The caller locks. */

#include <stddef.h>
#include <stdint.h>

typedef struct cuv__tickets {
  struct cuv__ticket_slot *slots; /* NULL until the first add */
  size_t cap;                     /* a power of two, or 0 */
  size_t n;
} cuv__tickets_t;

/* Adds ticket -> value (the ticket not in the index yet); 0, or CUV_ENOMEM when the index could
 * not grow and has no room left (it is unchanged then). */
int cuv__tickets_add(cuv__tickets_t *t, uint64_t ticket, void *value);
/* The value of ticket, or NULL. */
void *cuv__tickets_find(const cuv__tickets_t *t, uint64_t ticket);
/* Removes ticket; nothing when it is not in the index. */
void cuv__tickets_remove(cuv__tickets_t *t, uint64_t ticket);
/* Frees the index's memory, leaving it empty. */
void cuv__tickets_free(cuv__tickets_t *t);

#endif
