/* A sticky fault in one device's part of a tree over two devices (docs/devices.md). A part
 * of another device runs on a stream of its own, joined back into the executing stream with an
 * event (lib/cross.c). Here device 1's part sleeps, then writes through a bad pointer: device 1's
 * context dies, the event the join waits for never completes (sim/event.c), and the executing
 * stream on device 0 waits for good while its context is healthy. The submission must still
 * fail with the fault's code, its callback exactly once, on every completion path: the reactor,
 * the inline spin, host callbacks and cuv_sync, as tests/meson.build chooses them (argument 2
 * and the environment), each in a process of its own since the fault ends device 1's use for the
 * rest of the process.
 *
 * Argument 1 chooses the tree: `second`, cuv_seq(device 0's op, device 1's faulting part), which
 * executes on device 0 (the submission's stream is not the faulting one); `first`,
 * cuv_seq(device 1's faulting part, device 0's op), which executes on device 1 and leaves device
 * 0's part waiting for it; `landing`, the second tree, then a download and a then over it, whose
 * wait for the download (inside the execution) must end with the fault instead of never, its
 * callback not run. Afterwards device 0 still computes right on fresh random data on a
 * stream of its own, and device 1 refuses work with the fault. A watchdog (alarm) fails the
 * test instead of letting it hang; nothing is timed. Suites sim (CUV_SIM_DEVICES=2) and gpu,
 * skipped with fewer than two devices. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "counted.h"

#define WATCHDOG_S 20
#define N 4099          /* elements of the buffers; not a multiple of the block size */
#define PART_SLEEP_MS 200 /* device 1's part runs this long before its fault (set-up: below) */

static const char *tree_kind, *executor;
/* Device 0's buffers, never freed: cuMemFree synchronizes the context, and a stream of device 0
 * waits for good once device 1 died (kept here, reachable, rather than leaked). */
static cuv_buffer_t *volatile kept[2];
static cuv_device_t *d1;
static cuv_kernel_t *sleep1, *fault1; /* device 1's */

static void on_watchdog(int sig) {
  (void)sig;
  static const char msg[] = "# watchdog: the fault never reached the submission\n";
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
  _exit(1);
}

/* Device 1's part: a sleep, then the fault. The sleep puts the fault after the whole tree was
 * enqueued and armed (a few driver calls), so the join's wait is in the executing stream when the
 * context dies. A fault before that (a machine that stalled the thread for the whole sleep) makes
 * the enqueueing fail instead, which the callback reports all the same (test_fault_in_part). */
static cuv_op_t *faulting_part(void) {
  unsigned long long ns = PART_SLEEP_MS * 1000000ull;
  unsigned no_value = 0;
  cuv_deviceptr_t no_flag = 0;
  cuv_arg_t sleep_args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(no_value), CUV_ARG_VALUE(no_flag)};
  unsigned long long bad = 0x10; /* the GPU's first page is never mapped */
  cuv_arg_t fault_args[] = {CUV_ARG_VALUE(bad)};
  return cuv_seq(cuv_launch(sleep1, CUV_DIM1(1), CUV_DIM1(1), 0, sleep_args, 3),
                 cuv_launch(fault1, CUV_DIM1(1), CUV_DIM1(1), 0, fault_args, 1));
}

/* Device 0's op: a fill of its own buffer. */
static cuv_op_t *device0_op(cuv_buffer_t *buf) {
  unsigned n = N, value = cuvt_random_u32();
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(value), CUV_ARG_WRITE(buf)};
  return cuv_launch(cuvt_kernel_ok("fill_u32"), CUVT_GRID(N), CUVT_BLOCK, 0, args, 3);
}

static atomic_int then_calls;

static cuv_op_t *count_then(cuv_output_t *out, void *arg) {
  (void)out;
  (void)arg;
  atomic_fetch_add(&then_calls, 1);
  return cuv_value(NULL, NULL);
}

