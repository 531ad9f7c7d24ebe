/* DeviceBuffers' numbers (handles.h). Everything runs on the environment's JavaScript thread:
 * calls, and finalizers, also those at its end. */
#include <stdbool.h>
#include <stdlib.h>

#include "device_buffer.h"
#include "handles.h"

struct cuv_node_handles {
  cuv_node_buffer_t **slots; /* by number; NULL: free */
  uint32_t *free;            /* free numbers, a stack */
  uint32_t n_slots, n_free, cap;
  size_t refs; /* the environment's state, and each numbered buffer */
};

cuv_node_handles_t *cuv_node_handles_new(void) {
  cuv_node_handles_t *t = calloc(1, sizeof *t);
  if (t)
    t->refs = 1;
  return t;
}

void cuv_node_handles_release(cuv_node_handles_t *t) {
  if (!t || --t->refs > 0)
    return;
  free(t->slots);
  free(t->free);
  free(t);
}

static bool grow(cuv_node_handles_t *t) {
  uint32_t cap = t->cap ? t->cap * 2 : 64;
  if (cap <= t->cap)
    return false;
  cuv_node_buffer_t **slots = realloc(t->slots, cap * sizeof *slots);
  if (slots)
    t->slots = slots;
  uint32_t *free_numbers = slots ? realloc(t->free, cap * sizeof *free_numbers) : NULL;
  if (!free_numbers)
    return false;
  t->free = free_numbers;
  t->cap = cap;
  return true;
}

bool cuv_node_handles_add(cuv_node_handles_t *t, cuv_node_buffer_t *b) {
  uint32_t number;
  if (t->n_free > 0)
    number = t->free[--t->n_free];
  else if (t->n_slots < t->cap || grow(t))
    number = t->n_slots++;
  else
    return false;
  t->slots[number] = b;
  t->refs++;
  b->handles = t;
  b->number = number;
  return true;
}

void cuv_node_handles_remove(cuv_node_buffer_t *b) {
  cuv_node_handles_t *t = b->handles;
  if (!t)
    return;
  t->slots[b->number] = NULL;
  t->free[t->n_free++] = b->number; /* fits: one place per number */
  b->handles = NULL;
  cuv_node_handles_release(t);
}

cuv_node_buffer_t *cuv_node_handles_find(cuv_node_handles_t *t, napi_env env, napi_value value) {
  double number;
  if (!t || napi_get_value_double(env, value, &number) != napi_ok || !(number >= 0) ||
      number >= t->n_slots || number != (double)(uint32_t)number)
    return NULL;
  return t->slots[(uint32_t)number];
}
