/* Communicators created while a libuv loop on another thread accepts and closes TCP connections,
 * as rank 0 of samples/collectives --processes does while its own communicator is being made.
 * libuv closes descriptors with syscall(SYS_close), which ThreadSanitizer does not see, so the
 * simulator's NCCL gets numbers the loop thread just had for the files of its shared-memory
 * segments (sim/nccl_clique.c). Unless the simulator makes each segment's descriptor with a call
 * TSan sees, TSan takes the number for the loop's socket still and reports the simulator's fstat
 * or mmap of it as a race with the loop's accept4 (as it did in CI's TSan pass, exit status 66).
 * Worker threads make communicators of both devices round after round, each checked with an
 * all-reduce against the host's sum; the rounds are bounded by count and by time. Suite sim on 2
 * simulated devices, also in the TSan pass. Asserts on the test thread only. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>

#include "common.h"

#define NDEV 2
#define WORKERS 2
#define ROUNDS 40               /* per worker */
#define ROUNDS_NS 3000000000ull /* a worker starts no round after this long (one at least) */
#define COUNT 1024              /* floats per rank in a round's all-reduce */

static cuv_device_t *devs[NDEV];

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- the loop thread: one connection at a time to its own listener, accepted and closed ---- */

typedef struct churn {
  uv_loop_t loop;
  uv_tcp_t server, client;
  uv_connect_t connect;
  struct sockaddr_in addr;
  uv_thread_t thread;
  /* Relaxed on purpose: an acquire here would order the loop's earlier descriptors before the
   * workers' for TSan, which is what the test must not do. */
  atomic_bool stop;
  atomic_uint accepted;
  unsigned connected, errors;
  int loop_close;
} churn_t;

static void free_handle(uv_handle_t *h) { free(h); }

static void on_connection(uv_stream_t *server, int status) {
  churn_t *c = server->data;
  uv_tcp_t *peer = malloc(sizeof *peer);
  if (status < 0 || !peer || uv_tcp_init(&c->loop, peer) != 0) {
    c->errors++;
    free(peer);
    return;
  }
  if (uv_accept(server, (uv_stream_t *)peer) == 0)
    atomic_fetch_add_explicit(&c->accepted, 1, memory_order_relaxed);
  else
    c->errors++;
  uv_close((uv_handle_t *)peer, free_handle);
}

static void start_connect(churn_t *c);

static void on_client_closed(uv_handle_t *h) {
  churn_t *c = h->data;
  if (atomic_load_explicit(&c->stop, memory_order_relaxed))
    uv_close((uv_handle_t *)&c->server, NULL);
  else
    start_connect(c);
}

static void on_connected(uv_connect_t *req, int status) {
  churn_t *c = req->data;
  if (status == 0)
    c->connected++;
  else
    c->errors++;
  uv_close((uv_handle_t *)&c->client, on_client_closed);
}

static void start_connect(churn_t *c) {
  uv_tcp_init(&c->loop, &c->client); /* cannot fail: the socket is made by the connect */
  c->client.data = c->connect.data = c;
  if (uv_tcp_connect(&c->connect, &c->client, (const struct sockaddr *)&c->addr, on_connected)) {
    c->errors++;
    uv_close((uv_handle_t *)&c->client, on_client_closed);
  }
}

static void churn_main(void *arg) {
  churn_t *c = arg;
  start_connect(c);
  uv_run(&c->loop, UV_RUN_DEFAULT);
  c->loop_close = uv_loop_close(&c->loop);
}

static void churn_start(churn_t *c) {
  memset(c, 0, sizeof *c);
  assert_int_equal(uv_loop_init(&c->loop), 0);
  assert_int_equal(uv_tcp_init(&c->loop, &c->server), 0);
  c->server.data = c;
  assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &c->addr), 0);
  assert_int_equal(uv_tcp_bind(&c->server, (const struct sockaddr *)&c->addr, 0), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&c->server, 16, on_connection), 0);
  int len = sizeof c->addr;
  assert_int_equal(uv_tcp_getsockname(&c->server, (struct sockaddr *)&c->addr, &len), 0);
  assert_int_equal(uv_thread_create(&c->thread, churn_main, c), 0);
}

/* ---- the workers: a communicator of both devices, an all-reduce, the communicator's end ---- */

typedef struct worker {
  pthread_t thread;
  unsigned rounds, wrong; /* rounds run; elements of a sum that differed from the host's */
  int rc;                 /* the first failure */
  const char *what;
} worker_t;

static int fail_at(worker_t *w, const char *what, int rc) {
  w->what = what;
  return w->rc = rc;
}

