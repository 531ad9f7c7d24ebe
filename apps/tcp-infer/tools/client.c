/* tcp-infer-client: a verifying load client for tcp-infer, on libuv.
 *
 *   tcp-infer-client --port N [--host 127.0.0.1] [--connections 16] [--depth 4] [--batch 8|MIN-MAX]
 *                    [--duration 3 | --requests N] [--seed 42] [--threads 1]
 *                    [--api infer|kserve|kserve-binary]
 *   tcp-infer-client --make-request ROWS --out PREFIX [--binary]
 *   tcp-infer-client --check PREFIX RESPONSE [--header-length N] [--seed 42]
 *
 * --api: POST /infer (the default), or KServe v2's inference with JSON tensors, or with the
 * binary tensor data extension both ways. --make-request writes a KServe inference request of
 * ROWS random rows to PREFIX.body (JSON, or binary rows after the JSON header with --binary) and
 * its rows to PREFIX.rows, and prints the JSON part's length (Inference-Header-Content-Length);
 * --check reads a response body (as curl saved it) and checks its outputs against the host's for
 * PREFIX.rows, exit 0 when they match: so that a script can drive a server with curl.
 *
 * Opens N keep-alive connections and keeps `depth` requests pipelined on each, with random inputs;
 * every reply is checked against the host computation of the same MLP (mlp.c, same seed as the
 * server). To keep the check cheap at any rate, the inputs are rows drawn at random from a pool
 * whose outputs are computed once at start-up (the model is row-wise, so a batch's expected
 * output is the concatenation of its rows'). Reports requests/s and latency percentiles, and
 * exits 1 on any error or mismatch (with --requests N, also unless N verified replies came), 0
 * otherwise. The last line is machine-readable:
 *   RESULT requests=N seconds=S rps=R p50_us=A p99_us=B errors=E mismatches=M */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>
#include <uv.h>

#include "cli.h"
#include "mlp.h"
#include "v2-client.h"

#define POOL_ROWS 4096

typedef enum { API_INFER, API_KSERVE, API_KSERVE_BINARY } api_t;

typedef struct config {
  const char *host;
  int port;
  unsigned connections, depth, batch_min, batch_max, threads;
  double duration;
  uint64_t requests; /* 0: run for `duration` */
  uint64_t seed;
  api_t api;
  /* the file modes: --make-request ROWS --out PREFIX [--binary]; --check PREFIX RESPONSE */
  unsigned make_rows;
  const char *out, *check, *response;
  bool binary;
  long header_length;
  char authority[80]; /* the Host header's value: host:port, [host]:port for IPv6 */
} config_t;

static const char *argv_rest; /* the first argument that is no option, for its message */

/* The row pool and its expected outputs, shared read-only by every thread. */
static float pool_in[POOL_ROWS][MLP_IN], pool_out[POOL_ROWS][MLP_OUT];

typedef struct pending {
  uint64_t sent_ns;
  unsigned batch;
  uint16_t *rows; /* batch_max pool indices */
} pending_t;

typedef struct worker worker_t;

typedef struct cconn {
  uv_tcp_t tcp;
  uv_connect_t connect;
  worker_t *w;
  llhttp_t parser;
  pending_t *ring; /* depth entries: requests sent, oldest first */
  unsigned head, count;
  unsigned status;
  char *body;
  size_t body_len, body_cap;
  char field[40], value[24]; /* a response header being read (KServe's header length) */
  long infer_header_len;
  bool closed;
} cconn_t;

struct worker {
  const config_t *cfg;
  uv_loop_t loop;
  uv_timer_t deadline;
  pthread_t thread;
  cconn_t *conns;
  unsigned nconns, open;
  bool stopping;
  uint64_t state;       /* PRNG */
  uint64_t budget;      /* requests this worker may still send (requests mode) */
  uint64_t completed, errors, mismatches;
  uint32_t *latency_us; /* one per completed request */
  size_t nlat, caplat;
  llhttp_settings_t settings;
};

