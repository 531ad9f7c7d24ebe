/* Communicators that fail, on the simulator's NCCL (its failure injection: include/cuv/sim.h):
 * an asynchronous error, a peer that dies (in this process, or a peer process that exits), a peer
 * that vanishes without NCCL noticing (the communicator's timeout ends its ops), an abort on
 * request, a creation that fails, and NCCL's init held while a creation is pending (the
 * ops' groups end blocking, on the issuing thread).
 * Each failure reaches the op that was pending, once, with NCCL's error; the communicator's work is
 * ended once (ncclCommRevoke, counted; ncclCommAbort where CUV_SIM_HIDE hides the revoke, as in a
 * NCCL before 2.28), and later ops fail at once. Also: the thread's current
 * context after NCCL calls (the simulator's, like NCCL, make their device's context current), and
 * ranks in two processes: their data, then the death of one. Suite sim only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver-util.h"
#include "nccl-data.h"
#include "little.h"
#include "peer-rank.h"

enum {
  NCCL_SYSTEM_ERROR = 2,
  NCCL_INTERNAL_ERROR = 3,
  NCCL_INVALID_USAGE = 5,
  NCCL_REMOTE_ERROR = 6
};
#define NDEV 2
#define CHILD_COUNT 1000

static cuv_device_t *devs[NDEV];

/* ---- set-up ---- */

/* What ends a failed communicator's work: its revoke where NCCL has one (2.28), else its abort. */
static const char *ending_call(void) {
  return cuv_sim_nccl_proc("ncclCommRevoke") ? "ncclCommRevoke" : "ncclCommAbort";
}

static cuv_comm_t *make_clique(void) {
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_comm_init_all(devs, NDEV), &out));
  return cuv_output_take(&out).data;
}

static void take_comm(int status, cuv_output_t *output, void *arg) {
  assert_int_equal(status, 0);
  *(cuv_comm_t **)arg = cuv_output_take(output).data;
}

static void drain_all(cuv_queue_t *q) {
  while (cuv_queue_pending(q) > 0) {
    assert_cuv_ok(cuv_queue_wait(q, -1));
    cuv_queue_drain(q);
  }
}

/* Ranks 0 and 1 of one group as two communicators: created at once, or neither would finish. */
static void make_pair(cuv_comm_t **c0, cuv_comm_t **c1) {
  cuv_nccl_id_t id;
  cuv_queue_t *q;
  assert_cuv_ok(cuv_nccl_unique_id(&id));
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  assert_cuv_ok(cuv_submit(q, cuv_comm_init_rank(devs[0], &id, 0, 2), take_comm, c0, NULL));
  assert_cuv_ok(cuv_submit(q, cuv_comm_init_rank(devs[1], &id, 1, 2), take_comm, c1, NULL));
  drain_all(q);
  assert_cuv_ok(cuv_queue_destroy(q));
  assert_non_null(*c0);
  assert_non_null(*c1);
}

/* The end of a pair whose rank 0 failed with `error`: a later op on it fails at once with the
 * same error; then both ranks go. */
static void pair_end(little_t *l0, cuv_comm_t *c0, cuv_comm_t *c1, int error) {
  cuv_op_t *late = little_op(l0, c0);
  assert_int_equal(cuv_op_error(late), error);
  cuv_op_destroy(late);
  little_free(l0);
  cuv_comm_unref(c0);
  cuv_comm_unref(c1);
}

/* A one-element all-reduce of fresh random values through comm: every local rank holds the
 * host's sum. */
static void little_expect_sum(cuv_comm_t *comm) {
  little_t l;
  little_init(&l, comm);
  uint32_t in[NDEV], want = 0, got;
  for (unsigned r = 0; r < l.n; r++) {
    in[r] = cuvt_random_u32() % 100000;
    want += in[r];
    assert_cuv_ok(cuv_sync(cuv_memcpy_htod(l.buf[r], 0, &in[r], 4, 0), NULL));
  }
  assert_cuv_ok(cuv_sync(little_op(&l, comm), NULL));
  for (unsigned r = 0; r < l.n; r++) {
    assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(&got, l.buf[r], 0, 4), NULL));
    assert_int_equal(got, want);
  }
  little_free(&l);
}

/* ---- the thread's context ---- */

/* At execution, after what came before in the tree: is this thread's context the executing
 * stream's device's? */
