/* tcp-infer-flow: the server's memory bounded whatever clients do (http/flow.c), as a cmocka case
 * (TAP) against a server started with small limits (tests/meson.build: --max-buffered 2 MiB,
 * --max-conn-unsent 512 KiB: a connection paused by its own limit holds over 256 KiB, so that
 * some of them fill the server's cap and the others are paused by it):
 *
 *   NONREADERS connections each pipeline REQUESTS requests (a 1-row POST /infer, then three GET
 *   /metrics, over and over) and read nothing. Once the server stopped reading every one of them
 *   (cuv_infer_connections_paused), the bytes it holds (cuv_infer_buffered_bytes, read from
 *   another connection) are within README's bound (--max-buffered plus, per connection, one read
 *   of 64 KiB and one request's body and answer), and so is the growth of its resident memory
 *   (/proc/PID/statm); another client's inferences, one at a time and pipelined, are all
 *   answered right meanwhile. Then the non-readers read: every response comes, in order (each
 *   inference's outputs are its own rows'), none lost; and the server holds nothing after.
 *
 * Nothing is timed: each wait is for what the server does; the runner's timeout bounds them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "wire.h"

#define NONREADERS 20
#define REQUESTS 2000    /* per non-reader: about 19 MB of answers, which no socket buffer takes */
#define CAP (2u << 20)   /* the server's --max-buffered */
#define READ_BYTES 65536 /* a read of the server's (the input a paused connection keeps) */
#define GPU_ANSWERS (64 * 1024) /* a queue's answers still owed by the GPU (64 requests of 1 row) */

/* A connection that sends its requests as fast as the server takes them and reads nothing. */
typedef struct nonreader {
  client_t *c;
  char *wire;       /* its requests, back to back */
  size_t len, sent; /* the wire's bytes, those sent */
  size_t *ends;     /* where each request ends in the wire */
  batch_t *batches; /* request i's rows, for the inferences (i % 4 == 0) */
} nonreader_t;

static const char METRICS_REQUEST[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";

static void append(nonreader_t *nr, size_t *cap, const void *data, size_t n) {
  if (nr->len + n > *cap) {
    *cap = (*cap + n) * 2;
    nr->wire = realloc(nr->wire, *cap);
    assert_non_null(nr->wire);
  }
  memcpy(nr->wire + nr->len, data, n);
  nr->len += n;
}

static void make_nonreader(nonreader_t *nr) {
  *nr = (nonreader_t){.c = dial(),
                      .ends = calloc(REQUESTS, sizeof(size_t)),
                      .batches = calloc(REQUESTS, sizeof(batch_t))};
  assert_non_null(nr->ends);
  assert_non_null(nr->batches);
  size_t cap = 0;
  for (unsigned i = 0; i < REQUESTS; i++) {
    if (i % 4 == 0) {
      nr->batches[i] = make_batch(1);
      char head[128];
      int n = snprintf(head, sizeof head,
                       "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
                       MLP_IN * sizeof(float));
      append(nr, &cap, head, (size_t)n);
      append(nr, &cap, nr->batches[i].in, MLP_IN * sizeof(float));
    } else {
      append(nr, &cap, METRICS_REQUEST, sizeof METRICS_REQUEST - 1);
    }
    nr->ends[i] = nr->len;
  }
}

static void free_nonreader(nonreader_t *nr) {
  for (unsigned i = 0; i < REQUESTS; i += 4)
    free_batch(&nr->batches[i]);
  free(nr->batches);
  free(nr->ends);
  free(nr->wire);
  hang_up(nr->c);
}

/* Sends what the socket takes now, without waiting. */
static void pump(nonreader_t *nr) {
  while (nr->sent < nr->len) {
    ssize_t n =
        send(nr->c->fd, nr->wire + nr->sent, nr->len - nr->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    assert_true(n > 0);
    nr->sent += (size_t)n;
  }
}

/* Request i sent whole, waiting for the socket if need be: called once every answer before it
 * was read, so the server holds nothing of this connection and reads it. */
static void send_through(nonreader_t *nr, unsigned i) {
  if (nr->sent >= nr->ends[i])
    return;
  send_all(nr->c, nr->wire + nr->sent, nr->ends[i] - nr->sent);
  nr->sent = nr->ends[i];
}

/* Every answer, in order: an inference's outputs are its own rows', a page of metrics is one. */
static void read_all(nonreader_t *nr) {
  for (unsigned i = 0; i < REQUESTS; i++) {
    pump(nr);
    send_through(nr, i);
    if (i % 4 == 0) {
      wire_expect_ok(nr->c, &nr->batches[i]);
      continue;
    }
    response_t r;
    assert_true(read_response(nr->c, &r));
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "cuv_infer_buffered_bytes"));
    free_response(&r);
  }
}

