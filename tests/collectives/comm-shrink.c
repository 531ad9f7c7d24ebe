/* A rank that dies, and a group that goes on smaller (cuv_comm_shrink), on the simulator's NCCL:
 * ranks of one process, as one communicator over 4 devices or as one communicator per rank.
 * A rank vanishes while the others' all-reduces are pending (NCCL tells them nothing): with the
 * timeout of 100 ms set, each pending op fails with CUV_ETIMEDOUT, its callback once; every
 * survivor then submits the shrink with the same exclusion, and the new communicator's size and
 * ranks are NCCL's renumbering, its all-reduce the sum over the survivors' fresh random data. Also
 * a planned shrink of a live peer, the shrink's NCCL calls held off the submitting thread, the
 * argument misuses (each its code, nothing delivered), a shrink after cuv_comm_abort, and the
 * simulator's shrink and revoke themselves (their refusals, NCCL's). Run again (argument
 * `no-revoke`, CUV_SIM_HIDE=ncclCommRevoke) as with a NCCL before 2.28: a failure aborts, and a
 * shrink of the failed communicator fails with CUV_ENOTSUP; and (argument `no-shrink`) with
 * ncclCommShrink hidden, as before 2.27: every shrink fails with CUV_ENOTSUP at execution.
 * Suite sim only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "little.h"

enum { NCCL_SYSTEM_ERROR = 2, NCCL_INVALID_ARGUMENT = 4, NCCL_INVALID_USAGE = 5 };
#define NDEV 4
#define COUNT 4096
#define TIMEOUT_MS 100
#define PENDING_OPS 3

static cuv_device_t *devs[NDEV];
static const char *mode = "";

static uint64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static void pause_ms(long ms) { nanosleep(&(struct timespec){0, ms * 1000000L}, NULL); }

static void drain_all(cuv_queue_t *q) {
  while (cuv_queue_pending(q) > 0) {
    assert_cuv_ok(cuv_queue_wait(q, -1));
    cuv_queue_drain(q);
  }
}

/* ---- communicators ---- */

static cuv_comm_t *make_clique(void) {
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_comm_init_all(devs, NDEV), &out));
  return cuv_output_take(&out).data;
}

/* A submission's callback: counted, with its status, and its output taken when it has one. */
typedef struct seen {
  int calls, status;
  int order; /* of the callbacks of the process, from 1 */
  void *data;
} seen_t;

static int callbacks; /* callbacks run on this thread (cuv_queue_drain) */

static void note(int status, cuv_output_t *output, void *arg) {
  seen_t *s = arg;
  s->calls++;
  s->status = status;
  s->order = ++callbacks;
  if (status == 0 && output && output->data)
    s->data = cuv_output_take(output).data;
}

/* Ranks 0..n-1 of one group, one communicator each (on devs[0..n-1]), created at once: each
 * init returns only once every rank joined. */
static void make_ranks(cuv_comm_t **comms, int n) {
  cuv_nccl_id_t id;
  cuv_queue_t *q;
  seen_t seen[NDEV] = {{0}};
  assert_cuv_ok(cuv_nccl_unique_id(&id));
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  for (int r = 0; r < n; r++)
    assert_cuv_ok(cuv_submit(q, cuv_comm_init_rank(devs[r], &id, r, n), note, &seen[r], NULL));
  drain_all(q);
  assert_cuv_ok(cuv_queue_destroy(q));
  for (int r = 0; r < n; r++) {
    assert_int_equal(seen[r].calls, 1);
    assert_cuv_ok(seen[r].status);
    comms[r] = seen[r].data;
  }
}

/* Each communicator's shrink with the same exclusion, submitted at once (each survivor's NCCL
 * call returns only once every survivor called it); the new communicators in out. */
