/* Ops across devices (docs/devices.md): trees whose ops belong to several devices, peer
 * copies, hazards and holds across devices, policies over a set of devices, and the engine
 * ordering jobs of several devices submitted from several threads. Results are checked against
 * host arithmetic on fresh random data; ordering behind slow writers, so a missing wait shows as
 * stale data. It runs on 2 and 3 simulated devices (CUV_SIM_DEVICES, tests/meson.build) and on
 * however many GPUs there are: with one, each case says so and returns. */
#include <pthread.h>

#include <cuda.h>

#include "counted.h"

#define MAX_DEV 3
#define N 3001 /* floats; not a multiple of the block size */
#define SLOW_MS 60

static int ndev; /* devices in use: as many as there are, up to MAX_DEV */
static cuv_device_t *dev[MAX_DEV];
static cuv_module_t *mod[MAX_DEV];

static bool enough_devices(void) {
  if (ndev >= 2)
    return true;
  print_message("# one device: ops across devices need two\n");
  return false;
}

static int ordinal_of(cuv_buffer_t *buf) { return cuv_device_ordinal(cuv_buffer_device(buf)); }

/* The test kernel `name` of device d (looked up once; the table keeps it for the process). */
static cuv_kernel_t *kernel_on(int d, const char *name) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static struct {
    const char *name;
    cuv_kernel_t *kernel;
  } cache[MAX_DEV][8];
  cuv_kernel_t *found = NULL;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < 8 && !found; i++) {
    if (!cache[d][i].name && cuv_kernel_get(&cache[d][i].kernel, mod[d], name) == 0)
      cache[d][i].name = name;
    if (cache[d][i].name && strcmp(cache[d][i].name, name) == 0)
      found = cache[d][i].kernel;
  }
  pthread_mutex_unlock(&lock);
  return found;
}

/* Launches on the buffer's own device (they never assert: also built inside callbacks). */
static cuv_op_t *scale(cuv_buffer_t *buf, unsigned n, float factor) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(factor), CUV_ARG_RW(buf)};
  return cuv_launch(kernel_on(ordinal_of(buf), "scale"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 3);
}

static cuv_op_t *add_one(cuv_buffer_t *buf, unsigned n) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(buf)};
  return cuv_launch(kernel_on(ordinal_of(buf), "add_one"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 2);
}

static cuv_op_t *fill(cuv_buffer_t *buf, unsigned n, unsigned value) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(value), CUV_ARG_WRITE(buf)};
  return cuv_launch(kernel_on(ordinal_of(buf), "fill_u32"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 3);
}

/* After `ms` milliseconds on its device, *flag = value. */
static cuv_op_t *slow_write(unsigned ms, unsigned value, cuv_buffer_t *flag) {
  unsigned long long ns = (unsigned long long)ms * 1000000ull;
  cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(value), CUV_ARG_WRITE(flag)};
  return cuv_launch(kernel_on(ordinal_of(flag), "sleep_then_write"), CUV_DIM1(1), CUV_DIM1(1), 0,
                    args, 3);
}

static cuv_buffer_t *buffer_on(int d, size_t bytes) {
  cuv_buffer_t *buf = NULL;
  assert_cuv_ok(cuv_buffer_create(&buf, dev[d], bytes));
  assert_cuv_ok(cuv_sync(cuv_memset8(buf, 0, 0, bytes), NULL));
  return buf;
}

static void unref_all(cuv_buffer_t **bufs, int n) {
  for (int i = 0; i < n; i++)
    cuv_buffer_unref(bufs[i]);
}

/* The floats of buf equal want. */
static void assert_holds(cuv_buffer_t *buf, const float *want) {
  float *got = malloc(N * sizeof *got);
  assert_non_null(got);
  cuvt_read(got, buf, 0, N * sizeof *got);
  cuvt_assert_floats_equal(got, want, N);
  free(got);
}

static unsigned read_u32(cuv_buffer_t *buf) {
  unsigned v = 0;
  cuvt_read(&v, buf, 0, sizeof v);
  return v;
}

/* Drains q until nothing of it is pending, then destroys it (any thread: nothing asserts). */
static int drain_and_destroy(cuv_queue_t *q) {
  while (cuv_queue_pending(q) > 0) {
    cuv_queue_wait(q, 1000);
    cuv_queue_drain(q);
  }
  return cuv_queue_destroy(q);
}

