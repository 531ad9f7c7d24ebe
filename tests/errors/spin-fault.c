/* A device fault seen by the inline spin (path 1 of lib/completion.c), not by the reactor: the
 * submitting thread makes the submission's driver calls itself (CUV_SUBMIT_INLINE=always) and
 * spins on its stream's word for a budget (CUV_SPIN_BUDGET_US=1000000); the submission's first
 * kernel holds the second, which writes through a bad pointer, until the spin runs. The word
 * never lands, so when the budget runs out the spin asks the stream, finds the fault and completes
 * the submission with it: the callback gets the fault code exactly once, counted as a spin
 * completion and a fault (and not by the reactor, which never saw the submission). Then the
 * process's later work fails as a faulted context's does: a submission on the stream is called
 * back once with the fault, a blocking executor and the stream's synchronize return it.
 *
 * The hold. On the simulator the first kernel is a gate (tests/gate.h's wait_flag) that a thread
 * opens once the submission's completion write was enqueued (cuv_sim_calls): everything before
 * the spin is then enqueued, whatever the machine's load, and the fault comes while the spin
 * runs. The thread opens it with the driver's own calls on a stream of its own, so cuv's
 * statistics count the faulting submission alone. A GPU has no call counts: there it is a 100 ms
 * sleep, against an enqueueing of three calls on an otherwise idle machine.
 *
 * A fault kills the context for the rest of the process, so the test runs in a child process of
 * its own, forked before anything of cuv's ran in this one (tests/config/config.c's pattern), and
 * reports by its exit status. Suites sim and gpu (skipped without a GPU). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "common.h"
#include "internal.h"

#define SLEEP_NS 100000000ull /* a GPU's first kernel: 0.1 s of the spin's 1 s */
#define GATE_BOUND_NS 20000000000ull /* the gate's kernel gives up after 20 s: never reached */

/* The child's verdicts (its exit status); 77: no GPU (cuvt_init's). */
enum { SPIN_SAW_IT = 0, CHECK_FAILED = 1, ANOTHER_PATH = 2 };

#define CHECK(cond)                                                                               \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "spin-fault.c:%d: %s\n", __LINE__, #cond);                                  \
      return CHECK_FAILED;                                                                        \
    }                                                                                             \
  } while (0)

typedef struct record {
  int calls, status;
} record_t;

static void done(int status, cuv_output_t *output, void *arg) {
  (void)output;
  record_t *r = arg;
  r->calls++;
  r->status = status;
}

/* Drains q until r was called back, up to 10 s (a bound against hanging, not an assertion). */
static void drain_until_called(cuv_queue_t *q, const record_t *r) {
  for (int i = 0; i < 100 && r->calls == 0; i++) {
    cuv_queue_wait(q, 100);
    cuv_queue_drain(q);
  }
}

/* The documented results of a kernel's bad access (tests/errors/fault.c): the simulator gives the
 * GPU's. */
static bool fault_result(int status) {
  int r = cuv_cuda_result(status);
  if (cuvt_is_sim())
    return r == CUDA_ERROR_ILLEGAL_ADDRESS;
  return r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED;
}

/* The simulator's gate: opened by its own thread once the completion write is enqueued. */
typedef struct gate {
  cuv_buffer_t *flag, *result;
  unsigned value;
  unsigned long writes_before; /* cuStreamWriteValue64 calls before the submission */
  CUresult open_result;        /* the opener's launch; the fault's code where it came first */
} gate_t;

static void *open_when_armed(void *arg) {
  gate_t *g = arg;
  while (cuv_sim_calls("cuStreamWriteValue64") <= g->writes_before)
    usleep(100);
  CUstream s = NULL;
  CUresult r = cuv__drv.cuCtxSetCurrent(cuv_device_context(cuvt_device()));
  if (r == CUDA_SUCCESS)
    r = cuv__drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  /* tests/gate.h's setter: the waiter reads the flag atomically, and so must it be written. */
  CUdeviceptr flag = (CUdeviceptr)cuv_buffer_ptr(g->flag);
  void *params[] = {&g->value, &flag};
  if (r == CUDA_SUCCESS)
    r = cuv__drv.cuLaunchKernel(cuvt_kernel("set_flag")->fn, 1, 1, 1, 1, 1, 1, 0, s, params,
                                NULL);
  if (r == CUDA_SUCCESS)
    r = cuv__drv.cuStreamSynchronize(s);
  g->open_result = r;
  return NULL;
}

static int gate_init(gate_t *g) {
  g->value = cuvt_random_u32() | 1u; /* never the cleared flag */
  CHECK(cuv_buffer_create(&g->flag, cuvt_device(), sizeof(unsigned)) == 0);
  CHECK(cuv_buffer_create(&g->result, cuvt_device(), sizeof(unsigned)) == 0);
  CHECK(cuv_buffer_set_hazard_mode(g->flag, CUV_HAZARD_NONE) == 0); /* as tests/gate.h's */
  CHECK(cuv_buffer_set_hazard_mode(g->result, CUV_HAZARD_NONE) == 0);
  CHECK(cuv_sync(cuv_memset32(g->flag, 0, 0, 1), NULL) == 0);
  g->writes_before = cuv_sim_calls("cuStreamWriteValue64");
  return 0;
}