/* The server's resident memory, in bytes (its pid from tcp-infer-run). */
static uint64_t server_rss(void) {
  const char *pid = getenv("TCP_INFER_SERVER_PID");
  assert_non_null(pid);
  char path[64];
  snprintf(path, sizeof path, "/proc/%s/statm", pid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  unsigned long size = 0, resident = 0;
  assert_int_equal(fscanf(f, "%lu %lu", &size, &resident), 2);
  fclose(f);
  return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Under a sanitizer the allocator keeps freed memory in quarantine: its RSS says nothing here. */
static bool server_sanitized(void) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%s/maps", getenv("TCP_INFER_SERVER_PID"));
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  bool found = false;
  while (!found && fgets(line, sizeof line, f))
    found = strstr(line, "libasan") || strstr(line, "libtsan") || strstr(line, "libubsan");
  fclose(f);
  return found;
}

/* Another client, served while the non-readers hold the server's cap: inferences one at a time,
 * then 16 pipelined, every answer checked. */
static void reader_served(void) {
  client_t *c = dial();
  for (unsigned i = 0; i < 32; i++) {
    batch_t b = make_batch(1 + i % 8);
    wire_send_infer(c, &b);
    wire_expect_ok(c, &b);
    free_batch(&b);
  }
  batch_t b[16];
  for (unsigned i = 0; i < 16; i++) {
    b[i] = make_batch(1 + i);
    wire_send_infer(c, &b[i]);
  }
  for (unsigned i = 0; i < 16; i++) {
    wire_expect_ok(c, &b[i]);
    free_batch(&b[i]);
  }
  hang_up(c);
}

static void test_nonreaders(void **state) {
  char *page = NULL;
  prom_t p;
  wire_metrics(&p, "/metrics", &page);
  size_t answer = strlen(page) * 2 + 512; /* a page of metrics (they grow) and its head, at most */
  free(page);
  assert_int_equal(wire_value(&p, "cuv_infer_buffered_limit_bytes", ""), CAP);
  prom_free(&p);
  uint64_t rss0 = server_rss();
  static nonreader_t nr[NONREADERS];
  for (unsigned i = 0; i < NONREADERS; i++) {
    make_nonreader(&nr[i]);
    pump(&nr[i]);
  }
  while (wire_metric("cuv_infer_connections_paused", "") < NONREADERS)
    usleep(10000); /* until the server stopped reading every one */
  double held = wire_metric("cuv_infer_buffered_bytes", "");
  double bound = CAP + (NONREADERS + 1.0) * (READ_BYTES + answer + GPU_ANSWERS);
  uint64_t rss1 = server_rss();
  /* the RSS bound: the bytes held, and per connection its own state and the allocator's slack */
  double rss_bound = bound + NONREADERS * 65536.0 + (8u << 20);
  print_message("# %u non-readers paused: the server holds %.0f bytes (bound %.0f), RSS %.1f -> "
                "%.1f MiB (growth bound %.1f MiB)\n",
                NONREADERS, held, bound, rss0 / 1048576.0, rss1 / 1048576.0, rss_bound / 1048576.0);
  assert_true(held > 0 && held <= bound);
  if (server_sanitized())
    print_message("# a sanitizer's allocator: its RSS is not compared\n");
  else
    assert_true((double)rss1 - (double)rss0 <= rss_bound);
  reader_served();
  assert_true(wire_metric("cuv_infer_buffered_bytes", "") <= bound);
  for (unsigned i = 0; i < NONREADERS; i++)
    read_all(&nr[i]);
  /* A loop counts its bytes released when its write callbacks ran, which may come after the
   * client read the last byte and after another loop answered /metrics: wait for one page that
   * shows both gauges at 0 (the page before's own answer may still be counted on its loop when
   * the next page is made, so each look is judged on its own page). */
  for (;;) {
    wire_metrics(&p, "/metrics", NULL);
    if (wire_value(&p, "cuv_infer_buffered_bytes", "") == 0 &&
        wire_value(&p, "cuv_infer_connections_paused", "") == 0)
      break;
    prom_free(&p);
    usleep(10000);
  }
  double server = wire_value(&p, "cuv_infer_read_pauses_total", "reason=\"server\"");
  assert_true(server >= 1);
  assert_true(wire_value(&p, "cuv_infer_read_pauses_total", "reason=\"queue\"") +
                  wire_value(&p, "cuv_infer_read_pauses_total", "reason=\"unsent\"") + server >=
              NONREADERS);
  assert_int_equal(wire_value(&p, "cuv_infer_responses_dropped_total", ""), 0);
  prom_free(&p);
  for (unsigned i = 0; i < NONREADERS; i++)
    free_nonreader(&nr[i]);
}

int main(int argc, char **argv) {
  wire_init(argc, argv, "the server's memory bounded by non-reading clients, as a cmocka case",
            NULL);
  const struct CMUnitTest cases[] = {cmocka_unit_test(test_nonreaders)};
  return cmocka_run_group_tests(cases, NULL, NULL);
}