/* Runs op through a queue and returns what its callback saw (called once). */
static cuvt_seen_t submit_and_wait(cuv_op_t *op, cuv_policy_t *policy) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuvt_seen_t seen = {0};
  cuv_submit_opts_t opts = {.policy = policy};
  assert_cuv_ok(cuv_submit(q, op, cuvt_record_seen, &seen, &opts));
  assert_cuv_ok(drain_and_destroy(q));
  assert_int_equal(seen.calls, 1);
  return seen;
}

/* ---- results of trees across devices ---- */

/* Through every device and back: a[0] = 2x on device 0, then on each device d a copy of the
 * previous device's buffer times d + 2, then back on device 0, plus one. The tree executes on
 * device 0 (its first op's); each other device's part runs on that device's streams. */
static void test_chain_across_devices(void **state) {
  if (!enough_devices())
    return;
  float x[N], want[MAX_DEV][N], last[N];
  cuvt_random_ints(x, N);
  cuv_buffer_t *a[MAX_DEV], *back = buffer_on(0, N * sizeof(float));
  for (int d = 0; d < ndev; d++)
    a[d] = buffer_on(d, N * sizeof(float));
  cuvt_upload(a[0], 0, x, sizeof x);
  cuv_op_t *op = scale(a[0], N, 2.0f);
  for (int d = 1; d < ndev; d++)
    op = cuv_seq(cuv_seq(op, cuv_memcpy_peer(a[d], 0, a[d - 1], 0, sizeof x)),
                 scale(a[d], N, (float)(d + 2)));
  op = cuv_seq(cuv_seq(op, cuv_memcpy_peer(back, 0, a[ndev - 1], 0, sizeof x)), add_one(back, N));
  int ordinal = -1;
  assert_cuv_ok(cuv_op_device(op, &ordinal));
  assert_int_equal(ordinal, 0);
  assert_cuv_ok(cuv_sync(op, NULL));
  for (size_t i = 0; i < N; i++) {
    want[0][i] = 2.0f * x[i];
    for (int d = 1; d < ndev; d++)
      want[d][i] = want[d - 1][i] * (float)(d + 2);
    last[i] = want[ndev - 1][i] + 1.0f;
  }
  for (int d = 0; d < ndev; d++)
    assert_holds(a[d], want[d]);
  assert_holds(back, last);
  unref_all(a, ndev);
  cuv_buffer_unref(back);
}

/* zip and fork over every device: downloads of each device's data in one tuple, and one branch
 * per device scaling its own buffer, submitted asynchronously. */
static void test_zip_and_fork_across_devices(void **state) {
  if (!enough_devices())
    return;
  static float x[MAX_DEV][N], want[N];
  cuv_buffer_t *a[MAX_DEV];
  cuv_op_t *downloads[MAX_DEV], *branches[MAX_DEV];
  for (int d = 0; d < ndev; d++) {
    cuvt_random_ints(x[d], N);
    a[d] = buffer_on(d, N * sizeof(float));
    cuvt_upload(a[d], 0, x[d], sizeof x[d]);
    downloads[d] = cuv_download(a[d], 0, sizeof x[d]);
    branches[d] = scale(a[d], N, (float)(3 + d));
  }
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_zip(downloads, (size_t)ndev), &out));
  for (int d = 0; d < ndev; d++)
    cuvt_assert_floats_equal(cuv_tuple_get(&out, (size_t)d)->data, x[d], N);
  cuv_output_release(&out);
  assert_cuv_ok(submit_and_wait(cuv_fork(branches, (size_t)ndev), NULL).status);
  for (int d = 0; d < ndev; d++) {
    for (size_t i = 0; i < N; i++)
      want[i] = x[d][i] * (float)(3 + d);
    assert_holds(a[d], want);
  }
  unref_all(a, ndev);
}

typedef struct then_arg {
  cuv_buffer_t *a0, *a1;
  int calls;
} then_arg_t;

/* Returns work on both devices the tree names: a1 *= 2 on device 1, then a0 = a1 on device 0. */
static cuv_op_t *then_both(cuv_output_t *in, void *arg) {
  then_arg_t *t = arg;
  t->calls++;
  return cuv_seq(scale(t->a1, N, 2.0f), cuv_memcpy_peer(t->a0, 0, t->a1, 0, N * sizeof(float)));
}