static void shrink_all(cuv_comm_t **comms, int n, const int *exclude, size_t nx,
                       cuv_comm_t **out) {
  cuv_queue_t *q;
  seen_t seen[NDEV] = {{0}};
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  for (int r = 0; r < n; r++)
    assert_cuv_ok(cuv_submit(q, cuv_comm_shrink(comms[r], exclude, nx), note, &seen[r], NULL));
  drain_all(q);
  assert_cuv_ok(cuv_queue_destroy(q));
  for (int r = 0; r < n; r++) {
    assert_int_equal(seen[r].calls, 1);
    assert_cuv_ok(seen[r].status);
    out[r] = seen[r].data;
    assert_non_null(out[r]);
  }
}

/* ---- data ---- */

/* COUNT random values per local rank of every communicator, all-reduced together (one op per
 * communicator, submitted at once): every local rank of each must hold the host's sum. */
static void expect_sum(cuv_comm_t **comms, int ncomms) {
  cuv_buffer_t *buf[NDEV][NDEV];
  static uint32_t in[NDEV][NDEV][COUNT], want[COUNT], got[COUNT];
  memset(want, 0, sizeof want);
  for (int c = 0; c < ncomms; c++) {
    for (unsigned l = 0; l < cuv_comm_local_count(comms[c]); l++) {
      for (size_t i = 0; i < COUNT; i++) {
        in[c][l][i] = cuvt_random_u32() % 1000000u;
        want[i] += in[c][l][i];
      }
      assert_cuv_ok(cuv_buffer_create(&buf[c][l], cuv_comm_device(comms[c], l), sizeof got));
      assert_cuv_ok(cuv_sync(cuv_memcpy_htod(buf[c][l], 0, in[c][l], sizeof got, 0), NULL));
    }
  }
  cuv_queue_t *q;
  seen_t seen[NDEV] = {{0}};
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  for (int c = 0; c < ncomms; c++)
    assert_cuv_ok(cuv_submit(q, cuv_comm_all_reduce(comms[c], NULL, buf[c], COUNT,
                                                    CUV_NCCL_UINT32, CUV_NCCL_SUM),
                             note, &seen[c], NULL));
  drain_all(q);
  assert_cuv_ok(cuv_queue_destroy(q));
  for (int c = 0; c < ncomms; c++) {
    assert_int_equal(seen[c].calls, 1);
    assert_cuv_ok(seen[c].status);
    for (unsigned l = 0; l < cuv_comm_local_count(comms[c]); l++) {
      assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(got, buf[c][l], 0, sizeof got), NULL));
      assert_memory_equal(got, want, sizeof got);
      cuv_buffer_unref(buf[c][l]);
    }
  }
}

/* ---- a rank that vanishes ---- */

/* Rank 3 of a clique of 4 (one communicator) vanishes; then PENDING_OPS all-reduces wait for it.
 * Its peers learn nothing, but it is a rank of this process, whose NCCL communicator reports its
 * own death (ncclSystemError): each op fails with that, once, before the timeout of 100 ms would;
 * later ops fail at once. The shrink without rank 3 is the communicator of devices 0-2, ranks 0-2,
 * whose all-reduce sums right; the parent keeps its status. The dead rank's NCCL communicator
 * never shrinks, the three others do, in one group; the failure revoked the clique's four (where
 * NCCL can revoke; where it cannot, it aborted them, and the shrink fails with CUV_ENOTSUP). */