static cuv_host_buffer_t *landing_buffer;

static cuv_op_t *tree(cuv_buffer_t *buf0) {
  if (strcmp(tree_kind, "first") == 0)
    return cuv_seq(faulting_part(), device0_op(buf0));
  cuv_op_t *second = cuv_seq(device0_op(buf0), faulting_part());
  if (strcmp(tree_kind, "landing") != 0)
    return second;
  /* A then behind a download waits, inside the execution, until the stream got there, which it
   * never does: that wait must end with the fault, and the callback never run. */
  cuv_op_t *download = cuv_download_into(landing_buffer, 0, buf0, 0, N * sizeof(unsigned));
  return cuv_then(cuv_seq(second, download), count_then, NULL);
}

/* The documented results of a kernel's bad access (tests/errors/fault.c): the simulator gives the
 * one the GPU gave there. */
static void assert_fault(int status) {
  print_message("# %s tree, %s: %s\n", tree_kind, executor, cuv_err_name(status));
  int r = cuv_cuda_result(status);
  if (cuvt_is_sim())
    assert_int_equal(r, CUDA_ERROR_ILLEGAL_ADDRESS);
  else
    assert_true(r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED);
}

typedef struct call {
  int calls, status;
} call_t;

static void on_done(int status, cuv_output_t *output, void *arg) {
  (void)output;
  call_t *c = arg;
  c->calls++;
  c->status = status;
}

/* Completions by the path that completes the submission under this process's configuration:
 * host callbacks are watched by the reactor, which completes them on a fault; a submission made on
 * this thread (no submitter threads) spins for a budget far beyond the part's sleep, and sees the
 * fault there. */
static uint64_t completions_by_path(const cuv_stats_t *d) {
  cuv_config_t c;
  assert_cuv_ok(cuv_config_get(&c));
  if (strcmp(executor, "sync") == 0)
    return d->completed_sync;
  if (c.host_sync == CUV_HOST_SYNC_OFF && c.submit_threads == 0 && c.spin_budget_us >= 1000000)
    return d->completed_spin;
  assert_true(c.host_sync != CUV_HOST_SYNC_OFF || c.spin_budget_us == 0);
  return d->completed_reactor;
}

static int submit_and_wait(cuv_op_t *op) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  call_t call = {0};
  assert_cuv_ok(cuv_submit(q, op, on_done, &call, NULL));
  while (call.calls == 0) {
    cuv_queue_wait(q, 100);
    cuv_queue_drain(q);
  }
  /* Nothing left to call back: the submission is finished (leaked on purpose), not pending. */
  assert_int_equal(cuv_queue_pending(q), 0);
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_int_equal(call.calls, 1);
  assert_cuv_ok(cuv_queue_destroy(q));
  return call.status;
}

/* Device 0 after the fault, on a stream of its own (those of the tree may wait for good): a
 * round trip through a kernel on fresh random data. */
static void assert_device0_computes(void) {
  cuv_stream_t *fresh;
  assert_cuv_ok(cuv_stream_create(&fresh, cuvt_device()));
  float *x = malloc(N * sizeof *x), *got = malloc(N * sizeof *got);
  assert_non_null(x);
  assert_non_null(got);
  cuvt_random_ints(x, N);
  cuv_buffer_t *buf;
  assert_cuv_ok(cuv_buffer_create(&buf, cuvt_device(), N * sizeof *x));
  unsigned n = N;
  float factor = 3.0f;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(factor), CUV_ARG_RW(buf)};
  cuv_op_t *scale = cuv_launch(cuvt_kernel_ok("scale"), CUVT_GRID(N), CUVT_BLOCK, 0, args, 3);
  cuv_op_t *op = cuv_seq(cuv_seq(cuv_memcpy_htod(buf, 0, x, N * sizeof *x, CUV_COPY_STAGE), scale),
                         cuv_memcpy_dtoh(got, buf, 0, N * sizeof *got));
  assert_cuv_ok(cuv_sync_on(fresh, op, NULL));
  for (size_t i = 0; i < N; i++)
    x[i] *= factor;
  cuvt_assert_floats_equal(got, x, N);
  kept[1] = buf;
  cuv_stream_destroy(fresh);
  free(x);
  free(got);
}

