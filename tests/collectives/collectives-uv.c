/* Collectives from a libuv loop (the bridge, include/cuv/uv.h): communicators created by ops
 * submitted on the loop, completing like any submission, and collectives submitted from their
 * callbacks, checked against the host's sums. The ranks of one group created as separate
 * submissions all complete: no thread waits for a creation (tests/meson.build runs this file also
 * with one submitter thread, and with none, when the loop thread itself makes every call: a
 * creation that blocked its thread would never let the other ranks join). Suite sim on 4
 * simulated devices; suite gpu on every GPU (up to 8), skipped below 2. */
#include "uvt.h"

#define MAXD 8

static int ndev;
static cuv_device_t *devs[MAXD];

/* A float sum over every rank: inputs uploaded, the expected result, buffers per rank. */
typedef struct sums {
  size_t count;
  float *want;
  cuv_buffer_t *buf[MAXD];
} sums_t;

static void sums_init(sums_t *s, size_t count) {
  s->count = count;
  s->want = calloc(count, sizeof(float));
  float *in = malloc(count * sizeof(float));
  for (int r = 0; r < ndev; r++) {
    for (size_t i = 0; i < count; i++) {
      in[i] = (float)((int)(cuvt_random_u32() % 2001) - 1000);
      s->want[i] += in[i];
    }
    assert_cuv_ok(cuv_buffer_create(&s->buf[r], devs[r], count * sizeof(float)));
    assert_cuv_ok(cuv_sync(cuv_memcpy_htod(s->buf[r], 0, in, count * sizeof(float), 0), NULL));
  }
  free(in);
}

static void sums_check(sums_t *s) {
  float *out = malloc(s->count * sizeof(float));
  for (int r = 0; r < ndev; r++) {
    assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(out, s->buf[r], 0, s->count * sizeof(float)), NULL));
    assert_memory_equal(out, s->want, s->count * sizeof(float));
    cuv_buffer_unref(s->buf[r]);
  }
  free(out);
  free(s->want);
}

/* ---- one communicator of every device ---- */

typedef struct flow {
  uvt_loop_t *loop;
  sums_t *sums;
  cuv_comm_t *comm;
  uvt_call_t created, reduced;
  int submit_status;
} flow_t;

static void reduced(int status, cuv_output_t *output, void *arg) {
  flow_t *f = arg;
  uvt_done(status, output, &f->reduced);
}

/* The creation's callback, on the loop thread: the communicator, then the all-reduce on it. */
static void created(int status, cuv_output_t *output, void *arg) {
  flow_t *f = arg;
  uvt_done(status, output, &f->created);
  if (status != 0)
    return;
  f->comm = cuv_output_take(&f->created.out).data;
  f->submit_status = cuv_uv_submit(f->loop->bridge,
                                    cuv_comm_all_reduce(f->comm, NULL, f->sums->buf,
                                                        f->sums->count, CUV_NCCL_FLOAT32,
                                                        CUV_NCCL_SUM),
                                    reduced, f, NULL);
}

