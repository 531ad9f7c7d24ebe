/* The Node addon's releaser (node/src/releaser.c), driven from C so that the TSan pass runs it:
 * the thread that drops the device-buffer references the JavaScript threads let go of, because
 * the last one frees the memory with cuMemFree, which waits for the device's queued work (the
 * simulator's does). A reference handed over while the gate (tests/gate.h) holds work in flight
 * comes back at once; every reference handed over, from several threads at once, is dropped
 * exactly once: a buffer someone else still holds stays usable, each other one is freed once. */
#include <pthread.h>
#include <sched.h>

#include "gate.h"

#include "releaser.h"

#define BUFFERS 16
#define THREADS 4
#define PER_THREAD 256

/* Until the thread dropped every reference handed to it. */
static void wait_released(void) {
  time_t start = time(NULL);
  while (cuv_node_releasing() != 0) {
    if (time(NULL) - start > 120) /* a watchdog, not a timing assertion */
      fail_msg("%llu references never dropped", (unsigned long long)cuv_node_releasing());
    sched_yield();
  }
}

/* cuMemFree calls so far, on the simulator; 0 on a GPU, where nothing counts them. */
static unsigned long frees(void) { return cuvt_is_sim() ? cuv_sim_calls("cuMemFree") : 0; }

static void count_done(int status, cuv_output_t *output, void *arg) {
  (void)output;
  assert_cuv_ok(status);
  atomic_fetch_add((atomic_int *)arg, 1);
}

static void test_handing_over_returns_while_the_gpu_holds_the_free(void **state) {
  (void)state;
  wait_released();
  cuvt_gate_t g;
  cuvt_gate_init(&g);
  cuv_stream_t *held;
  cuv_queue_t *q;
  assert_cuv_ok(cuv_stream_create(&held, cuvt_device()));
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_buffer_t *bufs[BUFFERS];
  for (int i = 0; i < BUFFERS; i++)
    bufs[i] = cuvt_buffer(64);
  unsigned long before = frees();
  atomic_int done = 0;
  cuv_submit_opts_t on_held = {.stream = held};
  assert_cuv_ok(cuv_submit(q, cuvt_gate_wait(&g), count_done, &done, &on_held));
  cuv_node_release_buffer(NULL); /* nothing */
  for (int i = 0; i < BUFFERS; i++)
    cuv_node_release_buffer(bufs[i]); /* each the last reference */
  /* Back here with the gate still closed: it opens only below (cuvt_gate_close proves that its
   * waiter saw the flag, not its bound). On the simulator the first free waits for it. */
  assert_int_equal(cuv_queue_pending(q), 1);
  if (cuvt_is_sim())
    assert_true(cuv_node_releasing() > 0);
  cuvt_gate_open(&g);
  cuvt_drain_until_retired(q);
  assert_int_equal(atomic_load(&done), 1);
  wait_released();
  if (cuvt_is_sim())
    assert_int_equal(frees(), before + BUFFERS);
  cuv_queue_destroy(q);
  cuv_stream_destroy(held);
  cuvt_gate_close(&g);
}

typedef struct hand_over {
  cuv_buffer_t **bufs;
  pthread_t thread;
} hand_over_t;

static void *hand_over_main(void *arg) {
  hand_over_t *h = arg;
  for (int i = 0; i < PER_THREAD; i++)
    cuv_node_release_buffer(h->bufs[i]);
  return NULL;
}

static void test_references_from_many_threads_are_each_dropped_once(void **state) {
  (void)state;
  wait_released();
  enum { TOTAL = THREADS * PER_THREAD };
  cuv_buffer_t **bufs = calloc(TOTAL, sizeof *bufs);
  assert_non_null(bufs);
  uint32_t words[TOTAL];
  for (int i = 0; i < TOTAL; i++) {
    bufs[i] = cuvt_buffer(sizeof words[0]);
    words[i] = cuvt_random_u32();
    if (i % 3 == 0) { /* kept: the thread's drop must not be its last */
      cuvt_upload(bufs[i], 0, &words[i], sizeof words[i]);
      cuv_buffer_ref(bufs[i]);
    }
  }
  unsigned long before = frees();
  hand_over_t h[THREADS];
  for (int t = 0; t < THREADS; t++) {
    h[t].bufs = bufs + t * PER_THREAD;
    assert_int_equal(pthread_create(&h[t].thread, NULL, hand_over_main, &h[t]), 0);
  }
  for (int t = 0; t < THREADS; t++)
    assert_int_equal(pthread_join(h[t].thread, NULL), 0);
  wait_released();
  int kept = 0;
  for (int i = 0; i < TOTAL; i += 3, kept++) {
    uint32_t got = 0;
    cuvt_read(&got, bufs[i], 0, sizeof got);
    assert_int_equal(got, words[i]);
  }
  if (cuvt_is_sim())
    assert_int_equal(frees(), before + TOTAL - kept);
  for (int i = 0; i < TOTAL; i += 3)
    cuv_buffer_unref(bufs[i]);
  if (cuvt_is_sim())
    assert_int_equal(frees(), before + TOTAL);
  free(bufs);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handing_over_returns_while_the_gpu_holds_the_free),
      cmocka_unit_test(test_references_from_many_threads_are_each_dropped_once),
  };
  return cuvt_run(tests);
}