static int sum_floats(cuv_output_t *value, void *arg) {
  const float *v = value->data;
  float sum = 0.0f;
  for (size_t i = 0; i < N; i++)
    sum += v[i];
  *(float *)arg = sum;
  return 0;
}

/* then and map across devices: a then over uploads to two devices returns work on both; a map
 * over a download of device 1 in a tree of device 0 sees the data landed. */
static void test_then_and_map_across_devices(void **state) {
  if (!enough_devices())
    return;
  float x0[N], x1[N], want[N];
  cuvt_random_ints(x0, N);
  cuvt_random_ints(x1, N);
  then_arg_t t = {buffer_on(0, sizeof x0), buffer_on(1, sizeof x1), 0};
  cuv_op_t *uploads[] = {cuv_memcpy_htod(t.a0, 0, x0, sizeof x0, CUV_COPY_STAGE),
                         cuv_memcpy_htod(t.a1, 0, x1, sizeof x1, CUV_COPY_STAGE)};
  assert_cuv_ok(submit_and_wait(cuv_then(cuv_zip(uploads, 2), then_both, &t), NULL).status);
  assert_int_equal(t.calls, 1);
  float expected_sum = 0.0f;
  for (size_t i = 0; i < N; i++) {
    want[i] = 2.0f * x1[i];
    expected_sum += want[i];
  }
  assert_holds(t.a0, want);
  float sum = 0.0f;
  cuv_op_t *op = cuv_seq(add_one(t.a0, N), cuv_map(cuv_download(t.a1, 0, sizeof x1), sum_floats,
                                                    &sum));
  assert_cuv_ok(cuv_sync(op, NULL));
  if (sum != expected_sum)
    print_error("sum %g, want %g\n", (double)sum, (double)expected_sum);
  assert_true(sum == expected_sum);
  cuv_buffer_unref(t.a0);
  cuv_buffer_unref(t.a1);
}

/* A shared op of device 0 cloned into a tree of device 1 and executed again on its own: it runs
 * once, and the tree on device 1 sees its result through a peer copy. */
static void test_shared_across_devices(void **state) {
  if (!enough_devices())
    return;
  float x[N], want[N];
  cuvt_random_ints(x, N);
  cuv_buffer_t *a0 = buffer_on(0, sizeof x), *b1 = buffer_on(1, sizeof x);
  cuvt_upload(a0, 0, x, sizeof x);
  cuv_shared_t *sh = cuv_shared(scale(a0, N, 4.0f));
  cuv_op_t *tree = cuv_seq(cuv_seq(cuv_memset8(b1, 0, 0, sizeof x), cuv_shared_clone(sh)),
                           cuv_memcpy_peer(b1, 0, a0, 0, sizeof x));
  assert_cuv_ok(submit_and_wait(tree, NULL).status);
  assert_cuv_ok(cuv_sync(cuv_shared_clone(sh), NULL));
  assert_int_equal(cuv_shared_runs(sh), 1);
  for (size_t i = 0; i < N; i++)
    want[i] = 4.0f * x[i];
  assert_holds(b1, want);
  cuv_shared_unref(sh);
  cuv_buffer_unref(a0);
  cuv_buffer_unref(b1);
}

/* ---- order across devices ---- */

/* Slow writers and their readers on different devices in one tree (executing on device 0):
 * a part on device 1 starts after what device 0 enqueued before it (the fork point), device 0
 * goes on only after it (the join), and two parts of device 1 on two of its streams are
 * ordered through device 0's stream between them. The buffers track no hazards: only those
 * events order the reads. */
