/* Collectives as ops (include/cuv/collective.h) over every device of the process, against host
 * computations on fresh random data: every collective, every NCCL type with every reduction, in
 * place and not, in chunks larger than the simulator's slots, composed with seq, zip, fork and
 * then, submitted into a queue, captured in a graph and replayed, and ordered by hazard tracking
 * after a slow writer on another stream. Suite sim runs it on 4 simulated devices; suite gpu on
 * every GPU (up to 8), and reports itself skipped with fewer than 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "nccl-data.h"

static int ndev;
static cuv_device_t *devs[CT_MAX_RANKS];
static cuv_comm_t *comm;

/* ---- buffers ---- */

static void bufs_create(cuv_buffer_t **b, size_t bytes) {
  for (int r = 0; r < ndev; r++)
    assert_cuv_ok(cuv_buffer_create(&b[r], devs[r], bytes ? bytes : 1));
}

static void bufs_unref(cuv_buffer_t **b) {
  for (int r = 0; r < ndev; r++)
    cuv_buffer_unref(b[r]);
}

static void upload(cuv_buffer_t *buf, const void *host, size_t bytes) {
  if (bytes)
    assert_cuv_ok(cuv_sync(cuv_memcpy_htod(buf, 0, host, bytes, CUV_COPY_STAGE), NULL));
}

static void download(void *host, cuv_buffer_t *buf, size_t bytes) {
  if (bytes)
    assert_cuv_ok(cuv_sync(cuv_memcpy_dtoh(host, buf, 0, bytes), NULL));
}

/* Rank r's input: count random elements for `op` (malloc'd; free with inputs_free). */
static void inputs_make(unsigned char **in, cuv_nccl_type_t t, cuv_nccl_redop_t op,
                        size_t count) {
  size_t size = cuv_nccl_type_size(t);
  for (int r = 0; r < ndev; r++)
    in[r] = malloc(count * size + 1);
  for (size_t i = 0; i < count; i++) {
    int prod_rank = (int)(cuvt_random_u32() % (unsigned)ndev);
    for (int r = 0; r < ndev; r++)
      ct_set(t, in[r], i, ct_random(t, op, r, prod_rank));
  }
}

static void inputs_free(unsigned char **in) {
  for (int r = 0; r < ndev; r++)
    free(in[r]);
}

/* The reduction over the ranks of element i of in[][offset + i]. */
static double reference_at(unsigned char **in, cuv_nccl_type_t t, cuv_nccl_redop_t op,
                           size_t at) {
  double v[CT_MAX_RANKS] = {0};
  for (int r = 0; r < ndev; r++)
    v[r] = ct_get(t, in[r], at);
  return ct_reference(t, op, v, ndev);
}

static void assert_reduced(const void *got, unsigned char **in, size_t in_at, size_t count,
                           cuv_nccl_type_t t, cuv_nccl_redop_t op) {
  for (size_t i = 0; i < count; i++) {
    double want = reference_at(in, t, op, in_at + i), have = ct_get(t, got, i);
    if (!ct_close(t, op, have, want)) {
      print_error("type %d op %d element %zu of %zu: got %g, want %g\n", (int)t, (int)op, i,
                  count, have, want);
      fail();
    }
  }
}

/* ---- every reduction of every type ---- */

static void check_all_reduce(cuv_nccl_type_t t, cuv_nccl_redop_t op, size_t count,
                             bool in_place) {
  size_t bytes = count * cuv_nccl_type_size(t);
  unsigned char *in[CT_MAX_RANKS], *out = malloc(bytes + 1);
  cuv_buffer_t *send[CT_MAX_RANKS], *recv[CT_MAX_RANKS];
  inputs_make(in, t, op, count);
  bufs_create(send, bytes);
  bufs_create(recv, bytes);
  for (int r = 0; r < ndev; r++)
    upload(in_place ? recv[r] : send[r], in[r], bytes);
  assert_cuv_ok(cuv_sync(cuv_comm_all_reduce(comm, in_place ? NULL : send, recv, count, t, op),
                         NULL));
  for (int r = 0; r < ndev; r++) {
    download(out, recv[r], bytes);
    assert_reduced(out, in, 0, count, t, op);
  }
  bufs_unref(send);
  bufs_unref(recv);
  inputs_free(in);
  free(out);
}