static cuv_op_t *note_context(cuv_stream_t *stream, void *arg) {
  CUcontext ctx = NULL;
  int *right = arg;
  *right = cuv__drv.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS &&
           ctx == cuv_device_context(cuv_stream_device(stream));
  return cuv_value(NULL, NULL);
}

/* The simulator's NCCL, as NCCL does, leaves the last rank's device's context current: the next
 * op of the tree must still find the executing device's, after the creation and after a
 * collective. */
static void test_context_given_back(void **state) {
  (void)state;
  int right[3] = {0, 0, 0};
  cuv_op_t *pair[2] = {cuv_comm_init_all(devs, NDEV),
                       cuv_with_context(note_context, &right[0], NULL)};
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_zip(pair, 2), &out));
  cuv_comm_t *comm = cuv_output_take(cuv_tuple_get(&out, 0)).data;
  cuv_output_release(&out);
  little_t l;
  little_init(&l, comm);
  for (int i = 1; i <= 2; i++) /* again once the event pools are warm: no bind on the way */
    assert_cuv_ok(cuv_sync(
        cuv_seq(little_op(&l, comm), cuv_with_context(note_context, &right[i], NULL)), NULL));
  assert_true(right[0]);
  assert_true(right[1]);
  assert_true(right[2]);
  little_free(&l);
  cuv_comm_unref(comm);
}

/* ---- failures ---- */

/* An asynchronous error on one rank while an op waits for it: the op fails with it, the clique's
 * work is ended once, and later ops fail at once; an abort afterwards aborts the clique once
 * (revoked, it still had its NCCL communicators), and again does nothing more. */
static void test_async_error(void **state) {
  (void)state;
  cuv_comm_t *comm = make_clique();
  little_t l;
  little_init(&l, comm);
  unsigned long aborts = cuv_sim_calls("ncclCommAbort"), ends = cuv_sim_calls(ending_call());
  assert_int_equal(cuv_sim_nccl_set_async_error(cuv_comm_handle(comm, 1), NCCL_INTERNAL_ERROR), 0);
  uint64_t t0 = cuvt_now_ms();
  assert_int_equal(cuv_sync(little_op(&l, comm), NULL), CUV_ENCCL(NCCL_INTERNAL_ERROR));
  print_message("# the pending op failed %llu ms after it was submitted\n",
                (unsigned long long)(cuvt_now_ms() - t0));
  assert_int_equal(cuv_comm_status(comm), CUV_ENCCL(NCCL_INTERNAL_ERROR));
  assert_int_equal(cuv_sim_calls(ending_call()) - ends, NDEV);
  cuv_op_t *late = little_op(&l, comm);
  assert_int_equal(cuv_op_error(late), CUV_ENCCL(NCCL_INTERNAL_ERROR));
  cuv_op_destroy(late);
  assert_int_equal(cuv_comm_abort(comm), 0);
  assert_int_equal(cuv_comm_abort(comm), 0);
  assert_int_equal(cuv_comm_status(comm), CUV_ENCCL(NCCL_INTERNAL_ERROR));
  while (cuv_sim_calls("ncclCommAbort") - aborts < NDEV) /* cuv-nccl makes the abort calls */
    nanosleep(&(struct timespec){0, 1000000L}, NULL);
  little_free(&l);
  cuv_comm_unref(comm);
  assert_int_equal(cuv_sim_calls("ncclCommAbort") - aborts, NDEV); /* never twice */
}

/* Rank 1 dies while rank 0's op waits for it: rank 0's op fails with ncclRemoteError; rank 1's
 * own communicator reports ncclSystemError to the op it is given. */
static void test_peer_dies(void **state) {
  (void)state;
  cuv_comm_t *c0, *c1;
  make_pair(&c0, &c1);
  little_t l0, l1;
  little_init(&l0, c0);
  little_init(&l1, c1);
  assert_int_equal(cuv_sim_nccl_kill(cuv_comm_handle(c1, 0)), 0);
  assert_int_equal(cuv_sync(little_op(&l0, c0), NULL), CUV_ENCCL(NCCL_REMOTE_ERROR));
  assert_int_equal(cuv_comm_status(c0), CUV_ENCCL(NCCL_REMOTE_ERROR));
  assert_int_equal(cuv_sync(little_op(&l1, c1), NULL), CUV_ENCCL(NCCL_SYSTEM_ERROR));
  little_free(&l0);
  little_free(&l1);
  cuv_comm_unref(c0);
  cuv_comm_unref(c1);
}

static void note_status(int status, cuv_output_t *output, void *arg) {
  (void)output;
  int *seen = arg;
  seen[0]++;
  seen[1] = status;
}