static void test_order_behind_slow_writers(void **state) {
  if (!enough_devices())
    return;
  cuv_buffer_t *f0 = buffer_on(0, 4), *f1 = buffer_on(1, 4);
  assert_cuv_ok(cuv_buffer_set_hazard_mode(f0, CUV_HAZARD_NONE));
  assert_cuv_ok(cuv_buffer_set_hazard_mode(f1, CUV_HAZARD_NONE));
  unsigned v = cuvt_nonzero_u32();
  cuv_op_t *op = cuv_seq(cuv_seq(slow_write(SLOW_MS, v, f0), cuv_memcpy_peer(f1, 0, f0, 0, 4)),
                         cuv_download(f1, 0, 4));
  assert_int_equal(submit_and_wait(op, NULL).got, v);
  /* Device 1's slow writer, then device 0 copies and downloads its result. */
  v = cuvt_nonzero_u32();
  op = cuv_seq(cuv_seq(cuv_memset8(f0, 0, 0, 4), slow_write(SLOW_MS, v, f1)),
               cuv_seq(cuv_memcpy_peer(f0, 0, f1, 0, 4), cuv_download(f0, 0, 4)));
  assert_int_equal(submit_and_wait(op, NULL).got, v);
  /* Device 1's slow writer and device 1's download, two parts with device 0 between them. */
  unsigned w = cuvt_nonzero_u32();
  op = cuv_seq(cuv_seq(cuv_memset8(f0, 0, 0, 4), slow_write(SLOW_MS, w, f1)),
               cuv_download(f1, 0, 4));
  assert_int_equal(submit_and_wait(op, NULL).got, w);
  cuv_buffer_unref(f0);
  cuv_buffer_unref(f1);
}

/* Hazards across devices, in separate submissions: a peer copy reading a buffer that a slow
 * writer of its own device has in flight waits for it; a write on the source's device waits for
 * a peer copy reading it from another device's stream behind a slow kernel. */
static void test_hazards_across_devices(void **state) {
  if (!enough_devices())
    return;
  cuv_buffer_t *src = buffer_on(1, 4), *dst = buffer_on(0, 4);
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  unsigned v = cuvt_nonzero_u32();
  cuvt_seen_t writer = {0}, reader = {0};
  assert_cuv_ok(cuv_submit(q, slow_write(SLOW_MS, v, src), cuvt_record_seen, &writer, NULL));
  uint64_t waits = cuvt_waits_inserted();
  assert_cuv_ok(cuv_sync(cuv_memcpy_peer(dst, 0, src, 0, 4), NULL));
  assert_true(cuvt_waits_inserted() > waits);
  assert_int_equal(read_u32(dst), v);
  /* The reader: device 0 sleeps, then copies src; the writer on device 1 comes after it. */
  cuv_op_t *slow_read =
      cuv_seq(cuv_seq(slow_write(SLOW_MS, 0, dst), cuv_memcpy_peer(dst, 0, src, 0, 4)),
              cuv_value(NULL, NULL));
  assert_cuv_ok(cuv_submit(q, slow_read, cuvt_record_seen, &reader, NULL));
  assert_cuv_ok(cuv_sync(cuv_memset8(src, 0, 0, 4), NULL));
  assert_cuv_ok(drain_and_destroy(q));
  assert_int_equal(writer.calls + reader.calls, 2);
  assert_cuv_ok(reader.status);
  assert_int_equal(read_u32(dst), v); /* copied before the write of 0 */
  assert_int_equal(read_u32(src), 0);
  cuv_buffer_unref(src);
  cuv_buffer_unref(dst);
}

/* ---- holds across devices ---- */

/* A callback that keeps a copy of the N floats its output points to. */
typedef struct copied {
  int calls, status;
  float data[N];
} copied_t;

static void copy_done(int status, cuv_output_t *out, void *arg) {
  copied_t *c = arg;
  c->calls++;
  c->status = status;
  if (status == 0 && out && out->data)
    memcpy(c->data, out->data, sizeof c->data);
}

/* Buffers of two devices dropped by their owner as soon as a tree over them is submitted, behind
 * a slow kernel: the submission holds them until its work is proven complete, and releases
 * everything then (in flight back where it was). */
static void test_holds_across_devices(void **state) {
  if (!enough_devices())
    return;
  cuv_stats_t before = cuvt_stats();
  float x[N];
  cuvt_random_ints(x, N);
  cuv_buffer_t *a0 = buffer_on(0, sizeof x), *b1 = buffer_on(1, sizeof x), *f = buffer_on(0, 4);
  cuvt_upload(a0, 0, x, sizeof x);
  cuv_op_t *op = cuv_seq(slow_write(SLOW_MS, 1, f), cuv_memcpy_peer(b1, 0, a0, 0, sizeof x));
  op = cuv_seq(op, cuv_download(b1, 0, sizeof x));
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  static copied_t copied;
  copied.calls = 0;
  assert_cuv_ok(cuv_submit(q, op, copy_done, &copied, NULL));
  cuv_buffer_unref(a0);
  cuv_buffer_unref(b1);
  cuv_buffer_unref(f);
  assert_cuv_ok(drain_and_destroy(q));
  assert_int_equal(copied.calls, 1);
  assert_cuv_ok(copied.status);
  cuvt_assert_floats_equal(copied.data, x, N);
  assert_int_equal(cuvt_stats().in_flight, before.in_flight);
}