static void test_all_reduce_every_type(void **state) {
  (void)state;
  for (int t = CUV_NCCL_INT8; t <= CUV_NCCL_FLOAT8E5M2; t++)
    for (int op = CUV_NCCL_SUM; op <= CUV_NCCL_AVG; op++)
      check_all_reduce((cuv_nccl_type_t)t, (cuv_nccl_redop_t)op, 1 + cuvt_random_u32() % 300,
                       (t + op) % 2 == 0);
}

/* Larger than the simulator's slot of 1 MiB per step: several steps per call. */
static void test_all_reduce_in_chunks(void **state) {
  (void)state;
  check_all_reduce(CUV_NCCL_FLOAT32, CUV_NCCL_SUM, 300000 + cuvt_random_u32() % 1000, false);
  check_all_reduce(CUV_NCCL_INT64, CUV_NCCL_MAX, 200000 + cuvt_random_u32() % 1000, true);
}

/* ---- the other collectives ---- */

static void check_reduce(cuv_nccl_type_t t, cuv_nccl_redop_t op, size_t count, int root,
                         bool in_place) {
  size_t bytes = count * cuv_nccl_type_size(t);
  unsigned char *in[CT_MAX_RANKS], *out = malloc(bytes + 1);
  cuv_buffer_t *send[CT_MAX_RANKS], *recv[CT_MAX_RANKS], *recv_at[CT_MAX_RANKS];
  inputs_make(in, t, op, count);
  bufs_create(send, bytes);
  bufs_create(recv, bytes);
  for (int r = 0; r < ndev; r++) {
    upload(in_place ? recv[r] : send[r], in[r], bytes);
    recv_at[r] = in_place || r == root ? recv[r] : NULL; /* only the root's is written */
  }
  assert_cuv_ok(cuv_sync(cuv_comm_reduce(comm, in_place ? NULL : send, recv_at, count, t, op,
                                         root),
                         NULL));
  download(out, recv[root], bytes);
  assert_reduced(out, in, 0, count, t, op);
  bufs_unref(send);
  bufs_unref(recv);
  inputs_free(in);
  free(out);
}

static void check_broadcast(cuv_nccl_type_t t, size_t count, int root, bool in_place) {
  size_t bytes = count * cuv_nccl_type_size(t);
  unsigned char *in[CT_MAX_RANKS], *out = malloc(bytes + 1);
  cuv_buffer_t *send[CT_MAX_RANKS], *recv[CT_MAX_RANKS], *send_at[CT_MAX_RANKS];
  inputs_make(in, t, CUV_NCCL_SUM, count);
  bufs_create(send, bytes);
  bufs_create(recv, bytes);
  for (int r = 0; r < ndev; r++) {
    upload(in_place ? recv[r] : send[r], in[r], bytes);
    send_at[r] = r == root ? send[r] : NULL; /* only the root's is read */
  }
  assert_cuv_ok(
      cuv_sync(cuv_comm_broadcast(comm, in_place ? NULL : send_at, recv, count, t, root), NULL));
  for (int r = 0; r < ndev; r++) {
    download(out, recv[r], bytes);
    assert_memory_equal(out, in[root], bytes);
  }
  bufs_unref(send);
  bufs_unref(recv);
  inputs_free(in);
  free(out);
}

static void test_reduce_and_broadcast(void **state) {
  (void)state;
  static const cuv_nccl_type_t types[] = {CUV_NCCL_FLOAT32, CUV_NCCL_INT32, CUV_NCCL_FLOAT16,
                                          CUV_NCCL_UINT8};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    int root = (int)(cuvt_random_u32() % (unsigned)ndev);
    size_t count = 1 + cuvt_random_u32() % 500;
    check_reduce(types[i], i % 2 ? CUV_NCCL_MAX : CUV_NCCL_SUM, count, root, i % 2 == 0);
    check_broadcast(types[i], count, root, i % 2 == 1);
  }
}