/* An op of rank 0 that rank 1 never joins waits; cuv_comm_abort fails it with CUV_ECANCELED, once,
 * and aborts rank 0 once. */
static void test_abort_pending(void **state) {
  (void)state;
  cuv_comm_t *c0, *c1;
  make_pair(&c0, &c1);
  little_t l0;
  little_init(&l0, c0);
  unsigned long aborts = cuv_sim_calls("ncclCommAbort");
  cuv_queue_t *q;
  int seen[2] = {0, 0};
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  assert_cuv_ok(cuv_submit(q, little_op(&l0, c0), note_status, seen, NULL));
  assert_int_equal(cuv_queue_wait(q, 50), CUV_EBUSY); /* it waits for rank 1 */
  assert_int_equal(cuv_comm_abort(c0), 0);
  assert_int_equal(cuv_comm_abort(c0), 0);
  drain_all(q);
  assert_int_equal(seen[0], 1);
  assert_int_equal(seen[1], CUV_ECANCELED);
  assert_int_equal(cuv_sim_calls("ncclCommAbort") - aborts, 1);
  assert_cuv_ok(cuv_queue_destroy(q));
  pair_end(&l0, c0, c1, CUV_ECANCELED);
}

#define VANISH_OPS 3
#define VANISH_TIMEOUT_MS 50

/* Rank 1 vanishes (NCCL tells rank 0 nothing, as when a dead peer's kernels spin on NVLink):
 * rank 0's ops wait, with no timeout for good; once cuv_comm_set_timeout is set, every pending op
 * fails with CUV_ETIMEDOUT, each callback once, rank 0's work is ended once, and later ops fail at
 * once. */
static void test_peer_vanishes(void **state) {
  (void)state;
  cuv_comm_t *c0, *c1;
  make_pair(&c0, &c1);
  little_t l0;
  little_init(&l0, c0);
  unsigned long ends = cuv_sim_calls(ending_call());
  assert_int_equal(cuv_sim_nccl_vanish(cuv_comm_handle(c1, 0)), 0);
  cuv_queue_t *q;
  int seen[VANISH_OPS][2] = {{0}};
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  for (int i = 0; i < VANISH_OPS; i++)
    assert_cuv_ok(cuv_submit(q, little_op(&l0, c0), note_status, seen[i], NULL));
  assert_int_equal(cuv_queue_wait(q, 50), CUV_EBUSY); /* no error from NCCL: they wait */
  assert_int_equal(cuv_comm_status(c0), 0);
  uint64_t t0 = cuvt_now_ms();
  assert_cuv_ok(cuv_comm_set_timeout(c0, VANISH_TIMEOUT_MS));
  drain_all(q);
  printf("# the pending ops (issued 50 ms before) failed %llu ms after the %d ms timeout was "
         "set\n",
         (unsigned long long)(cuvt_now_ms() - t0), VANISH_TIMEOUT_MS);
  for (int i = 0; i < VANISH_OPS; i++) {
    assert_int_equal(seen[i][0], 1);
    assert_int_equal(seen[i][1], CUV_ETIMEDOUT);
  }
  assert_int_equal(cuv_comm_status(c0), CUV_ETIMEDOUT);
  assert_int_equal(cuv_sim_calls(ending_call()) - ends, 1);
  assert_cuv_ok(cuv_queue_destroy(q));
  pair_end(&l0, c0, c1, CUV_ETIMEDOUT);
}

/* A communicator whose ops end within its timeout: they succeed and it stays usable. */
static void test_timeout_not_reached(void **state) {
  (void)state;
  cuv_comm_t *comm = make_clique();
  assert_cuv_ok(cuv_comm_set_timeout(comm, 60000));
  little_expect_sum(comm);
  assert_int_equal(cuv_comm_status(comm), 0);
  assert_int_equal(cuv_comm_set_timeout(NULL, 1), CUV_EINVAL);
  cuv_comm_unref(comm);
}

/* A creation whose NCCL initialization fails: the op fails with NCCL's error, no output. */
static void test_creation_fails(void **state) {
  (void)state;
  cuv_sim_fail("ncclCommInitRankConfig", 2, NCCL_SYSTEM_ERROR);
  cuv_output_t out = {(void *)1, NULL, NULL};
  assert_int_equal(cuv_sync(cuv_comm_init_all(devs, NDEV), &out), CUV_ENCCL(NCCL_SYSTEM_ERROR));
  assert_null(out.data);
  cuv_sim_fail_clear();
  cuv_comm_unref(make_clique()); /* and the next works */
}