static void upload_done(int status, cuv_output_t *out, void *arg) { *(int *)arg = status; }

/* A download of device 1 whose output a seq drops at once, behind device 1's slow kernel, in a
 * tree of device 0: its pinned block stays with the submission, so a staged upload built
 * meanwhile from device 1's pool keeps its own data. */
static void test_download_dropped_on_another_device(void **state) {
  if (!enough_devices())
    return;
  enum { BYTES = 4096 };
  cuv_buffer_t *f1 = buffer_on(1, 4), *src = buffer_on(1, BYTES), *dst = buffer_on(1, BYTES);
  cuv_buffer_t *b0 = buffer_on(0, 4);
  assert_cuv_ok(cuv_sync(cuv_memset8(src, 0, 0xAA, BYTES), NULL));
  cuv_op_t *dropped = cuv_seq(cuv_seq(slow_write(SLOW_MS, 1, f1), cuv_download(src, 0, BYTES)),
                              cuv_value(NULL, NULL));
  cuv_op_t *op = cuv_seq(cuv_memset8(b0, 0, 0, 4), dropped); /* the tree's device: 0 */
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  int status = 1;
  assert_cuv_ok(cuv_submit(q, op, upload_done, &status, NULL));
  unsigned char pattern[BYTES], got[BYTES];
  memset(pattern, 0x55, sizeof pattern);
  cuv_op_t *upload = cuv_memcpy_htod(dst, 0, pattern, BYTES, CUV_COPY_STAGE);
  assert_cuv_ok(drain_and_destroy(q));
  assert_cuv_ok(status);
  assert_cuv_ok(cuv_sync(upload, NULL));
  cuvt_read(got, dst, 0, BYTES);
  for (size_t i = 0; i < BYTES; i++)
    assert_int_equal(got[i], 0x55);
  cuv_buffer_unref(f1);
  cuv_buffer_unref(src);
  cuv_buffer_unref(dst);
  cuv_buffer_unref(b0);
}

/* ---- policies over devices ---- */

/* The device each with_context callback was given a stream of. */
static atomic_int ran_on[MAX_DEV];

static cuv_op_t *note_device(cuv_stream_t *stream, void *arg) {
  atomic_fetch_add(&ran_on[cuv_device_ordinal(cuv_stream_device(stream))], 1);
  return cuv_value(NULL, NULL);
}

static void count_done(int status, cuv_output_t *out, void *arg) {
  if (status == 0)
    atomic_fetch_add((atomic_int *)arg, 1);
}

/* Round-robin across devices: ops of no device take the devices in turn, an op of a device its
 * own device; the parts of a fork on each device run there. */
static void test_round_robin_devices(void **state) {
  if (!enough_devices())
    return;
  enum { EACH = 4 };
  cuv_policy_t *p;
  assert_cuv_ok(cuv_policy_round_robin_devices(&p, dev, (unsigned)ndev, 2));
  assert_ptr_equal(cuv_policy_device(p), dev[0]);
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  for (int d = 0; d < ndev; d++)
    atomic_store(&ran_on[d], 0);
  atomic_int done = 0;
  cuv_submit_opts_t opts = {.policy = p};
  for (int i = 0; i < EACH * ndev; i++)
    assert_cuv_ok(cuv_submit(q, cuv_with_context(note_device, NULL, NULL), count_done, &done,
                             &opts));
  cuvt_drain_until(q, &done, EACH * ndev);
  for (int d = 0; d < ndev; d++)
    assert_int_equal(atomic_load(&ran_on[d]), EACH);
  cuv_buffer_t *b = buffer_on(ndev - 1, 4);
  cuv_op_t *op = cuv_memset8(b, 0, 0, 4);
  for (int i = 0; i < 3; i++) {
    cuv_stream_t *s;
    assert_cuv_ok(cuv_policy_next_stream(p, op, &s));
    assert_ptr_equal(cuv_stream_device(s), dev[ndev - 1]);
  }
  cuv_op_destroy(op);
  unsigned v = cuvt_nonzero_u32();
  assert_cuv_ok(cuv_sync_policy(p, fill(b, 1, v), NULL));
  assert_int_equal(read_u32(b), v);
  cuv_buffer_unref(b);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_policy_destroy(p);
}