static void check_all_gather(cuv_nccl_type_t t, size_t count, bool in_place) {
  size_t size = cuv_nccl_type_size(t), bytes = count * size, all = bytes * (size_t)ndev;
  unsigned char *in[CT_MAX_RANKS], *out = malloc(all + 1);
  cuv_buffer_t *send[CT_MAX_RANKS], *recv[CT_MAX_RANKS];
  inputs_make(in, t, CUV_NCCL_SUM, count);
  bufs_create(send, bytes);
  bufs_create(recv, all);
  for (int r = 0; r < ndev; r++) {
    if (in_place) /* each rank's part already at its slot of recv */
      assert_cuv_ok(cuv_sync(cuv_memcpy_htod(recv[r], (size_t)r * bytes, in[r], bytes, 0), NULL));
    else
      upload(send[r], in[r], bytes);
  }
  assert_cuv_ok(cuv_sync(cuv_comm_all_gather(comm, in_place ? NULL : send, recv, count, t), NULL));
  for (int r = 0; r < ndev; r++) {
    download(out, recv[r], all);
    for (int j = 0; j < ndev; j++)
      assert_memory_equal(out + (size_t)j * bytes, in[j], bytes);
  }
  bufs_unref(send);
  bufs_unref(recv);
  inputs_free(in);
  free(out);
}

static void check_reduce_scatter(cuv_nccl_type_t t, cuv_nccl_redop_t op, size_t count,
                                 bool in_place) {
  size_t size = cuv_nccl_type_size(t), bytes = count * size, all = bytes * (size_t)ndev;
  unsigned char *in[CT_MAX_RANKS], *out = malloc(all + 1);
  cuv_buffer_t *send[CT_MAX_RANKS], *recv[CT_MAX_RANKS];
  inputs_make(in, t, op, count * (size_t)ndev);
  bufs_create(send, all);
  bufs_create(recv, in_place ? all : bytes);
  for (int r = 0; r < ndev; r++)
    upload(in_place ? recv[r] : send[r], in[r], all);
  assert_cuv_ok(
      cuv_sync(cuv_comm_reduce_scatter(comm, in_place ? NULL : send, recv, count, t, op), NULL));
  for (int r = 0; r < ndev; r++) { /* rank r's slice of every rank's input, reduced */
    download(out, recv[r], in_place ? all : bytes);
    assert_reduced(out + (in_place ? (size_t)r * bytes : 0), in, (size_t)r * count, count, t, op);
  }
  bufs_unref(send);
  bufs_unref(recv);
  inputs_free(in);
  free(out);
}

static void test_all_gather_and_reduce_scatter(void **state) {
  (void)state;
  static const cuv_nccl_type_t types[] = {CUV_NCCL_INT8, CUV_NCCL_FLOAT32, CUV_NCCL_BFLOAT16,
                                          CUV_NCCL_UINT64, CUV_NCCL_FLOAT64};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    size_t count = 1 + cuvt_random_u32() % 400;
    check_all_gather(types[i], count, i % 2 == 1);
    check_reduce_scatter(types[i], (cuv_nccl_redop_t)(i % 5), count, i % 2 == 0);
  }
  /* in steps of the simulator's slot shared by every destination rank */
  check_reduce_scatter(CUV_NCCL_FLOAT32, CUV_NCCL_SUM, 100000 + cuvt_random_u32() % 100, false);
}

