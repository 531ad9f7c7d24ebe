/* tcp-infer-client: a verifying load client for tcp-infer, on libuv.
 *
 *   tcp-infer-client --port N [--host 127.0.0.1] [--connections 16] [--depth 4] [--batch 8|MIN-MAX]
 *                    [--duration 3 | --requests N] [--seed 42] [--threads 1]
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

#include "mlp.h"

#define POOL_ROWS 4096

typedef struct config {
  const char *host;
  int port;
  unsigned connections, depth, batch_min, batch_max, threads;
  double duration;
  uint64_t requests; /* 0: run for `duration` */
  uint64_t seed;
} config_t;

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

/* One POST /infer with `batch` random rows of the pool, in one write. */
static void send_request(cconn_t *c) {
  worker_t *w = c->w;
  const config_t *cfg = w->cfg;
  pending_t *p = &c->ring[(c->head + c->count) % cfg->depth];
  unsigned span = cfg->batch_max - cfg->batch_min + 1;
  p->batch = cfg->batch_min + (unsigned)(next_random(&w->state) % span);
  size_t body = (size_t)p->batch * MLP_IN * sizeof(float);
  char head[160];
  int hlen = snprintf(head, sizeof head,
                      "POST /infer HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: "
                      "application/octet-stream\r\nContent-Length: %zu\r\n\r\n",
                      cfg->host, cfg->port, body);
  uv_write_t *wr = malloc(sizeof *wr + (size_t)hlen + body);
  if (!wr) {
    w->errors++;
    return;
  }
  char *buf = (char *)(wr + 1);
  memcpy(buf, head, (size_t)hlen);
  for (unsigned r = 0; r < p->batch; r++) {
    p->rows[r] = (uint16_t)(next_random(&w->state) % POOL_ROWS);
    memcpy(buf + hlen + (size_t)r * sizeof pool_in[0], pool_in[p->rows[r]], sizeof pool_in[0]);
  }
  uv_buf_t b = uv_buf_init(buf, (unsigned)((size_t)hlen + body));
  p->sent_ns = uv_hrtime();
  c->count++;
  if (uv_write(wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
    free(wr);
    conn_close(c, true);
  }
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
  size_t want = (size_t)p->batch * MLP_OUT * sizeof(float);
  if (c->status != 200 || c->body_len != want) {
    if (w->errors++ < 5) /* an error's body is one line of text: what went wrong */
      fprintf(stderr, "client: status %u, %zu bytes (want 200, %zu bytes)%s%.*s", c->status,
              c->body_len, want, c->status != 200 ? ": " : "\n",
              c->status != 200 ? (int)(c->body_len < 200 ? c->body_len : 200) : 0,
              c->body ? c->body : "");
    return;
  }
  const float *got = (const float *)(const void *)c->body;
  for (unsigned r = 0; r < p->batch; r++) {
    if (!mlp_close_enough(got + (size_t)r * MLP_OUT, pool_out[p->rows[r]], MLP_OUT)) {
      if (w->mismatches++ < 5)
        fprintf(stderr, "client: row %u of a batch of %u differs from the host's result\n", r,
                p->batch);
      return;
    }
  }
  w->completed++;
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

static void *worker_run(void *arg) {
  worker_t *w = arg;
  const config_t *cfg = w->cfg;
  struct sockaddr_in addr;
  uv_ip4_addr(cfg->host, cfg->port, &addr);
  uv_loop_init(&w->loop);
  llhttp_settings_init(&w->settings);
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
          "         [--batch N|MIN-MAX] [--duration S | --requests N] [--seed N] [--threads N]\n");
}

static int parse_options(int argc, char **argv, config_t *cfg) {
  static const struct option longs[] = {
      {"host", required_argument, NULL, 'H'},        {"port", required_argument, NULL, 'p'},
      {"connections", required_argument, NULL, 'c'}, {"depth", required_argument, NULL, 'd'},
      {"batch", required_argument, NULL, 'b'},       {"duration", required_argument, NULL, 't'},
      {"requests", required_argument, NULL, 'n'},    {"seed", required_argument, NULL, 's'},
      {"threads", required_argument, NULL, 'T'},     {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  *cfg = (config_t){.host = "127.0.0.1", .port = -1, .connections = 16, .depth = 4,
                    .batch_min = 8, .batch_max = 8, .threads = 1, .duration = 3.0,
                    .seed = MLP_DEFAULT_SEED};
  int ch;
  while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (ch) {
    case 'H': cfg->host = optarg; break;
    case 'p': cfg->port = atoi(optarg); break;
    case 'c': cfg->connections = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'd': cfg->depth = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'b': {
      char *dash = strchr(optarg, '-');
      cfg->batch_min = (unsigned)strtoul(optarg, NULL, 10);
      cfg->batch_max = dash ? (unsigned)strtoul(dash + 1, NULL, 10) : cfg->batch_min;
      break;
    }
    case 't': cfg->duration = atof(optarg); break;
    case 'n': cfg->requests = strtoull(optarg, NULL, 10); break;
    case 's': cfg->seed = strtoull(optarg, NULL, 0); break;
    case 'T': cfg->threads = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); return -1;
    }
  }
  if (optind != argc || cfg->port <= 0 || cfg->port > 65535 || cfg->connections == 0 ||
      cfg->depth == 0 || cfg->batch_min == 0 || cfg->batch_max < cfg->batch_min ||
      cfg->threads == 0 || (cfg->requests == 0 && cfg->duration <= 0)) {
    usage(stderr);
    return -1;
  }
  if (cfg->threads > cfg->connections)
    cfg->threads = cfg->connections;
  return 0;
}

int main(int argc, char **argv) {
  config_t cfg;
  if (parse_options(argc, argv, &cfg) != 0)
    return 2;
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
