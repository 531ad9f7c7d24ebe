/* The sticky fault, on the simulator and on the GPU, in a process of its own (a fault kills the
 * context for the rest of the process). A kernel writes through a bad pointer; then every stream
 * reports the error, work queued behind it or enqueued after it never runs, and the error stays
 * the same on every later call. Asserts on the test thread only: the host functions count. */
#include <stdatomic.h>

#include "driver-util.h"

/* Far below any allocation: the GPU's first page is never mapped. */
#define BAD_POINTER ((CUdeviceptr)0x10)

static atomic_uint host_calls;

static void CUDA_CB count_host_call(void *arg) { atomic_fetch_add(&host_calls, 1); }

/* The documented results of a kernel's bad access: CUDA_ERROR_ILLEGAL_ADDRESS ("a load or store
 * instruction on an invalid memory address"), or on some systems CUDA_ERROR_LAUNCH_FAILED ("an
 * exception occurred on the device ... dereferencing an invalid device pointer"). The simulator
 * gives the one current GPUs give. */
static void assert_fault_result(CUresult r) {
  if (cuvt_is_sim())
    assert_int_equal(r, CUDA_ERROR_ILLEGAL_ADDRESS);
  else if (r != CUDA_ERROR_ILLEGAL_ADDRESS && r != CUDA_ERROR_LAUNCH_FAILED)
    fail_msg("fault reported as %d (%s)", (int)r, cuv_err_name(cuv__cu(r)));
}

/* Work enqueued after the fault is refused with the fault or accepted and then dropped. */
static void assert_refused_or_ok(CUresult r, CUresult fault) {
  if (r != CUDA_SUCCESS && r != fault)
    fail_msg("enqueue after the fault returned %d, neither success nor the fault %d", (int)r,
             (int)fault);
}

static void test_sticky_fault(void **state) {
  enum { GATE, FLAG_QUEUED, FLAG_LATE, WORDS };
  CUdeviceptr d;
  uint32_t *w = cuvt_mapped_words(WORDS, &d);
  uint32_t open = cuvt_random_nonzero(), queued_value = cuvt_random_nonzero(),
           late_value = cuvt_random_nonzero();
  /* Streams exist before the fault: after it, creating one fails. c stays idle. */
  CUstream a = cuvt_stream_new(), b = cuvt_stream_new(), c = cuvt_stream_new();
  CUevent ev;
  CU_OK(cuv__drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));

  /* Queued before the fault, held behind a gate the host opens only after it. */
  CU_OK(cuv__drv.cuStreamWaitValue32(b, d + 4 * GATE, open, CU_STREAM_WAIT_VALUE_EQ));
  CU_OK(cuv__drv.cuLaunchHostFunc(b, count_host_call, NULL));
  CU_OK(cuv__drv.cuStreamWriteValue32(b, d + 4 * FLAG_QUEUED, queued_value, 0));

  CUdeviceptr bad = BAD_POINTER;
  void *params[] = {&bad};
  cuvt_launch(a, "fault_kernel", 1, params);
  /* The kernel may already have faulted: the record then fails with the fault. */
  CUresult recorded = cuv__drv.cuEventRecord(ev, a);
  CUresult fault = cuv__drv.cuStreamSynchronize(a);
  assert_fault_result(fault);
  assert_refused_or_ok(recorded, fault);
  cuvt_store(&w[GATE], open);

  /* Enqueued after the fault, on a stream that never saw it. */
  assert_refused_or_ok(cuv__drv.cuLaunchHostFunc(c, count_host_call, NULL), fault);
  assert_refused_or_ok(cuv__drv.cuStreamWriteValue32(c, d + 4 * FLAG_LATE, late_value, 0), fault);

  /* A bounded wait proving nothing ran: in a healthy context the gate's opening lets b's host
   * function and write through within microseconds; 300 ms is over 1000 times that. */
  cuvt_sleep_ms(300);
  assert_int_equal(atomic_load(&host_calls), 0);
  assert_int_equal(cuvt_load(&w[FLAG_QUEUED]), 0);
  assert_int_equal(cuvt_load(&w[FLAG_LATE]), 0);

  /* Sticky and stable: every stream, the event and the context report the same error, again. */
  CUstream streams[] = {a, b, c};
  for (int round = 0; round < 3; round++) {
    for (size_t i = 0; i < 3; i++) {
      assert_int_equal(cuv__drv.cuStreamQuery(streams[i]), fault);
      assert_int_equal(cuv__drv.cuStreamSynchronize(streams[i]), fault);
    }
    if (recorded == CUDA_SUCCESS) /* behind the fault: it can never complete */
      assert_int_equal(cuv__drv.cuEventQuery(ev), fault);
    assert_int_equal(cuv__drv.cuCtxSynchronize(), fault);
  }
  assert_int_equal(atomic_load(&host_calls), 0);
  /* Nothing is freed: after a fault the driver can no longer prove the memory is unused. */
}

int main(void) {
  cuvt_drv_setup();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sticky_fault),
  };
  return cuvt_run(tests);
}
