/* lib/pool.c, the per-thread block pools: sizes, alignment and clearing; a block its maker frees
 * is the maker's next of that size; blocks other threads free go back to their maker, which
 * reuses them; makers and freers on several threads, every block's contents checked by the
 * thread that frees it; a maker that exits with blocks out (freed after it exited, or before)
 * leaves nothing allocated. Worker threads record; the test thread asserts. Also in suite sim,
 * so the TSan pass runs it. Under ASan the pool passes everything to malloc (pool.h): the
 * checks of reuse and of what stays allocated then skip, and LeakSanitizer checks the rest. */
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cuv.h>

#include "pool.h"
#include "ring.h"

#if defined(__SANITIZE_ADDRESS__)
#define POOLED 0
#else
#define POOLED 1
#endif

#define MAKERS 3
#define PER_MAKER 40000u
#define MAX_SIZE 1100u /* past the largest pooled size (1 KiB), so large blocks mix in */

/* A block's contents: its size and a tag, then a pattern of both to its end. */
typedef struct stamp {
  uint32_t size, tag;
} stamp_t;

static void fill(void *p, uint32_t size, uint32_t tag) {
  unsigned char *bytes = p;
  for (uint32_t i = 0; i < size; i++)
    bytes[i] = (unsigned char)(tag * 31u + i);
  if (size >= sizeof(stamp_t))
    memcpy(p, &(stamp_t){size, tag}, sizeof(stamp_t));
}

static bool intact(const void *p, uint32_t size, uint32_t tag) {
  const unsigned char *bytes = p;
  stamp_t s;
  size_t from = size >= sizeof s ? sizeof s : 0;
  if (from && (memcpy(&s, p, sizeof s), s.size != size || s.tag != tag))
    return false;
  for (size_t i = from; i < size; i++)
    if (bytes[i] != (unsigned char)(tag * 31u + i))
      return false;
  return true;
}

static uint32_t next_random(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

static void test_sizes_alignment_clearing(void **state) {
  (void)state;
  for (uint32_t size = 0; size <= MAX_SIZE; size++) {
    unsigned char *p = cuv__pool_alloc(size);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % _Alignof(max_align_t), 0);
    fill(p, size, size);
    assert_true(intact(p, size, size));
    cuv__pool_free(p);
    unsigned char *z = cuv__pool_zalloc(size); /* often the block just freed, dirty */
    assert_non_null(z);
    for (uint32_t i = 0; i < size; i++)
      assert_int_equal(z[i], 0);
    cuv__pool_free(z);
  }
  cuv__pool_free(NULL);
  if (POOLED) { /* ASan's malloc aborts on such sizes */
    assert_null(cuv__pool_alloc(SIZE_MAX));
    assert_null(cuv__pool_alloc(SIZE_MAX - 8));
  }
}

/* Freed by its maker: the maker's next block of that size class, last freed first. */
static void test_maker_reuses_its_own(void **state) {
  (void)state;
  if (!POOLED) { /* (cmocka's skip() reads as a failure in TAP) */
    print_message("# ASan: the pool passes every block to malloc, nothing to reuse\n");
    return;
  }
  void *a = cuv__pool_alloc(40), *b = cuv__pool_alloc(48);
  cuv__pool_free(a);
  cuv__pool_free(b);
  assert_ptr_equal(cuv__pool_alloc(33), b); /* 33..48 bytes: one class */
  assert_ptr_equal(cuv__pool_alloc(48), a);
  void *c = cuv__pool_alloc(49); /* the next class: neither */
  assert_ptr_not_equal(c, a);
  assert_ptr_not_equal(c, b);
  cuv__pool_free(a);
  cuv__pool_free(b);
  cuv__pool_free(c);
}

typedef struct freer {
  pthread_t thread;
  void **blocks;
  size_t n;
} freer_t;

static void *free_all(void *arg) {
  freer_t *f = arg;
  for (size_t i = 0; i < f->n; i++)
    cuv__pool_free(f->blocks[i]);
  return NULL;
}

/* Blocks this thread made, freed on another thread: they come back here and are reused. */
static void test_freed_elsewhere_come_back(void **state) {
  (void)state;
  enum { N = 500 };
  void *made[N];
  for (size_t i = 0; i < N; i++)
    assert_non_null(made[i] = cuv__pool_alloc(64));
  freer_t f = {.blocks = made, .n = N};
  assert_int_equal(pthread_create(&f.thread, NULL, free_all, &f), 0);
  assert_int_equal(pthread_join(f.thread, NULL), 0);
  size_t back = 0;
  void *again[N];
  for (size_t i = 0; i < N; i++) {
    assert_non_null(again[i] = cuv__pool_alloc(64));
    for (size_t j = 0; j < N; j++)
      back += again[i] == made[j];
  }
  for (size_t i = 0; i < N; i++)
    cuv__pool_free(again[i]);
  if (POOLED)
    assert_int_equal(back, N);
}

/* Makers allocate blocks of random sizes, fill them and push them to the test thread, which
 * checks them and frees each (back to its maker) while the makers keep allocating. */
typedef struct maker {
  pthread_t thread;
  cuv__ring_t *ring;
  uint32_t id;
  unsigned long full; /* pushes the ring refused (retried) */
} maker_t;

/* A ring item: the block, its size and tag in a small header the test thread frees too. */
typedef struct item {
  void *block;
  uint32_t size, tag;
} item_t;

