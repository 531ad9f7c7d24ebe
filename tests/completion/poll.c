/* cuv__reactor_poll (lib/reactor.h), the scan cuv_queue_poll runs for young work: a thread that
 * polls completes landed work itself (the reactor's scan, done on the calling thread). Pollers
 * race the reactor thread and each other over thousands of reactor submissions from four
 * threads: every callback runs exactly once with its own output, the stats count exactly what the
 * pollers said they completed, and nothing is left in flight. Reaches into lib/reactor.h, so it
 * links the static archive. Run under ThreadSanitizer too (the sim suite is CI's TSan pass). */
#include <pthread.h>

#include "counted.h"
#include "internal.h"
#include "reactor.h"

#define SUBMITTERS 4
#define POLLERS 2
#define PER_SUBMITTER 1500
#define TOTAL (SUBMITTERS * PER_SUBMITTER)

/* What a done callback saw; written on the draining (test) thread. */
typedef struct seen {
  int calls;
  int status;
  int payload;
} seen_t;

static void record_done(int status, cuv_output_t *output, void *arg) {
  seen_t *s = arg;
  s->calls++;
  s->status = status;
  s->payload = cuvt_payload(output); /* cuv releases the output after the callback */
}

typedef struct race {
  cuv_queue_t *q;
  seen_t seen[TOTAL];
  atomic_int releases;
  atomic_int refused;
  atomic_bool stop;
  atomic_llong polled; /* sum of the pollers' scan results */
} race_t;

typedef struct submitter {
  race_t *r;
  int first;
} submitter_t;

/* An empty kernel, then a counted host value naming the submission. No inline spin: every
 * submission is armed on the reactor, where the pollers can see it. */
static void *submit_many(void *arg) {
  submitter_t *w = arg;
  cuv_submit_opts_t opts = {.flags = CUV_SUBMIT_NO_SPIN};
  for (int i = w->first; i < w->first + PER_SUBMITTER; i++) {
    cuv_op_t *op = cuv_seq(cuv_launch(cuvt_kernel("empty_kernel"), CUV_DIM1(1), CUV_DIM1(1), 0,
                                      NULL, 0),
                           cuvt_counted_value(i, &w->r->releases));
    if (cuv_submit(w->r->q, op, record_done, &w->r->seen[i], &opts) != 0)
      atomic_fetch_add(&w->r->refused, 1);
  }
  return NULL;
}

static void *poll_until_stopped(void *arg) {
  race_t *r = arg;
  long long mine = 0;
  while (!atomic_load(&r->stop))
    mine += cuv__reactor_poll();
  atomic_fetch_add(&r->polled, mine);
  return NULL;
}

static void drain_all(race_t *r) {
  for (;;) {
    cuv_queue_drain(r->q);
    int calls = 0;
    for (int i = 0; i < TOTAL; i++)
      calls += r->seen[i].calls;
    if (calls + atomic_load(&r->refused) >= TOTAL)
      return;
    cuv_queue_wait(r->q, 100);
  }
}

static void test_pollers_race_the_reactor(void **state) {
  (void)state;
  race_t *r = calloc(1, sizeof *r);
  assert_non_null(r);
  assert_cuv_ok(cuv_queue_create(&r->q, NULL, NULL));
  cuv_stats_t before, after;
  cuv_stats(&before);

  pthread_t pollers[POLLERS], submitters[SUBMITTERS];
  submitter_t w[SUBMITTERS];
  for (int p = 0; p < POLLERS; p++)
    assert_int_equal(pthread_create(&pollers[p], NULL, poll_until_stopped, r), 0);
  for (int t = 0; t < SUBMITTERS; t++) {
    w[t] = (submitter_t){r, t * PER_SUBMITTER};
    assert_int_equal(pthread_create(&submitters[t], NULL, submit_many, &w[t]), 0);
  }
  for (int t = 0; t < SUBMITTERS; t++)
    assert_int_equal(pthread_join(submitters[t], NULL), 0);
  drain_all(r);
  atomic_store(&r->stop, true);
  for (int p = 0; p < POLLERS; p++)
    assert_int_equal(pthread_join(pollers[p], NULL), 0);
  cuv_stats(&after);

  assert_int_equal(atomic_load(&r->refused), 0);
  for (int i = 0; i < TOTAL; i++) {
    assert_int_equal(r->seen[i].calls, 1);
    assert_int_equal(r->seen[i].status, 0);
    assert_int_equal(r->seen[i].payload, i);
  }
  assert_int_equal(atomic_load(&r->releases), TOTAL);
  long long polled = atomic_load(&r->polled);
  uint64_t by_flag = after.completed_reactor - before.completed_reactor;
  uint64_t by_hostfn = after.completed_hostfn - before.completed_hostfn;
  assert_int_equal(after.completed_polled - before.completed_polled, (uint64_t)polled);
  assert_true((uint64_t)polled <= by_flag);
  assert_int_equal(by_flag + by_hostfn, TOTAL); /* by stream words, or host functions */
  assert_int_equal(after.in_flight, 0);
  print_message("# %lld of %d completions seen by the pollers, %llu by the reactor thread, "
                "%llu by host functions\n", polled, TOTAL,
                (unsigned long long)(by_flag - (uint64_t)polled), (unsigned long long)by_hostfn);
  assert_cuv_ok(cuv_queue_destroy(r->q));
  free(r);
}

/* With nothing in flight there is nothing to find, and polling is harmless at any time. */
static void test_poll_with_nothing_in_flight(void **state) {
  (void)state;
  cuv_stats_t before, after;
  cuv_stats(&before);
  for (int i = 0; i < 1000; i++)
    assert_int_equal(cuv__reactor_poll(), 0);
  cuv_stats(&after);
  assert_int_equal(after.completed_polled, before.completed_polled);
}

/* One slow submission, polled from the test thread until its flag lands: the scan never blocks,
 * and whichever thread saw the flag, the callback runs once after the work really finished. */
static void test_poll_a_slow_kernel(void **state) {
  (void)state;
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_buffer_t *buf;
  const unsigned n = 4096, value = cuvt_nonzero_u32();
  assert_cuv_ok(cuv_buffer_create(&buf, cuvt_device(), n * sizeof(unsigned)));
  seen_t seen = {0};
  atomic_int releases = 0;
  cuv_submit_opts_t opts = {.flags = CUV_SUBMIT_NO_SPIN};
  cuv_op_t *op = cuv_seq(cuv_seq(cuvt_sleep(20), cuvt_fill_u32(buf, n, value)),
                         cuvt_counted_value(7, &releases));
  assert_cuv_ok(cuv_submit(q, op, record_done, &seen, &opts));
  long long polls = 0;
  while (cuv_queue_pending(q) > 0 && cuv_queue_drain(q) == 0) {
    cuv__reactor_poll();
    polls++;
  }
  assert_int_equal(seen.calls, 1);
  assert_int_equal(seen.status, 0);
  assert_int_equal(seen.payload, 7);
  assert_int_equal(atomic_load(&releases), 1);
  unsigned *got = malloc(n * sizeof *got);
  assert_non_null(got);
  cuvt_read(got, buf, 0, n * sizeof *got);
  for (unsigned i = 0; i < n; i++)
    assert_int_equal(got[i], value);
  free(got);
  print_message("# %lld polls while a 20 ms kernel ran\n", polls);
  cuv_buffer_unref(buf);
  assert_cuv_ok(cuv_queue_destroy(q));
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_poll_with_nothing_in_flight),
      cmocka_unit_test(test_poll_a_slow_kernel),
      cmocka_unit_test(test_pollers_race_the_reactor),
  };
  return cuvt_run(tests);
}
