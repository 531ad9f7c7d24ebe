/* tcp-infer-fault-client: drives a `tcp-infer --isolate --debug-fault` server through worker
 * faults and kills under verified load, checks the recovery and measures it (libuv, one thread).
 *
 *   tcp-infer-fault-client --port N [--connections 8] [--depth 8] [--batch 1-8] [--faults 2]
 *                          [--kills 1] [--warmup 200] [--seed 42] [--timeout 60]
 *
 * Keeps `depth` verified requests pipelined on each connection (inputs from a pool whose outputs
 * were computed on the host, as tcp-infer-client does). For each event in turn (the faults, then
 * the kills), once `warmup` correct answers came since the last one:
 *   fault: POST /debug/fault on a control connection; kill: SIGKILL to the worker's pid read from
 *   GET /stats (cuv_infer_worker_pid).
 * The requests in flight at that moment are marked. The event is over when every marked request
 * was answered, the fault request was answered (with an error status), and a request sent after
 * the worker was certainly replaced (after the fault's reply, or after the kill) was answered
 * correctly; then GET /stats must say cuv_infer_worker_restarts_total = events so far.
 *
 * Every answer must be 200 with the host's result, or 500/503 (an error, never a wrong answer);
 * a request sent after its event's first correct answer (a new worker, serving) must be correct;
 * no connection may lose a request. Exit 0, or 1 with the reason. Per event one line:
 *   RESULT event=fault n=1 inflight=N inflight_ok=A inflight_err=B answered_us=T1
 *          first_correct_us=T2 fault_status=S restarts=R
 * (times from the fault request's send, or the kill), then a RESULT summary line. */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>
#include <uv.h>

#include "mlp.h"

#define POOL_ROWS 1024
#define MAX_EVENTS 64
#define MAX_BATCH 64

typedef struct config {
  int port;
  unsigned connections, depth, batch_min, batch_max, faults, kills, warmup;
  uint64_t seed;
  double timeout;
} config_t;

static float pool_in[POOL_ROWS][MLP_IN], pool_out[POOL_ROWS][MLP_OUT];

typedef struct pending {
  uint64_t sent_ns;
  unsigned batch, epoch; /* epoch: events triggered before it was sent */
  int mark;              /* the event it was in flight at, or -1 */
  uint16_t rows[MAX_BATCH];
} pending_t;

/* A response being read: status and body. */
typedef struct reader {
  http_parser parser;
  unsigned status;
  char *body;
  size_t len, cap;
} reader_t;

typedef struct lconn { /* a load connection */
  uv_tcp_t tcp;
  uv_connect_t connect;
  reader_t rd;
  pending_t *ring;
  unsigned head, count;
  bool closed;
} lconn_t;

typedef enum { PH_WARM, PH_PID, PH_TRIGGERED, PH_STATS, PH_DRAIN, PH_DONE } phase_t;

typedef struct event {
  bool kill;
  uint64_t t0, marker_ns, answered_ns, first_correct_ns;
  unsigned inflight, left, ok, err;
  int fault_status; /* the fault request's HTTP status */
  long restarts;
} event_t;

static struct {
  config_t cfg;
  uv_loop_t loop;
  uv_timer_t tick;
  struct sockaddr_in addr;
  lconn_t *conns;
  http_parser_settings settings, ctl_settings;
  uint64_t rng;
  /* the control connection: one request at a time, a new connection each */
  uv_tcp_t ctl;
  uv_connect_t ctl_connect;
  reader_t ctl_rd;
  bool ctl_busy, ctl_done;
  char ctl_req[256];
  /* progress */
  phase_t phase;
  uint64_t phase_deadline;
  unsigned ev, nev, correct_in_phase;
  event_t events[MAX_EVENTS];
  uint64_t strict_ns[MAX_EVENTS + 1]; /* requests of epoch k sent after it must be correct */
  uint64_t sent, correct, errors, status_counts[6];
  int pid;
  const char *failure;
  char why[256];
} g;