static void test_clique_rank_vanishes(void **state) {
  (void)state;
  cuv_comm_t *comm = make_clique();
  assert_cuv_ok(cuv_comm_set_timeout(comm, TIMEOUT_MS));
  little_t l;
  little_init(&l, comm);
  unsigned long revokes = cuv_sim_calls("ncclCommRevoke");
  unsigned long shrinks = cuv_sim_calls("ncclCommShrink");
  cuv_queue_t *q;
  seen_t seen[PENDING_OPS] = {{0}};
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_op_t *ops[PENDING_OPS]; /* built first: once the failure is seen, building one fails */
  for (int i = 0; i < PENDING_OPS; i++)
    ops[i] = little_op(&l, comm);
  uint64_t t0 = now_ms();
  assert_int_equal(cuv_sim_nccl_vanish(cuv_comm_handle(comm, 3)), 0);
  for (int i = 0; i < PENDING_OPS; i++) /* (before it, an op may have completed whole) */
    assert_cuv_ok(cuv_submit(q, ops[i], note, &seen[i], NULL));
  drain_all(q);
  print_message("# the pending ops failed %llu ms after rank 3 vanished (timeout %d ms)\n",
                (unsigned long long)(now_ms() - t0), TIMEOUT_MS);
  assert_cuv_ok(cuv_queue_destroy(q));
  for (int i = 0; i < PENDING_OPS; i++) {
    assert_int_equal(seen[i].calls, 1);
    assert_int_equal(seen[i].status, CUV_ENCCL(NCCL_SYSTEM_ERROR));
  }
  assert_int_equal(cuv_comm_status(comm), CUV_ENCCL(NCCL_SYSTEM_ERROR));
  cuv_op_t *late = little_op(&l, comm);
  assert_int_equal(cuv_op_error(late), CUV_ENCCL(NCCL_SYSTEM_ERROR));
  cuv_op_destroy(late);
  little_free(&l);
  bool revoking = cuv_sim_nccl_proc("ncclCommRevoke") != NULL;
  assert_int_equal(cuv_sim_calls("ncclCommRevoke") - revokes, revoking ? NDEV : 0);

  int dead = 3;
  cuv_output_t out = {NULL, NULL, NULL};
  int rc = cuv_sync(cuv_comm_shrink(comm, &dead, 1), &out);
  if (!revoking) { /* aborted for the failure: nothing left to shrink */
    assert_int_equal(rc, CUV_ENOTSUP);
    assert_null(out.data);
    assert_int_equal(cuv_sim_calls("ncclCommShrink") - shrinks, 0);
    cuv_comm_unref(comm);
    return;
  }
  assert_cuv_ok(rc);
  cuv_comm_t *small = cuv_output_take(&out).data;
  assert_int_equal(cuv_sim_calls("ncclCommShrink") - shrinks, NDEV - 1);
  assert_int_equal(cuv_comm_size(small), NDEV - 1);
  assert_int_equal(cuv_comm_local_count(small), NDEV - 1);
  for (unsigned i = 0; i < NDEV - 1; i++) {
    assert_int_equal(cuv_comm_rank(small, i), (int)i);
    assert_ptr_equal(cuv_comm_device(small, i), devs[i]);
    assert_non_null(cuv_comm_handle(small, i));
    assert_ptr_not_equal(cuv_comm_handle(small, i), cuv_comm_handle(comm, i));
  }
  assert_int_equal(cuv_comm_status(small), 0);
  assert_int_equal(cuv_comm_status(comm), CUV_ENCCL(NCCL_SYSTEM_ERROR)); /* still failed */
  expect_sum(&small, 1);
  cuv_comm_unref(comm);
  expect_sum(&small, 1); /* the new communicator holds nothing of its parent */
  cuv_comm_unref(small);
}

/* Ranks 0-3 as four communicators; ranks 0, 2 and 3 submit an all-reduce, which waits for rank 1
 * (no callback yet); the timeout of 100 ms is set, and rank 1 vanishes: its peers learn nothing,
 * and each op fails with CUV_ETIMEDOUT (the time counting from its submission), once. The three
 * survivors each submit the shrink without rank 1: their new ranks are 0, 1, 2 (2 and 3 move
 * down), of 3, and they sum right. */