/* Two ranks of one group on one GPU: NCCL's init refuses them ("Duplicate GPU detected",
 * ncclInvalidUsage), and so does the simulator's; both creations fail, neither hangs. */
static void test_ranks_on_one_gpu(void **state) {
  (void)state;
  cuv_nccl_id_t id;
  cuv_queue_t *q;
  int seen[2][2] = {{0, 0}, {0, 0}};
  assert_cuv_ok(cuv_nccl_unique_id(&id));
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  for (int r = 0; r < 2; r++)
    assert_cuv_ok(
        cuv_submit(q, cuv_comm_init_rank(devs[0], &id, r, 2), note_status, seen[r], NULL));
  drain_all(q);
  assert_cuv_ok(cuv_queue_destroy(q));
  for (int r = 0; r < 2; r++) {
    assert_int_equal(seen[r][0], 1);
    assert_int_equal(seen[r][1], CUV_ENCCL(NCCL_INVALID_USAGE));
  }
}

/* The ops' groups end as blocking ones, on the issuing thread: with the simulator's launch delay
 * of non-blocking groups set (NCCL's thread per ncclGroupEnd), no group of cuv's pays it, the
 * simulator counts every group cuv ends as blocking and none as non-blocking, and the download
 * ordered after the all-reduce sees the host's sum. */
static void test_groups_end_blocking(void **state) {
  (void)state;
  cuv_comm_t *comm = make_clique();
  uint32_t in[NDEV], want = 0, zero = 0;
  cuv_buffer_t *send[NDEV], *recv[NDEV];
  for (int r = 0; r < NDEV; r++) {
    in[r] = cuvt_random_u32() % 100000;
    want += in[r];
    assert_cuv_ok(cuv_buffer_create(&send[r], devs[r], 4));
    assert_cuv_ok(cuv_buffer_create(&recv[r], devs[r], 4));
    assert_cuv_ok(cuv_sync(cuv_memcpy_htod(send[r], 0, &in[r], 4, 0), NULL));
    assert_cuv_ok(cuv_sync(cuv_memcpy_htod(recv[r], 0, &zero, 4, 0), NULL));
  }
  unsigned long blocking0, nonblocking0, blocking1, nonblocking1;
  cuv_sim_nccl_group_counts(&blocking0, &nonblocking0);
  cuv_sim_nccl_set_launch_delay_us(30000); /* what a non-blocking group would pay */
  cuv_output_t out;
  assert_cuv_ok(
      cuv_sync(cuv_seq(cuv_comm_all_reduce(comm, send, recv, 1, CUV_NCCL_UINT32, CUV_NCCL_SUM),
                       cuv_download(recv[0], 0, 4)),
               &out));
  cuv_sim_nccl_set_launch_delay_us(0);
  cuv_sim_nccl_group_counts(&blocking1, &nonblocking1);
  assert_int_equal(blocking1 - blocking0, 1);
  assert_int_equal(nonblocking1 - nonblocking0, 0);
  assert_int_equal(*(uint32_t *)out.data, want);
  cuv_output_release(&out);
  for (int r = 0; r < NDEV; r++) {
    cuv_buffer_unref(send[r]);
    cuv_buffer_unref(recv[r]);
  }
  cuv_comm_unref(comm);
}

/* NCCL's blocking init held by the simulator: cuv_submit returned, and the init waits inside
 * NCCL on a thread of cuv's, not on this one (which would never get here) nor on a submitter (the
 * queue would not see the creation pending); the creation is not delivered until the init ended,
 * and the communicator then sums right. */
static void test_init_off_the_submitter(void **state) {
  (void)state;
  cuv_queue_t *q;
  cuv_comm_t *comm = NULL;
  unsigned waiting = cuv_sim_nccl_inits_waiting();
  cuv_sim_nccl_hold_inits(1);
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  assert_cuv_ok(cuv_submit(q, cuv_comm_init_all(devs, NDEV), take_comm, &comm, NULL));
  while (cuv_sim_nccl_inits_waiting() == waiting) /* until the init is inside NCCL's init */
    nanosleep(&(struct timespec){0, 1000000L}, NULL);
  assert_int_equal(cuv_queue_wait(q, 20), CUV_EBUSY); /* held: not delivered */
  assert_int_equal(cuv_queue_pending(q), 1);
  assert_null(comm);
  cuv_sim_nccl_hold_inits(0);
  drain_all(q);
  assert_cuv_ok(cuv_queue_destroy(q));
  assert_non_null(comm);
  little_expect_sum(comm);
  cuv_comm_unref(comm);
}