static void test_fault_in_part(void **state) {
  (void)state;
  cuv_buffer_t *buf0;
  assert_cuv_ok(cuv_buffer_create(&buf0, cuvt_device(), N * sizeof(unsigned)));
  assert_cuv_ok(cuv_host_buffer_create(&landing_buffer, cuvt_device(), N * sizeof(unsigned)));
  cuv_stats_t before, after;
  cuv_stats(&before);
  bool sync = strcmp(executor, "sync") == 0;
  int status = sync ? cuv_sync(tree(buf0), NULL) : submit_and_wait(tree(buf0));
  cuv_stats(&after);
  assert_fault(status);
  cuv_stats_t d = {
      .faults = after.faults - before.faults,
      .leaked = after.leaked - before.leaked,
      .completed_spin = after.completed_spin - before.completed_spin,
      .completed_reactor = after.completed_reactor - before.completed_reactor,
      .completed_sync = after.completed_sync - before.completed_sync,
  };
  assert_int_equal(d.faults, 1);
  assert_int_equal(d.leaked, 1); /* what the GPU may still touch stays held */
  /* Else the fault came before the tree was armed: in the first tree, the arming's write into
   * device 1's dead context failed with it and completed the submission at once. */
  uint64_t by_path = completions_by_path(&d);
  if (by_path == 0 && strcmp(tree_kind, "first") == 0 && !sync && d.completed_sync == 1)
    print_message("# the fault came before the tree was armed\n");
  else
    assert_int_equal(by_path, 1);
  assert_int_equal(after.in_flight, before.in_flight);

  assert_device0_computes();
  /* Device 1's context is the dead one: its work is refused with the fault. */
  cuv_buffer_t *buf1;
  int rc = cuv_buffer_create(&buf1, d1, 64);
  if (rc == 0) {
    rc = cuv_sync(cuv_memset8(buf1, 0, 0, 64), NULL);
    cuv_buffer_unref(buf1);
  }
  assert_true(cuv_status_is_fault(rc));
  assert_int_equal(atomic_load(&then_calls), 0);
  kept[0] = buf0;
  cuv_host_buffer_unref(landing_buffer); /* the leaked submission holds it */
}

int main(int argc, char **argv) {
  if (argc != 3 ||
      (strcmp(argv[1], "first") && strcmp(argv[1], "second") && strcmp(argv[1], "landing")) ||
      (strcmp(argv[2], "submit") != 0 && strcmp(argv[2], "sync") != 0)) {
    fprintf(stderr, "usage: %s first|second|landing submit|sync\n", argv[0]);
    return 2;
  }
  tree_kind = argv[1];
  executor = argv[2];
  signal(SIGALRM, on_watchdog);
  alarm(WATCHDOG_S);
  cuvt_init();
  int devices = 0;
  cuv_device_count(&devices);
  if (devices < 2) {
    printf("1..0 # SKIP one device: a tree over two devices needs two\n");
    return 77;
  }
  cuv_module_t *m1 = NULL;
  int rc = cuv_device_open(&d1, 1);
  if (rc == 0)
    rc = cuv_module_load_file(&m1, d1, cuvt_ptx_path());
  if (rc == 0 && (rc = cuv_kernel_get(&sleep1, m1, "sleep_then_write")) == 0)
    rc = cuv_kernel_get(&fault1, m1, "fault_kernel");
  cuv_module_unref(m1);
  if (rc != 0) {
    fprintf(stderr, "device 1's set-up: %s\n", cuv_err_name(rc));
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fault_in_part),
  };
  return cuvt_run(tests);
}
