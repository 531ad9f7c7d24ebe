/* tcp-infer-limits: the limits of a server on a network, as cmocka cases (TAP), each set against
 * a server started with small limits (tests/meson.build):
 *
 *   --cases timeouts   tcp-infer --header-timeout-ms 300 --body-timeout-ms 300
 *                      --idle-timeout-ms 500 --max-header-bytes 1024
 *     a request head that trickles, a body that stops, an idle keep-alive connection: 408 (or,
 *     idle, the close), each counted by stage in cuv_infer_timeouts_total; a head over the cap:
 *     431 and the close, one just under it served.
 *   --cases cap        tcp-infer --max-connections 8 --idle-timeout-ms 0
 *     8 connections held open: the 9th is answered 503 with Retry-After and closed; once some
 *     close, new ones are served.
 *   --cases fds        the server under a descriptor limit of 256 (ulimit -n)
 *     its connection cap fitted under the limit (cuv_infer_connections_limit), 300 connections
 *     at once: those within the cap served, the others answered 503 or, once the descriptors
 *     ran out, closed (accept.c's reserved descriptor accepts and closes them): none left
 *     hanging, each refusal counted, and the server serves after.
 *   --cases fds-used   the same, with 120 of the server's descriptors taken before it starts
 *     (inherited), so that its cap is above what is left: the descriptors run out first, and
 *     the connections refused then are counted (cuv_infer_connections_refused_fds_total).
 *   --cases queue      tcp-infer --workspaces 1 --max-queue-size 2 --sim-delay-us 20000
 *     5 inferences pipelined in one send: the first runs, 2 wait, the last 2 are answered 503
 *     with Retry-After at once, in their turn (cuv_infer_queue_rejected_total); the 3 that ran
 *     answered right, and the connection served again once the queue drained; the same through
 *     KServe's inference, refused in the protocol's JSON form.
 *
 * No case asserts how long anything took: each waits for what the server does (its answer, its
 * close); the runner's timeout bounds the waits. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "v2-client.h"
#include "wire.h"

static double timeouts(const char *stage) {
  char labels[32];
  snprintf(labels, sizeof labels, "stage=\"%s\"", stage);
  return wire_metric("cuv_infer_timeouts_total", labels);
}

static void send_infer(client_t *c, const batch_t *b) {
  char head[128];
  snprintf(head, sizeof head, "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
           (size_t)b->rows * MLP_IN * sizeof(float));
  send_str(c, head);
  send_all(c, b->in, (size_t)b->rows * MLP_IN * sizeof(float));
}

static void expect_infer(client_t *c, const batch_t *b) {
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 200);
  assert_true(mlp_close_enough((const float *)(const void *)r.body, b->want,
                               (size_t)b->rows * MLP_OUT));
  free_response(&r);
}

/* The request, unless the server closed the connection first (a send that fails is not an
 * error here: the server may have closed it for want of descriptors). */
static void send_all_or_closed(client_t *c, const batch_t *b) {
  char head[128];
  int n = snprintf(head, sizeof head,
                   "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
                   (size_t)b->rows * MLP_IN * sizeof(float));
  if (send(c->fd, head, (size_t)n, MSG_NOSIGNAL) == n)
    send(c->fd, b->in, (size_t)b->rows * MLP_IN * sizeof(float), MSG_NOSIGNAL);
}

/* A new connection answers a verified inference. */
static void assert_serving(void) {
  client_t *c = dial();
  batch_t b = make_batch(2);
  send_infer(c, &b);
  expect_infer(c, &b);
  free_batch(&b);
  hang_up(c);
}

/* Until a new connection's inference is answered 200: the server has seen the closes that free
 * its connection slots (or descriptors); 503, a close or a reset meanwhile. */
static void await_serving(void) {
  for (;;) {
    client_t *t = dial();
    batch_t b = make_batch(1);
    send_all_or_closed(t, &b);
    response_t r;
    bool got = read_response(t, &r);
    unsigned status = got ? r.status : 0;
    if (got)
      free_response(&r);
    free_batch(&b);
    hang_up(t);
    if (status == 200)
      return;
    assert_true(status == 503 || status == 0);
  }
}

/* The server's answer, then its close. */
static void expect_status_then_close(client_t *c, unsigned status) {
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, status);
  assert_false(r.keep_alive);
  free_response(&r);
  assert_closed(c);
}

/* ---- timeouts, the head cap ----------------------------------------------------------------- */

static void test_slow_head(void **state) {
  double before = timeouts("head");
  client_t *c = dial();
  send_str(c, "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Len"); /* and nothing more */
  expect_status_then_close(c, 408);
  hang_up(c);
  assert_true(timeouts("head") == before + 1);
  assert_serving();
}