static uint64_t next_random(void) { /* xorshift64* */
  g.rng ^= g.rng >> 12;
  g.rng ^= g.rng << 25;
  g.rng ^= g.rng >> 27;
  return g.rng * 2685821657736338717ull;
}

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...) {
  if (g.failure)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g.why, sizeof g.why, fmt, ap);
  va_end(ap);
  g.failure = g.why;
  g.phase = PH_DONE;
}

/* ---- responses ------------------------------------------------------------------------------ */

static int on_headers(http_parser *p) {
  reader_t *r = p->data;
  r->status = p->status_code;
  r->len = 0;
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
  reader_t *r = p->data;
  if (r->len + n > r->cap) {
    size_t cap = (r->len + n) * 2;
    char *b = realloc(r->body, cap);
    if (!b)
      return -1;
    r->body = b;
    r->cap = cap;
  }
  memcpy(r->body + r->len, at, n);
  r->len += n;
  return 0;
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  static char space[65536];
  (void)handle;
  (void)suggested;
  *buf = uv_buf_init(space, sizeof space);
}

static void on_closed(uv_handle_t *handle) { (void)handle; }

/* ---- load connections ------------------------------------------------------------------- */

static void on_written(uv_write_t *wr, int status) {
  free(wr);
  if (status < 0)
    fail("a write failed: %s", uv_strerror(status));
}

static void send_request(lconn_t *c) {
  pending_t *p = &c->ring[(c->head + c->count) % g.cfg.depth];
  unsigned span = g.cfg.batch_max - g.cfg.batch_min + 1;
  p->batch = g.cfg.batch_min + (unsigned)(next_random() % span);
  p->epoch = g.ev + (g.phase == PH_TRIGGERED || g.phase == PH_STATS ? 1 : 0);
  p->mark = -1;
  size_t body = (size_t)p->batch * sizeof pool_in[0];
  char head[128];
  int hlen = snprintf(head, sizeof head,
                      "POST /infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %zu\r\n\r\n",
                      body);
  uv_write_t *wr = malloc(sizeof *wr + (size_t)hlen + body);
  if (!wr) {
    fail("out of memory");
    return;
  }
  char *buf = (char *)(wr + 1);
  memcpy(buf, head, (size_t)hlen);
  for (unsigned r = 0; r < p->batch; r++) {
    p->rows[r] = (uint16_t)(next_random() % POOL_ROWS);
    memcpy(buf + hlen + (size_t)r * sizeof pool_in[0], pool_in[p->rows[r]], sizeof pool_in[0]);
  }
  uv_buf_t b = uv_buf_init(buf, (unsigned)((size_t)hlen + body));
  p->sent_ns = uv_hrtime();
  c->count++;
  g.sent++;
  if (uv_write(wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
    free(wr);
    fail("cannot write a request");
  }
}

static bool body_correct(const pending_t *p, const reader_t *r) {
  if (r->len != (size_t)p->batch * MLP_OUT * sizeof(float))
    return false;
  const float *got = (const float *)(const void *)r->body;
  for (unsigned i = 0; i < p->batch; i++)
    if (!mlp_close_enough(got + (size_t)i * MLP_OUT, pool_out[p->rows[i]], MLP_OUT))
      return false;
  return true;
}

/* A marked request (in flight at event `mark`) was answered. */
static void mark_answered(const pending_t *p, bool ok, uint64_t now) {
  event_t *e = &g.events[p->mark];
  if (ok)
    e->ok++;
  else
    e->err++;
  if (--e->left == 0)
    e->answered_ns = now;
}

static void on_load_answer(lconn_t *c) {
  if (c->count == 0) {
    fail("a response nobody asked for");
    return;
  }
  pending_t *p = &c->ring[c->head];
  c->head = (c->head + 1) % g.cfg.depth;
  c->count--;
  uint64_t now = uv_hrtime();
  unsigned st = c->rd.status;
  g.status_counts[st / 100 % 6]++;
  bool ok = st == 200 && body_correct(p, &c->rd);
  if (st == 200 && !ok)
    fail("a WRONG answer (200 with outputs that differ from the host's)");
  else if (!ok && st != 500 && st != 503)
    fail("unexpected status %u", st);
  else if (!ok && p->mark < 0 && g.strict_ns[p->epoch] && p->sent_ns > g.strict_ns[p->epoch])
    fail("an error (status %u) for a request sent after recovery", st);
  ok ? g.correct++ : g.errors++;
  if (p->mark >= 0)
    mark_answered(p, ok, now);
  event_t *e = &g.events[g.ev];
  if (ok && g.phase == PH_TRIGGERED && !e->first_correct_ns && p->sent_ns > e->marker_ns) {
    e->first_correct_ns = now;
    g.strict_ns[g.ev + 1] = now; /* a new worker serves: what is sent from now on must be right */
  }
  if (ok)
    g.correct_in_phase++;
}

static int on_load_complete(http_parser *parser) {
  lconn_t *c = (lconn_t *)((char *)parser->data - offsetof(lconn_t, rd));
  on_load_answer(c);
  if (g.phase != PH_DRAIN && g.phase != PH_DONE && !c->closed)
    send_request(c);
  return 0;
}

static void on_load_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  lconn_t *c = stream->data;
  if (c->closed)
    return;
  if (nread < 0) {
    if (c->count || g.phase != PH_DONE)
      fail("the server closed a connection: %s", uv_strerror((int)nread));
    return;
  }
  size_t done = http_parser_execute(&c->rd.parser, &g.settings, buf->base, (size_t)nread);
  if (HTTP_PARSER_ERRNO(&c->rd.parser) != HPE_OK || done != (size_t)nread)
    fail("malformed response: %s", http_errno_description(HTTP_PARSER_ERRNO(&c->rd.parser)));
}

