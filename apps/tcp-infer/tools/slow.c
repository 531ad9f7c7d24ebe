/* tcp-infer-slow: many connections that take a server's resources without using them, as a
 * slowloris attack or a crowd of idle keep-alive clients would (libuv, one thread).
 *
 *   tcp-infer-slow --port N [--host ADDR] [--connections 1000]
 *                  [--mode mix|idle|head|body|noread] [--interval-ms 1000] [--requests 1900]
 *                  [--duration S]
 *
 * idle connections connect and send nothing; head ones send a request's head one byte per
 * interval; body ones send a whole head, then its body one byte per interval; mix: a third of
 * each; noread ones pipeline --requests GET /metrics at once and never read (the server must
 * stop reading them rather than hold every answer). Runs for --duration seconds, or until SIGINT
 * or SIGTERM. Prints "slow: N connections open" once they all connected (a script waits for that
 * line), and at the end:
 *   RESULT slow connections=N opened=O answered_408=A answered_503=R other=X closed=C
 * (answered: the first response's status; closed: the server ended the connection). A
 * connection the server closed is not opened again. Exit 0, 1 when none could connect, 2 on a
 * usage error. */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "cli.h"

static const char REQUEST[] = "POST /infer HTTP/1.1\r\nHost: slow\r\nContent-Length: 256\r\n\r\n";

typedef enum { MODE_IDLE, MODE_HEAD, MODE_BODY, MODE_MIX, MODE_NOREAD } mode_t_;

typedef struct sconn {
  uv_tcp_t tcp;
  uv_connect_t connect;
  mode_t_ mode;
  size_t sent; /* bytes of the request (and its body) sent so far */
  bool open, closed, answered;
} sconn_t;

static struct {
  const char *host;
  int port;
  unsigned connections, interval_ms, requests;
  double duration;
  mode_t_ mode;
  uv_loop_t *loop;
  uv_timer_t tick, stop;
  uv_signal_t sigint, sigterm;
  sconn_t *conns;
  unsigned connected, pending, a408, a503, other, closed;
  bool stopping, announced;
} g = {.host = "127.0.0.1", .port = -1, .connections = 1000, .interval_ms = 1000,
       .requests = 1900, .mode = MODE_MIX};

static void on_closed(uv_handle_t *handle) { (void)handle; }

static void close_conn(sconn_t *c) {
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  static char space[4096];
  (void)handle;
  (void)suggested;
  *buf = uv_buf_init(space, sizeof space);
}

/* The first bytes the server sends: the status of its answer (408, 503, ...); then its end. */
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  sconn_t *c = stream->data;
  if (nread > 0 && !c->answered) {
    c->answered = true;
    if (nread >= 12 && !memcmp(buf->base, "HTTP/1.1 408", 12))
      g.a408++;
    else if (nread >= 12 && !memcmp(buf->base, "HTTP/1.1 503", 12))
      g.a503++;
    else
      g.other++;
  }
  if (nread < 0 && !c->closed) {
    c->closed = true;
    c->open = false;
    g.closed++;
    close_conn(c);
  }
}

static void on_written(uv_write_t *w, int status) {
  (void)status; /* a connection the server closed: on_read sees its end */
  free(w);
}

static void send_bytes(sconn_t *c, const char *data, size_t n) {
  uv_write_t *w = malloc(sizeof *w + n);
  if (!w)
    return;
  memcpy(w + 1, data, n);
  uv_buf_t buf = uv_buf_init((char *)(w + 1), (unsigned)n);
  if (uv_write(w, (uv_stream_t *)&c->tcp, &buf, 1, on_written) != 0)
    free(w);
}

/* --mode noread: every request at once, back to back; nothing is read. */
static void send_pipelined(sconn_t *c) {
  static const char get[] = "GET /metrics HTTP/1.1\r\nHost: slow\r\n\r\n";
  size_t n = sizeof get - 1, total = n * g.requests;
  char *wire = malloc(total);
  if (!wire)
    return;
  for (unsigned i = 0; i < g.requests; i++)
    memcpy(wire + i * n, get, n);
  send_bytes(c, wire, total);
  free(wire);
}

static void on_connect(uv_connect_t *req, int status) {
  sconn_t *c = req->data;
  g.pending--;
  if (status < 0) {
    c->closed = true;
    close_conn(c);
  } else {
    c->open = true;
    g.connected++;
    if (c->mode == MODE_NOREAD)
      send_pipelined(c);
    else
      uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (c->mode == MODE_BODY) { /* the whole head at once, the body slowly */
      send_bytes(c, REQUEST, sizeof REQUEST - 1);
      c->sent = sizeof REQUEST - 1;
    }
  }
  if (!g.pending && !g.announced) {
    g.announced = true;
    printf("slow: %u connections open\n", g.connected);
    fflush(stdout);
  }
}

/* One byte more on each slow connection: the head's next, or the body's. */
static void on_tick(uv_timer_t *timer) {
  (void)timer;
  for (unsigned i = 0; i < g.connections; i++) {
    sconn_t *c = &g.conns[i];
    if (!c->open || c->mode == MODE_IDLE || c->mode == MODE_NOREAD)
      continue;
    char byte = c->sent < sizeof REQUEST - 1 ? REQUEST[c->sent] : 'x';
    if (c->sent < sizeof REQUEST - 1 + 256) {
      send_bytes(c, &byte, 1);
      c->sent++;
    }
  }
}

