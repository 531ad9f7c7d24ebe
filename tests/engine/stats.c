/* Every field of cuv_stats (include/cuv.h), with exact deltas where the value is deterministic.
 * The process runs with a 1 s inline spin budget (set before cuv reads its environment, once), so
 * a submission that may spin finds its stream's word within the budget; gated submissions wait in
 * the reactor (reactor_waiting counts them) and a failing stream write, on the simulator, sends one
 * to the host-callback path (a fallback). The gate is tests/completion/concurrency.c's pair: a
 * wait_flag kernel holds its stream until a set_flag kernel on another stream writes the flag, so
 * "in flight" states are held on purpose, not by timing. completed_polled is counted against the
 * reactor's scan run on this thread (cuv__reactor_poll, lib/reactor.h: what cuv_queue_poll runs
 * for young work), so this test links the static archive. The last test faults the device, so it
 * runs last. */
#include <stdlib.h>
#include <time.h>

#include <cuda.h>

#include "gate.h"
#include "internal.h"
#include "reactor.h"

#define D(field) ((int64_t)(now.field - before.field))

/* tests/gate.h's gate, and the stream its waiter holds. */
typedef struct gate {
  cuvt_gate_t gate;
  cuv_stream_t *held;
} gate_t;

static void gate_init(gate_t *g) {
  cuvt_gate_init(&g->gate);
  assert_cuv_ok(cuv_stream_create(&g->held, cuvt_device()));
}

static cuv_op_t *gate_wait(gate_t *g) { return cuvt_gate_wait(&g->gate); }

static void gate_open(gate_t *g) { cuvt_gate_open(&g->gate); }

static void gate_close(gate_t *g) {
  assert_cuv_ok(cuv_stream_synchronize(g->held));
  cuvt_gate_close(&g->gate);
  cuv_stream_destroy(g->held);
}

static void count_done(int status, cuv_output_t *output, void *arg) {
  if (status == 0)
    atomic_fetch_add((atomic_int *)arg, 1);
}

static void assert_quiet(const cuv_stats_t *s) {
  assert_int_equal(s->in_flight, 0);
  assert_int_equal(s->reactor_waiting, 0);
}

/* The blocking executors and cuv_enqueue_on; a refused op counts nowhere. */
static void test_executors(void **state) {
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  cuv_stats_t before = cuvt_stats(), now;
  assert_quiet(&before);
  assert_cuv_ok(cuv_sync(cuv_value(NULL, NULL), NULL));
  assert_cuv_ok(cuv_sync(cuvt_sleep(1), NULL));
  assert_cuv_ok(cuv_sync_on(s, cuv_value(NULL, NULL), NULL));
  assert_int_equal(cuv_sync(cuv_fail(CUV_EIO), NULL), CUV_EIO); /* refused before running */
  now = cuvt_stats();
  assert_int_equal(D(submitted), 3);
  assert_int_equal(D(completed), 3);
  assert_int_equal(D(completed_sync), 3);
  assert_int_equal(D(in_flight), 0);
  assert_cuv_ok(cuv_enqueue_on(s, cuv_value(NULL, NULL), NULL));
  now = cuvt_stats();
  assert_int_equal(D(submitted), 4);
  assert_int_equal(D(in_flight), 1);
  assert_int_equal(D(completed_event), 0);
  assert_cuv_ok(cuv_stream_synchronize(s));
  now = cuvt_stats();
  assert_int_equal(D(completed), 4);
  assert_int_equal(D(completed_event), 1);
  assert_int_equal(D(in_flight), 0);
  /* None of the asynchronous paths, no fault, no wait between streams. */
  assert_int_equal(D(completed_spin), 0);
  assert_int_equal(D(completed_reactor), 0);
  assert_int_equal(D(completed_polled), 0);
  assert_int_equal(D(completed_hostfn), 0);
  assert_int_equal(D(fallbacks), 0);
  assert_int_equal(D(faults), 0);
  assert_int_equal(D(leaked), 0);
  assert_int_equal(D(waits_inserted), 0);
  assert_int_equal(D(reactor_waiting), 0);
  cuv_stream_destroy(s);
}

/* cuv_submit: a submission that may spin completes by the spin (its flag lands within the 1 s
 * budget; otherwise the reactor takes it, and the try is repeated: exactly one of the two counts
 * each time); CUV_SUBMIT_NO_SPIN ones by the reactor. */