/* A ring: rank r sends to r + 1 and receives from r - 1, in one op, twice with other counts. */
static void test_send_recv_ring(void **state) {
  (void)state;
  size_t count[2] = {1 + cuvt_random_u32() % 1000, 70000 + cuvt_random_u32() % 100};
  size_t bytes[2] = {count[0] * 4, count[1] * 4};
  unsigned char *in[2][CT_MAX_RANKS], *out = malloc(bytes[1]);
  cuv_buffer_t *send[2][CT_MAX_RANKS], *recv[2][CT_MAX_RANKS];
  cuv_nccl_p2p_t t[4 * CT_MAX_RANKS];
  size_t n = 0;
  for (int k = 0; k < 2; k++) {
    inputs_make(in[k], CUV_NCCL_INT32, CUV_NCCL_SUM, count[k]);
    bufs_create(send[k], bytes[k]);
    bufs_create(recv[k], bytes[k]);
    for (int r = 0; r < ndev; r++) {
      upload(send[k][r], in[k][r], bytes[k]);
      t[n++] = (cuv_nccl_p2p_t){CUV_NCCL_SEND, (unsigned)r, (r + 1) % ndev, send[k][r], count[k]};
      t[n++] = (cuv_nccl_p2p_t){CUV_NCCL_RECV, (unsigned)r, (r + ndev - 1) % ndev, recv[k][r],
                                count[k]};
    }
  }
  assert_cuv_ok(cuv_sync(cuv_comm_send_recv(comm, t, n, CUV_NCCL_INT32), NULL));
  for (int k = 0; k < 2; k++) {
    for (int r = 0; r < ndev; r++) {
      download(out, recv[k][r], bytes[k]);
      assert_memory_equal(out, in[k][(r + ndev - 1) % ndev], bytes[k]);
    }
    bufs_unref(send[k]);
    bufs_unref(recv[k]);
    inputs_free(in[k]);
  }
  free(out);
}

/* ---- composition ---- */

/* Float sums of fresh data in send, and what each rank's recv must hold after. */
typedef struct sum_case {
  size_t count, bytes;
  float *in[CT_MAX_RANKS];
  float *want;
  cuv_buffer_t *send[CT_MAX_RANKS], *recv[CT_MAX_RANKS];
} sum_case_t;

/* Uploads every rank's input but rank 0's when `skip0` (the caller's tree uploads it). */
static void sum_case_init(sum_case_t *c, size_t count, bool skip0) {
  c->count = count;
  c->bytes = count * sizeof(float);
  c->want = calloc(count, sizeof(float));
  bufs_create(c->send, c->bytes);
  bufs_create(c->recv, c->bytes);
  for (int r = 0; r < ndev; r++) {
    c->in[r] = malloc(c->bytes);
    for (size_t i = 0; i < count; i++) {
      c->in[r][i] = (float)((int)(cuvt_random_u32() % 2001) - 1000);
      c->want[i] += c->in[r][i];
    }
    if (r > 0 || !skip0)
      upload(c->send[r], c->in[r], c->bytes);
  }
}

static cuv_op_t *sum_case_op(sum_case_t *c) {
  return cuv_comm_all_reduce(comm, c->send, c->recv, c->count, CUV_NCCL_FLOAT32, CUV_NCCL_SUM);
}

static void sum_case_check(sum_case_t *c) {
  float *out = malloc(c->bytes);
  for (int r = 0; r < ndev; r++) {
    download(out, c->recv[r], c->bytes);
    assert_memory_equal(out, c->want, c->bytes);
  }
  free(out);
}

static void sum_case_free(sum_case_t *c) {
  for (int r = 0; r < ndev; r++)
    free(c->in[r]);
  free(c->want);
  bufs_unref(c->send);
  bufs_unref(c->recv);
}

static cuv_op_t *download_rank0(cuv_output_t *input, void *arg) {
  cuv_output_release(input);
  sum_case_t *c = arg;
  return cuv_download(c->recv[0], 0, c->bytes);
}

static void test_composed(void **state) {
  (void)state;
  /* seq: rank 0's upload, the all-reduce and rank 0's download in one tree */
  sum_case_t a, b, c, d;
  sum_case_init(&a, 1 + cuvt_random_u32() % 2000, true);
  cuv_output_t out;
  cuv_op_t *tree = cuv_seq(cuv_memcpy_htod(a.send[0], 0, a.in[0], a.bytes, CUV_COPY_STAGE),
                           cuv_seq(sum_case_op(&a), cuv_download(a.recv[0], 0, a.bytes)));
  assert_cuv_ok(cuv_sync(tree, &out));
  assert_memory_equal(out.data, a.want, a.bytes);
  cuv_output_release(&out);
  sum_case_check(&a);
  /* zip of two collectives, and fork of one beside a memset on another stream */
  sum_case_init(&b, 1 + cuvt_random_u32() % 2000, false);
  sum_case_init(&c, 1 + cuvt_random_u32() % 2000, false);
  cuv_op_t *pair[2] = {sum_case_op(&a), sum_case_op(&b)};
  sum_case_init(&d, 1 + cuvt_random_u32() % 2000, false);
  cuv_op_t *branches[2] = {sum_case_op(&c), cuv_memset8(d.recv[0], 0, 0x7f, d.bytes)};
  assert_cuv_ok(cuv_sync(cuv_seq(cuv_zip(pair, 2), cuv_fork(branches, 2)), NULL));
  sum_case_check(&a);
  sum_case_check(&b);
  sum_case_check(&c);
  /* then: the all-reduce, then a download built by the callback */
  assert_cuv_ok(cuv_sync(cuv_then(sum_case_op(&d), download_rank0, &d), &out));
  assert_memory_equal(out.data, d.want, d.bytes);
  cuv_output_release(&out);
  sum_case_free(&a);
  sum_case_free(&b);
  sum_case_free(&c);
  sum_case_free(&d);
}