static void on_load_connect(uv_connect_t *req, int status) {
  lconn_t *c = req->data;
  if (status < 0) {
    fail("cannot connect: %s", uv_strerror(status));
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_load_read);
  for (unsigned i = 0; i < g.cfg.depth; i++)
    send_request(c);
}

/* ---- the control connection (one request, one connection) ------------------------------- */

static int on_ctl_complete(http_parser *parser) {
  (void)parser;
  g.ctl_done = true;
  return 0;
}

static void on_ctl_closed(uv_handle_t *handle) {
  (void)handle;
  g.ctl_busy = false;
}

static void on_ctl_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  if (nread > 0)
    http_parser_execute(&g.ctl_rd.parser, &g.ctl_settings, buf->base, (size_t)nread);
  if (nread < 0 && !g.ctl_done)
    fail("the control connection closed before its answer");
  if ((nread < 0 || g.ctl_done) && !uv_is_closing((uv_handle_t *)stream))
    uv_close((uv_handle_t *)stream, on_ctl_closed);
}

static void on_ctl_written(uv_write_t *wr, int status) {
  free(wr);
  if (status < 0)
    fail("cannot send a control request: %s", uv_strerror(status));
}

static void on_ctl_connect(uv_connect_t *req, int status) {
  if (status < 0) {
    fail("control connection: %s", uv_strerror(status));
    if (!uv_is_closing((uv_handle_t *)req->handle))
      uv_close((uv_handle_t *)req->handle, on_ctl_closed);
    return;
  }
  uv_write_t *wr = malloc(sizeof *wr);
  uv_buf_t b = uv_buf_init(g.ctl_req, (unsigned)strlen(g.ctl_req));
  uv_read_start((uv_stream_t *)&g.ctl, on_alloc, on_ctl_read);
  if (!wr || uv_write(wr, (uv_stream_t *)&g.ctl, &b, 1, on_ctl_written) != 0) {
    free(wr);
    fail("cannot send a control request");
  }
}

