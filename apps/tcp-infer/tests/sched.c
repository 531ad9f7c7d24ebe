/* tcp-infer-sched: per-request scheduling, Triton's schedule policy, as cmocka cases (TAP),
 * each set against a server whose GPU work is held long (tests/meson.build, the simulator only:
 * --sim-delay-us makes each request's work take 300 ms there):
 *
 *   --cases queue   tcp-infer --workspaces 1 --priority-levels 3 --sim-delay-us 150000
 *     timeouts: while one request holds the only workspace, one that waits with a 1 ms timeout
 *     is answered 503 "Request timeout expired" (KServe's JSON error) while the first still
 *     runs, counted (cuv_infer_queue_timeouts_total, nv_inference_request_failure REJECTED);
 *     the others on its connection (timeout 0, none, 60 s) and the held one answered right.
 *     priority: requests of levels 3, 2, default, 1, 2, 1 queued one by one behind the held
 *     one run in the order 1, 1, 2, 2, 3, default (arrival order within a level).
 *     parameters: a wrong type, a negative value, a level above --priority-levels, JSON or
 *     binary tensors: 400 with the error object, the connection still served.
 *   --cases batch   tcp-infer --workspaces 1 --coalesce 2 --max-batch 1 --priority-levels 3
 *                   --sim-delay-us 150000
 *     requests of levels 3, 2, 1, 3, 1 queued behind a held batch leave as the batches
 *     {1, 1}, {2, 3}, {3}: a batch is filled from the highest level first.
 *   --cases isolate-queue, isolate-batch   the same cases against tcp-infer --isolate with the
 *                   same options and --hang-suspect-ms 0 (a request queued long at its worker is
 *                   not moved to the spare): the requests wait in the worker's queue for its
 *                   workspace, their schedule sent with them in the frames. Then failover: the
 *                   active worker killed (SIGKILL) while a request past its timeout runs and
 *                   three wait behind it: that one is answered 503 "Request timeout expired"
 *                   (not replayed), the three are replayed on the promoted spare, whose queue
 *                   runs them by their levels.
 *   --cases isolate-start   tcp-infer --isolate --debug-fault --debug-start-hang 1
 *                   --isolate-start-timeout 2000: while the first worker hangs in its start-up,
 *                   a request with a 1 ms timeout waits in the front's queue and is answered 503
 *                   "Request timeout expired" there, no worker ready, counted.
 *
 * The order the server ran requests in is the order their answers arrive on their own
 * connections (poll), 300 ms apart; answers that are readable at the same poll are taken as
 * arriving together (they may be in either order). Each request is queued only once the
 * previous one shows in nv_inference_pending_request_count (with --isolate, in
 * cuv_infer_gpu_in_flight: the front sent it to the worker, over the one pipe in order), so
 * arrival order is known. No case asserts how long anything took; the runner's timeout bounds
 * the waits. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "v2-client.h"
#include "wire.h"

#define MAX_REQS 8
#define LOOP0 "loop=\"0\"" /* --isolate's per-loop gauges */
/* nv_inference_request_failure's labels for a reason */
#define FAILED(reason) "model=\"mlp\",reason=\"" reason "\",version=\"1\""

/* ---- requests and answers ------------------------------------------------------------------ */

/* A KServe inference of the batch with `params` (JSON members of its parameters, NULL: none),
 * JSON tensors or binary ones. */
static void send_v2(client_t *c, const batch_t *b, const char *params, bool binary) {
  v2_request_opts_t o = {.parameters = params, .binary_in = binary};
  size_t len, json_len;
  char *body = v2_request(b->in, b->rows, &o, &len, &json_len), head[192];
  assert_non_null(body);
  int n = snprintf(head, sizeof head,
                   "POST " V2_INFER_PATH " HTTP/1.1\r\nHost: x\r\n"
                   "Content-Length: %zu\r\n",
                   len);
  if (binary)
    n += snprintf(head + n, sizeof head - (size_t)n, "Inference-Header-Content-Length: %zu\r\n",
                  json_len);
  snprintf(head + n, sizeof head - (size_t)n, "\r\n");
  send_str(c, head);
  send_all(c, body, len);
  free(body);
}

/* An error in KServe's form: `status`, {"error": "<words>..."}, the connection kept. */
static void expect_v2_error(client_t *c, unsigned status, const char *words) {
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, status);
  assert_non_null(r.body);
  char want[160];
  snprintf(want, sizeof want, "{\"error\":\"%s", words);
  if (strncmp(r.body, want, strlen(want)) != 0)
    fail_msg("%u: %.*s does not begin %s", status, (int)r.len, r.body, want);
  assert_true(r.keep_alive);
  free_response(&r);
}

static bool isolate; /* the server runs --isolate (the isolate-* cases) */