/* ---- submission into a queue, and on the communicator's own stream ---- */

static void count_done(int status, cuv_output_t *output, void *arg) {
  (void)output;
  int *calls = arg;
  calls[0]++;
  if (status != 0)
    calls[1] = status;
}

static void test_submitted(void **state) {
  (void)state;
  enum { N = 6 };
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  sum_case_t c[N];
  int calls[N][2] = {{0}};
  for (int i = 0; i < N; i++) {
    sum_case_init(&c[i], 1 + cuvt_random_u32() % 3000, false);
    /* every other one on rank 0's stream of the communicator: that part needs no fork */
    cuv_submit_opts_t opts = {.stream = i % 2 ? cuv_comm_stream(comm, 0) : NULL};
    assert_cuv_ok(cuv_submit(q, sum_case_op(&c[i]), count_done, calls[i], &opts));
  }
  while (cuv_queue_pending(q) > 0) {
    assert_cuv_ok(cuv_queue_wait(q, -1));
    cuv_queue_drain(q);
  }
  for (int i = 0; i < N; i++) {
    assert_int_equal(calls[i][0], 1);
    assert_int_equal(calls[i][1], 0);
    sum_case_check(&c[i]);
    sum_case_free(&c[i]);
  }
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* ---- a graph ---- */

static void test_graph_replayed(void **state) {
  (void)state;
  sum_case_t c;
  sum_case_init(&c, 1 + cuvt_random_u32() % 3000, false);
  cuv_stream_t *s;
  cuv_graph_t *g;
  assert_cuv_ok(cuv_stream_create(&s, devs[0]));
  assert_cuv_ok(cuv_graph_capture(&g, sum_case_op(&c), s, NULL));
  for (int rep = 0; rep < 3; rep++) {
    memset(c.want, 0, c.bytes);
    for (int r = 0; r < ndev; r++) { /* fresh inputs, uploaded before the replay */
      for (size_t i = 0; i < c.count; i++) {
        c.in[r][i] = (float)((int)(cuvt_random_u32() % 2001) - 1000);
        c.want[i] += c.in[r][i];
      }
      upload(c.send[r], c.in[r], c.bytes);
    }
    assert_cuv_ok(cuv_sync_on(s, cuv_graph_launch(g), NULL));
    sum_case_check(&c);
  }
  cuv_graph_unref(g);
  cuv_stream_destroy(s);
  sum_case_free(&c);
}

/* ---- hazards ---- */

/* The last rank's input is written by a slow kernel on another stream of its device, enqueued
 * just before: the collective's part on that device must wait for it (an inserted event wait),
 * or it would read the old value. */
static void test_ordered_after_writer(void **state) {
  (void)state;
  int last = ndev - 1;
  cuv_module_t *mod;
  cuv_kernel_t *slow;
  assert_cuv_ok(cuv_module_load_file(&mod, devs[last], cuvt_ptx_path()));
  assert_cuv_ok(cuv_kernel_get(&slow, mod, "sleep_then_write"));
  cuv_buffer_t *send[CT_MAX_RANKS], *recv[CT_MAX_RANKS];
  bufs_create(send, 4);
  bufs_create(recv, 4);
  uint32_t value = 1 + cuvt_random_u32() % 1000, zero = 0, want = value, got = 0;
  for (int r = 0; r < ndev; r++)
    upload(send[r], &zero, 4);
  unsigned long long ns = 20000000ull;
  cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(value), CUV_ARG_WRITE(send[last])};
  cuv_policy_t *policy;
  cuv_stream_t *other;
  assert_cuv_ok(cuv_device_policy(devs[last], &policy));
  assert_cuv_ok(cuv_policy_next_stream(policy, NULL, &other));
  assert_cuv_ok(
      cuv_enqueue_on(other, cuv_launch(slow, CUV_DIM1(1), CUV_DIM1(1), 0, args, 3), NULL));
  cuv_stats_t before, after;
  cuv_stats(&before);
  assert_cuv_ok(cuv_sync(
      cuv_comm_all_reduce(comm, send, recv, 1, CUV_NCCL_UINT32, CUV_NCCL_SUM), NULL));
  cuv_stats(&after);
  assert_true(after.waits_inserted > before.waits_inserted);
  for (int r = 0; r < ndev; r++) {
    download(&got, recv[r], 4);
    assert_int_equal(got, want);
  }
  assert_cuv_ok(cuv_stream_synchronize(other));
  bufs_unref(send);
  bufs_unref(recv);
  cuv_kernel_unref(slow);
  cuv_module_unref(mod);
}