static void test_slow_body(void **state) {
  double before = timeouts("body");
  client_t *c = dial();
  batch_t b = make_batch(1);
  send_str(c, "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: 256\r\n\r\n");
  send_all(c, b.in, 100); /* 100 of its 256 bytes */
  expect_status_then_close(c, 408);
  hang_up(c);
  free_batch(&b);
  assert_true(timeouts("body") == before + 1);
  assert_serving();
}

/* An idle keep-alive connection is closed; one answered first, then left idle, too. */
static void test_idle(void **state) {
  double before = timeouts("idle");
  client_t *c = dial();
  batch_t b = make_batch(3);
  send_infer(c, &b);
  expect_infer(c, &b);
  char byte;
  ssize_t n = recv(c->fd, &byte, 1, 0); /* waits for the server's close */
  assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
  hang_up(c);
  free_batch(&b);
  assert_true(timeouts("idle") >= before + 1);
}

static void test_head_cap(void **state) {
  char *head = malloc(2048);
  assert_non_null(head);
  /* just under the cap of 1024 bytes (line and headers as they are counted): served */
  client_t *c = dial();
  batch_t b = make_batch(1);
  int pad = 1024 - 200;
  snprintf(head, 2048, "POST /infer HTTP/1.1\r\nHost: x\r\nX-Pad: %0*d\r\nContent-Length: 256\r\n"
           "\r\n", pad, 0);
  send_str(c, head);
  send_all(c, b.in, 256);
  expect_infer(c, &b);
  hang_up(c);
  /* over it: 431, then the close */
  c = dial();
  snprintf(head, 2048, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: %0*d\r\n\r\n", 1200, 0);
  send_str(c, head);
  expect_status_then_close(c, 431);
  hang_up(c);
  free(head);
  free_batch(&b);
  assert_serving();
}

/* ---- the connection cap --------------------------------------------------------------------- */

/* n connections, each answered once and left open. */
static void hold(client_t **c, unsigned n) {
  batch_t b = make_batch(1);
  for (unsigned i = 0; i < n; i++) {
    c[i] = dial();
    send_infer(c[i], &b);
    expect_infer(c[i], &b);
  }
  free_batch(&b);
}

static void test_connection_cap(void **state) {
  enum { CAP = 8 };
  client_t *c[CAP];
  hold(c, CAP);
  client_t *over = dial(); /* the 9th */
  response_t r;
  assert_true(read_response(over, &r));
  assert_int_equal(r.status, 503);
  assert_false(r.keep_alive);
  free_response(&r);
  assert_closed(over);
  hang_up(over);
  for (unsigned i = 0; i < CAP; i++)
    hang_up(c[i]);
  await_serving();
  prom_t p;
  wire_metrics(&p, "/metrics", NULL);
  assert_true(wire_value(&p, "cuv_infer_connections_refused_total", "") >= 1);
  assert_int_equal(wire_value(&p, "cuv_infer_connections_limit", ""), CAP);
  prom_free(&p);
}

/* ---- the descriptor limit ------------------------------------------------------------------- */

/* Connections refused so far: over the cap (a 503 in turn) and out of descriptors (accept.c). */
static double refusals(void) {
  return wire_metric("cuv_infer_connections_refused_total", "") +
         wire_metric("cuv_infer_connections_refused_fds_total", "");
}

static void descriptor_limit(bool run_out) {
  enum { N = 300 };
  double limit = wire_metric("cuv_infer_connections_limit", "");
  double refused_before = refusals();
  double fds_before = wire_metric("cuv_infer_connections_refused_fds_total", "");
  print_message("# the server's connection cap under its descriptor limit: %.0f\n", limit);
  assert_true(limit >= 1 && limit < 256);
  client_t *c[N];
  for (unsigned i = 0; i < N; i++)
    c[i] = dial();
  /* a request on each: within the cap answered 200, beyond it 503 or closed unanswered */
  batch_t b = make_batch(1);
  unsigned ok = 0, refused = 0, closed = 0;
  for (unsigned i = 0; i < N; i++)
    send_all_or_closed(c[i], &b);
  for (unsigned i = 0; i < N; i++) {
    response_t r;
    if (!read_response(c[i], &r)) { /* closed: EOF or a reset, never a hang */
      closed++;
      continue;
    }
    assert_true(r.status == 200 || r.status == 503);
    ok += r.status == 200;
    refused += r.status == 503;
    free_response(&r);
  }
  print_message("# %u connections: %u served, %u refused with 503, %u closed unanswered\n", N,
                ok, refused, closed);
  assert_true(refused + closed >= 1 && ok >= 1 && ok <= limit);
  for (unsigned i = 0; i < N; i++)
    hang_up(c[i]);
  free_batch(&b);
  await_serving();
  /* every connection not served was counted, by the cap or at the descriptor limit (those of
   * await_serving's tries that were refused too) */
  double counted = refusals() - refused_before;
  double fds = wire_metric("cuv_infer_connections_refused_fds_total", "") - fds_before;
  print_message("# refusals counted: %.0f, out of descriptors %.0f\n", counted, fds);
  assert_true(counted >= refused + closed);
  if (run_out)
    assert_true(fds >= 1);
}

static void test_descriptor_limit(void **state) { descriptor_limit(false); }
static void test_descriptors_used(void **state) { descriptor_limit(true); }

/* ---- the queue policy (--max-queue-size) ---------------------------------------------------- */

static void expect_queue_full(client_t *c, bool v2) {
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 503);
  assert_string_equal(r.retry_after, "1");
  assert_non_null(strstr(r.body, v2 ? "{\"error\":\"queue full" : "queue full"));
  assert_true(r.keep_alive);
  free_response(&r);
}