static void test_created_on_the_loop(void **state) {
  (void)state;
  uvt_loop_t l;
  sums_t s;
  sums_init(&s, 1 + cuvt_random_u32() % 5000);
  uvt_open(&l);
  flow_t f = {.loop = &l, .sums = &s};
  f.created.loop = f.reduced.loop = &l;
  assert_cuv_ok(cuv_uv_submit(l.bridge, cuv_comm_init_all(devs, (size_t)ndev), created, &f, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(&f.created, 1);
  assert_cuv_ok(f.submit_status);
  uvt_assert_all_ok(&f.reduced, 1);
  uvt_close(&l);
  sums_check(&s);
  cuv_comm_unref(f.comm);
}

/* ---- a then over the creation, in one submission ---- */

typedef struct chained {
  sums_t *sums;
  int status_seen; /* the communicator's status in the then callback (a submitter thread) */
  uvt_call_t done;
} chained_t;

/* Runs once the creation completed: the communicator it gives is ready, not being created. */
static cuv_op_t *reduce_after(cuv_output_t *input, void *arg) {
  chained_t *c = arg;
  cuv_comm_t *comm = input->data;
  c->status_seen = cuv_comm_status(comm);
  return cuv_comm_all_reduce(comm, NULL, c->sums->buf, c->sums->count, CUV_NCCL_FLOAT32,
                             CUV_NCCL_SUM);
}

static void chained_done(int status, cuv_output_t *output, void *arg) {
  chained_t *c = arg;
  uvt_done(status, output, &c->done);
}

static void test_then_over_creation(void **state) {
  (void)state;
  uvt_loop_t l;
  sums_t s;
  sums_init(&s, 1 + cuvt_random_u32() % 5000);
  uvt_open(&l);
  chained_t c = {.sums = &s, .status_seen = 1};
  c.done.loop = &l;
  cuv_op_t *op = cuv_then(cuv_comm_init_all(devs, (size_t)ndev), reduce_after, &c);
  assert_cuv_ok(cuv_uv_submit(l.bridge, op, chained_done, &c, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(&c.done, 1);
  assert_int_equal(c.status_seen, 0);
  uvt_close(&l);
  sums_check(&s);
}

/* ---- one communicator per rank ---- */

typedef struct rank_flow {
  uvt_loop_t *loop;
  sums_t *sums;
  int rank;
  cuv_comm_t *comm;
  uvt_call_t created, reduced;
  int *ready; /* ranks created so far: the last one's callback starts every all-reduce */
  struct rank_flow *all;
} rank_flow_t;

static void rank_reduced(int status, cuv_output_t *output, void *arg) {
  rank_flow_t *f = arg;
  uvt_done(status, output, &f->reduced);
}

static void rank_created(int status, cuv_output_t *output, void *arg) {
  rank_flow_t *f = arg;
  uvt_done(status, output, &f->created);
  if (status != 0)
    return;
  f->comm = cuv_output_take(&f->created.out).data;
  if (++*f->ready < ndev)
    return;
  for (int r = 0; r < ndev; r++) { /* each rank's part of the group, a submission each */
    rank_flow_t *g = &f->all[r];
    cuv_op_t *op = cuv_comm_all_reduce(g->comm, NULL, &g->sums->buf[r], g->sums->count,
                                       CUV_NCCL_FLOAT32, CUV_NCCL_SUM);
    if (cuv_uv_submit(g->loop->bridge, op, rank_reduced, g, NULL) != 0)
      g->reduced.status = CUV_EINVAL; /* seen after uv_run: no callback */
  }
}

static void test_ranks_on_the_loop(void **state) {
  (void)state;
  uvt_loop_t l;
  sums_t s;
  cuv_nccl_id_t id;
  rank_flow_t f[MAXD];
  int ready = 0;
  sums_init(&s, 1 + cuvt_random_u32() % 5000);
  assert_cuv_ok(cuv_nccl_unique_id(&id));
  uvt_open(&l);
  for (int r = 0; r < ndev; r++) {
    f[r] = (rank_flow_t){.loop = &l, .sums = &s, .rank = r, .ready = &ready, .all = f};
    f[r].created.loop = f[r].reduced.loop = &l;
    assert_cuv_ok(cuv_uv_submit(l.bridge, cuv_comm_init_rank(devs[r], &id, r, ndev), rank_created,
                                &f[r], NULL));
  }
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  for (int r = 0; r < ndev; r++) {
    uvt_assert_all_ok(&f[r].created, 1);
    uvt_assert_all_ok(&f[r].reduced, 1);
  }
  uvt_close(&l);
  sums_check(&s);
  for (int r = 0; r < ndev; r++)
    cuv_comm_unref(f[r].comm);
}

int main(void) {
  cuv_sim_set_device_count(4); /* the simulator only: a GPU machine has what it has */
  cuvt_init();
  int count = 0;
  if (cuv_device_count(&count) != 0 || count < 2) {
    printf("1..0 # SKIP fewer than 2 devices\n");
    return 77;
  }
  ndev = count < MAXD ? count : MAXD;
  for (int r = 0; r < ndev; r++)
    if (cuv_device_open(&devs[r], r) != 0)
      return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_created_on_the_loop),
      cmocka_unit_test(test_ranks_on_the_loop),
      cmocka_unit_test(test_then_over_creation),
  };
  int rc = cuvt_run(tests);
  for (int r = 0; r < ndev; r++)
    cuv_device_unref(devs[r]);
  return rc;
}