static void stop(void) {
  if (g.stopping)
    return;
  g.stopping = true;
  uv_close((uv_handle_t *)&g.tick, on_closed);
  uv_close((uv_handle_t *)&g.stop, on_closed);
  uv_close((uv_handle_t *)&g.sigint, on_closed);
  uv_close((uv_handle_t *)&g.sigterm, on_closed);
  for (unsigned i = 0; i < g.connections; i++)
    close_conn(&g.conns[i]);
}

static void on_stop(uv_timer_t *timer) {
  (void)timer;
  stop();
}

static void on_signal(uv_signal_t *handle, int signum) {
  (void)handle;
  (void)signum;
  stop();
}

static void usage(FILE *f) {
  fprintf(f, "usage: tcp-infer-slow --port N [--host ADDR] [--connections N] "
             "[--mode mix|idle|head|body|noread] [--interval-ms MS] [--requests N] "
             "[--duration S]\n"
             "  connections that hold a server's resources: idle ones, ones that send a\n"
             "  request one byte per interval (its head, or its body), and ones that pipeline\n"
             "  N GET /metrics and never read (noread); --help, --version\n");
}

static bool parse_mode(const char *arg) {
  static const char *const names[] = {"idle", "head", "body", "mix", "noread"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(arg, names[i])) {
      g.mode = (mode_t_)i;
      return true;
    }
  cli_usage_error("--mode: '%s' is none of mix, idle, head, body, noread", arg);
  return false;
}

/* One option; false after a usage error. */
static bool option(int ch, void *arg) {
  (void)arg;
  uint64_t v;
  switch (ch) {
  case 'H': g.host = optarg; return true;
  case 'p': return cli_uint("--port", optarg, 1, 65535, &v) && (g.port = (int)v, true);
  case 'c': return cli_unsigned("--connections", optarg, 1, 100000, &g.connections);
  case 'm': return parse_mode(optarg);
  case 'i': return cli_unsigned("--interval-ms", optarg, 1, 3600000, &g.interval_ms);
  case 'd': return cli_seconds("--duration", optarg, 0.001, 1e9, &g.duration);
  case 'r': return cli_unsigned("--requests", optarg, 1, 1000000, &g.requests);
  default: return false;
  }
}

static int parse(int argc, char **argv) {
  static const struct option longs[] = {
      {"host", required_argument, NULL, 'H'},     {"port", required_argument, NULL, 'p'},
      {"connections", required_argument, NULL, 'c'}, {"mode", required_argument, NULL, 'm'},
      {"interval-ms", required_argument, NULL, 'i'}, {"duration", required_argument, NULL, 'd'},
      {"requests", required_argument, NULL, 'r'},
      {"help", no_argument, NULL, 'h'},           {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0}};
  if (cli_parse(argc, argv, "", longs, option, usage, NULL) != 0)
    return CLI_USAGE;
  if (optind != argc)
    return cli_usage_error("unexpected argument '%s'", argv[optind]);
  if (g.port < 0)
    return cli_usage_error("--port is required");
  return 0;
}

static int open_all(void) {
  struct sockaddr_storage addr;
  if (uv_ip4_addr(g.host, g.port, (struct sockaddr_in *)&addr) != 0 &&
      uv_ip6_addr(g.host, g.port, (struct sockaddr_in6 *)&addr) != 0)
    return cli_usage_error("--host: '%s' is no IPv4 or IPv6 address", g.host);
  for (unsigned i = 0; i < g.connections; i++) {
    sconn_t *c = &g.conns[i];
    c->mode = g.mode == MODE_MIX ? (mode_t_)(i % 3) : g.mode;
    uv_tcp_init(g.loop, &c->tcp);
    c->tcp.data = c->connect.data = c;
    g.pending++;
    if (uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&addr, on_connect) != 0) {
      g.pending--;
      c->closed = true;
      close_conn(c);
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  int rc = parse(argc, argv);
  if (rc != 0)
    return rc;
  signal(SIGPIPE, SIG_IGN);
  g.loop = uv_default_loop();
  g.conns = calloc(g.connections, sizeof *g.conns);
  if (!g.conns)
    return 1;
  uv_timer_init(g.loop, &g.tick);
  uv_timer_init(g.loop, &g.stop);
  uv_signal_init(g.loop, &g.sigint);
  uv_signal_init(g.loop, &g.sigterm);
  uv_signal_start(&g.sigint, on_signal, SIGINT);
  uv_signal_start(&g.sigterm, on_signal, SIGTERM);
  uv_timer_start(&g.tick, on_tick, g.interval_ms, g.interval_ms);
  if (g.duration > 0)
    uv_timer_start(&g.stop, on_stop, (uint64_t)(g.duration * 1000), 0);
  if ((rc = open_all()) != 0)
    return rc;
  uv_run(g.loop, UV_RUN_DEFAULT);
  printf("RESULT slow connections=%u opened=%u answered_408=%u answered_503=%u other=%u "
         "closed=%u\n", g.connections, g.connected, g.a408, g.a503, g.other, g.closed);
  uv_loop_close(g.loop);
  free(g.conns);
  return g.connected ? 0 : 1;
}
