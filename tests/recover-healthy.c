/* cuv_device_recover on a healthy device (the reset works on the simulator and on the H200,
 * unlike a reset after a sticky fault: tests/recover.c): it refuses while work is in flight that
 * arms no reactor slot (so the slot check cannot answer for it), and pinned memory from before
 * the reset is never handed out again. Each test leaves nothing in flight, and each recovery
 * starts a new epoch, so every test makes its own objects. */
#include <pthread.h>
#include <sched.h>

#include "gate.h"

/* Recovers the idle device: a new epoch, and (where the driver resets, as both suites' do) the
 * old module's kernels work again. Returns the answer; the caller skips what needs a success. */
static int recover_idle(void) {
  cuv_device_t *dev = cuvt_device();
  unsigned epoch = cuv_device_epoch(dev);
  int rc = cuv_device_recover(dev);
  print_message("# recover: %s\n", cuv_err_name(rc));
  assert_int_not_equal(rc, CUV_EBUSY); /* nothing is in flight any more */
  assert_int_equal(cuv_device_epoch(dev), epoch + 1);
  if (rc == 0) {
    cuv_buffer_t *buf = cuvt_buffer(16 * sizeof(unsigned));
    unsigned value = cuvt_nonzero_u32(), got[16];
    assert_cuv_ok(cuv_sync(cuvt_fill_u32(buf, 16, value), NULL));
    cuvt_read(got, buf, 0, sizeof got);
    for (int i = 0; i < 16; i++)
      assert_int_equal(got[i], value);
    cuv_buffer_unref(buf);
  }
  return rc;
}

/* The refusal, with the gated work in flight on `held` and no reactor slot armed: no new epoch,
 * no recovery counted. */
static void assert_recover_refused(void) {
  cuv_device_t *dev = cuvt_device();
  cuv_stats_t before = cuvt_stats();
  assert_int_equal(before.slots_in_use, 0); /* only the in-flight count can refuse */
  unsigned epoch = cuv_device_epoch(dev);
  assert_int_equal(cuv_device_recover(dev), CUV_EBUSY);
  assert_int_equal(cuv_device_epoch(dev), epoch);
  assert_int_equal(cuvt_stats().recoveries, before.recoveries);
}

/* cuv_enqueue_on work is proven complete by an event at a later reap, never by a reactor slot:
 * resetting the context under it would kill a running kernel and free what it uses. */
static void test_refused_while_enqueued_work_runs(void **state) {
  cuvt_gate_t g;
  cuvt_gate_init(&g);
  cuv_stream_t *held;
  assert_cuv_ok(cuv_stream_create(&held, cuvt_device()));
  assert_cuv_ok(cuv_enqueue_on(cuvt_gate_wait(&g), held, NULL));
  assert_int_equal(cuv_stream_in_flight(held), 1);
  assert_recover_refused();
  /* The refused call changed nothing: the work still completes, and right. */
  cuvt_gate_open(&g);
  assert_cuv_ok(cuv_stream_synchronize(held)); /* also reaps it */
  assert_int_equal(cuv_stream_in_flight(held), 0);
  assert_int_equal(cuvt_stats().in_flight, 0);
  cuvt_gate_close(&g);
  cuv_stream_destroy(held);
  recover_idle();
}

typedef struct blocked {
  cuv_op_t *op; /* built on the test thread, which alone may assert */
  cuv_stream_t *stream;
  int rc;
  atomic_int finished;
} blocked_t;

static void *run_blocked(void *arg) {
  blocked_t *b = arg;
  b->rc = cuv_sync_on(b->op, b->stream, NULL);
  atomic_store(&b->finished, 1);
  return NULL;
}

/* A blocking executor waiting on another thread: its wait arms no slot either. */
static void test_refused_while_blocking_executor_waits(void **state) {
  cuvt_gate_t g;
  cuvt_gate_init(&g);
  blocked_t b = {cuvt_gate_wait(&g), NULL, 1, 0};
  assert_cuv_ok(cuv_stream_create(&b.stream, cuvt_device()));
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, run_blocked, &b), 0);
  /* Waits until the executor's submission exists (in flight on its stream), not for a time. */
  while (cuv_stream_in_flight(b.stream) == 0 && !atomic_load(&b.finished))
    sched_yield();
  assert_int_equal(cuv_stream_in_flight(b.stream), 1); /* not finished: the gate is shut */
  assert_recover_refused();
  cuvt_gate_open(&g);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_cuv_ok(b.rc);
  assert_int_equal(cuv_stream_in_flight(b.stream), 0);
  assert_int_equal(cuvt_stats().in_flight, 0);
  cuvt_gate_close(&g);
  cuv_stream_destroy(b.stream);
  recover_idle();
}

/* A host buffer (a pinned staging block) made before a recovery and released after it: the reset
 * took its memory, so the block must not go back into the pool, where the next host buffer of
 * its size class would get it (memory that is gone, and a data pointer cuv reports as lost). */
static void test_block_from_old_epoch_not_reused(void **state) {
  enum { BYTES = 4096 };
  cuv_device_t *dev = cuvt_device();
  cuv_host_buffer_t *old;
  assert_cuv_ok(cuv_host_buffer_create(&old, dev, BYTES));
  assert_non_null(cuv_host_buffer_data(old));
  if (recover_idle() != 0) {
    cuv_host_buffer_unref(old);
    skip(); /* the driver did not reset: nothing of the old epoch was lost */
  }
  assert_null(cuv_host_buffer_data(old)); /* its memory went with the reset */
  cuv_host_buffer_unref(old);             /* the last reference, in the new epoch */

  /* Two new host buffers of the same class, each usable: a round trip through the device. */
  cuv_host_buffer_t *in, *out;
  assert_cuv_ok(cuv_host_buffer_create(&in, dev, BYTES));
  assert_cuv_ok(cuv_host_buffer_create(&out, dev, BYTES));
  assert_non_null(cuv_host_buffer_data(in));
  assert_non_null(cuv_host_buffer_data(out));
  float data[BYTES / sizeof(float)];
  cuvt_random_ints(data, BYTES / sizeof(float));
  memcpy(cuv_host_buffer_data(in), data, BYTES);
  memset(cuv_host_buffer_data(out), 0, BYTES);
  cuv_buffer_t *buf = cuvt_buffer(BYTES);
  assert_cuv_ok(cuv_sync(cuv_seq(cuv_upload(buf, 0, in, 0, BYTES),
                                 cuv_download_into(out, 0, buf, 0, BYTES)),
                         NULL));
  cuvt_assert_floats_equal(cuv_host_buffer_data(out), data, BYTES / sizeof(float));
  cuv_buffer_unref(buf);
  cuv_host_buffer_unref(in);
  cuv_host_buffer_unref(out);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refused_while_enqueued_work_runs),
      cmocka_unit_test(test_refused_while_blocking_executor_waits),
      cmocka_unit_test(test_block_from_old_epoch_not_reused),
  };
  return cuvt_run(tests);
}