static void test_per_rank_vanishes(void **state) {
  (void)state;
  cuv_comm_t *comms[NDEV];
  make_ranks(comms, NDEV);
  little_t l[NDEV];
  cuv_queue_t *q;
  seen_t seen[NDEV] = {{0}};
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  for (int r = 0; r < NDEV; r++)
    little_init(&l[r], comms[r]);
  uint64_t submitted = now_ms();
  for (int r = 0; r < NDEV; r++)
    if (r != 1)
      assert_cuv_ok(cuv_submit(q, little_op(&l[r], comms[r]), note, &seen[r], NULL));
  assert_int_equal(cuv_queue_wait(q, 20), CUV_EBUSY); /* waiting for rank 1 */
  assert_int_equal(seen[0].calls + seen[2].calls + seen[3].calls, 0);
  for (int r = 0; r < NDEV; r++) /* now: a slow machine's wait above must not outlast it */
    assert_cuv_ok(cuv_comm_set_timeout(comms[r], TIMEOUT_MS));
  uint64_t t0 = now_ms();
  assert_int_equal(cuv_sim_nccl_vanish(cuv_comm_handle(comms[1], 0)), 0);
  drain_all(q);
  uint64_t failed = now_ms();
  print_message("# the survivors' ops failed %llu ms after rank 1 vanished, %llu ms after they "
                "were submitted (timeout %d ms)\n",
                (unsigned long long)(failed - t0), (unsigned long long)(failed - submitted),
                TIMEOUT_MS);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_comm_t *survivors[NDEV - 1], *small[NDEV - 1];
  for (int r = 0, s = 0; r < NDEV; r++) {
    little_free(&l[r]);
    if (r == 1)
      continue;
    assert_int_equal(seen[r].calls, 1);
    assert_int_equal(seen[r].status, CUV_ETIMEDOUT);
    survivors[s++] = comms[r];
  }
  assert_int_equal(seen[1].calls, 0);
  int dead = 1;
  shrink_all(survivors, NDEV - 1, &dead, 1, small);
  for (int s = 0; s < NDEV - 1; s++) {
    assert_int_equal(cuv_comm_size(small[s]), NDEV - 1);
    assert_int_equal(cuv_comm_local_count(small[s]), 1);
    assert_int_equal(cuv_comm_rank(small[s], 0), s);
    assert_ptr_equal(cuv_comm_device(small[s], 0), cuv_comm_device(survivors[s], 0));
  }
  expect_sum(small, NDEV - 1);
  for (int r = 0; r < NDEV; r++)
    cuv_comm_unref(comms[r]);
  for (int s = 0; s < NDEV - 1; s++)
    cuv_comm_unref(small[s]);
}

/* A planned shrink: ranks 0 and 1 of three leave rank 2 out while it lives (it does not call the
 * shrink). Their communicator of two sums right; the parents stay usable: an all-reduce of all
 * three still sums right after. */
static void test_shrink_live_peer(void **state) {
  (void)state;
  cuv_comm_t *comms[3], *small[2];
  make_ranks(comms, 3);
  unsigned long revokes = cuv_sim_calls("ncclCommRevoke");
  int leaving = 2;
  shrink_all(comms, 2, &leaving, 1, small);
  for (int s = 0; s < 2; s++) {
    assert_int_equal(cuv_comm_size(small[s]), 2);
    assert_int_equal(cuv_comm_rank(small[s], 0), s);
  }
  expect_sum(small, 2);
  assert_int_equal(cuv_comm_status(comms[2]), 0);
  expect_sum(comms, 3);
  assert_int_equal(cuv_sim_calls("ncclCommRevoke") - revokes, 0); /* nothing failed */
  for (int r = 0; r < 3; r++)
    cuv_comm_unref(comms[r]);
  for (int s = 0; s < 2; s++)
    cuv_comm_unref(small[s]);
}

/* The survivors' shrink waits inside NCCL (the simulator holds every init, the shrink's too) on
 * cuv's init threads: cuv_submit returned, neither is delivered while held, and both are once
 * let go, with communicators that sum right. */
