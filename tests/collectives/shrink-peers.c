/* A killed rank and the survivor's shrink, with ranks in two processes: rank 0 here on device 0,
 * rank 1 in a child process on device 1. A first all-reduce combines both processes' data; then
 * the child waits, rank 0's second all-reduce waits for it (no callback), and the child is killed
 * (SIGKILL). With the timeout of 100 ms set, the pending op fails, its callback once, with
 * CUV_ETIMEDOUT or the error NCCL reports (ncclRemoteError where it sees the peer's socket close),
 * never hangs; the survivor's shrink without rank 1 is a communicator of one rank (rank 0 of 1),
 * whose all-reduce of fresh random data is that data. With a NCCL that has ncclCommShrink but no
 * ncclCommRevoke (2.27), the failure aborts the communicator and the shrink fails with
 * CUV_ENOTSUP. Suites sim and gpu; the gpu suite skips it with fewer than two GPUs, without NCCL,
 * or with a NCCL before 2.27. A watchdog (alarm) fails the file rather than let it hang. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "peer-rank.h"

#define COUNT 4096
#define TIMEOUT_MS 100
#define WATCHDOG_S 120


static cuv_device_t *dev0;
static int nccl_version;
static pid_t child_pid;

static uint64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static void on_watchdog(int sig) {
  (void)sig;
  static const char msg[] = "shrink-peers: watchdog: the scenario hangs\n";
  if (child_pid > 0)
    kill(child_pid, SIGKILL);
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static uint32_t child_value(size_t i) { return (uint32_t)(i * 7 + 3); }

/* ---- the child: rank 1 ---- */

/* One all-reduce with rank 0, then it waits to be killed (and dies with its parent). */
static int child(const char *id_hex) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  cuv_device_t *dev;
  cuv_comm_t *comm;
  int rc = cuvt_join_as_rank1(id_hex, &dev, &comm);
  if (rc != 0)
    return rc;
  static uint32_t data[COUNT];
  for (size_t i = 0; i < COUNT; i++)
    data[i] = child_value(i);
  cuv_buffer_t *buf;
  if (cuv_buffer_create(&buf, dev, sizeof data) != 0 ||
      cuv_sync(cuv_memcpy_htod(buf, 0, data, sizeof data, 0), NULL) != 0 ||
      cuv_sync(cuv_comm_all_reduce(comm, NULL, &buf, COUNT, CUV_NCCL_UINT32, CUV_NCCL_SUM), NULL) !=
          0)
    return 4;
  for (;;)
    pause();
}

/* ---- rank 0 ---- */

typedef struct seen {
  int calls, status;
  void *data;
} seen_t;

static void note(int status, cuv_output_t *output, void *arg) {
  seen_t *s = arg;
  s->calls++;
  s->status = status;
  if (status == 0 && output && output->data)
    s->data = cuv_output_take(output).data;
}

static cuv_buffer_t *filled(const uint32_t *data) {
  cuv_buffer_t *buf;
  assert_cuv_ok(cuv_buffer_create(&buf, dev0, COUNT * 4));
  assert_cuv_ok(cuv_sync(cuv_memcpy_htod(buf, 0, data, COUNT * 4, 0), NULL));
  return buf;
}

static cuv_op_t *sum_op(cuv_comm_t *comm, cuv_buffer_t *buf) {
  return cuv_comm_all_reduce(comm, NULL, &buf, COUNT, CUV_NCCL_UINT32, CUV_NCCL_SUM);
}