static uint64_t next_random(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

static void record_latency(worker_t *w, uint64_t ns) {
  if (w->nlat == w->caplat) {
    size_t cap = w->caplat ? w->caplat * 2 : 65536;
    uint32_t *p = realloc(w->latency_us, cap * sizeof *p);
    if (!p)
      return;
    w->latency_us = p;
    w->caplat = cap;
  }
  w->latency_us[w->nlat++] = (uint32_t)(ns / 1000u);
}

static void on_closed(uv_handle_t *handle) {
  cconn_t *c = handle->data;
  c->w->open--;
}

static void conn_close(cconn_t *c, bool error) {
  if (c->closed)
    return;
  c->closed = true;
  if (error && c->count) {
    fprintf(stderr, "client: connection lost with %u requests outstanding\n", c->count);
    c->w->errors += c->count;
  }
  c->count = 0;
  uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_written(uv_write_t *wr, int status) {
  cconn_t *c = wr->handle->data;
  free(wr);
  if (status < 0 && !c->closed) {
    fprintf(stderr, "client: write failed: %s\n", uv_strerror(status));
    conn_close(c, true);
  }
}

static bool may_send(worker_t *w) {
  if (w->stopping)
    return false;
  if (w->cfg->requests == 0)
    return true;
  if (w->budget == 0)
    return false;
  w->budget--;
  return true;
}

/* The request's head: POST /infer, or KServe's inference (its header length when binary). */
static int request_head(const config_t *cfg, char *head, size_t cap, size_t body,
                        size_t json_len) {
  if (cfg->api == API_INFER)
    return snprintf(head, cap,
                    "POST /infer HTTP/1.1\r\nHost: %s\r\nContent-Type: "
                    "application/octet-stream\r\nContent-Length: %zu\r\n\r\n",
                    cfg->authority, body);
  char extra[64] = "";
  if (cfg->api == API_KSERVE_BINARY)
    snprintf(extra, sizeof extra, "Inference-Header-Content-Length: %zu\r\n", json_len);
  return snprintf(head, cap,
                  "POST " V2_INFER_PATH " HTTP/1.1\r\nHost: %s\r\nContent-Type: "
                  "application/json\r\nContent-Length: %zu\r\n%s\r\n",
                  cfg->authority, body, extra);
}

/* KServe's body for the request's rows (binary both ways with kserve-binary); NULL without
 * memory. */
static char *kserve_body(const config_t *cfg, const pending_t *p, size_t *len, size_t *json_len) {
  float *rows = malloc((size_t)p->batch * sizeof pool_in[0]);
  if (!rows)
    return NULL;
  for (unsigned r = 0; r < p->batch; r++)
    memcpy(rows + (size_t)r * MLP_IN, pool_in[p->rows[r]], sizeof pool_in[0]);
  bool binary = cfg->api == API_KSERVE_BINARY;
  v2_request_opts_t o = {.binary_in = binary, .binary_out = binary};
  char *body = v2_request(rows, p->batch, &o, len, json_len);
  free(rows);
  return body;
}

/* One request with `batch` random rows of the pool, in one write; POST /infer's rows are copied
 * straight into the write's buffer. */
static void send_request(cconn_t *c) {
  worker_t *w = c->w;
  const config_t *cfg = w->cfg;
  pending_t *p = &c->ring[(c->head + c->count) % cfg->depth];
  unsigned span = cfg->batch_max - cfg->batch_min + 1;
  p->batch = cfg->batch_min + (unsigned)(next_random(&w->state) % span);
  for (unsigned r = 0; r < p->batch; r++)
    p->rows[r] = (uint16_t)(next_random(&w->state) % POOL_ROWS);
  size_t body = (size_t)p->batch * MLP_IN * sizeof(float), json_len = body;
  char *v2 = cfg->api == API_INFER ? NULL : kserve_body(cfg, p, &body, &json_len);
  char head[256];
  int hlen = request_head(cfg, head, sizeof head, body, json_len);
  uv_write_t *wr = cfg->api == API_INFER || v2 ? malloc(sizeof *wr + (size_t)hlen + body) : NULL;
  if (!wr) {
    free(v2);
    w->errors++;
    return;
  }
  char *buf = (char *)(wr + 1);
  memcpy(buf, head, (size_t)hlen);
  if (v2)
    memcpy(buf + hlen, v2, body);
  for (unsigned r = 0; !v2 && r < p->batch; r++)
    memcpy(buf + hlen + (size_t)r * sizeof pool_in[0], pool_in[p->rows[r]], sizeof pool_in[0]);
  free(v2);
  uv_buf_t b = uv_buf_init(buf, (unsigned)((size_t)hlen + body));
  p->sent_ns = uv_hrtime();
  c->count++;
  if (uv_write(wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
    free(wr);
    conn_close(c, true);
  }
}

/* The reply's outputs into got (batch x MLP_OUT floats): POST /infer's body, or read out of
 * KServe's response; false (and why) when it is not one. */
static bool reply_outputs(const cconn_t *c, const pending_t *p, float *got, char *why,
                          size_t n) {
  size_t want = (size_t)p->batch * MLP_OUT * sizeof(float);
  if (c->w->cfg->api != API_INFER)
    return v2_response_outputs(c->body, c->body_len, c->infer_header_len, p->batch, NULL, got,
                               why, n) == 0;
  if (c->body_len != want) {
    snprintf(why, n, "%zu bytes, want %zu", c->body_len, want);
    return false;
  }
  memcpy(got, c->body, want);
  return true;
}

static void check_response(cconn_t *c) {
  worker_t *w = c->w;
  if (c->count == 0) {
    fprintf(stderr, "client: a response nobody asked for\n");
    w->errors++;
    return;
  }
  pending_t *p = &c->ring[c->head];
  c->head = (c->head + 1) % w->cfg->depth;
  c->count--;
  record_latency(w, uv_hrtime() - p->sent_ns);
  char why[160];
  float *got = c->status == 200 ? malloc((size_t)p->batch * MLP_OUT * sizeof(float)) : NULL;
  if (!got || !reply_outputs(c, p, got, why, sizeof why)) {
    if (w->errors++ < 5) /* an error's body is one line of text: what went wrong */
      fprintf(stderr, "client: status %u, %zu bytes: %.*s\n", c->status, c->body_len,
              c->status != 200 ? (int)(c->body_len < 200 ? c->body_len : 200) : (int)strlen(why),
              c->status != 200 ? (c->body ? c->body : "") : why);
    free(got);
    return;
  }
  for (unsigned r = 0; r < p->batch; r++) {
    if (!mlp_close_enough(got + (size_t)r * MLP_OUT, pool_out[p->rows[r]], MLP_OUT)) {
      if (w->mismatches++ < 5)
        fprintf(stderr, "client: row %u of a batch of %u differs from the host's result\n", r,
                p->batch);
      free(got);
      return;
    }
  }
  free(got);
  w->completed++;
}

static int on_header_field(llhttp_t *parser, const char *at, size_t n) {
  cconn_t *c = parser->data;
  size_t len = strlen(c->field);
  snprintf(c->field + len, sizeof c->field - len, "%.*s", (int)n, at);
  return 0;
}

static int on_header_value(llhttp_t *parser, const char *at, size_t n) {
  cconn_t *c = parser->data;
  size_t len = strlen(c->value);
  snprintf(c->value + len, sizeof c->value - len, "%.*s", (int)n, at);
  return 0;
}

static int on_header_value_complete(llhttp_t *parser) {
  cconn_t *c = parser->data;
  if (!strcasecmp(c->field, "Inference-Header-Content-Length"))
    c->infer_header_len = strtol(c->value, NULL, 10);
  c->field[0] = c->value[0] = '\0';
  return 0;
}

static int on_message_begin(llhttp_t *parser) {
  cconn_t *c = parser->data;
  c->infer_header_len = -1;
  c->field[0] = c->value[0] = '\0';
  return 0;
}

static int on_headers_complete(llhttp_t *parser) {
  cconn_t *c = parser->data;
  c->status = parser->status_code;
  c->body_len = 0;
  return 0;
}

static int on_body(llhttp_t *parser, const char *at, size_t n) {
  cconn_t *c = parser->data;
  if (c->body_len + n > c->body_cap) {
    size_t cap = (c->body_len + n) * 2;
    char *b = realloc(c->body, cap);
    if (!b)
      return -1;
    c->body = b;
    c->body_cap = cap;
  }
  memcpy(c->body + c->body_len, at, n);
  c->body_len += n;
  return 0;
}

static int on_message_complete(llhttp_t *parser) {
  cconn_t *c = parser->data;
  check_response(c);
  if (c->closed)
    return 0;
  if (may_send(c->w))
    send_request(c);
  else if (c->count == 0)
    conn_close(c, false);
  return 0;
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  static _Thread_local char space[65536];
  *buf = uv_buf_init(space, sizeof space);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  cconn_t *c = stream->data;
  if (c->closed)
    return;
  if (nread < 0) {
    if (c->count)
      fprintf(stderr, "client: connection closed by the server: %s\n", uv_strerror((int)nread));
    conn_close(c, true);
    return;
  }
  llhttp_errno_t err = llhttp_execute(&c->parser, buf->base, (size_t)nread);
  if (!c->closed && err != HPE_OK) {
    fprintf(stderr, "client: malformed response: %s (%s)\n", llhttp_errno_name(err),
            llhttp_get_error_reason(&c->parser));
    conn_close(c, true);
  }
}

static void on_connect(uv_connect_t *req, int status) {
  cconn_t *c = req->data;
  if (status < 0) {
    fprintf(stderr, "client: cannot connect to %s:%d: %s\n", c->w->cfg->host, c->w->cfg->port,
            uv_strerror(status));
    c->w->errors++;
    conn_close(c, false);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  for (unsigned i = 0; i < c->w->cfg->depth && may_send(c->w); i++)
    send_request(c);
  if (c->count == 0)
    conn_close(c, false);
}

static void on_deadline(uv_timer_t *timer) {
  worker_t *w = timer->data;
  w->stopping = true; /* connections close once their outstanding replies arrived */
  for (unsigned i = 0; i < w->nconns; i++)
    if (w->conns[i].count == 0)
      conn_close(&w->conns[i], false);
}

/* The server's address, IPv4 or IPv6 (the host was checked by parse_options). */
static int server_address(const config_t *cfg, struct sockaddr_storage *addr) {
  if (uv_ip4_addr(cfg->host, cfg->port, (struct sockaddr_in *)addr) == 0)
    return 0;
  return uv_ip6_addr(cfg->host, cfg->port, (struct sockaddr_in6 *)addr);
}

static void *worker_run(void *arg) {
  worker_t *w = arg;
  const config_t *cfg = w->cfg;
  struct sockaddr_storage addr;
  server_address(cfg, &addr);
  uv_loop_init(&w->loop);
  llhttp_settings_init(&w->settings);
  w->settings.on_message_begin = on_message_begin;
  w->settings.on_header_field = on_header_field;
  w->settings.on_header_value = on_header_value;
  w->settings.on_header_value_complete = on_header_value_complete;
  w->settings.on_headers_complete = on_headers_complete;
  w->settings.on_body = on_body;
  w->settings.on_message_complete = on_message_complete;
  if (cfg->requests == 0) {
    uv_timer_init(&w->loop, &w->deadline);
    w->deadline.data = w;
    uv_timer_start(&w->deadline, on_deadline, (uint64_t)(cfg->duration * 1000.0), 0);
    uv_unref((uv_handle_t *)&w->deadline); /* the connections keep the loop alive */
  }
  for (unsigned i = 0; i < w->nconns; i++) {
    cconn_t *c = &w->conns[i];
    c->w = w;
    c->ring = calloc(cfg->depth, sizeof *c->ring);
    for (unsigned d = 0; c->ring && d < cfg->depth; d++)
      c->ring[d].rows = calloc(cfg->batch_max, sizeof(uint16_t));
    llhttp_init(&c->parser, HTTP_RESPONSE, &w->settings);
    c->parser.data = c;
    uv_tcp_init(&w->loop, &c->tcp);
    c->tcp.data = c->connect.data = c;
    w->open++;
    if (uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&addr, on_connect) != 0) {
      w->errors++;
      conn_close(c, false);
    }
  }
  uv_run(&w->loop, UV_RUN_DEFAULT);
  if (cfg->requests == 0)
    uv_close((uv_handle_t *)&w->deadline, NULL);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  uv_loop_close(&w->loop);
  return NULL;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static uint32_t percentile(const uint32_t *sorted, size_t n, double q) {
  if (n == 0)
    return 0;
  size_t i = (size_t)ceil(q * (double)n);
  return sorted[i ? i - 1 : 0];
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: tcp-infer-client --port N [--host ADDR] [--connections N] [--depth N]\n"
          "         [--batch N|MIN-MAX] [--duration S | --requests N] [--seed N] [--threads N]\n"
          "         [--api infer|kserve|kserve-binary]\n"
          "       tcp-infer-client --make-request ROWS --out PREFIX [--binary]\n"
          "       tcp-infer-client --check PREFIX --response FILE [--header-length N] [--seed N]\n"
          "  --host ADDR        the server's address, IPv4 or IPv6 (default 127.0.0.1)\n"
          "  --port N           its port\n"
          "  --connections N    keep-alive connections (default 16)\n"
          "  --depth N          requests pipelined on each (default 4)\n"
          "  --batch N|MIN-MAX  rows per request, or a range drawn from (default 8)\n"
          "  --duration S       run this long (default 3), or --requests N: that many\n"
          "  --seed N           the model's weight seed, as the server's (default %u)\n"
          "  --threads N        loops, one thread each (default 1)\n"
          "  --api NAME         infer: POST /infer (default); kserve: KServe v2 with JSON\n"
          "                     tensors; kserve-binary: with the binary tensor data extension\n"
          "  --make-request ROWS  write a KServe request of ROWS random rows to PREFIX.body (its\n"
          "                     rows to PREFIX.rows) and print its JSON part's length\n"
          "  --binary           with --make-request: binary rows, binary outputs asked for\n"
          "  --check PREFIX     check the outputs of a KServe response (--response FILE, its\n"
          "                     --header-length if binary) against the host's for PREFIX.rows\n"
          "  --help, --version\n",
          MLP_DEFAULT_SEED);
}

static bool parse_api(const char *arg, config_t *cfg) {
  static const char *const names[] = {"infer", "kserve", "kserve-binary"};
  for (int i = 0; i < 3; i++)
    if (!strcmp(arg, names[i])) {
      cfg->api = (api_t)i;
      return true;
    }
  cli_usage_error("--api: '%s' is none of infer, kserve, kserve-binary", arg);
  return false;
}

/* One option; false after a usage error. */
static bool option(int ch, void *arg) {
  config_t *cfg = arg;
  uint64_t v;
  switch (ch) {
  case 'H': cfg->host = optarg; return true;
  case 'p': return cli_uint("--port", optarg, 1, 65535, &v) && (cfg->port = (int)v, true);
  case 'c': return cli_unsigned("--connections", optarg, 1, 1000000, &cfg->connections);
  case 'd': return cli_unsigned("--depth", optarg, 1, 65536, &cfg->depth);
  case 'b': return cli_range("--batch", optarg, 1, 65536, &cfg->batch_min, &cfg->batch_max);
  case 't': return cli_seconds("--duration", optarg, 0.001, 1e9, &cfg->duration);
  case 'n': return cli_uint("--requests", optarg, 1, UINT64_MAX, &cfg->requests);
  case 's': return cli_uint("--seed", optarg, 0, UINT64_MAX, &cfg->seed);
  case 'T': return cli_unsigned("--threads", optarg, 1, 1024, &cfg->threads);
  case 'a': return parse_api(optarg, cfg);
  case 'm': return cli_unsigned("--make-request", optarg, 1, 65536, &cfg->make_rows);
  case 'o': cfg->out = optarg; return true;
  case 'B': cfg->binary = true; return true;
  case 'k': cfg->check = optarg; return true;
  case 'r': cfg->response = optarg; return true;
  case 'L': return cli_uint("--header-length", optarg, 0, INT32_MAX, &v) &&
                   (cfg->header_length = (long)v, true);
  default: return false;
  }
}

/* What the options ask for, all together; 0, or CLI_USAGE after the message. */
static int check_config(const config_t *cfg, int argc) {
  if (optind != argc)
    return cli_usage_error("unexpected argument '%s'", argv_rest);
  if (cfg->make_rows && !cfg->out)
    return cli_usage_error("--make-request needs --out PREFIX");
  if (cfg->check && !cfg->response)
    return cli_usage_error("--check needs --response FILE");
  if (!cfg->make_rows && !cfg->check && cfg->port <= 0)
    return cli_usage_error("--port is required");
  struct sockaddr_storage addr;
  if (server_address(cfg, &addr) != 0)
    return cli_usage_error("--host: '%s' is no IPv4 or IPv6 address", cfg->host);
  return 0;
}

static int parse_options(int argc, char **argv, config_t *cfg) {
  static const struct option longs[] = {
      {"host", required_argument, NULL, 'H'},        {"port", required_argument, NULL, 'p'},
      {"connections", required_argument, NULL, 'c'}, {"depth", required_argument, NULL, 'd'},
      {"batch", required_argument, NULL, 'b'},       {"duration", required_argument, NULL, 't'},
      {"requests", required_argument, NULL, 'n'},    {"seed", required_argument, NULL, 's'},
      {"threads", required_argument, NULL, 'T'},     {"api", required_argument, NULL, 'a'},
      {"make-request", required_argument, NULL, 'm'}, {"out", required_argument, NULL, 'o'},
      {"binary", no_argument, NULL, 'B'},            {"check", required_argument, NULL, 'k'},
      {"response", required_argument, NULL, 'r'},
      {"header-length", required_argument, NULL, 'L'}, {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},           {NULL, 0, NULL, 0}};
  *cfg = (config_t){.host = "127.0.0.1", .port = -1, .connections = 16, .depth = 4,
                    .batch_min = 8, .batch_max = 8, .threads = 1, .duration = 3.0,
                    .seed = MLP_DEFAULT_SEED, .header_length = -1};
  if (cli_parse(argc, argv, "", longs, option, usage, cfg) != 0)
    return CLI_USAGE;
  argv_rest = optind < argc ? argv[optind] : "";
  int rc = check_config(cfg, argc);
  snprintf(cfg->authority, sizeof cfg->authority, strchr(cfg->host, ':') ? "[%s]:%d" : "%s:%d",
           cfg->host, cfg->port);
  if (rc == 0 && cfg->threads > cfg->connections)
    cfg->threads = cfg->connections;
  return rc;
}

/* ---- the file modes: --make-request and --check --------------------------------------- */

static int write_file(const char *prefix, const char *suffix, const void *data, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s%s", prefix, suffix);
  FILE *f = fopen(path, "wb");
  int rc = f && fwrite(data, 1, len, f) == len ? 0 : -1;
  if (f && fclose(f) != 0)
    rc = -1;
  if (rc != 0)
    fprintf(stderr, "client: cannot write %s\n", path);
  return rc;
}

/* A whole file, malloc'd; NULL when it cannot be read. */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *data = NULL;
  *len = 0;
  if (f) {
    FILE *mem = open_memstream(&data, len);
    char buf[65536];
    size_t n;
    while (mem && (n = fread(buf, 1, sizeof buf, f)) > 0)
      fwrite(buf, 1, n, mem);
    if (mem)
      fclose(mem);
    fclose(f);
  }
  if (!data)
    fprintf(stderr, "client: cannot read %s\n", path);
  return data;
}

static int make_request(const config_t *cfg) {
  size_t n = (size_t)cfg->make_rows * MLP_IN, len, json_len;
  float *rows = malloc(n * sizeof(float));
  uint64_t state = uv_hrtime() | 1;
  if (!rows)
    return 1;
  mlp_random_inputs(rows, n, &state);
  v2_request_opts_t o = {.binary_in = cfg->binary, .binary_out = cfg->binary};
  char *body = v2_request(rows, cfg->make_rows, &o, &len, &json_len);
  int rc = body && write_file(cfg->out, ".body", body, len) == 0 &&
                   write_file(cfg->out, ".rows", rows, n * sizeof(float)) == 0
               ? 0
               : 1;
  if (rc == 0)
    printf("%zu\n", json_len);
  free(body);
  free(rows);
  return rc;
}

static int check_files(const config_t *cfg) {
  char path[4096], why[200] = "";
  size_t rows_len, len;
  snprintf(path, sizeof path, "%s.rows", cfg->check);
  char *in = read_file(path, &rows_len), *body = read_file(cfg->response, &len);
  unsigned rows = (unsigned)(rows_len / (MLP_IN * sizeof(float)));
  float *want = malloc((size_t)rows * MLP_OUT * sizeof(float) + 1);
  float *got = malloc((size_t)rows * MLP_OUT * sizeof(float) + 1);
  mlp_weights_t *w = malloc(sizeof *w);
  int rc = 1;
  if (in && body && want && got && w && rows) {
    mlp_weights_init(w, cfg->seed);
    mlp_forward(w, rows, (const float *)(const void *)in, want);
    if (v2_response_outputs(body, len, cfg->header_length, rows, NULL, got, why, sizeof why) != 0)
      fprintf(stderr, "client: %s: %s\n", cfg->response, why);
    else if (!mlp_close_enough(got, want, (size_t)rows * MLP_OUT))
      fprintf(stderr, "client: %s: the outputs differ from the host's\n", cfg->response);
    else
      rc = 0;
  }
  if (rc == 0)
    printf("client: %s: %u rows, every output equal to the host's\n", cfg->response, rows);
  free(in);
  free(body);
  free(want);
  free(got);
  free(w);
  return rc;
}

int main(int argc, char **argv) {
  config_t cfg;
  int rc = parse_options(argc, argv, &cfg);
  if (rc != 0)
    return rc;
  if (cfg.make_rows)
    return make_request(&cfg);
  if (cfg.check)
    return check_files(&cfg);
  signal(SIGPIPE, SIG_IGN);

  mlp_weights_t *weights = malloc(sizeof *weights);
  if (!weights)
    return 1;
  mlp_weights_init(weights, cfg.seed);
  uint64_t state = uv_hrtime() | 1;
  mlp_random_inputs(&pool_in[0][0], (size_t)POOL_ROWS * MLP_IN, &state);
  mlp_forward(weights, POOL_ROWS, &pool_in[0][0], &pool_out[0][0]);
  free(weights);

  worker_t *workers = calloc(cfg.threads, sizeof *workers);
  cconn_t *conns = calloc(cfg.connections, sizeof *conns);
  if (!workers || !conns)
    return 1;
  for (unsigned t = 0, first = 0; t < cfg.threads; t++) {
    worker_t *w = &workers[t];
    unsigned n = cfg.connections / cfg.threads + (t < cfg.connections % cfg.threads);
    *w = (worker_t){.cfg = &cfg, .conns = conns + first, .nconns = n,
                    .state = (uv_hrtime() + t * 0x9e3779b97f4a7c15ull) | 1,
                    .budget = cfg.requests / cfg.threads + (t < cfg.requests % cfg.threads)};
    first += n;
  }
  uint64_t start = uv_hrtime();
  for (unsigned t = 0; t < cfg.threads; t++)
    if (pthread_create(&workers[t].thread, NULL, worker_run, &workers[t]) != 0)
      return 1;
  uint64_t completed = 0, errors = 0, mismatches = 0;
  size_t nlat = 0;
  for (unsigned t = 0; t < cfg.threads; t++) {
    pthread_join(workers[t].thread, NULL);
    completed += workers[t].completed;
    errors += workers[t].errors;
    mismatches += workers[t].mismatches;
    nlat += workers[t].nlat;
  }
  double seconds = (double)(uv_hrtime() - start) / 1e9;

  uint32_t *lat = malloc((nlat ? nlat : 1) * sizeof *lat);
  size_t k = 0;
  for (unsigned t = 0; t < cfg.threads; t++) {
    if (lat && workers[t].nlat)
      memcpy(lat + k, workers[t].latency_us, workers[t].nlat * sizeof *lat);
    k += workers[t].nlat;
    free(workers[t].latency_us);
  }
  if (lat)
    qsort(lat, nlat, sizeof *lat, cmp_u32);
  uint32_t p50 = lat ? percentile(lat, nlat, 0.50) : 0, p99 = lat ? percentile(lat, nlat, 0.99) : 0;
  uint32_t pmax = lat && nlat ? lat[nlat - 1] : 0;
  double rps = seconds > 0 ? (double)completed / seconds : 0.0;

  char batch[32];
  if (cfg.batch_min == cfg.batch_max)
    snprintf(batch, sizeof batch, "%u", cfg.batch_min);
  else
    snprintf(batch, sizeof batch, "%u-%u", cfg.batch_min, cfg.batch_max);
  printf("client: %u connections x %u pipelined, batch %s rows, %u thread%s: %" PRIu64
         " verified replies in %.2f s\n",
         cfg.connections, cfg.depth, batch, cfg.threads, cfg.threads > 1 ? "s" : "", completed,
         seconds);
  printf("client: %.1f requests/s, latency p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", rps,
         p50 / 1e3, p99 / 1e3, pmax / 1e3);
  printf("client: %" PRIu64 " errors, %" PRIu64 " mismatches\n", errors, mismatches);
  printf("RESULT requests=%" PRIu64 " seconds=%.3f rps=%.1f p50_us=%u p99_us=%u errors=%" PRIu64
         " mismatches=%" PRIu64 "\n",
         completed, seconds, rps, p50, p99, errors, mismatches);

  for (unsigned i = 0; i < cfg.connections; i++) {
    for (unsigned d = 0; conns[i].ring && d < cfg.depth; d++)
      free(conns[i].ring[d].rows);
    free(conns[i].ring);
    free(conns[i].body);
  }
  free(conns);
  free(workers);
  free(lat);
  /* --requests N: every request must have got its verified reply, none left unanswered */
  bool all = cfg.requests == 0 || completed == cfg.requests;
  if (!all)
    fprintf(stderr, "client: %" PRIu64 " verified replies of %" PRIu64 " requests\n", completed,
            cfg.requests);
  return errors == 0 && mismatches == 0 && completed > 0 && all ? 0 : 1;
}