/* The first kernel: the gate on the simulator, else the sleep (writing `value` into buf). */
static cuv_op_t *hold_op(gate_t *g, cuv_buffer_t *buf, unsigned value) {
  unsigned long long bound = GATE_BOUND_NS, ns = SLEEP_NS;
  if (g) {
    cuv_arg_t args[] = {CUV_ARG_VALUE(bound), CUV_ARG_VALUE(g->value), CUV_ARG_READ(g->flag),
                        CUV_ARG_WRITE(g->result)};
    return cuv_launch(cuvt_kernel("wait_flag"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 4);
  }
  cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(value), CUV_ARG_WRITE(buf)};
  return cuv_launch(cuvt_kernel("sleep_then_write"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 3);
}

static int attempt(void) {
  cuvt_init(); /* exits 77 in the gpu suite without a GPU */
  CHECK(cuvt_spin_budget_us() == 1000000);
  cuv_queue_t *q;
  cuv_stream_t *stream;
  cuv_buffer_t *buf;
  CHECK(cuv_buffer_create(&buf, cuvt_device(), sizeof(unsigned)) == 0);
  CHECK(cuv_queue_create(&q, NULL, NULL) == 0);
  CHECK(cuv_stream_create(&stream, cuvt_device()) == 0);
  cuv_submit_opts_t on_stream = {.stream = stream};
  unsigned long long bad = 0x10; /* the GPU's first page is never mapped */
  unsigned value = cuvt_random_u32();
  gate_t gate = {0};
  pthread_t opener;
  bool gated = cuvt_is_sim();
  if (gated) {
    if (gate_init(&gate) != 0)
      return CHECK_FAILED;
    CHECK(pthread_create(&opener, NULL, open_when_armed, &gate) == 0);
  }
  cuv_arg_t fault_args[] = {CUV_ARG_VALUE(bad)};
  cuv_op_t *op = cuv_seq(
      hold_op(gated ? &gate : NULL, buf, value),
      cuv_launch(cuvt_kernel("fault_kernel"), CUV_DIM1(1), CUV_DIM1(1), 0, fault_args, 1));
  record_t faulting = {0}, later = {0};
  cuv_stats_t before, after;
  cuv_stats(&before);
  CHECK(cuv_submit(q, op, done, &faulting, &on_stream) == 0);
  drain_until_called(q, &faulting); /* the spin ran in cuv_submit: the first drain has it */
  if (gated) {
    CHECK(pthread_join(opener, NULL) == 0);
    /* Opened before the fault, whose code its synchronize may meet (one context). */
    CHECK(gate.open_result == CUDA_SUCCESS || gate.open_result == CUDA_ERROR_ILLEGAL_ADDRESS);
  }
  cuv_stats(&after);
  fprintf(stderr, "# faulting submission: %s; spin %llu, reactor %llu, other paths %llu\n",
          cuv_err_name(faulting.status),
          (unsigned long long)(after.completed_spin - before.completed_spin),
          (unsigned long long)(after.completed_reactor - before.completed_reactor),
          (unsigned long long)(after.completed_sync - before.completed_sync +
                               after.completed_hostfn - before.completed_hostfn));
  CHECK(faulting.calls == 1);
  CHECK(fault_result(faulting.status));
  CHECK(after.faults - before.faults == 1);
  /* a fault is not a completion (tests/engine/stats.c) */
  CHECK(after.completed - before.completed == 0);
  bool by_spin = after.completed_spin - before.completed_spin == 1;
  if (by_spin)
    CHECK(after.completed_reactor == before.completed_reactor);

  /* Later work on the stream: called back once, with the fault. */
  CHECK(cuv_submit(q, cuv_memset32(buf, 0, value, 1), done, &later, &on_stream) == 0);
  drain_until_called(q, &later);
  CHECK(later.calls == 1 && cuv_status_is_fault(later.status));
  CHECK(cuv_status_is_fault(cuv_sync_on(stream, cuv_memset32(buf, 0, value, 1), NULL)));
  CHECK(cuv_status_is_fault(cuv_stream_synchronize(stream)));
  cuv_queue_drain(q);
  CHECK(faulting.calls == 1 && later.calls == 1); /* exactly once, also after more drains */
  /* Nothing is freed: the dead context may still name what the work used (lib/submission.c). */
  return by_spin ? SPIN_SAW_IT : ANOTHER_PATH;
}

static int probe(void) { return cuv_init() == CUV_ENODRIVER ? 77 : 0; }

static void test_fault_seen_by_inline_spin(void **state) {
  (void)state;
  int status = cuvt_child_status(attempt);
  if (status == ANOTHER_PATH)
    print_message("# the fault was seen by another path than the spin\n");
  assert_int_equal(status, SPIN_SAW_IT);
}

int main(void) {
  /* Whatever the suite's environment: the submitting thread spins, for longer than the sleep. */
  setenv("CUV_SPIN_BUDGET_US", "1000000", 1);
  setenv("CUV_SUBMIT_INLINE", "always", 1);
  if (strcmp(cuvt_suite_name(), "gpu") == 0 && cuvt_child_status(probe) == 77) {
    printf("1..0 # SKIP no GPU\n");
    return 77; /* the gpu suite's protocol is exitcode: 77 is skipped */
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fault_seen_by_inline_spin),
  };
  return cuvt_run(tests);
}