static double metric(const char *name, const char *labels) { return wire_metric(name, labels); }

static double pending(void) { return metric("nv_inference_pending_request_count", WIRE_MODEL); }

static double in_flight(void) { return metric("cuv_infer_gpu_in_flight", ""); }

/* Where a request queued behind the held one shows: in process, waiting for the workspace;
 * with --isolate, sent to the worker (it waits in the worker's queue, which the front does not
 * see: nothing waits at the front while a worker is ready). */
static double queued_gauge(void) { return isolate ? in_flight() : pending(); }

static double worker_ready(void) { return metric("cuv_infer_worker_ready", LOOP0); }

static double spare_ready(void) { return metric("cuv_infer_worker_spare_ready", LOOP0); }

static void pause_ms(long ms) {
  const struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&t, NULL);
}

/* Waits (no bound but the runner's timeout) until the gauge reads `want`. */
static void await(double (*gauge)(void), double want) {
  while (gauge() != want)
    pause_ms(1);
}

/* Whether an answer is waiting on the connection now. */
static bool answered(const client_t *c) {
  struct pollfd fd = {.fd = c->fd, .events = POLLIN};
  return poll(&fd, 1, 0) > 0;
}

/* --isolate: the active worker and its spare ready, before a case holds the GPU. */
static int workers_ready(void **state) {
  await(worker_ready, 1);
  await(spare_ready, 1);
  return 0;
}

/* ---- a held queue ------------------------------------------------------------------------- */

typedef struct held {
  client_t *first, *c[MAX_REQS];
  batch_t hold, b[MAX_REQS];
  unsigned n;
} held_t;

/* The model executions the worker began, as its reports bring them (--isolate: a counter, so a
 * report that came and went while the work ran still counts). */
static double worker_execs(void) { return metric("nv_inference_exec_count", WIRE_MODEL); }

static double executions(void);

static void await_at_least(double (*counter)(void), double want) {
  while (counter() < want)
    pause_ms(1);
}

/* One request (with hold_params) holds the GPU (started: in flight), then n requests with these
 * parameters queue behind it, one at a time, each on its own connection. With --isolate the
 * front's in-flight count says only that the frame was sent: the worker must also have begun it,
 * or the requests behind it could reach the worker in the same read and be batched with it. */
static void hold_and_queue(held_t *h, const char *hold_params, const char *const *params,
                           unsigned n) {
  double flying = in_flight(), begun = isolate ? executions() : 0; /* every report in */
  h->n = n;
  h->first = dial();
  h->hold = make_batch(1);
  send_v2(h->first, &h->hold, hold_params, false);
  await(in_flight, flying + 1);
  if (isolate)
    await_at_least(worker_execs, begun + 1);
  double queued = queued_gauge();
  for (unsigned i = 0; i < n; i++) {
    h->c[i] = dial();
    h->b[i] = make_batch(1);
    send_v2(h->c[i], &h->b[i], params[i], false);
    await(queued_gauge, queued + i + 1);
  }
}

/* The queued requests' answers in the order they arrive, each right: rank[i] is request i's
 * place in the order the server must run them (equal ranks: the same batch); the arrival order
 * must not go back in rank. */
static void expect_order(held_t *h, const unsigned *rank) {
  bool answered[MAX_REQS] = {false};
  unsigned last = 0;
  for (unsigned got = 0; got < h->n;) {
    struct pollfd fds[MAX_REQS];
    unsigned idx[MAX_REQS], k = 0;
    for (unsigned i = 0; i < h->n; i++)
      if (!answered[i]) {
        fds[k] = (struct pollfd){.fd = h->c[i]->fd, .events = POLLIN};
        idx[k++] = i;
      }
    assert_true(poll(fds, k, -1) > 0);
    /* those readable together, lowest rank first */
    for (unsigned r = 0; r <= MAX_REQS; r++)
      for (unsigned j = 0; j < k; j++)
        if ((fds[j].revents & POLLIN) && rank[idx[j]] == r) {
          if (r < last)
            fail_msg("request %u (rank %u) answered after one of rank %u", idx[j], r, last);
          last = r;
          wire_expect_v2_ok(h->c[idx[j]], &h->b[idx[j]]);
          answered[idx[j]] = true;
          got++;
        }
  }
}

static void held_free(held_t *h) {
  hang_up(h->first);
  free_batch(&h->hold);
  for (unsigned i = 0; i < h->n; i++) {
    hang_up(h->c[i]);
    free_batch(&h->b[i]);
  }
}

/* ---- the cases ---------------------------------------------------------------------------- */

/* A timeout that passes while the request waits: 503 at once (the held request still runs);
 * timeouts 0, none and long ones met; every answer counted. */
