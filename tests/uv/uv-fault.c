/* A device fault while a bridge submission waits on the reactor (CUV_SPIN_BUDGET_US=0, set
 * by tests/meson.build; a process of its own, as a fault kills the context): a slow kernel, then
 * a kernel writing through a bad pointer, on one stream. The faulting submission's flag never
 * lands; the reactor's probe must find the sticky fault and the callback must fire with the CUDA
 * error, exactly once, on the loop thread. Run also with CUV_HOST_SYNC=spin and =block, where
 * the completion comes through a host callback that a dead context never runs: the probe still
 * finds the fault. A 10 s watchdog timer fails the test instead of hanging; nothing else here is
 * timed. */
#include <cuda.h>

#include "uvt.h"

#define WATCHDOG_MS 10000

typedef struct watchdog {
  uv_timer_t timer;
  int fired;
} watchdog_t;

static void on_watchdog(uv_timer_t *t) {
  watchdog_t *w = t->data;
  w->fired = 1;
  uv_stop(t->loop);
}

static void test_fault_while_waiting_on_reactor(void **state) {
  assert_int_equal(cuvt_spin_budget_us(), 0);
  uvt_loop_t l;
  uvt_open(&l);
  watchdog_t dog = {0};
  dog.timer.data = &dog;
  assert_int_equal(uv_timer_init(&l.loop, &dog.timer), 0);
  assert_int_equal(uv_timer_start(&dog.timer, on_watchdog, WATCHDOG_MS, 0), 0);
  uv_unref((uv_handle_t *)&dog.timer); /* the bridge alone decides when the loop may end */

  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  cuv_submit_opts_t on_stream = {.stream = stream};
  cuv_buffer_t *buf = uvt_buffer(sizeof(unsigned));
  uvt_call_t slow = {.loop = &l}, faulting = {.loop = &l};
  cuv_stats_t before;
  cuv_stats(&before);
  assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_slow_write_then_read(200, 5, buf), uvt_done, &slow,
                              &on_stream));
  unsigned long long bad = 0x10; /* the GPU's first page is never mapped */
  cuv_arg_t args[] = {CUV_ARG_VALUE(bad)};
  assert_cuv_ok(cuv_uv_submit(l.bridge,
                              cuv_launch(cuvt_kernel("fault_kernel"), CUV_DIM1(1), CUV_DIM1(1), 0,
                                         args, 1),
                              uvt_done, &faulting, &on_stream));

  uv_run(&l.loop, UV_RUN_DEFAULT);
  assert_false(dog.fired); /* else the fault never reached the callback */
  assert_int_equal(cuv_uv_pending(l.bridge), 0);

  /* The slow kernel ran before the fault: done, or caught by the fault on the way out. */
  assert_int_equal(slow.calls, 1);
  assert_true(slow.on_loop_thread);
  if (slow.status == 0)
    assert_int_equal(slow.payload, 5);
  else
    assert_true(CUV_IS_ECUDA(slow.status));
  /* The faulting one carries the driver's error. */
  assert_int_equal(faulting.calls, 1);
  assert_true(faulting.on_loop_thread);
  print_message("# faulting submission: %s\n", cuv_err_name(faulting.status));
  int r = cuv_cuda_result(faulting.status);
  assert_true(r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED);
  cuv_stats_t d = uvt_stats_delta(&before);
  assert_true(d.faults >= 1);
  assert_int_equal(d.completed_spin, 0);

  uvt_release_outputs(&slow, 1);
  cuv_buffer_unref(buf);
  cuv_stream_destroy(stream);
  uv_close((uv_handle_t *)&dog.timer, NULL);
  uvt_close(&l);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fault_while_waiting_on_reactor),
  };
  return cuvt_run(tests);
}