/* Request i of the 5 (1 row each), appended to the wire: POST /infer's, or KServe's JSON. */
static void append_request(char **wire, size_t *len, const batch_t *b, bool v2) {
  size_t body_len = MLP_IN * sizeof(float), json_len;
  v2_request_opts_t o = {0};
  char *body = v2 ? v2_request(b->in, 1, &o, &body_len, &json_len) : (char *)b->in;
  assert_non_null(body);
  *wire = realloc(*wire, *len + 160 + body_len);
  assert_non_null(*wire);
  *len += (size_t)snprintf(*wire + *len, 160,
                           "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
                           v2 ? V2_INFER_PATH : "/infer", body_len);
  memcpy(*wire + *len, body, body_len);
  *len += body_len;
  if (v2)
    free(body);
}

/* 5 requests in one send, so that the server parses them in one read, before any GPU work of
 * theirs can complete: 1 runs, 2 wait, 2 are refused, each in its turn; then, the queue drained,
 * the connection is served again. */
static void queue_full(bool v2) {
  double before = wire_metric("cuv_infer_queue_rejected_total", "");
  client_t *c = dial();
  batch_t b[5];
  char *wire = NULL;
  size_t len = 0;
  for (unsigned i = 0; i < 5; i++) {
    b[i] = make_batch(1);
    append_request(&wire, &len, &b[i], v2);
  }
  send_all(c, wire, len);
  for (unsigned i = 0; i < 3; i++)
    v2 ? wire_expect_v2_ok(c, &b[i]) : wire_expect_ok(c, &b[i]);
  expect_queue_full(c, v2);
  expect_queue_full(c, v2);
  assert_true(wire_metric("cuv_infer_queue_rejected_total", "") == before + 2);
  len = 0;
  append_request(&wire, &len, &b[4], v2);
  send_all(c, wire, len);
  v2 ? wire_expect_v2_ok(c, &b[4]) : wire_expect_ok(c, &b[4]);
  for (unsigned i = 0; i < 5; i++)
    free_batch(&b[i]);
  free(wire);
  hang_up(c);
}

static void test_queue_full(void **state) { queue_full(false); }
static void test_queue_full_v2(void **state) { queue_full(true); }

int main(int argc, char **argv) {
  const char *cases = NULL;
  wire_init(argc, argv,
            "a server's limits as cmocka cases, --cases timeouts|cap|fds|fds-used|queue", &cases);
  const struct CMUnitTest timeouts_cases[] = {
      cmocka_unit_test(test_slow_head), cmocka_unit_test(test_slow_body),
      cmocka_unit_test(test_idle),      cmocka_unit_test(test_head_cap),
  };
  const struct CMUnitTest cap_cases[] = {cmocka_unit_test(test_connection_cap)};
  const struct CMUnitTest fds_cases[] = {cmocka_unit_test(test_descriptor_limit)};
  const struct CMUnitTest queue_cases[] = {cmocka_unit_test(test_queue_full),
                                           cmocka_unit_test(test_queue_full_v2)};
  const struct CMUnitTest fds_used_cases[] = {cmocka_unit_test(test_descriptors_used)};
  if (!strcmp(cases, "timeouts"))
    return cmocka_run_group_tests(timeouts_cases, NULL, NULL);
  if (!strcmp(cases, "cap"))
    return cmocka_run_group_tests(cap_cases, NULL, NULL);
  if (!strcmp(cases, "fds"))
    return cmocka_run_group_tests(fds_cases, NULL, NULL);
  if (!strcmp(cases, "queue"))
    return cmocka_run_group_tests(queue_cases, NULL, NULL);
  if (!strcmp(cases, "fds-used"))
    return cmocka_run_group_tests(fds_used_cases, NULL, NULL);
  return cli_usage_error("--cases: '%s' is none of timeouts, cap, fds, fds-used, queue", cases);
}