static void test_shrink_off_the_submitter(void **state) {
  (void)state;
  cuv_comm_t *comms[3];
  make_ranks(comms, 3);
  unsigned waiting = cuv_sim_nccl_inits_waiting();
  cuv_sim_nccl_hold_inits(1);
  cuv_queue_t *q;
  seen_t seen[2] = {{0}};
  int leaving = 0;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  for (int r = 1; r < 3; r++)
    assert_cuv_ok(cuv_submit(q, cuv_comm_shrink(comms[r], &leaving, 1), note, &seen[r - 1], NULL));
  while (cuv_sim_nccl_inits_waiting() < waiting + 2) /* both inside NCCL's shrink */
    pause_ms(1);
  assert_int_equal(cuv_queue_wait(q, 20), CUV_EBUSY);
  assert_int_equal(cuv_queue_pending(q), 2);
  assert_int_equal(seen[0].calls + seen[1].calls, 0);
  cuv_sim_nccl_hold_inits(0);
  drain_all(q);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_comm_t *small[2];
  for (int s = 0; s < 2; s++) {
    assert_int_equal(seen[s].calls, 1);
    assert_cuv_ok(seen[s].status);
    small[s] = seen[s].data;
    assert_int_equal(cuv_comm_rank(small[s], 0), s); /* ranks 1 and 2 become 0 and 1 */
  }
  expect_sum(small, 2);
  for (int r = 0; r < 3; r++)
    cuv_comm_unref(comms[r]);
  for (int s = 0; s < 2; s++)
    cuv_comm_unref(small[s]);
}

/* ---- misuse ---- */

/* An op that must fail with `code` at construction: cuv_sync returns it and gives no output;
 * cuv_submit refuses it (the op is consumed) and its callback never runs. */
static void expect_refused(cuv_op_t *(*make)(cuv_comm_t *, const int *, size_t), cuv_comm_t *comm,
                           const int *exclude, size_t n, int code) {
  cuv_output_t out = {(void *)1, NULL, NULL};
  assert_int_equal(cuv_sync(make(comm, exclude, n), &out), code);
  assert_null(out.data);
  cuv_queue_t *q;
  seen_t seen = {0};
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  assert_int_equal(cuv_submit(q, make(comm, exclude, n), note, &seen, NULL), code);
  assert_int_equal(cuv_queue_pending(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  assert_int_equal(seen.calls, 0);
}

/* Each misuse gets CUV_EINVAL and costs NCCL nothing; the communicators stay usable. */
static void test_misuse(void **state) {
  (void)state;
  cuv_comm_t *clique = make_clique(), *pair[2];
  make_ranks(pair, 2);
  unsigned long shrinks = cuv_sim_calls("ncclCommShrink");
  int one = 1, all[NDEV] = {0, 1, 2, 3}, twice[2] = {2, 2}, low = -1, high = NDEV, me = 0;
  expect_refused(cuv_comm_shrink, NULL, &one, 1, CUV_EINVAL);       /* no communicator */
  expect_refused(cuv_comm_shrink, clique, NULL, 1, CUV_EINVAL);     /* no list */
  expect_refused(cuv_comm_shrink, clique, &one, 0, CUV_EINVAL);     /* nothing excluded */
  expect_refused(cuv_comm_shrink, clique, &low, 1, CUV_EINVAL);     /* out of range */
  expect_refused(cuv_comm_shrink, clique, &high, 1, CUV_EINVAL);
  expect_refused(cuv_comm_shrink, clique, twice, 2, CUV_EINVAL);    /* a rank named twice */
  expect_refused(cuv_comm_shrink, clique, all, NDEV, CUV_EINVAL);   /* every rank */
  expect_refused(cuv_comm_shrink, clique, &one, 1, CUV_EINVAL);     /* a live local rank */
  expect_refused(cuv_comm_shrink, pair[0], &me, 1, CUV_EINVAL);     /* its only local rank */
  assert_int_equal(cuv_sim_nccl_vanish(cuv_comm_handle(pair[1], 0)), 0);
  expect_refused(cuv_comm_shrink, pair[1], &one, 1, CUV_EINVAL);    /* dead, but every local */
  assert_int_equal(cuv_sim_calls("ncclCommShrink") - shrinks, 0);
  expect_sum(&clique, 1);
  cuv_comm_unref(clique);
  cuv_comm_unref(pair[0]);
  cuv_comm_unref(pair[1]);
}

/* A shrink of a communicator cuv_comm_abort aborted fails at execution with its status: its NCCL
 * communicators are gone. */
static void test_shrink_after_abort(void **state) {
  (void)state;
  cuv_comm_t *comms[2];
  make_ranks(comms, 2);
  assert_cuv_ok(cuv_comm_abort(comms[0]));
  int other = 1;
  cuv_op_t *op = cuv_comm_shrink(comms[0], &other, 1);
  assert_cuv_ok(cuv_op_error(op)); /* refused only once it executes */
  cuv_output_t out = {NULL, NULL, NULL};
  assert_int_equal(cuv_sync(op, &out), CUV_ECANCELED);
  assert_null(out.data);
  cuv_comm_unref(comms[0]);
  cuv_comm_unref(comms[1]);
}

/* A shrink of a communicator with an op in flight, not failed, fails with CUV_EBUSY at execution
 * (NCCL's shrink would wait for the device that op holds); once the op failed, the shrink goes. */
static void test_shrink_while_busy(void **state) {
  (void)state;
  cuv_comm_t *comms[2];
  make_ranks(comms, 2);
  little_t l;
  little_init(&l, comms[0]);
  cuv_queue_t *q;
  seen_t op = {0}, busy = {0};
  int other = 1;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  assert_cuv_ok(cuv_submit(q, little_op(&l, comms[0]), note, &op, NULL)); /* rank 1 never joins */
  assert_int_equal(cuv_queue_wait(q, 20), CUV_EBUSY);
  assert_cuv_ok(cuv_submit(q, cuv_comm_shrink(comms[0], &other, 1), note, &busy, NULL));
  while (busy.calls == 0) {
    assert_cuv_ok(cuv_queue_wait(q, -1));
    cuv_queue_drain(q);
  }
  assert_int_equal(busy.status, CUV_EBUSY);
  assert_int_equal(op.calls, 0); /* still waiting */
  assert_cuv_ok(cuv_comm_set_timeout(comms[0], 1));
  drain_all(q);
  assert_cuv_ok(cuv_queue_destroy(q));
  assert_int_equal(op.calls, 1);
  assert_int_equal(op.status, CUV_ETIMEDOUT);
  assert_true(op.order > busy.order);
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_comm_shrink(comms[0], &other, 1), &out));
  cuv_comm_t *alone = cuv_output_take(&out).data;
  assert_cuv_ok(cuv_comm_set_timeout(alone, 0)); /* it took its parent's 1 ms */
  assert_int_equal(cuv_comm_size(alone), 1);
  assert_int_equal(cuv_comm_rank(alone, 0), 0);
  expect_sum(&alone, 1);
  little_free(&l);
  cuv_comm_unref(alone);
  cuv_comm_unref(comms[0]);
  cuv_comm_unref(comms[1]);
}