/* Starts one control request (`Connection: close`); g.ctl_done once answered. */
static void control(const char *method, const char *path) {
  snprintf(g.ctl_req, sizeof g.ctl_req,
           "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
           method, path);
  g.ctl_busy = true;
  g.ctl_done = false;
  g.ctl_rd.len = 0;
  g.ctl_rd.status = 0;
  http_parser_init(&g.ctl_rd.parser, HTTP_RESPONSE);
  g.ctl_rd.parser.data = &g.ctl_rd;
  uv_tcp_init(&g.loop, &g.ctl);
  if (uv_tcp_connect(&g.ctl_connect, &g.ctl, (const struct sockaddr *)&g.addr,
                     on_ctl_connect) != 0) {
    fail("cannot open the control connection");
    uv_close((uv_handle_t *)&g.ctl, on_ctl_closed);
  }
}

/* A sample's value in the /stats body, summed over its label sets; -1 when absent. */
static long stat_value(const char *name) {
  if (!g.ctl_rd.body)
    return -1;
  long sum = -1;
  size_t n = strlen(name);
  for (const char *s = g.ctl_rd.body, *end = s + g.ctl_rd.len; s < end;) {
    const char *eol = memchr(s, '\n', (size_t)(end - s));
    if (!eol)
      eol = end;
    if ((size_t)(eol - s) > n && !strncmp(s, name, n) && (s[n] == ' ' || s[n] == '{')) {
      const char *v = memchr(s, ' ', (size_t)(eol - s));
      sum = (sum < 0 ? 0 : sum) + (v ? strtol(v + 1, NULL, 10) : 0);
    }
    s = eol + 1;
  }
  return sum;
}

/* ---- the events ----------------------------------------------------------------------------- */

/* Marks every request in flight now with the current event. */
static unsigned mark_in_flight(void) {
  unsigned n = 0;
  for (unsigned i = 0; i < g.cfg.connections; i++) {
    lconn_t *c = &g.conns[i];
    for (unsigned k = 0; k < c->count; k++) {
      c->ring[(c->head + k) % g.cfg.depth].mark = (int)g.ev;
      n++;
    }
  }
  return n;
}

static void trigger(void) {
  event_t *e = &g.events[g.ev];
  e->inflight = e->left = mark_in_flight();
  e->t0 = uv_hrtime();
  e->marker_ns = UINT64_MAX; /* a fault: set when its reply comes (the old worker is done) */
  e->fault_status = -1;
  g.phase = PH_TRIGGERED;
  if (e->kill) {
    if (kill(g.pid, SIGKILL) != 0)
      fail("cannot kill the worker (pid %d)", g.pid);
    e->marker_ns = e->t0;
  } else {
    control("POST", "/debug/fault");
  }
}

static void report(const event_t *e, unsigned n) {
  printf("RESULT event=%s n=%u inflight=%u inflight_ok=%u inflight_err=%u answered_us=%llu "
         "first_correct_us=%llu fault_status=%d restarts=%ld\n",
         e->kill ? "kill" : "fault", n, e->inflight, e->ok, e->err,
         (unsigned long long)((e->answered_ns ? e->answered_ns : e->t0) - e->t0) / 1000u,
         (unsigned long long)(e->first_correct_ns - e->t0) / 1000u, e->fault_status,
         e->restarts);
}

static void next_phase(phase_t ph) {
  g.phase = ph;
  g.phase_deadline = uv_hrtime() + (uint64_t)(g.cfg.timeout * 1e9);
  g.correct_in_phase = 0;
}

/* The event's answers are all in: check the restart count. */
static void on_stats_answer(void) {
  event_t *e = &g.events[g.ev];
  e->restarts = stat_value("cuv_infer_worker_restarts_total");
  if (g.ctl_rd.status != 200 || e->restarts != (long)g.ev + 1) {
    fail("GET /stats: cuv_infer_worker_restarts_total is %ld", e->restarts);
    return;
  }
  report(e, g.ev + 1);
  g.ev++;
  next_phase(g.ev == g.nev ? PH_DRAIN : PH_WARM);
}