/* Least loaded across devices: with a submission in flight on device 0 (its callback not yet
 * drained, so it counts whatever the GPU does), ops of no device go to the other devices. */
static void test_least_loaded_devices(void **state) {
  if (!enough_devices())
    return;
  cuv_policy_t *p;
  assert_cuv_ok(cuv_policy_least_loaded_devices(&p, dev, (unsigned)ndev, 1));
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_buffer_t *f0 = buffer_on(0, 4);
  atomic_int done = 0;
  cuv_submit_opts_t opts = {.policy = p};
  assert_cuv_ok(cuv_submit(q, slow_write(SLOW_MS, 1, f0), count_done, &done, &opts));
  for (int d = 0; d < ndev; d++)
    atomic_store(&ran_on[d], 0);
  for (int i = 0; i < ndev - 1; i++)
    assert_cuv_ok(cuv_submit(q, cuv_with_context(note_device, NULL, NULL), count_done, &done,
                             &opts));
  cuvt_drain_until(q, &done, ndev);
  assert_int_equal(atomic_load(&ran_on[0]), 0);
  for (int d = 1; d < ndev; d++)
    assert_int_equal(atomic_load(&ran_on[d]), 1);
  assert_int_equal(read_u32(f0), 1);
  cuv_buffer_unref(f0);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_policy_destroy(p);
}

/* ---- peer copies ---- */

/* Every ordered pair of devices copies both ways a few times; peer access is asked for at most
 * once per pair (the simulator counts the driver's calls), and not at all for a pair the
 * device cannot reach, whose copies still arrive. */
static void test_peer_access_once(void **state) {
  if (!enough_devices())
    return;
  float x[N];
  cuvt_random_ints(x, N);
  cuv_buffer_t *a[MAX_DEV];
  for (int d = 0; d < ndev; d++)
    a[d] = buffer_on(d, sizeof x);
  cuvt_upload(a[0], 0, x, sizeof x);
  for (int round = 0; round < 3; round++)
    for (int d = 0; d < ndev; d++)
      for (int e = 0; e < ndev; e++)
        if (d != e)
          assert_cuv_ok(cuv_sync(cuv_memcpy_peer(a[e], 0, a[d], 0, sizeof x), NULL));
  for (int d = 0; d < ndev; d++)
    assert_holds(a[d], x);
  if (cuvt_is_sim()) /* main denied device 1 access to device 0 before any copy */
    assert_int_equal(cuv_sim_calls("cuCtxEnablePeerAccess"),
                     (unsigned long)(ndev * (ndev - 1) - 1));
  unref_all(a, ndev);
}

/* The driver refusing the peer copy (the simulator's failure injection): the copy is staged
 * through pinned host memory, in order behind device 0's slow writer, and arrives. */
static void test_peer_copy_staged(void **state) {
  if (!enough_devices())
    return;
  if (!cuvt_is_sim()) {
    print_message("# the driver's refusal is injected on the simulator only\n");
    return;
  }
  float x[N], want[N];
  cuvt_random_ints(x, N);
  cuv_buffer_t *a0 = buffer_on(0, sizeof x), *b1 = buffer_on(1, sizeof x), *f0 = buffer_on(0, 4);
  cuvt_upload(a0, 0, x, sizeof x);
  unsigned long staged = cuv_sim_calls("cuMemcpyDtoHAsync");
  cuv_sim_fail("cuMemcpyPeerAsync", 0, CUDA_ERROR_NOT_SUPPORTED);
  cuv_op_t *op = cuv_seq(cuv_seq(cuv_seq(slow_write(SLOW_MS, 1, f0), scale(a0, N, 3.0f)),
                                 cuv_memcpy_peer(b1, 0, a0, 0, sizeof x)),
                         cuv_memcpy_peer(a0, 0, b1, 0, sizeof x));
  int status = submit_and_wait(op, NULL).status;
  cuv_sim_fail_clear();
  assert_cuv_ok(status);
  assert_true(cuv_sim_calls("cuMemcpyDtoHAsync") >= staged + 2);
  for (size_t i = 0; i < N; i++)
    want[i] = 3.0f * x[i];
  assert_holds(b1, want);
  assert_holds(a0, want);
  cuv_buffer_unref(a0);
  cuv_buffer_unref(b1);
  cuv_buffer_unref(f0);
}