static void test_timeout(void **state) {
  double timeouts = metric("cuv_infer_queue_timeouts_total", "");
  double rejected = metric("nv_inference_request_failure", FAILED("REJECTED"));
  double success = metric("nv_inference_request_success", WIRE_MODEL);
  double flying = in_flight();
  client_t *first = dial(), *c = dial();
  batch_t hold = make_batch(1), b[4];
  static const char *const params[4] = {"\"timeout\":1000", "\"timeout\":0", NULL,
                                        "\"timeout\":60000000,\"priority\":0"};
  send_v2(first, &hold, NULL, false);
  await(in_flight, flying + 1);
  for (unsigned i = 0; i < 4; i++) {
    b[i] = make_batch(1);
    send_v2(c, &b[i], params[i], false);
  }
  expect_v2_error(c, 503, "Request timeout expired");
  assert_false(answered(first)); /* the held one still runs: answered while queued */
  if (!isolate) /* nothing else started either (--isolate: the front sent the others on) */
    assert_true(in_flight() == flying + 1);
  for (unsigned i = 1; i < 4; i++)
    wire_expect_v2_ok(c, &b[i]);
  wire_expect_v2_ok(first, &hold);
  assert_true(metric("cuv_infer_queue_timeouts_total", "") == timeouts + 1);
  assert_true(metric("nv_inference_request_failure", FAILED("REJECTED")) == rejected + 1);
  assert_true(metric("nv_inference_request_success", WIRE_MODEL) == success + 4);
  hang_up(first);
  hang_up(c);
  free_batch(&hold);
  for (unsigned i = 0; i < 4; i++)
    free_batch(&b[i]);
}

/* Levels 3, 2, default (3 of 3), 1, 2, 1: run 1, 1, 2, 2, 3, default. */
static void test_priority(void **state) {
  static const char *const params[6] = {"\"priority\":3", "\"priority\":2", NULL,
                                        "\"priority\":1", "\"priority\":2", "\"priority\":1"};
  static const unsigned rank[6] = {4, 2, 5, 0, 3, 1};
  held_t h;
  hold_and_queue(&h, NULL, params, 6);
  wire_expect_v2_ok(h.first, &h.hold);
  expect_order(&h, rank);
  held_free(&h);
}

/* The batches run: in process, cuv_infer_batches_total; with --isolate, the workers' model
 * executions, which their reports bring (read once the reports count every reply). */
static double executions(void) {
  if (!isolate)
    return metric("cuv_infer_batches_total", "");
  for (;;) {
    prom_t p;
    wire_metrics(&p, "/metrics", NULL);
    double behind = wire_value(&p, "cuv_infer_worker_reports_behind", LOOP0);
    double execs = wire_value(&p, "nv_inference_exec_count", WIRE_MODEL);
    prom_free(&p);
    if (!behind)
      return execs;
    pause_ms(20);
  }
}

/* Levels 3, 2, 1, 3, 1 behind a held batch, two rows a batch: {1, 1}, {2, 3}, {3}. */
static void test_batch_priority(void **state) {
  static const char *const params[5] = {"\"priority\":3", "\"priority\":2", "\"priority\":1",
                                        "\"priority\":3", "\"priority\":1"};
  static const unsigned rank[5] = {1, 1, 0, 2, 0};
  double batches = executions();
  held_t h;
  hold_and_queue(&h, NULL, params, 5);
  wire_expect_v2_ok(h.first, &h.hold);
  expect_order(&h, rank);
  assert_true(executions() == batches + 4);
  held_free(&h);
}

/* Bad schedule parameters: 400 with the error object, each counted, the connection kept; good
 * ones through the binary tensor extension's JSON header served. */
static void test_bad_parameters(void **state) {
  static const char *const bad[] = {"\"priority\":-1",    "\"priority\":1.5",  "\"priority\":\"1\"",
                                    "\"priority\":4",     "\"priority\":true", "\"timeout\":-5",
                                    "\"timeout\":\"10\"", "\"timeout\":2.5",   "\"timeout\":null"};
  size_t nbad = sizeof bad / sizeof bad[0];
  double other = metric("nv_inference_request_failure", FAILED("OTHER"));
  client_t *c = dial();
  batch_t b = make_batch(1);
  for (size_t i = 0; i < nbad; i++) {
    send_v2(c, &b, bad[i], i % 2 == 1); /* every other one as binary tensors */
    expect_v2_error(c, 400, "parameters.");
  }
  send_str(c, "POST " V2_INFER_PATH " HTTP/1.1\r\nHost: x\r\nContent-Length: 19\r\n\r\n"
              "{\"parameters\":[1]}\n");
  expect_v2_error(c, 400, "parameters must be an object");
  send_v2(c, &b, "\"priority\":1,\"timeout\":60000000", true);
  wire_expect_v2_ok(c, &b);
  assert_true(metric("nv_inference_request_failure", FAILED("OTHER")) == other + (double)nbad + 1);
  hang_up(c);
  free_batch(&b);
}