static void test_killed_rank(void **state) {
  (void)state;
  cuv_nccl_id_t id;
  assert_cuv_ok(cuv_nccl_unique_id(&id));
  child_pid = cuvt_spawn_rank1(&id);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_comm_init_rank(dev0, &id, 0, 2), &out));
  cuv_comm_t *comm = cuv_output_take(&out).data;
  static uint32_t data[COUNT], got[COUNT];
  for (size_t i = 0; i < COUNT; i++)
    data[i] = cuvt_random_u32() % 1000000u;
  cuv_buffer_t *buf = filled(data);
  assert_cuv_ok(cuv_sync(sum_op(comm, buf), NULL));
  assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(got, buf, 0, sizeof got), NULL));
  for (size_t i = 0; i < COUNT; i++)
    assert_int_equal(got[i], data[i] + child_value(i));

  cuv_queue_t *q;
  seen_t pending = {0};
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  uint64_t submitted = now_ms();
  assert_cuv_ok(cuv_submit(q, sum_op(comm, buf), note, &pending, NULL));
  assert_int_equal(cuv_queue_wait(q, 20), CUV_EBUSY); /* rank 1 does not join */
  assert_int_equal(pending.calls, 0);
  /* Set now: before, the child's start-up would count against it, and a slow machine's wait
   * above could outlast it. It counts from the op's submission. */
  assert_cuv_ok(cuv_comm_set_timeout(comm, TIMEOUT_MS));
  uint64_t t0 = now_ms();
  assert_int_equal(kill(child_pid, SIGKILL), 0);
  int wstatus;
  assert_int_equal(waitpid(child_pid, &wstatus, 0), child_pid);
  child_pid = 0;
  assert_true(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
  while (cuv_queue_pending(q) > 0) {
    assert_cuv_ok(cuv_queue_wait(q, -1));
    cuv_queue_drain(q);
  }
  assert_cuv_ok(cuv_queue_destroy(q));
  uint64_t failed = now_ms();
  print_message("# the pending op failed %llu ms after the kill, %llu ms after it was submitted, "
                "with %s (timeout %d ms)\n",
                (unsigned long long)(failed - t0), (unsigned long long)(failed - submitted),
                cuv_err_name(pending.status), TIMEOUT_MS);
  assert_int_equal(pending.calls, 1);
  assert_true(pending.status == CUV_ETIMEDOUT || CUV_IS_ENCCL(pending.status));
  assert_int_equal(cuv_comm_status(comm), pending.status);

  int dead = 1;
  out = (cuv_output_t){NULL, NULL, NULL};
  int rc = cuv_sync(cuv_comm_shrink(comm, &dead, 1), &out);
  if (nccl_version < 22800) { /* no ncclCommRevoke: the failure aborted it */
    assert_int_equal(rc, CUV_ENOTSUP);
    assert_null(out.data);
  } else {
    assert_cuv_ok(rc);
    cuv_comm_t *alone = cuv_output_take(&out).data;
    assert_int_equal(cuv_comm_size(alone), 1);
    assert_int_equal(cuv_comm_local_count(alone), 1);
    assert_int_equal(cuv_comm_rank(alone, 0), 0);
    assert_ptr_equal(cuv_comm_device(alone, 0), dev0);
    for (size_t i = 0; i < COUNT; i++)
      data[i] = cuvt_random_u32() % 1000000u;
    assert_cuv_ok(cuv_sync(cuv_memcpy_htod(buf, 0, data, sizeof data, 0), NULL));
    assert_cuv_ok(cuv_sync(sum_op(alone, buf), NULL));
    assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(got, buf, 0, sizeof got), NULL));
    assert_memory_equal(got, data, sizeof got);
    assert_int_equal(cuv_comm_status(alone), 0);
    cuv_comm_unref(alone);
  }
  cuv_buffer_unref(buf);
  cuv_comm_unref(comm);
}

int main(int argc, char **argv) {
  cuv_sim_set_device_count(2);
  if (argc == 3 && strcmp(argv[1], "child") == 0) {
    if (cuv_init() != 0)
      return 5;
    return child(argv[2]);
  }
  signal(SIGALRM, on_watchdog);
  alarm(WATCHDOG_S);
  cuvt_init();
  int devices = 0;
  cuv_device_count(&devices);
  if (devices < 2) {
    printf("1..0 # SKIP one device: a group of two processes needs two\n");
    return 77;
  }
  if (cuv_nccl_version(&nccl_version) != 0 || nccl_version < 22700) {
    printf("1..0 # SKIP no NCCL with ncclCommShrink (2.27 or later): %s\n",
           cuv_nccl_error() ? cuv_nccl_error() : "an older version");
    return 77;
  }
  if (cuv_device_open(&dev0, 0) != 0)
    return 1;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_killed_rank)};
  int rc = cuvt_run(tests);
  cuv_device_unref(dev0);
  return rc;
}