/* ---- the engine: several threads submitting jobs of several devices ---- */

#define THREADS 4
#define ROUNDS 150

typedef struct worker {
  int t;
  cuv_buffer_t *near, *far; /* far is written on its own device, then copied into near */
  unsigned got[ROUNDS];
  int calls[ROUNDS];
  int failures;
  atomic_int fills;
} worker_t;

typedef struct round_rec {
  worker_t *w;
  int round;
} round_rec_t;

static void round_done(int status, cuv_output_t *out, void *arg) {
  round_rec_t *r = arg;
  r->w->calls[r->round]++;
  if (status != 0 || !out->data)
    r->w->failures++;
  else
    r->w->got[r->round] = *(const unsigned *)out->data;
}

/* Each round: a job of far's device alone writes the round's number, then a job of two devices
 * copies it into near and downloads it. The second is ordered after the first only by the
 * engines: far's engine holds a stand-in of it behind the first. */
static void *worker_main(void *arg) {
  worker_t *w = arg;
  cuv_queue_t *q;
  if (cuv_queue_create(&q, NULL, NULL) < 0)
    return NULL;
  round_rec_t recs[ROUNDS];
  for (int i = 0; i < ROUNDS; i++) {
    recs[i] = (round_rec_t){w, i};
    unsigned value = (unsigned)(w->t * ROUNDS + i + 1);
    cuv_op_t *copy =
        cuv_seq(cuv_memcpy_peer(w->near, 0, w->far, 0, 4), cuv_download(w->near, 0, 4));
    if (cuv_submit(q, fill(w->far, 1, value), count_done, &w->fills, NULL) < 0 ||
        cuv_submit(q, copy, round_done, &recs[i], NULL) < 0)
      w->failures++;
  }
  drain_and_destroy(q);
  return NULL;
}

static void test_threads_submit_across_devices(void **state) {
  if (!enough_devices())
    return;
  static worker_t workers[THREADS];
  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; t++) {
    memset(&workers[t], 0, sizeof workers[t]);
    workers[t].t = t;
    workers[t].near = buffer_on(t % ndev, 4);
    workers[t].far = buffer_on((t + 1) % ndev, 4);
    assert_int_equal(pthread_create(&threads[t], NULL, worker_main, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; t++)
    pthread_join(threads[t], NULL);
  for (int t = 0; t < THREADS; t++) {
    worker_t *w = &workers[t];
    assert_int_equal(w->failures, 0);
    assert_int_equal(atomic_load(&w->fills), ROUNDS);
    for (int i = 0; i < ROUNDS; i++) {
      assert_int_equal(w->calls[i], 1);
      if (w->got[i] != (unsigned)(t * ROUNDS + i + 1))
        fail_msg("thread %d round %d: copied %u, not that round's value", t, i, w->got[i]);
    }
    cuv_buffer_unref(w->near);
    cuv_buffer_unref(w->far);
  }
}

int main(void) {
  cuvt_init();
  int count = 0;
  assert_cuv_ok(cuv_device_count(&count));
  ndev = count < MAX_DEV ? count : MAX_DEV;
  for (int d = 0; d < ndev; d++) {
    assert_cuv_ok(cuv_device_open(&dev[d], d));
    assert_cuv_ok(cuv_module_load_file(&mod[d], dev[d], cuvt_ptx_path()));
  }
  print_message("# %d devices\n", ndev);
  if (cuvt_is_sim() && ndev >= 2)
    cuv_sim_set_peer_access(1, 0, 0); /* one pair the device cannot reach (test_peer_access_once) */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_across_devices),
      cmocka_unit_test(test_zip_and_fork_across_devices),
      cmocka_unit_test(test_then_and_map_across_devices),
      cmocka_unit_test(test_shared_across_devices),
      cmocka_unit_test(test_order_behind_slow_writers),
      cmocka_unit_test(test_hazards_across_devices),
      cmocka_unit_test(test_holds_across_devices),
      cmocka_unit_test(test_download_dropped_on_another_device),
      cmocka_unit_test(test_round_robin_devices),
      cmocka_unit_test(test_least_loaded_devices),
      cmocka_unit_test(test_peer_access_once),
      cmocka_unit_test(test_peer_copy_staged),
      cmocka_unit_test(test_threads_submit_across_devices),
  };
  return cuvt_run(tests);
}