static void step_triggered(void) {
  event_t *e = &g.events[g.ev];
  if (!e->kill && e->fault_status < 0 && g.ctl_done && !g.ctl_busy) {
    e->fault_status = (int)g.ctl_rd.status;
    e->marker_ns = uv_hrtime();
    if (e->fault_status != 500 && e->fault_status != 503)
      fail("POST /debug/fault answered %d (want an error status)", e->fault_status);
  }
  bool fault_in = e->kill || e->fault_status >= 0;
  if (fault_in && e->left == 0 && e->first_correct_ns && !g.ctl_busy) {
    next_phase(PH_STATS);
    control("GET", "/stats");
  }
}

static void step_warm(void) {
  if (g.correct_in_phase < g.cfg.warmup || g.ctl_busy)
    return;
  if (!g.events[g.ev].kill) {
    trigger();
    return;
  }
  next_phase(PH_PID);
  control("GET", "/stats");
}

static void step_pid(void) {
  if (g.ctl_busy)
    return;
  g.pid = (int)stat_value("cuv_infer_worker_pid");
  if (g.pid <= 0) {
    fail("no worker pid in GET /stats (%d)", g.pid);
    return;
  }
  trigger();
}

static void finish(void) {
  static bool finished;
  if (finished)
    return;
  finished = true;
  if (g.ctl_busy && !uv_is_closing((uv_handle_t *)&g.ctl))
    uv_close((uv_handle_t *)&g.ctl, on_ctl_closed); /* after a failure: do not wait for it */
  uv_timer_stop(&g.tick);
  uv_close((uv_handle_t *)&g.tick, on_closed);
  for (unsigned i = 0; i < g.cfg.connections; i++)
    if (!g.conns[i].closed) {
      g.conns[i].closed = true;
      uv_close((uv_handle_t *)&g.conns[i].tcp, on_closed);
    }
}

static bool all_answered(void) {
  for (unsigned i = 0; i < g.cfg.connections; i++)
    if (g.conns[i].count)
      return false;
  return true;
}

static void on_tick(uv_timer_t *timer) {
  (void)timer;
  if (g.phase != PH_DONE && uv_hrtime() > g.phase_deadline)
    fail("timed out (phase %d)", (int)g.phase);
  switch (g.phase) {
  case PH_WARM: step_warm(); break;
  case PH_PID: step_pid(); break;
  case PH_TRIGGERED: step_triggered(); break;
  case PH_STATS:
    if (!g.ctl_busy)
      on_stats_answer();
    break;
  case PH_DRAIN:
    if (all_answered() && !g.ctl_busy)
      g.phase = PH_DONE;
    break;
  case PH_DONE: break;
  }
  if (g.phase == PH_DONE)
    finish();
}

/* ---- start-up ------------------------------------------------------------------------------- */

static int parse(int argc, char **argv) {
  static const struct option longs[] = {
      {"port", required_argument, NULL, 'p'},  {"connections", required_argument, NULL, 'c'},
      {"depth", required_argument, NULL, 'd'}, {"batch", required_argument, NULL, 'b'},
      {"faults", required_argument, NULL, 'f'}, {"kills", required_argument, NULL, 'k'},
      {"warmup", required_argument, NULL, 'w'}, {"seed", required_argument, NULL, 's'},
      {"timeout", required_argument, NULL, 't'}, {NULL, 0, NULL, 0}};
  g.cfg = (config_t){.port = 8080, .connections = 8, .depth = 8, .batch_min = 1, .batch_max = 8,
                     .faults = 2, .kills = 1, .warmup = 200, .seed = MLP_DEFAULT_SEED,
                     .timeout = 60};
  int ch;
  while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (ch) {
    case 'p': g.cfg.port = atoi(optarg); break;
    case 'c': g.cfg.connections = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'd': g.cfg.depth = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'b':
      if (sscanf(optarg, "%u-%u", &g.cfg.batch_min, &g.cfg.batch_max) != 2)
        g.cfg.batch_min = g.cfg.batch_max = (unsigned)strtoul(optarg, NULL, 10);
      break;
    case 'f': g.cfg.faults = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'k': g.cfg.kills = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'w': g.cfg.warmup = (unsigned)strtoul(optarg, NULL, 10); break;
    case 's': g.cfg.seed = strtoull(optarg, NULL, 0); break;
    case 't': g.cfg.timeout = atof(optarg); break;
    default: return -1;
    }
  }
  const config_t *c = &g.cfg;
  return optind == argc && c->port > 0 && c->port < 65536 && c->connections > 0 && c->depth > 0 &&
                 c->batch_min > 0 && c->batch_min <= c->batch_max && c->batch_max <= MAX_BATCH &&
                 c->faults + c->kills <= MAX_EVENTS && c->timeout > 0
             ? 0
             : -1;
}

