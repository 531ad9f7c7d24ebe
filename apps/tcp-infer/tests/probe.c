/* tcp-infer-probe: the server's behaviour on good and bad input, as cmocka cases (TAP). Run by
 * tcp-infer-run, which starts the server and adds "--port PORT":
 *
 *   tcp-infer-run tcp-infer --sim-delay-us 20000 -- tcp-infer-probe
 *
 * Blocking sockets, one connection per scenario (plus one per GET /stats). Every 200 answer to
 * POST /infer is checked against the host computation (mlp.c, default seed). Waiting for the
 * server to settle (work in flight retired) polls GET /stats without any time limit of its own:
 * the test runner's timeout is the only bound, so no assertion depends on timing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"

static void send_infer(client_t *c, const batch_t *b, const char *extra_headers) {
  char head[256];
  size_t bytes = (size_t)b->rows * MLP_IN * sizeof(float);
  snprintf(head, sizeof head, "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n%s\r\n",
           bytes, extra_headers ? extra_headers : "");
  send_str(c, head);
  send_all(c, b->in, bytes);
}

static void assert_infer_ok(client_t *c, const batch_t *b) {
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 200);
  assert_true(r.date[0] != '\0');
  assert_int_equal(r.x_batch, b->rows);
  assert_int_equal(r.len, (size_t)b->rows * MLP_OUT * sizeof(float));
  assert_true(mlp_close_enough((const float *)(const void *)r.body, b->want,
                               (size_t)b->rows * MLP_OUT));
  free_response(&r);
}

static unsigned expect_status(client_t *c, unsigned status) {
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, status);
  assert_true(r.date[0] != '\0');
  bool keep_alive = r.keep_alive;
  free_response(&r);
  return keep_alive;
}

/* One valid request on a new connection: the server is alive and right. */
static void assert_serving(void) {
  client_t *c = dial();
  batch_t b = make_batch(3);
  send_infer(c, &b, NULL);
  assert_infer_ok(c, &b);
  free_batch(&b);
  hang_up(c);
}

/* ---- GET /stats ---------------------------------------------------------------------------- */