static void test_spin_and_reactor(void **state) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  atomic_int calls = 0;
  cuv_stats_t before, now;
  int spun = 0;
  for (int tries = 0; !spun; tries++) {
    if (tries > 100)
      fail_msg("no submission completed by the inline spin in 100 tries");
    before = cuvt_stats();
    assert_cuv_ok(cuv_submit(q, cuv_value(NULL, NULL), count_done, &calls, NULL));
    cuvt_drain_until(q, &calls, tries + 1);
    now = cuvt_stats();
    assert_int_equal(D(submitted), 1);
    assert_int_equal(D(completed), 1);
    assert_int_equal(D(completed_spin) + D(completed_reactor), 1);
    assert_int_equal(D(completed_hostfn), 0);
    spun = D(completed_spin) == 1;
  }
  int base = atomic_load(&calls);
  before = cuvt_stats();
  cuv_submit_opts_t no_spin = {.flags = CUV_SUBMIT_NO_SPIN};
  for (int i = 0; i < 2; i++)
    assert_cuv_ok(cuv_submit(q, cuv_value(NULL, NULL), count_done, &calls, &no_spin));
  cuvt_drain_until(q, &calls, base + 2);
  now = cuvt_stats();
  assert_int_equal(D(submitted), 2);
  assert_int_equal(D(completed), 2);
  assert_int_equal(D(completed_reactor), 2);
  assert_int_equal(D(completed_spin), 0);
  assert_int_equal(D(completed_hostfn), 0);
  assert_int_equal(D(fallbacks), 0);
  assert_int_equal(D(in_flight), 0);
  assert_int_equal(D(reactor_waiting), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* Three gated submissions on one stream wait in the reactor (no pool to run out of: no
 * fallback); on the simulator a fourth, whose stream write fails, takes the host-callback path.
 * Once the gate opens this thread polls: what it completes is counted in completed_polled,
 * exactly. */
static void test_reactor_fallback_hostfn_polled(void **state) {
  gate_t g;
  gate_init(&g);
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  atomic_int calls = 0;
  cuv_submit_opts_t held = {.stream = g.held, .flags = CUV_SUBMIT_NO_SPIN};
  cuv_stats_t before = cuvt_stats(), now;
  assert_quiet(&before);
  assert_cuv_ok(cuv_submit(q, gate_wait(&g), count_done, &calls, &held));
  assert_cuv_ok(cuv_submit(q, cuv_value(NULL, NULL), count_done, &calls, &held));
  assert_cuv_ok(cuv_submit(q, cuv_value(NULL, NULL), count_done, &calls, &held));
  now = cuvt_stats();
  assert_int_equal(D(reactor_waiting), 3);
  assert_int_equal(D(fallbacks), 0);
  int fallbacks = cuvt_is_sim() ? 1 : 0;
  if (fallbacks) {
    cuv_sim_fail("cuStreamWriteValue64", 0, CUDA_ERROR_NOT_SUPPORTED);
    assert_cuv_ok(cuv_submit(q, cuv_value(NULL, NULL), count_done, &calls, &held));
    cuv_sim_fail_clear();
  }
  now = cuvt_stats();
  assert_int_equal(D(reactor_waiting), 3);
  assert_int_equal(D(fallbacks), fallbacks);
  assert_int_equal(D(in_flight), 3 + fallbacks);
  assert_int_equal(D(completed), 0);
  assert_int_equal(cuv_queue_pending(q), 3 + fallbacks);
  gate_open(&g);
  uint64_t polled = 0;
  time_t start = time(NULL);
  while (cuvt_stats().completed_reactor - before.completed_reactor < 3) {
    polled += cuv__reactor_poll();
    if (time(NULL) - start > 120) /* a watchdog, not a timing assertion */
      fail_msg("the gated work was not seen complete");
  }
  cuvt_drain_until(q, &calls, 3 + fallbacks);
  now = cuvt_stats();
  assert_int_equal(D(submitted), 4 + fallbacks); /* and the opener's cuv_sync_on */
  assert_int_equal(D(completed), 4 + fallbacks);
  assert_int_equal(D(completed_sync), 1);
  assert_int_equal(D(completed_reactor), 3);
  assert_int_equal(D(completed_hostfn), fallbacks);
  assert_int_equal(D(completed_spin), 0);
  assert_int_equal(D(completed_polled), (int64_t)polled);
  assert_int_equal(D(fallbacks), fallbacks);
  assert_int_equal(D(reactor_waiting), 0);
  assert_int_equal(D(in_flight), 0);
  assert_int_equal(D(waits_inserted), 0); /* the gate's buffers are untracked */
  assert_cuv_ok(cuv_queue_destroy(q));
  gate_close(&g);
}

/* waits_inserted: one per conflicting stream per access, none for reads against reads. */
static void test_waits_inserted(void **state) {
  gate_t g;
  gate_init(&g);
  cuv_stream_t *b, *c;
  assert_cuv_ok(cuv_stream_create(&b, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&c, cuvt_device()));
  cuv_buffer_t *buf = cuvt_buffer(4 * sizeof(unsigned));
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  atomic_int calls = 0;
  unsigned value = cuvt_nonzero_u32();
  /* Pinned: a copy into pageable memory returns only once it ran (the driver's rule), so the
   * readers would wait for the gate in cuv_submit. */
  enum { BYTES = 4 * sizeof(unsigned) };
  cuv_host_buffer_t *host_b, *host_c;
  assert_cuv_ok(cuv_host_buffer_create(&host_b, cuvt_device(), BYTES));
  assert_cuv_ok(cuv_host_buffer_create(&host_c, cuvt_device(), BYTES));
  unsigned *got_b = cuv_host_buffer_data(host_b), *got_c = cuv_host_buffer_data(host_c);
  memset(got_b, 0, BYTES);
  memset(got_c, 0, BYTES);
  cuv_submit_opts_t on_held = {.stream = g.held, .flags = CUV_SUBMIT_NO_SPIN};
  cuv_submit_opts_t on_b = {.stream = b, .flags = CUV_SUBMIT_NO_SPIN};
  cuv_stats_t before = cuvt_stats(), now;
  /* The writer is held by the gate; the reader on b waits for it (1), the reader on c too (1),
   * not for b's read. */
  assert_cuv_ok(cuv_submit(q, cuv_seq(gate_wait(&g), cuvt_fill_u32(buf, 4, value)), count_done,
                           &calls, &on_held));
  assert_cuv_ok(cuv_submit(q, cuv_download_into(host_b, 0, buf, 0, BYTES), count_done, &calls,
                           &on_b));
  now = cuvt_stats();
  assert_int_equal(D(waits_inserted), 1);
  assert_cuv_ok(cuv_enqueue_on(c, cuv_download_into(host_c, 0, buf, 0, BYTES), NULL));
  now = cuvt_stats();
  assert_int_equal(D(waits_inserted), 2);
  assert_int_equal(D(reactor_waiting), 2); /* the writer's and b's; enqueue_on arms none */
  assert_int_equal(D(fallbacks), 0);
  gate_open(&g);
  cuvt_drain_until(q, &calls, 2);
  assert_cuv_ok(cuv_stream_synchronize(c));
  for (int i = 0; i < 4; i++) {
    assert_int_equal(got_b[i], value);
    assert_int_equal(got_c[i], value);
  }
  now = cuvt_stats();
  assert_int_equal(D(waits_inserted), 2);
  assert_int_equal(D(in_flight), 0);
  cuv_buffer_unref(buf);
  cuv_host_buffer_unref(host_b);
  cuv_host_buffer_unref(host_c);
  cuv_stream_destroy(b);
  cuv_stream_destroy(c);
  assert_cuv_ok(cuv_queue_destroy(q));
  gate_close(&g);
}

/* reactor_wakeups: the reactor parks soon after nothing is armed, and one arm wakes it once. A
 * submission held by the gate lives through at most one wake-up; the test idles before each try
 * so the reactor parks, and repeats until a try saw the wake-up. */
static void test_reactor_wakeups(void **state) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  atomic_int calls = 0;
  int woke = 0;
  for (int tries = 0; !woke; tries++) {
    if (tries > 20)
      fail_msg("the reactor never woke for an arm after idling");
    gate_t g;
    gate_init(&g);
    struct timespec idle = {0, 50 * 1000000L};
    nanosleep(&idle, NULL);
    cuv_stats_t before = cuvt_stats(), now;
    cuv_submit_opts_t held = {.stream = g.held, .flags = CUV_SUBMIT_NO_SPIN};
    assert_cuv_ok(cuv_submit(q, gate_wait(&g), count_done, &calls, &held));
    gate_open(&g);
    cuvt_drain_until(q, &calls, tries + 1);
    now = cuvt_stats();
    assert_true(D(reactor_wakeups) <= 1);
    woke = D(reactor_wakeups) == 1;
    gate_close(&g);
  }
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* faults and leaked: one faulting submission counts one of each, and is not counted completed. */
static void test_fault_and_leak(void **state) {
  cuv_stats_t before = cuvt_stats(), now;
  unsigned long long bad = 0x10; /* never mapped */
  cuv_arg_t args[] = {CUV_ARG_VALUE(bad)};
  int rc = cuv_sync(cuv_launch(cuvt_kernel_ok("fault_kernel"), CUV_DIM1(1), CUV_DIM1(1), 0, args,
                               1),
                    NULL);
  assert_true(cuv_status_is_fault(rc));
  now = cuvt_stats();
  assert_int_equal(D(submitted), 1);
  assert_int_equal(D(faults), 1);
  assert_int_equal(D(leaked), 1);
  assert_int_equal(D(completed), 0);
  assert_int_equal(D(in_flight), 0);
}

int main(void) {
  setenv("CUV_SPIN_BUDGET_US", "1000000", 1);
  /* The counters are read as soon as cuv_submit returns: its driver calls are made on this
   * thread (tests/engine/engine.c counts the engine's paths). */
  setenv("CUV_SUBMIT_INLINE", "always", 1);
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_executors),
      cmocka_unit_test(test_spin_and_reactor),
      cmocka_unit_test(test_reactor_fallback_hostfn_polled),
      cmocka_unit_test(test_waits_inserted),
      cmocka_unit_test(test_reactor_wakeups),
      cmocka_unit_test(test_fault_and_leak),
  };
  return cuvt_run(tests);
}