static void make_pool(void) {
  mlp_weights_t *w = malloc(sizeof *w);
  if (!w)
    exit(1);
  mlp_weights_init(w, g.cfg.seed);
  uint64_t state = 0x5eed;
  mlp_random_inputs(&pool_in[0][0], sizeof pool_in / sizeof(float), &state);
  mlp_forward(w, POOL_ROWS, &pool_in[0][0], &pool_out[0][0]);
  free(w);
}

static int open_connections(void) {
  g.conns = calloc(g.cfg.connections, sizeof *g.conns);
  if (!g.conns)
    return -1;
  for (unsigned i = 0; i < g.cfg.connections; i++) {
    lconn_t *c = &g.conns[i];
    if (!(c->ring = calloc(g.cfg.depth, sizeof *c->ring)))
      return -1;
    uv_tcp_init(&g.loop, &c->tcp);
    c->tcp.data = c->connect.data = c;
    http_parser_init(&c->rd.parser, HTTP_RESPONSE);
    c->rd.parser.data = &c->rd;
    if (uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&g.addr, on_load_connect))
      return -1;
  }
  return 0;
}

static void settings(http_parser_settings *s, http_cb complete) {
  http_parser_settings_init(s);
  s->on_headers_complete = on_headers;
  s->on_body = on_body;
  s->on_message_complete = complete;
}

int main(int argc, char **argv) {
  if (parse(argc, argv) != 0) {
    fprintf(stderr, "usage: tcp-infer-fault-client --port N [--connections C] [--depth D] "
                    "[--batch MIN-MAX] [--faults F] [--kills K] [--warmup N] [--seed S] "
                    "[--timeout SECONDS]\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  make_pool();
  g.rng = 0x9e3779b97f4a7c15ull;
  g.nev = g.cfg.faults + g.cfg.kills;
  for (unsigned i = 0; i < g.nev; i++)
    g.events[i].kill = i >= g.cfg.faults;
  g.strict_ns[0] = 1; /* before the first event, every answer must be correct */
  settings(&g.settings, on_load_complete);
  settings(&g.ctl_settings, on_ctl_complete);
  uv_loop_init(&g.loop);
  uv_ip4_addr("127.0.0.1", g.cfg.port, &g.addr);
  uv_timer_init(&g.loop, &g.tick);
  next_phase(g.nev ? PH_WARM : PH_DRAIN);
  if (open_connections() != 0)
    fail("cannot open the connections");
  uv_timer_start(&g.tick, on_tick, 1, 1);
  uv_run(&g.loop, UV_RUN_DEFAULT);
  printf("RESULT summary events=%u sent=%llu correct=%llu errors=%llu 5xx=%llu\n", g.ev,
         (unsigned long long)g.sent, (unsigned long long)g.correct,
         (unsigned long long)g.errors, (unsigned long long)g.status_counts[5]);
  if (g.failure) {
    fprintf(stderr, "tcp-infer-fault-client: FAILED: %s\n", g.failure);
    return 1;
  }
  return 0;
}