/* ---- two processes ---- */

static uint32_t child_value(size_t i) { return (uint32_t)(i * 7 + 3); }

static cuv_buffer_t *filled(cuv_device_t *dev, const uint32_t *data, size_t count) {
  cuv_buffer_t *buf;
  assert_cuv_ok(cuv_buffer_create(&buf, dev, count * 4));
  assert_cuv_ok(cuv_sync(cuv_memcpy_htod(buf, 0, data, count * 4, 0), NULL));
  return buf;
}

/* The child: rank 1 on its own device, one all-reduce, then it exits without a word to anyone,
 * as a crashed process would. */
static int child(const char *id_hex) {
  cuv_device_t *dev;
  cuv_comm_t *comm;
  int rc = cuvt_join_as_rank1(id_hex, &dev, &comm);
  if (rc != 0)
    return rc;
  uint32_t data[CHILD_COUNT];
  for (size_t i = 0; i < CHILD_COUNT; i++)
    data[i] = child_value(i);
  cuv_buffer_t *buf;
  if (cuv_buffer_create(&buf, dev, sizeof data) != 0 ||
      cuv_sync(cuv_memcpy_htod(buf, 0, data, sizeof data, 0), NULL) != 0 ||
      cuv_sync(cuv_comm_all_reduce(comm, NULL, &buf, CHILD_COUNT, CUV_NCCL_UINT32, CUV_NCCL_SUM),
               NULL) != 0)
    return 4;
  _exit(0);
}

/* Rank 0 here, rank 1 in a child process: the first all-reduce combines both processes' data;
 * the child then exits, and the second fails with ncclRemoteError. */
static void test_peer_process(void **state) {
  (void)state;
  cuv_nccl_id_t id;
  assert_cuv_ok(cuv_nccl_unique_id(&id));
  pid_t pid = cuvt_spawn_rank1(&id);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_comm_init_rank(devs[0], &id, 0, 2), &out));
  cuv_comm_t *comm = cuv_output_take(&out).data;
  uint32_t data[CHILD_COUNT], got[CHILD_COUNT];
  for (size_t i = 0; i < CHILD_COUNT; i++)
    data[i] = cuvt_random_u32() % 1000000;
  cuv_buffer_t *buf = filled(devs[0], data, CHILD_COUNT);
  assert_cuv_ok(cuv_sync(
      cuv_comm_all_reduce(comm, NULL, &buf, CHILD_COUNT, CUV_NCCL_UINT32, CUV_NCCL_SUM), NULL));
  assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(got, buf, 0, sizeof got), NULL));
  for (size_t i = 0; i < CHILD_COUNT; i++)
    assert_int_equal(got[i], data[i] + child_value(i));
  int wstatus;
  assert_int_equal(waitpid(pid, &wstatus, 0), pid);
  assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  assert_int_equal(
      cuv_sync(cuv_comm_all_reduce(comm, NULL, &buf, CHILD_COUNT, CUV_NCCL_UINT32, CUV_NCCL_SUM),
               NULL),
      CUV_ENCCL(NCCL_REMOTE_ERROR));
  cuv_buffer_unref(buf);
  cuv_comm_unref(comm);
}

int main(int argc, char **argv) {
  cuv_sim_set_device_count(NDEV);
  if (argc == 3 && strcmp(argv[1], "child") == 0) {
    if (cuv_init() != 0)
      return 5;
    return child(argv[2]);
  }
  cuvt_init();
  for (int r = 0; r < NDEV; r++)
    if (cuv_device_open(&devs[r], r) != 0)
      return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_context_given_back),  cmocka_unit_test(test_ranks_on_one_gpu),
      cmocka_unit_test(test_async_error),         cmocka_unit_test(test_peer_dies),
      cmocka_unit_test(test_abort_pending),       cmocka_unit_test(test_creation_fails),
      cmocka_unit_test(test_groups_end_blocking), cmocka_unit_test(test_init_off_the_submitter),
      cmocka_unit_test(test_peer_vanishes),       cmocka_unit_test(test_timeout_not_reached),
      cmocka_unit_test(test_peer_process),
  };
  int rc = cuvt_run(tests);
  for (int r = 0; r < NDEV; r++)
    cuv_device_unref(devs[r]);
  return rc;
}