static char *get_stats(void) {
  client_t *c = dial();
  send_str(c, "GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 200);
  hang_up(c);
  return r.body;
}

/* The value of an unlabelled metric. */
static double metric(const char *stats, const char *name) {
  size_t len = strlen(name);
  for (const char *line = stats; line && *line;
       line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
    if (!strncmp(line, name, len) && line[len] == ' ')
      return strtod(line + len + 1, NULL);
  fail_msg("metric %s missing", name);
  return 0;
}

/* Whether GET /stats has a sample of that name (unlabelled). */
static bool metric_present(const char *name) {
  char *s = get_stats(), key[128];
  snprintf(key, sizeof key, "\n%s ", name);
  bool present = strstr(s, key) != NULL;
  free(s);
  return present;
}

static void pause_ms(unsigned ms) {
  struct timespec ts = {0, (long)ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* Polls until no GPU work is in flight, every workspace is back, and at most `conns` connections
 * remain (those of the caller); no time limit of its own (the test's timeout is the bound). With
 * graphs (the default), cuv counts each live graph's capture in cuv_in_flight (cuv_infer_graphs
 * of them). */
static char *wait_settled(unsigned conns) {
  for (;;) {
    char *s = get_stats();
    /* the stats connection itself is counted while it is open */
    if (metric(s, "cuv_infer_gpu_in_flight") == 0 &&
        metric(s, "cuv_in_flight") == metric(s, "cuv_infer_graphs") &&
        metric(s, "cuv_infer_workspaces_free") == metric(s, "cuv_infer_workspaces") &&
        metric(s, "cuv_infer_connections_open") <= conns + 1)
      return s;
    free(s);
    pause_ms(10);
  }
}

/* ---- scenarios ----------------------------------------------------------------------------- */

static void test_keep_alive(void **state) {
  client_t *c = dial();
  const unsigned sizes[] = {1, 7, MLP_DEFAULT_MAX_BATCH};
  for (size_t i = 0; i < 3; i++) {
    batch_t b = make_batch(sizes[i]);
    send_infer(c, &b, i == 1 ? "X-In-Dim: 64\r\nX-Batch: 7\r\n" : NULL);
    assert_infer_ok(c, &b);
    free_batch(&b);
  }
  hang_up(c);
}

static void test_pipelined_in_order(void **state) {
  client_t *c = dial();
  batch_t b2 = make_batch(2), b5 = make_batch(5), b1 = make_batch(1);
  /* Five requests in one write: answers come back in this order whatever the GPU does. */
  send_infer(c, &b2, NULL);
  send_str(c, "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n");
  send_infer(c, &b5, NULL);
  send_str(c, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
  send_infer(c, &b1, "Connection: close\r\n");
  assert_infer_ok(c, &b2);
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "cuv_submitted_total"));
  free_response(&r);
  assert_infer_ok(c, &b5);
  assert_true(expect_status(c, 404));
  assert_infer_ok(c, &b1);
  assert_closed(c);
  free_batch(&b2);
  free_batch(&b5);
  free_batch(&b1);
  hang_up(c);
}

static void test_many_connections(void **state) {
  enum { N = 48 };
  client_t *c[N];
  batch_t b[N];
  for (unsigned i = 0; i < N; i++) {
    c[i] = dial();
    b[i] = make_batch(1 + i % 9);
  }
  for (unsigned round = 0; round < 3; round++) {
    for (unsigned i = 0; i < N; i++)
      send_infer(c[i], &b[i], NULL);
    for (unsigned i = N; i-- > 0;)
      assert_infer_ok(c[i], &b[i]);
  }
  for (unsigned i = 0; i < N; i++) {
    free_batch(&b[i]);
    hang_up(c[i]);
  }
}

static void test_truncated_body(void **state) {
  char *before = get_stats();
  double truncated = metric(before, "cuv_infer_truncated_total");
  free(before);
  client_t *c = dial();
  batch_t b = make_batch(2);
  send_str(c, "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: 512\r\n\r\n");
  send_all(c, b.in, 100); /* 100 of 512 bytes, then the client goes away */
  hang_up(c);
  free_batch(&b);
  for (;;) { /* the server notices the EOF and drops the partial request */
    char *s = get_stats();
    double now = metric(s, "cuv_infer_truncated_total");
    free(s);
    if (now > truncated)
      break;
    pause_ms(10);
  }
  assert_serving();
}

static void test_oversized(void **state) {
  client_t *c = dial();
  send_str(c, "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n");
  assert_false(expect_status(c, 413));
  assert_closed(c);
  hang_up(c);

  /* One row over the limit, body being sent: still 413, and the connection closes cleanly. */
  c = dial();
  batch_t b = make_batch(MLP_DEFAULT_MAX_BATCH + 1);
  send_infer(c, &b, NULL);
  assert_false(expect_status(c, 413));
  assert_closed(c);
  free_batch(&b);
  hang_up(c);
  assert_serving();
}

static void test_wrong_dimension(void **state) {
  client_t *c = dial();
  char body[300] = {0};
  /* Not a multiple of 64 floats; empty; a declared dimension or batch that does not match. */
  send_str(c, "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n");
  send_all(c, body, 100);
  assert_true(expect_status(c, 400));
  send_str(c, "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  assert_true(expect_status(c, 400));
  send_str(c, "POST /infer HTTP/1.1\r\nHost: x\r\nX-In-Dim: 32\r\nContent-Length: 256\r\n\r\n");
  send_all(c, body, 256);
  assert_true(expect_status(c, 400));
  send_str(c, "POST /infer HTTP/1.1\r\nHost: x\r\nX-Batch: 3\r\nContent-Length: 256\r\n\r\n");
  send_all(c, body, 256);
  assert_true(expect_status(c, 400));
  /* ... and the same connection still serves. */
  batch_t b = make_batch(4);
  send_infer(c, &b, NULL);
  assert_infer_ok(c, &b);
  free_batch(&b);
  hang_up(c);
}

static void test_malformed(void **state) {
  client_t *c = dial();
  send_str(c, "HELLO WORLD\r\n\r\n");
  assert_false(expect_status(c, 400));
  assert_closed(c);
  hang_up(c);

  /* A valid request, then garbage: the first is answered, then 400, then the close. */
  c = dial();
  batch_t b = make_batch(3);
  send_infer(c, &b, NULL);
  send_str(c, "GET /stats HTTP/1.1\r\nBad Header Line\r\n\r\n");
  assert_infer_ok(c, &b);
  assert_false(expect_status(c, 400));
  assert_closed(c);
  free_batch(&b);
  hang_up(c);
  assert_serving();
}

static void test_routes_and_methods(void **state) {
  client_t *c = dial();
  send_str(c, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
  assert_true(expect_status(c, 404));
  /* the debug routes exist only with --debug-fault, which no probe run uses */
  send_str(c, "POST /debug/fault HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  assert_true(expect_status(c, 404));
  send_str(c, "POST /debug/hang HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  assert_true(expect_status(c, 404));
  send_str(c, "GET /infer HTTP/1.1\r\nHost: x\r\n\r\n");
  assert_true(expect_status(c, 405));
  send_str(c, "POST /stats HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  assert_true(expect_status(c, 405));
  send_str(c, "POST /infer HTTP/1.1\r\nHost: x\r\n\r\n"); /* neither length nor chunks */
  assert_true(expect_status(c, 411));
  batch_t b = make_batch(2);
  send_infer(c, &b, NULL);
  assert_infer_ok(c, &b);
  free_batch(&b);
  hang_up(c);
}

/* RFC 9112's head rules that llhttp leaves to the server, each a 400 that closes the
 * connection and counts as a malformed request: an HTTP/1.1 request without Host, two Host
 * lines (any case, any version), whitespace between a field's name and its colon (llhttp takes
 * "Host : x" as a field "Host "; a name longer than the server keeps too). HTTP/1.0 needs no
 * Host. */
static void test_host_rules(void **state) {
  static const char *const refused[] = {
      "GET /metrics HTTP/1.1\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nhost: a\r\nX-Other: 1\r\nHOST: b\r\n\r\n",
      "GET /metrics HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nHost: x\r\nX-A-Field-Name-Longer-Than-Kept-By-The-Server : 1"
      "\r\n\r\n",
      "POST /infer HTTP/1.1\r\nContent-Length: 256\r\n\r\n",
  };
  size_t n = sizeof refused / sizeof refused[0];
  char *before = get_stats();
  double errors = metric(before, "cuv_infer_parse_errors_total");
  free(before);
  for (size_t i = 0; i < n; i++) {
    client_t *c = dial();
    send_str(c, refused[i]);
    assert_false(expect_status(c, 400));
    assert_closed(c);
    hang_up(c);
  }
  char *after = get_stats();
  assert_true(metric(after, "cuv_infer_parse_errors_total") == errors + (double)n);
  free(after);
  client_t *c = dial();
  send_str(c, "GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  assert_true(expect_status(c, 200));
  send_str(c, "GET /metrics HTTP/1.1\r\nHost:\r\n\r\n"); /* empty: RFC 9112 allows it */
  assert_true(expect_status(c, 200));
  hang_up(c);
  assert_serving();
}

/* Absolute-form targets (RFC 9112 3.2.2, "http://host/path"): routed by their path, the scheme
 * in any case, the query left out; no path is no route. */
static void test_absolute_form(void **state) {
  client_t *c = dial();
  batch_t b = make_batch(4);
  char head[256];
  size_t bytes = (size_t)b.rows * MLP_IN * sizeof(float);
  snprintf(head, sizeof head, "POST http://127.0.0.1:%d/infer HTTP/1.1\r\nHost: 127.0.0.1:%d"
           "\r\nContent-Length: %zu\r\n\r\n", wire_port, wire_port, bytes);
  send_str(c, head);
  send_all(c, b.in, bytes);
  assert_infer_ok(c, &b);
  static const struct {
    const char *target;
    unsigned status;
  } gets[] = {{"HTTP://x/metrics?q=1", 200}, {"https://x:1/v2/health/live", 200},
              {"http://x/nope", 404},        {"http://x", 404},
              {"http://x/http://y/metrics", 404}};
  for (size_t i = 0; i < sizeof gets / sizeof gets[0]; i++) {
    snprintf(head, sizeof head, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", gets[i].target);
    send_str(c, head);
    assert_true(expect_status(c, gets[i].status));
  }
  free_batch(&b);
  hang_up(c);
}

/* Chunked request bodies (llhttp parses the framing): a batch in chunks of odd sizes, one byte
 * at a time, and one that outgrows the first buffer, each answered right; a body that is no
 * whole number of rows or disagrees with X-Batch 400 on a connection that serves on; one row
 * past the largest batch 413 at once, the connection then closed. */
static void test_chunked(void **state) {
  static const char head[] = "POST /infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                             "\r\n\r\n";
  client_t *c = dial();
  const struct {
    unsigned rows;
    size_t piece;
  } ok[] = {{3, 100}, {1, 1}, {200, 4093}, {MLP_DEFAULT_MAX_BATCH, 65536}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    batch_t b = make_batch(ok[i].rows);
    send_chunked(c, head, b.in, (size_t)b.rows * MLP_IN * sizeof(float), ok[i].piece);
    assert_infer_ok(c, &b);
    free_batch(&b);
  }
  batch_t b = make_batch(MLP_DEFAULT_MAX_BATCH + 1);
  send_chunked(c, head, b.in, 100, 7);
  assert_true(expect_status(c, 400));
  send_chunked(c, "POST /infer HTTP/1.1\r\nHost: x\r\nX-Batch: 2\r\nTransfer-Encoding: chunked"
                  "\r\n\r\n", b.in, 3 * MLP_IN * sizeof(float), 256);
  assert_true(expect_status(c, 400));
  send_chunked(c, head, b.in, (size_t)b.rows * MLP_IN * sizeof(float), 1000);
  assert_false(expect_status(c, 413));
  assert_closed(c);
  free_batch(&b);
  hang_up(c);
  assert_serving();
}

/* Every response has a Date: HTTP's IMF-fixdate in GMT, the weekday right, the server's clock
 * (this machine's) between the request's send and its answer, to the second. */
static void test_date_header(void **state) {
  time_t before = time(NULL) - 1;
  client_t *c = dial();
  send_str(c, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
  response_t r;
  assert_true(read_response(c, &r));
  time_t after = time(NULL) + 1;
  struct tm tm = {0};
  const char *end = strptime(r.date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  assert_non_null(end);
  assert_int_equal(*end, '\0');
  time_t t = timegm(&tm);
  assert_true(t >= before && t <= after);
  char again[64];
  strftime(again, sizeof again, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&t, &tm));
  assert_string_equal(again, r.date);
  free_response(&r);
  hang_up(c);
}

/* HEAD is GET without the body: the same status and headers, Content-Length included; on routes
 * that take POST only, 405 naming POST; unknown routes 404; all without a body, so the next
 * response on the connection follows right after the head. */
static void test_head(void **state) {
  client_t *c = dial();
  batch_t b = make_batch(2);
  send_str(c, "HEAD /stats HTTP/1.1\r\nHost: x\r\n\r\n"
              "HEAD /infer HTTP/1.1\r\nHost: x\r\n\r\n"
              "HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n");
  send_infer(c, &b, NULL);
  const unsigned want[] = {200, 405, 404};
  for (int i = 0; i < 3; i++) {
    response_t r;
    c->head = true;
    assert_true(read_response(c, &r));
    assert_int_equal(r.status, want[i]);
    assert_true(r.content_length > 0); /* what GET would have sent */
    assert_int_equal(r.len, 0);
    assert_true(r.date[0] != '\0');
    if (want[i] == 200)
      assert_non_null(strstr(r.content_type, "version=0.0.4"));
    if (want[i] == 405)
      assert_string_equal(r.allow, "POST");
    free_response(&r);
  }
  assert_infer_ok(c, &b);
  /* the methods each route allows */
  send_str(c, "GET /infer HTTP/1.1\r\nHost: x\r\n\r\n"
              "POST /stats HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 405);
  assert_string_equal(r.allow, "POST");
  free_response(&r);
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 405);
  assert_string_equal(r.allow, "GET, HEAD");
  free_response(&r);
  free_batch(&b);
  hang_up(c);
}

/* A request for a protocol switch is answered as any other, then the connection closes. */
static void test_upgrade_refused(void **state) {
  client_t *c = dial();
  send_str(c, "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
              "\r\nGET /nope HTTP/1.1\r\n\r\n");
  assert_false(expect_status(c, 404));
  assert_closed(c);
  hang_up(c);
  assert_serving();
}

/* Clients that go away while their GPU work is in flight (reset, and orderly close): the work
 * completes, its workspaces come back, nothing is written to the dead connection, the server
 * serves on. Under ASan this is the use-after-free check of the orphaned requests. */
static void disconnect_in_flight(bool abrupt) {
  char *before = get_stats();
  double submitted = metric(before, "cuv_infer_gpu_submitted_total");
  free(before);
  client_t *c = dial();
  batch_t b = make_batch(16);
  for (int i = 0; i < 8; i++)
    send_infer(c, &b, NULL);
  /* Wait until the server started the work (it may already have finished on a fast GPU). */
  bool seen_in_flight = false;
  for (;;) {
    char *s = get_stats();
    double started = metric(s, "cuv_infer_gpu_submitted_total") - submitted;
    seen_in_flight = metric(s, "cuv_infer_gpu_in_flight") > 0;
    free(s);
    if (started >= 1)
      break;
    pause_ms(1);
  }
  if (abrupt)
    reset(c);
  else
    hang_up(c);
  free_batch(&b);
  char *s = wait_settled(0);
  print_message("# %s disconnect with work in flight (seen: %s); responses dropped so far: %.0f\n",
                abrupt ? "abrupt" : "orderly", seen_in_flight ? "yes" : "no",
                metric(s, "cuv_infer_responses_dropped_total"));
  assert_true(metric(s, "cuv_infer_gpu_completed_total") >= submitted + 1);
  assert_int_equal(metric(s, "cuv_infer_gpu_failed_total"), 0);
  free(s);
  assert_serving();
}

static void test_disconnect_abrupt(void **state) { disconnect_in_flight(true); }
static void test_disconnect_orderly(void **state) { disconnect_in_flight(false); }

/* Requests of several connections that share batches (with --coalesce) or run side by side,
 * and half of the connections go away (reset) while their work is pending or in flight: the
 * others still get their right answers in order, every workspace comes back, the server serves
 * on. Under ASan: the batch's slices of a shared output outlive neither their batch nor it them. */
static void test_disconnect_mid_batch(void **state) {
  enum { N = 8, DEPTH = 3 };
  char *before = get_stats();
  double submitted = metric(before, "cuv_infer_gpu_submitted_total");
  free(before);
  client_t *c[N];
  batch_t b[N][DEPTH];
  for (unsigned i = 0; i < N; i++) {
    c[i] = dial();
    for (unsigned d = 0; d < DEPTH; d++)
      b[i][d] = make_batch(1 + (i * 7 + d * 5) % 23);
  }
  for (unsigned d = 0; d < DEPTH; d++)
    for (unsigned i = 0; i < N; i++)
      send_infer(c[i], &b[i][d], NULL);
  for (;;) { /* until the server started some of the work */
    char *s = get_stats();
    double started = metric(s, "cuv_infer_gpu_submitted_total") - submitted;
    free(s);
    if (started >= 1)
      break;
    pause_ms(1);
  }
  for (unsigned i = 1; i < N; i += 2)
    reset(c[i]);
  for (unsigned i = 0; i < N; i += 2) {
    for (unsigned d = 0; d < DEPTH; d++)
      assert_infer_ok(c[i], &b[i][d]);
    hang_up(c[i]);
  }
  for (unsigned i = 0; i < N; i++)
    for (unsigned d = 0; d < DEPTH; d++)
      free_batch(&b[i][d]);
  char *s = wait_settled(0);
  assert_int_equal(metric(s, "cuv_infer_gpu_failed_total"), 0);
  assert_int_equal(metric(s, "cuv_infer_waiting"), 0);
  if (strstr(s, "\ncuv_infer_batches_total ")) { /* --coalesce: every request went in a batch */
    assert_int_equal(metric(s, "cuv_infer_batch_pending"), 0);
    assert_int_equal(metric(s, "cuv_infer_batch_requests_total"),
                     metric(s, "cuv_infer_gpu_submitted_total"));
    assert_true(metric(s, "cuv_infer_batches_total") <= metric(s, "cuv_infer_gpu_submitted_total"));
  }
  free(s);
  assert_serving();
}

/* ---- GET /metrics ------------------------------------------------------------------------- */

/* The family a sample's HELP and TYPE are under: a histogram's for its series. */
static void family_of(const char *text, const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s", name);
  static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(name), k = strlen(suffixes[i]);
    char type[192];
    snprintf(type, sizeof type, "# TYPE %.*s histogram\n", (int)(n - k), name);
    if (n > k && !strcmp(name + n - k, suffixes[i]) && strstr(text, type))
      snprintf(out, cap, "%.*s", (int)(n - k), name);
  }
}

/* nv_inference_request_failure summed over Triton's four reasons, each of which must be there. */
static double failures(const prom_t *p) {
  static const char *const reasons[] = {"REJECTED", "CANCELED", "BACKEND", "OTHER"};
  double sum = 0;
  for (size_t i = 0; i < 4; i++) {
    char labels[96];
    snprintf(labels, sizeof labels, "model=\"mlp\",reason=\"%s\",version=\"1\"", reasons[i]);
    sum += wire_value(p, "nv_inference_request_failure", labels);
  }
  return sum;
}

/* Triton's GPU metrics (NVML): none on the simulator (absent, not zeros); on a GPU, where NVML
 * is, each value in its range (a ratio, used memory within the total, power above zero). */
static void check_gpu_metrics(const prom_t *p) {
  const char *driver = getenv("CUV_DRIVER");
  bool sim = driver && !strcmp(driver, "sim");
  size_t n = 0;
  for (size_t i = 0; i < p->n; i++) {
    const prom_sample_t *s = &p->samples[i];
    if (strncmp(s->name, "nv_gpu_", 7))
      continue;
    n++;
    assert_non_null(strstr(s->labels, "gpu_uuid=\""));
    if (!strcmp(s->name, "nv_gpu_utilization"))
      assert_true(s->value >= 0 && s->value <= 1);
    else if (!strcmp(s->name, "nv_gpu_memory_used_bytes")) {
      const prom_sample_t *total = prom_find(p, "nv_gpu_memory_total_bytes", s->labels);
      assert_non_null(total);
      assert_true(s->value <= total->value);
    } else
      assert_true(s->value > 0);
  }
  print_message("# %zu GPU metric samples (NVML)\n", n);
  if (sim)
    assert_int_equal(n, 0);
}

/* GET /metrics and its alias /stats parse as Prometheus text; every family has its HELP and
 * TYPE, cuv's own prefix or Triton's; Triton's model metrics and the histograms are there. */
static void test_metrics_format(void **state) {
  static const char *const triton[] = {
      "nv_inference_request_success",           "nv_inference_pending_request_count",
      "nv_inference_count",                     "nv_inference_exec_count",
      "nv_inference_request_duration_us",       "nv_inference_queue_duration_us",
      "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
      "nv_inference_compute_output_duration_us"};
  for (int k = 0; k < 2; k++) {
    prom_t p;
    char *text;
    wire_metrics(&p, k ? "/stats" : "/metrics", &text);
    for (size_t i = 0; i < p.n; i++) {
      char fam[128], help[160], type[160];
      family_of(text, p.samples[i].name, fam, sizeof fam);
      assert_true(!strncmp(fam, "cuv_", 4) || !strncmp(fam, "nv_inference_", 13) ||
                  !strncmp(fam, "nv_gpu_", 7));
      snprintf(help, sizeof help, "# HELP %s ", fam);
      snprintf(type, sizeof type, "# TYPE %s ", fam);
      assert_non_null(strstr(text, help));
      assert_non_null(strstr(text, type));
    }
    for (size_t i = 0; i < sizeof triton / sizeof triton[0]; i++)
      wire_value(&p, triton[i], WIRE_MODEL);
    failures(&p); /* each of Triton's reasons */
    check_gpu_metrics(&p);
    wire_value(&p, "cuv_infer_request_duration_seconds_count", WIRE_MODEL);
    wire_value(&p, "cuv_infer_exec_rows_bucket", WIRE_MODEL ",le=\"+Inf\"");
    assert_true(p.n >= 60);
    assert_int_equal(wire_value(&p, "cuv_leaked_total", ""), 0);
    prom_free(&p);
    free(text);
  }
}

typedef struct snapshot {
  double success, failure, count, execs, exec_rows, latency_n, latency_s, submitted, ok_2xx;
  double behind; /* --isolate: workers whose reports lag behind their replies */
  double request, parts; /* Triton's request duration; its queue, input, infer, output summed */
} snapshot_t;

static snapshot_t snapshot(void) {
  prom_t p;
  wire_metrics(&p, "/metrics", NULL);
  snapshot_t s = {
      .success = wire_value(&p, "nv_inference_request_success", WIRE_MODEL),
      .failure = failures(&p),
      .count = wire_value(&p, "nv_inference_count", WIRE_MODEL),
      .execs = wire_value(&p, "nv_inference_exec_count", WIRE_MODEL),
      .exec_rows = wire_value(&p, "cuv_infer_exec_rows_sum", WIRE_MODEL),
      .latency_n = wire_value(&p, "cuv_infer_request_duration_seconds_count", WIRE_MODEL),
      .latency_s = wire_value(&p, "cuv_infer_request_duration_seconds_sum", WIRE_MODEL),
      .submitted = wire_value(&p, "cuv_submitted_total", ""),
      .ok_2xx = wire_value(&p, "cuv_infer_responses_total", "code=\"2xx\""),

      .request = wire_value(&p, "nv_inference_request_duration_us", WIRE_MODEL),
      .parts = wire_value(&p, "nv_inference_queue_duration_us", WIRE_MODEL) +
               wire_value(&p, "nv_inference_compute_input_duration_us", WIRE_MODEL) +
               wire_value(&p, "nv_inference_compute_infer_duration_us", WIRE_MODEL) +
               wire_value(&p, "nv_inference_compute_output_duration_us", WIRE_MODEL)};
  for (size_t i = 0; i < p.n; i++)
    if (!strcmp(p.samples[i].name, "cuv_infer_worker_reports_behind"))
      s.behind += p.samples[i].value;
  prom_free(&p);
  return s;
}

/* K inferences of R rows in all on a quiet server: Triton's counters move by exactly K and R,
 * the executions by K (or fewer, batched, but at least one), their rows by R, the latency
 * histogram by K observations whose sum is the request duration's; cuv's submissions by at
 * least the executions (with --isolate, the workers' own, which only their reports bring: the
 * polls wait until the reports count every reply, cuv_infer_worker_reports_behind). The
 * durations' parts add up to the whole, to the microsecond each. */
static void test_metrics_counts(void **state) {
  enum { K = 12 };
  free(wait_settled(0));
  snapshot_t a, b;
  do /* --isolate: until the workers' reports count all the work they answered */
    a = snapshot();
  while (a.behind && (pause_ms(20), true));
  client_t *c = dial();
  double rows = 0;
  for (unsigned i = 1; i <= K; i++) {
    batch_t x = make_batch(i);
    send_infer(c, &x, NULL);
    assert_infer_ok(c, &x);
    rows += i;
    free_batch(&x);
  }
  hang_up(c);
  for (;;) { /* the workers' reports come a few times a second */
    b = snapshot();
    if (b.success - a.success >= K && !b.behind && b.ok_2xx - a.ok_2xx >= K)
      break;
    pause_ms(20);
  }
  bool batched = metric_present("cuv_infer_batch_rows_limit");
  assert_true(b.success - a.success == K);
  assert_true(b.submitted - a.submitted >= b.execs - a.execs);
  assert_true(b.failure == a.failure);
  assert_true(b.count - a.count == rows);
  assert_true(b.exec_rows - a.exec_rows == rows);
  assert_true(batched ? b.execs - a.execs >= 1 && b.execs - a.execs <= K
                      : b.execs - a.execs == K);
  assert_true(b.latency_n - a.latency_n == K);
  double request = b.request - a.request, parts = b.parts - a.parts;
  assert_true(parts <= request && parts >= request - 5 * K);
  double latency_us = (b.latency_s - a.latency_s) * 1e6;
  assert_true(latency_us >= request - 1 && latency_us <= request + 1);
}

/* Last: everything retired, nothing failed, still right. */
static void test_settled(void **state) {
  char *s = wait_settled(0);
  assert_int_equal(metric(s, "cuv_infer_gpu_failed_total"), 0);
  assert_int_equal(metric(s, "cuv_faults_total"), 0);
  assert_true(metric(s, "cuv_infer_parse_errors_total") >= 2);
  free(s);
  assert_serving();
}

int main(int argc, char **argv) {
  wire_init(argc, argv, "the server's behaviour on good and bad input, as cmocka cases", NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keep_alive),        cmocka_unit_test(test_pipelined_in_order),
      cmocka_unit_test(test_many_connections),  cmocka_unit_test(test_truncated_body),
      cmocka_unit_test(test_oversized),         cmocka_unit_test(test_wrong_dimension),
      cmocka_unit_test(test_malformed),         cmocka_unit_test(test_routes_and_methods),
      cmocka_unit_test(test_date_header),       cmocka_unit_test(test_head),
      cmocka_unit_test(test_upgrade_refused),   cmocka_unit_test(test_host_rules),
      cmocka_unit_test(test_absolute_form),     cmocka_unit_test(test_chunked),
      cmocka_unit_test(test_disconnect_abrupt), cmocka_unit_test(test_disconnect_orderly),
      cmocka_unit_test(test_disconnect_mid_batch),
      cmocka_unit_test(test_metrics_format),    cmocka_unit_test(test_metrics_counts),
      cmocka_unit_test(test_settled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