/* --isolate: the active worker killed while the held request, whose 1 ms timeout passed, runs
 * and requests of levels default (3 of 3), 2, 1 wait behind it at that worker. The held one is
 * answered 503 "Request timeout expired" (a retry past its timeout is not made), counted; the
 * three are replayed, in the order they were sent, on the promoted spare: the first takes its
 * workspace, the other two wait there by level, 1 before 2. */
static void test_failover(void **state) {
  static const char *const params[3] = {NULL, "\"priority\":2", "\"priority\":1"};
  static const unsigned rank[3] = {0, 2, 1};
  double timeouts = metric("cuv_infer_queue_timeouts_total", "");
  double rejected = metric("nv_inference_request_failure", FAILED("REJECTED"));
  double replays = metric("cuv_infer_worker_replays_total", "");
  double success = metric("nv_inference_request_success", WIRE_MODEL);
  held_t h;
  hold_and_queue(&h, "\"timeout\":1000", params, 3);
  pause_ms(2); /* past the held one's timeout, which does not cut it: it still runs */
  assert_false(answered(h.first));
  assert_int_equal(kill((pid_t)metric("cuv_infer_worker_pid", LOOP0), SIGKILL), 0);
  expect_v2_error(h.first, 503, "Request timeout expired");
  expect_order(&h, rank);
  assert_true(metric("cuv_infer_queue_timeouts_total", "") == timeouts + 1);
  assert_true(metric("nv_inference_request_failure", FAILED("REJECTED")) == rejected + 1);
  assert_true(metric("cuv_infer_worker_replays_total", "") == replays + 3);
  assert_true(metric("nv_inference_request_success", WIRE_MODEL) == success + 3);
  held_free(&h);
}

/* --isolate, the first worker hanging in its start-up: a request with a 1 ms timeout waits in
 * the front's queue (no worker ready) and is answered there when it passes, counted. */
static void test_front_timeout(void **state) {
  assert_true(worker_ready() == 0); /* it hangs until its start timeout kills it */
  double timeouts = metric("cuv_infer_queue_timeouts_total", "");
  double rejected = metric("nv_inference_request_failure", FAILED("REJECTED"));
  client_t *c = dial();
  batch_t b = make_batch(2);
  send_v2(c, &b, "\"timeout\":1000,\"priority\":1", true);
  expect_v2_error(c, 503, "Request timeout expired");
  assert_true(worker_ready() == 0); /* answered while it waited for one */
  assert_true(metric("cuv_infer_worker_queued", LOOP0) == 0);
  assert_true(metric("cuv_infer_queue_timeouts_total", "") == timeouts + 1);
  assert_true(metric("nv_inference_request_failure", FAILED("REJECTED")) == rejected + 1);
  hang_up(c);
  free_batch(&b);
  await(worker_ready, 1); /* the next worker, after the start timeout: the stop is then quick */
}

int main(int argc, char **argv) {
  const char *cases = NULL;
  wire_init(argc, argv,
            "per-request scheduling as cmocka cases, --cases [isolate-]queue|[isolate-]batch|"
            "isolate-start",
            &cases);
  const struct CMUnitTest queue_cases[] = {cmocka_unit_test(test_timeout),
                                           cmocka_unit_test(test_priority),
                                           cmocka_unit_test(test_bad_parameters)};
  const struct CMUnitTest isolate_queue_cases[] = {
      cmocka_unit_test(test_timeout), cmocka_unit_test(test_priority),
      cmocka_unit_test(test_bad_parameters), cmocka_unit_test(test_failover)};
  const struct CMUnitTest batch_cases[] = {cmocka_unit_test(test_batch_priority)};
  const struct CMUnitTest start_cases[] = {cmocka_unit_test(test_front_timeout)};
  isolate = !strncmp(cases, "isolate-", 8);
  if (!strcmp(cases, "queue"))
    return cmocka_run_group_tests(queue_cases, NULL, NULL);
  if (!strcmp(cases, "batch"))
    return cmocka_run_group_tests(batch_cases, NULL, NULL);
  if (!strcmp(cases, "isolate-queue"))
    return cmocka_run_group_tests(isolate_queue_cases, workers_ready, NULL);
  if (!strcmp(cases, "isolate-batch"))
    return cmocka_run_group_tests(batch_cases, workers_ready, NULL);
  if (!strcmp(cases, "isolate-start"))
    return cmocka_run_group_tests(start_cases, NULL, NULL);
  return cli_usage_error("--cases: '%s' is none of queue, batch, isolate-queue, isolate-batch, "
                         "isolate-start",
                         cases);
}
