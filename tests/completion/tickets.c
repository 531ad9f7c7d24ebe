/* lib/tickets.c, the ticket index: random adds, removals and lookups against a plain array on
 * fresh random data, at sizes that make the table grow, wrap and shift entries back over removed
 * ones; and, with calloc made to fail (the test links with --wrap=calloc), an index that cannot
 * grow takes entries until one slot is left and then refuses with CUV_ENOMEM, unchanged. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>

#include <cmocka.h>

#include <cuv.h>

#include "calloc-fails.h"
#include "common.h"
#include "tickets.h"

#define LIVE_MAX 5000u

/* The reference: the tickets in the index, and their values. */
typedef struct model {
  uint64_t ticket[LIVE_MAX];
  size_t n;
} model_t;

static void *value_of(uint64_t ticket) { return (void *)(uintptr_t)(ticket * 3 + 1); }

static void assert_same(const cuv__tickets_t *t, const model_t *m, uint64_t next) {
  assert_int_equal(t->n, m->n);
  for (size_t i = 0; i < m->n; i++)
    assert_ptr_equal(cuv__tickets_find(t, m->ticket[i]), value_of(m->ticket[i]));
  /* Tickets never added, and 0, are not found. */
  assert_null(cuv__tickets_find(t, 0));
  assert_null(cuv__tickets_find(t, next));
  assert_null(cuv__tickets_find(t, next + 1 + cuvt_random_u32()));
}

/* Tickets are added in sequence, as a queue hands them out, and removed in random order; the
 * live count wanders up to `live` so the table grows, and lookups cover every live ticket. */
static void run_random(size_t live, unsigned steps) {
  cuv__tickets_t t = {0};
  static model_t m;
  m.n = 0;
  uint64_t next = 1 + cuvt_random_u32(); /* any starting point */
  for (unsigned s = 0; s < steps; s++) {
    bool add = m.n == 0 || (m.n < live && cuvt_random_u32() % 8 < 5);
    if (add) {
      assert_int_equal(cuv__tickets_add(&t, next, value_of(next)), 0);
      m.ticket[m.n++] = next++;
    } else {
      size_t i = cuvt_random_u32() % m.n;
      cuv__tickets_remove(&t, m.ticket[i]);
      assert_null(cuv__tickets_find(&t, m.ticket[i]));
      cuv__tickets_remove(&t, m.ticket[i]); /* again: nothing */
      m.ticket[i] = m.ticket[--m.n];
    }
    if (s % 97 == 0)
      assert_same(&t, &m, next);
  }
  assert_same(&t, &m, next);
  assert_true(t.cap >= 2 * t.n);
  while (m.n) { /* emptied in random order */
    size_t i = cuvt_random_u32() % m.n;
    cuv__tickets_remove(&t, m.ticket[i]);
    m.ticket[i] = m.ticket[--m.n];
  }
  assert_same(&t, &m, next);
  cuv__tickets_free(&t);
  assert_null(t.slots);
  assert_int_equal(t.cap, 0);
}

static void test_small(void **state) {
  (void)state;
  run_random(40, 20000);
}

static void test_large(void **state) {
  (void)state;
  run_random(LIVE_MAX, 60000);
}

/* Tickets far apart and in no order (a queue never hands those out, but the index must not
 * care). */
static void test_scattered(void **state) {
  (void)state;
  cuv__tickets_t t = {0};
  static model_t m;
  m.n = 0;
  for (size_t i = 0; i < 1000; i++) {
    uint64_t ticket = ((uint64_t)cuvt_random_u32() << 32 | cuvt_random_u32()) | 1u;
    if (cuv__tickets_find(&t, ticket))
      continue;
    assert_int_equal(cuv__tickets_add(&t, ticket, value_of(ticket)), 0);
    m.ticket[m.n++] = ticket;
  }
  for (size_t i = 0; i < m.n; i += 2)
    cuv__tickets_remove(&t, m.ticket[i]);
  for (size_t i = 0; i < m.n; i++)
    assert_ptr_equal(cuv__tickets_find(&t, m.ticket[i]), i % 2 ? value_of(m.ticket[i]) : NULL);
  cuv__tickets_free(&t);
}

static void test_no_memory(void **state) {
  (void)state;
  cuv__tickets_t t = {0};
  calloc_fails = true;
  assert_int_equal(cuv__tickets_add(&t, 1, value_of(1)), CUV_ENOMEM); /* no table at all */
  assert_int_equal(t.n, 0);
  assert_null(cuv__tickets_find(&t, 1));
  cuv__tickets_remove(&t, 1); /* nothing */
  calloc_fails = false;
  uint64_t next = 1;
  while (2 * (t.n + 1) <= 64) /* half of the first table's 64 slots */
    assert_int_equal(cuv__tickets_add(&t, next, value_of(next)), 0), next++;
  size_t cap = t.cap;
  calloc_fails = true;
  while (t.n + 1 < cap) /* past half full without growing, to one free slot */
    assert_int_equal(cuv__tickets_add(&t, next, value_of(next)), 0), next++;
  assert_int_equal(cuv__tickets_add(&t, next, value_of(next)), CUV_ENOMEM);
  assert_int_equal(t.cap, cap);
  assert_int_equal(t.n, cap - 1);
  assert_null(cuv__tickets_find(&t, next)); /* ends at the free slot */
  for (uint64_t k = 1; k < next; k++)
    assert_ptr_equal(cuv__tickets_find(&t, k), value_of(k));
  cuv__tickets_remove(&t, 5);
  assert_int_equal(cuv__tickets_add(&t, next, value_of(next)), 0); /* room again */
  calloc_fails = false;
  assert_int_equal(cuv__tickets_add(&t, next + 1, value_of(next + 1)), 0); /* grows */
  assert_true(t.cap > cap);
  for (uint64_t k = 1; k <= next + 1; k++)
    assert_ptr_equal(cuv__tickets_find(&t, k), k == 5 ? NULL : value_of(k));
  cuv__tickets_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_small),
      cmocka_unit_test(test_large),
      cmocka_unit_test(test_scattered),
      cmocka_unit_test(test_no_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