/* ---- the simulator's NCCL ---- */

typedef int (*shrink_fn)(void *comm, int *exclude, int n, void **newcomm, void *config,
                         int flags);
typedef int (*revoke_fn)(void *comm, int flags);
typedef int (*finalize_fn)(void *comm);

/* NCCL's refusals: a shrink that excludes its caller, names no rank or a rank out of range, or
 * has an unknown flag is an invalid argument; a dead rank's own shrink fails with
 * ncclSystemError; a second revoke, a revoke's flag, and a finalize after a revoke are invalid
 * arguments, and a revoked communicator takes no collective. None makes a communicator. */
static void test_sim_refusals(void **state) {
  (void)state;
  shrink_fn shrink;
  revoke_fn revoke;
  finalize_fn finalize;
  void *fn = cuv_sim_nccl_proc("ncclCommShrink");
  memcpy(&shrink, &fn, sizeof fn);
  fn = cuv_sim_nccl_proc("ncclCommRevoke");
  memcpy(&revoke, &fn, sizeof fn);
  fn = cuv_sim_nccl_proc("ncclCommFinalize");
  memcpy(&finalize, &fn, sizeof fn);
  cuv_comm_t *comms[3];
  make_ranks(comms, 3);
  void *h0 = cuv_comm_handle(comms[0], 0), *h2 = cuv_comm_handle(comms[2], 0), *made = &made;
  int self = 0, none = 0, out_of_range = 3, two = 2;
  assert_int_equal(shrink(h0, &self, 1, &made, NULL, 0), NCCL_INVALID_ARGUMENT);
  assert_null(made);
  assert_int_equal(shrink(h0, &none, 0, &made, NULL, 0), NCCL_INVALID_ARGUMENT);
  assert_int_equal(shrink(h0, &out_of_range, 1, &made, NULL, 0), NCCL_INVALID_ARGUMENT);
  assert_int_equal(shrink(h0, &two, 1, &made, NULL, 2), NCCL_INVALID_ARGUMENT);
  assert_int_equal(cuv_sim_nccl_vanish(h2), 0);
  int first = 0;
  assert_int_equal(shrink(h2, &first, 1, &made, NULL, 0), NCCL_SYSTEM_ERROR);
  assert_null(made);
  assert_int_equal(revoke(h0, 1), NCCL_INVALID_ARGUMENT);
  assert_int_equal(revoke(h0, 0), 0);
  assert_int_equal(revoke(h0, 0), NCCL_INVALID_ARGUMENT);
  assert_int_equal(finalize(h0), NCCL_INVALID_ARGUMENT);
  little_t l;
  little_init(&l, comms[0]);
  assert_int_equal(cuv_sync(little_op(&l, comms[0]), NULL), CUV_ENCCL(NCCL_INVALID_USAGE));
  little_free(&l);
  for (int r = 0; r < 3; r++)
    cuv_comm_unref(comms[r]);
}