/* Integers, so that the sum of NDEV of them in float is exact. */
static float small_int(void) { return (float)((int)(cuvt_random_u32() % 2001u) - 1000); }

static int one_round(worker_t *w) {
  cuv_output_t out = {0};
  int rc = cuv_sync(cuv_comm_init_all(devs, NDEV), &out);
  if (rc != 0)
    return fail_at(w, "cuv_comm_init_all", rc);
  cuv_comm_t *comm = cuv_output_take(&out).data;
  static _Thread_local float in[NDEV][COUNT], got[COUNT];
  float want[COUNT] = {0};
  cuv_buffer_t *buf[NDEV] = {0};
  for (int r = 0; rc == 0 && r < NDEV; r++) {
    for (size_t i = 0; i < COUNT; i++)
      want[i] += in[r][i] = small_int();
    rc = cuv_buffer_create(&buf[r], devs[r], sizeof in[r]);
    if (rc == 0)
      rc = cuv_sync(cuv_memcpy_htod(buf[r], 0, in[r], sizeof in[r], CUV_COPY_STAGE), NULL);
  }
  if (rc == 0)
    rc =
        cuv_sync(cuv_comm_all_reduce(comm, NULL, buf, COUNT, CUV_NCCL_FLOAT32, CUV_NCCL_SUM), NULL);
  for (int r = 0; rc == 0 && r < NDEV; r++) {
    rc = cuv_sync(cuv_memcpy_dtoh(got, buf[r], 0, sizeof got), NULL);
    for (size_t i = 0; rc == 0 && i < COUNT; i++)
      w->wrong += got[i] != want[i];
  }
  for (int r = 0; r < NDEV; r++)
    cuv_buffer_unref(buf[r]);
  cuv_comm_unref(comm);
  return rc == 0 ? 0 : fail_at(w, "the round's all-reduce", rc);
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  uint64_t until = now_ns() + ROUNDS_NS;
  while (w->rounds < ROUNDS && (w->rounds == 0 || now_ns() < until) && one_round(w) == 0)
    w->rounds++;
  return NULL;
}

static void test_communicators_beside_a_loop_closing_sockets(void **state) {
  (void)state;
  churn_t churn;
  churn_start(&churn);
  /* Relaxed, as the loop's counter: the workers start once the loop has closed descriptors. */
  unsigned accepted_before;
  while ((accepted_before = atomic_load_explicit(&churn.accepted, memory_order_relaxed)) < 4)
    uv_sleep(1);
  worker_t w[WORKERS];
  memset(w, 0, sizeof w);
  for (int i = 0; i < WORKERS; i++)
    assert_int_equal(pthread_create(&w[i].thread, NULL, worker_main, &w[i]), 0);
  for (int i = 0; i < WORKERS; i++)
    assert_int_equal(pthread_join(w[i].thread, NULL), 0);
  unsigned accepted_after = atomic_load_explicit(&churn.accepted, memory_order_relaxed);
  atomic_store_explicit(&churn.stop, true, memory_order_relaxed);
  assert_int_equal(uv_thread_join(&churn.thread), 0);

  for (int i = 0; i < WORKERS; i++) {
    if (w[i].rc != 0)
      fail_msg("worker %d, round %u: %s: %s (%s) %s", i, w[i].rounds, w[i].what,
               cuv_err_name(w[i].rc), cuv_strerror(w[i].rc),
               cuv_nccl_error() ? cuv_nccl_error() : "");
    assert_true(w[i].rounds >= 1);
    assert_int_equal(w[i].wrong, 0);
  }
  print_message("# rounds %u and %u; %u connections accepted and closed meanwhile\n", w[0].rounds,
                w[1].rounds, accepted_after - accepted_before);
  assert_true(accepted_after > accepted_before); /* the loop went on closing while they ran */
  assert_int_equal(churn.errors, 0);
  assert_true(churn.connected >= accepted_after); /* each accepted one was connected first */
  assert_int_equal(churn.loop_close, 0);
}

int main(void) {
  cuvt_init();
  int count = 0;
  assert_cuv_ok(cuv_device_count(&count));
  if (count < NDEV) {
    fprintf(stderr, "collectives-fds: %d devices, %d needed (CUV_SIM_DEVICES)\n", count, NDEV);
    return 1;
  }
  for (int r = 0; r < NDEV; r++)
    assert_cuv_ok(cuv_device_open(&devs[r], r));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_communicators_beside_a_loop_closing_sockets),
  };
  int rc = cuvt_run(tests);
  for (int r = 0; r < NDEV; r++)
    cuv_device_unref(devs[r]);
  return rc;
}