static void *make(void *arg) {
  maker_t *m = arg;
  uint32_t seed = m->id + 1;
  for (uint32_t i = 0; i < PER_MAKER; i++) {
    item_t *it = cuv__pool_alloc(sizeof *it);
    uint32_t size = next_random(&seed) % (MAX_SIZE + 1);
    void *block = it ? cuv__pool_alloc(size) : NULL;
    if (!block) { /* counted by the test thread as missing */
      cuv__pool_free(it);
      continue;
    }
    *it = (item_t){block, size, m->id << 24 | i};
    fill(block, size, it->tag);
    while (!cuv__ring_push(m->ring, it))
      m->full++;
  }
  return NULL;
}

static void test_makers_and_freer(void **state) {
  (void)state;
  cuv__ring_t *ring;
  assert_int_equal(cuv__ring_create(&ring, 256), 0);
  maker_t m[MAKERS];
  for (uint32_t i = 0; i < MAKERS; i++) {
    m[i] = (maker_t){.ring = ring, .id = i};
    assert_int_equal(pthread_create(&m[i].thread, NULL, make, &m[i]), 0);
  }
  uint32_t next[MAKERS] = {0};
  unsigned long received = 0, damaged = 0;
  while (received < MAKERS * (unsigned long)PER_MAKER) {
    item_t *it = cuv__ring_pop(ring);
    if (!it)
      continue;
    uint32_t maker = it->tag >> 24, index = it->tag & 0xffffffu;
    assert_true(maker < MAKERS);
    assert_int_equal(index, next[maker]++); /* none lost: allocation never failed */
    damaged += !intact(it->block, it->size, it->tag);
    cuv__pool_free(it->block);
    cuv__pool_free(it);
    received++;
  }
  unsigned long full = 0;
  for (uint32_t i = 0; i < MAKERS; i++) {
    assert_int_equal(pthread_join(m[i].thread, NULL), 0);
    full += m[i].full;
  }
  assert_int_equal(damaged, 0);
  assert_null(cuv__ring_pop(ring));
  cuv__ring_destroy(ring);
  print_message("# %lu blocks checked and freed; the ring was full %lu times\n", received, full);
}

/* A maker thread that allocates `n` blocks and hands them over, after freeing `own` of them
 * itself; with `wait`, it exits only once the test thread has freed the others. */
typedef struct leaver {
  pthread_t thread;
  void **blocks;
  size_t n, own;
  pthread_barrier_t *freed; /* NULL: exits at once */
} leaver_t;

static void *leave(void *arg) {
  leaver_t *l = arg;
  for (size_t i = 0; i < l->n; i++)
    l->blocks[i] = cuv__pool_alloc(100 + i % 300);
  for (size_t i = 0; i < l->own; i++) {
    cuv__pool_free(l->blocks[i]);
    l->blocks[i] = NULL;
  }
  if (l->freed) {
    pthread_barrier_wait(l->freed); /* handed over */
    pthread_barrier_wait(l->freed); /* freed by the test thread */
  }
  return NULL;
}

static size_t in_use(void) { return mallinfo2().uordblks; }

/* The blocks of a thread that exited go back to malloc, and its cache with the last of them. */
static void check_nothing_left(size_t before) {
  size_t after = in_use();
  print_message("# in use before %zu bytes, after %zu\n", before, after);
  /* Slack for what malloc's own per-thread cache keeps of the blocks freed here (7 per size,
   * counted as in use: at most 36 KB of these sizes), far below the 2000 blocks of 100-400
   * bytes that were made. */
  if (POOLED)
    assert_true(after <= before + 65536);
}

static void test_maker_exits_first(void **state) {
  (void)state;
  enum { N = 2000 };
  void *blocks[N];
  cuv__pool_free(cuv__pool_alloc(16)); /* this thread's cache exists before the count */
  size_t before = in_use();
  leaver_t l = {.blocks = blocks, .n = N, .own = 1000};
  assert_int_equal(pthread_create(&l.thread, NULL, leave, &l), 0);
  assert_int_equal(pthread_join(l.thread, NULL), 0);
  for (size_t i = 0; i < N; i++) {
    if (i >= l.own)
      assert_non_null(blocks[i]);
    cuv__pool_free(blocks[i]); /* its maker has exited: back to malloc */
  }
  check_nothing_left(before);
}

static void test_maker_exits_after(void **state) {
  (void)state;
  enum { N = 2000 };
  void *blocks[N];
  pthread_barrier_t freed;
  assert_int_equal(pthread_barrier_init(&freed, NULL, 2), 0);
  cuv__pool_free(cuv__pool_alloc(16));
  size_t before = in_use();
  leaver_t l = {.blocks = blocks, .n = N, .own = 1000, .freed = &freed};
  assert_int_equal(pthread_create(&l.thread, NULL, leave, &l), 0);
  pthread_barrier_wait(&freed);
  for (size_t i = l.own; i < N; i++) {
    assert_non_null(blocks[i]);
    cuv__pool_free(blocks[i]); /* given back to a live maker, which takes them at its exit */
  }
  pthread_barrier_wait(&freed);
  assert_int_equal(pthread_join(l.thread, NULL), 0);
  pthread_barrier_destroy(&freed);
  check_nothing_left(before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes_alignment_clearing),
      cmocka_unit_test(test_maker_reuses_its_own),
      cmocka_unit_test(test_freed_elsewhere_come_back),
      cmocka_unit_test(test_makers_and_freer),
      cmocka_unit_test(test_maker_exits_first),
      cmocka_unit_test(test_maker_exits_after),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