/* ---- without ncclCommShrink ---- */

/* A NCCL before 2.27: the op is built, and fails at execution with CUV_ENOTSUP, once. */
static void test_no_shrink(void **state) {
  (void)state;
  cuv_comm_t *comms[2];
  make_ranks(comms, 2);
  int other = 1;
  cuv_queue_t *q;
  seen_t seen = {0};
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  assert_cuv_ok(cuv_submit(q, cuv_comm_shrink(comms[0], &other, 1), note, &seen, NULL));
  drain_all(q);
  assert_cuv_ok(cuv_queue_destroy(q));
  assert_int_equal(seen.calls, 1);
  assert_int_equal(seen.status, CUV_ENOTSUP);
  assert_null(seen.data);
  expect_sum(comms, 2); /* untouched */
  cuv_comm_unref(comms[0]);
  cuv_comm_unref(comms[1]);
}

int main(int argc, char **argv) {
  mode = argc > 1 ? argv[1] : "";
  cuv_sim_set_device_count(NDEV);
  cuvt_init();
  for (int r = 0; r < NDEV; r++)
    if (cuv_device_open(&devs[r], r) != 0)
      return 1;
  const struct CMUnitTest all[] = {
      cmocka_unit_test(test_clique_rank_vanishes),
      cmocka_unit_test(test_per_rank_vanishes),
      cmocka_unit_test(test_shrink_live_peer),
      cmocka_unit_test(test_shrink_off_the_submitter),
      cmocka_unit_test(test_misuse),
      cmocka_unit_test(test_shrink_after_abort),
      cmocka_unit_test(test_shrink_while_busy),
      cmocka_unit_test(test_sim_refusals),
  };
  /* Without the revoke, the cases that need none (a failure aborts the communicator). */
  const struct CMUnitTest no_revoke[] = {
      cmocka_unit_test(test_clique_rank_vanishes),
      cmocka_unit_test(test_shrink_live_peer),
      cmocka_unit_test(test_shrink_off_the_submitter),
      cmocka_unit_test(test_misuse),
      cmocka_unit_test(test_shrink_after_abort),
  };
  const struct CMUnitTest no_shrink[] = {cmocka_unit_test(test_no_shrink)};
  int rc = strcmp(mode, "no-shrink") == 0   ? cuvt_run(no_shrink)
           : strcmp(mode, "no-revoke") == 0 ? cuvt_run(no_revoke)
                                            : cuvt_run(all);
  for (int r = 0; r < NDEV; r++)
    cuv_device_unref(devs[r]);
  return rc;
}
