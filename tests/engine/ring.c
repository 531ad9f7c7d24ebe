/* lib/ring.c, the lock-free multi-producer ring: FIFO order and the full/empty answers on one
 * thread across many laps; then 4 producers push 50,000 tagged items each while the test thread
 * pops: every item arrives exactly once and each producer's items arrive in the order it pushed
 * them (the producers record nothing but their pushes; every check runs on the test thread). Also
 * in suite sim, so the TSan pass runs it. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>

#include <cmocka.h>

#include <cuv.h>

#include "ring.h"

#define PRODUCERS 4
#define PER_PRODUCER 50000u

/* Items are (producer, index) packed into a pointer-sized integer, index + 1 so none is NULL. */
static void *tag(unsigned producer, unsigned index) {
  return (void *)(((uintptr_t)producer << 32) | (index + 1u));
}

static void test_bad_capacity(void **state) {
  (void)state;
  cuv__ring_t *r;
  assert_int_equal(cuv__ring_create(&r, 0), CUV_EINVAL);
  assert_int_equal(cuv__ring_create(&r, 1), CUV_EINVAL);
  assert_int_equal(cuv__ring_create(&r, 6), CUV_EINVAL);
  assert_int_equal(cuv__ring_create(&r, 1u << 25), CUV_EINVAL);
  assert_int_equal(cuv__ring_create(NULL, 8), CUV_EINVAL);
}

/* One thread: fills to capacity (the next push refused), drains in order (then NULL), for many
 * laps of a small ring so positions wrap the slots again and again. */
static void test_fifo_full_empty_laps(void **state) {
  (void)state;
  cuv__ring_t *r;
  assert_int_equal(cuv__ring_create(&r, 8), 0);
  assert_null(cuv__ring_pop(r));
  unsigned next_in = 0, next_out = 0;
  for (int lap = 0; lap < 1000; lap++) {
    unsigned fill = 1 + (unsigned)lap % 8;
    for (unsigned i = 0; i < fill; i++)
      assert_true(cuv__ring_push(r, tag(0, next_in++)));
    if (fill == 8)
      assert_false(cuv__ring_push(r, tag(0, 99999)));
    for (unsigned i = 0; i < fill; i++)
      assert_ptr_equal(cuv__ring_pop(r), tag(0, next_out++));
    assert_null(cuv__ring_pop(r));
  }
  cuv__ring_destroy(r);
}

typedef struct producer {
  pthread_t thread;
  cuv__ring_t *ring;
  unsigned id;
  unsigned long refused; /* pushes the full ring refused (retried) */
} producer_t;

static void *produce(void *arg) {
  producer_t *p = arg;
  for (unsigned i = 0; i < PER_PRODUCER; i++)
    while (!cuv__ring_push(p->ring, tag(p->id, i)))
      p->refused++;
  return NULL;
}

/* A small ring, so producers often find it full and the consumer often finds it empty. */
static void test_producers_exactly_once_in_order(void **state) {
  (void)state;
  cuv__ring_t *r;
  assert_int_equal(cuv__ring_create(&r, 64), 0);
  producer_t p[PRODUCERS];
  for (unsigned i = 0; i < PRODUCERS; i++) {
    p[i] = (producer_t){.ring = r, .id = i};
    assert_int_equal(pthread_create(&p[i].thread, NULL, produce, &p[i]), 0);
  }
  unsigned next[PRODUCERS] = {0};
  unsigned long received = 0, empty = 0;
  while (received < PRODUCERS * (unsigned long)PER_PRODUCER) {
    void *item = cuv__ring_pop(r);
    if (!item) {
      empty++;
      continue;
    }
    uintptr_t v = (uintptr_t)item;
    unsigned producer = (unsigned)(v >> 32), index = (unsigned)(v & 0xffffffffu) - 1u;
    assert_true(producer < PRODUCERS);
    assert_int_equal(index, next[producer]); /* in order, none lost, none twice */
    next[producer]++;
    received++;
  }
  unsigned long refused = 0;
  for (unsigned i = 0; i < PRODUCERS; i++) {
    assert_int_equal(pthread_join(p[i].thread, NULL), 0);
    assert_int_equal(next[i], PER_PRODUCER);
    refused += p[i].refused;
  }
  assert_null(cuv__ring_pop(r));
  print_message("# %lu items; the ring was full %lu times and empty %lu times\n", received,
                refused, empty);
  cuv__ring_destroy(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_capacity),
      cmocka_unit_test(test_fifo_full_empty_laps),
      cmocka_unit_test(test_producers_exactly_once_in_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