/* ---- the communicator ---- */

static void test_communicator(void **state) {
  (void)state;
  assert_int_equal(cuv_comm_local_count(comm), (unsigned)ndev);
  assert_int_equal(cuv_comm_size(comm), ndev);
  assert_int_equal(cuv_comm_status(comm), 0);
  for (int r = 0; r < ndev; r++) {
    assert_int_equal(cuv_comm_rank(comm, (unsigned)r), r);
    assert_ptr_equal(cuv_comm_device(comm, (unsigned)r), devs[r]);
    assert_ptr_equal(cuv_stream_device(cuv_comm_stream(comm, (unsigned)r)), devs[r]);
    assert_non_null(cuv_comm_handle(comm, (unsigned)r));
  }
  assert_int_equal(cuv_comm_rank(comm, (unsigned)ndev), CUV_EINVAL);
  assert_null(cuv_comm_stream(comm, (unsigned)ndev));
}

static int open_all(void) {
  int count = 0;
  assert_cuv_ok(cuv_device_count(&count));
  ndev = count < CT_MAX_RANKS ? count : CT_MAX_RANKS;
  for (int r = 0; r < ndev; r++)
    assert_cuv_ok(cuv_device_open(&devs[r], r));
  return ndev;
}

static int make_comm(void **state) {
  (void)state;
  cuv_output_t out;
  int rc = cuv_sync(cuv_comm_init_all(devs, (size_t)ndev), &out);
  if (rc != 0) {
    fprintf(stderr, "cuv_comm_init_all: %s (%s) %s\n", cuv_err_name(rc), cuv_strerror(rc),
            cuv_nccl_error() ? cuv_nccl_error() : "");
    return -1;
  }
  comm = cuv_output_take(&out).data;
  return 0;
}

static int drop_comm(void **state) {
  (void)state;
  cuv_comm_unref(comm);
  for (int r = 0; r < ndev; r++)
    cuv_device_unref(devs[r]);
  return 0;
}

int main(void) {
  cuv_sim_set_device_count(4); /* the simulator only: a GPU machine has what it has */
  cuvt_init();
  if (open_all() < 2) {
    printf("1..0 # SKIP fewer than 2 devices\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_communicator),
      cmocka_unit_test(test_all_reduce_every_type),
      cmocka_unit_test(test_all_reduce_in_chunks),
      cmocka_unit_test(test_reduce_and_broadcast),
      cmocka_unit_test(test_all_gather_and_reduce_scatter),
      cmocka_unit_test(test_send_recv_ring),
      cmocka_unit_test(test_composed),
      cmocka_unit_test(test_submitted),
      cmocka_unit_test(test_graph_replayed),
      cmocka_unit_test(test_ordered_after_writer),
  };
  return cmocka_run_group_tests_name(cuvt_suite_name(), tests, make_comm, drop_comm);
}
