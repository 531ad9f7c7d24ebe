/* tcp-infer-fault-client: drives a `tcp-infer --isolate --debug-fault` server through worker
 * faults, hangs and kills under verified load, checks the recovery and measures it (libuv, one
 * thread).
 *
 *   tcp-infer-fault-client --port N [--connections 8] [--depth 8] [--batch 1-8] [--faults 2]
 *                          [--hangs 0] [--kills 1] [--double-kills 0] [--second-kills 0]
 *                          [--stops 0] [--stop-kills 0]
 *                          [--spare] [--moves] [--warmup 200] [--seed 42] [--timeout 60]
 *
 * Keeps `depth` verified requests pipelined on each connection (inputs from a pool whose outputs
 * were computed on the host, as tcp-infer-client does). For each event in turn (the faults, the
 * hangs, the kills, the double kills, the second kills, the stops, then the stop-kills), once
 * `warmup` correct answers came since the last one, it reads GET /stats (the workers' pids, one
 * per loop; the counters so far) and triggers it:
 *   fault: POST /debug/fault on a control connection (one loop's worker faults);
 *   hang: POST /debug/hang (one loop's worker runs a kernel that never ends; the server's
 *         watchdog, --isolate-timeout, must kill it: the request's answer is then a 503);
 *   kill: SIGKILL to every loop's active worker (cuv_infer_worker_pid{loop="N"});
 *   double-kill: SIGKILL to every loop's active worker and its ready spare together
 *         (cuv_infer_worker_spare_pid): a new process must take over;
 *   second-kill: SIGKILL to every loop's active worker, then, once GET /stats shows each loop's
 *         spare promoted (re-read every 10 ms), SIGKILL to those too, while they replay what the
 *         first ones held;
 *   stop: SIGSTOP to every loop's active worker (its ready spare waited for): it neither answers
 *         nor ends, its socket stays open, so only the server's moves (--stall-suspect-ms, and
 *         --hang-suspect-ms unless 0) can answer what it holds: every request in flight, and
 *         one sent after the stop, must be answered correctly while it is stopped, some by the
 *         spare (X-Worker: spare), and GET /stats must then show the same workers active, a
 *         stall and its moves counted; then SIGCONT, and the event ends once
 *         cuv_infer_worker_late_replies_total counts a late reply per move (dropped: never a
 *         second answer);
 *   stop-kill: the same, then SIGKILL instead of SIGCONT (the spare is promoted).
 * With --spare it first waits until every loop's spare is ready (cuv_infer_worker_spare_ready),
 * and then requires each replacement of a fault, hang or kill to be a promotion
 * (cuv_infer_worker_promotions_total); the double and second kills always wait for the spares.
 * The server marks an answer its loop's spare computed (a request it moved there, --hang-suspect-
 * ms) with `X-Worker: spare`: with --moves, each hang must see such answers, all correct, before
 * the hung request's 503 (the watchdog's kill): the requests stuck behind the hung kernel were
 * moved to the spare rather than waiting for the watchdog.
 * The requests in flight at that moment are marked. The event is over when every marked request
 * was answered, the debug request was answered (with an error status), and a request sent after
 * the worker was certainly replaced (after the debug request's reply, or after the kill) was
 * answered correctly; then GET /stats must count one restart per worker replaced
 * (cuv_infer_worker_restarts_total: one per fault or hang, one per loop per kill, two per loop
 * per second kill; read again while it is short, as a loop may not have seen its worker's end
 * yet). A double kill counts one or two per loop (two when the spare was promoted before its
 * death was seen): its count is read once every loop has a ready worker that is neither of the
 * two killed.
 *
 * Every load answer must be 200 with the host's result: the server replays on the next worker
 * what a faulted, killed or hung worker held, as often as it takes, so no error may reach a load
 * request, in flight at an event or sent during one, even one caught by two events; only the
 * debug request answers an error. No connection
 * may lose a request. Exit 0, or 1 with the reason. Per event one line:
 *   RESULT event=fault n=1 inflight=N inflight_ok=A inflight_err=B answered_us=T1
 *          first_correct_us=T2 debug_status=S restarts=R promoted=P
 * (times from the debug request's send, or the kill; promoted: the replacements of this event
 * that were spares' promotions; a hang adds window_us, window_answers and window_rps: the
 * correct answers from the hang's start until the watchdog killed its worker, and their rate,
 * window_spare: how many of them the spare computed, first_spare_us: when the first came, and
 * spare_max_latency_us: the longest any of them took from its send (a moved request's wait);
 * a second kill adds second_kill_us, when its second kill went; a stop adds held_us, how long
 * its workers were stopped, held_answers and held_spare, the correct answers meanwhile and those
 * the spare computed, first_spare_us and moved, the requests moved), then a RESULT summary line
 * (spare_answers: all the answers marked as the spare's). */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <llhttp.h>
#include <uv.h>

#include "cli.h"
#include "mlp.h"

#define POOL_ROWS 1024
#define MAX_EVENTS 64
#define MAX_BATCH 64

typedef struct config {
  int port;
  unsigned connections, depth, batch_min, batch_max, faults, hangs, kills, warmup;
  unsigned double_kills, second_kills, stops, stop_kills;
  bool spare; /* wait for ready spares before each event; every replacement a promotion */
  bool moves; /* each hang: answers from the spare before the watchdog's kill */
  uint64_t seed;
  double timeout;
} config_t;

static float pool_in[POOL_ROWS][MLP_IN], pool_out[POOL_ROWS][MLP_OUT];

typedef struct pending {
  uint64_t sent_ns;
  unsigned batch;
  int mark;              /* the event it was in flight at, or -1 */
  uint16_t rows[MAX_BATCH];
} pending_t;

/* A response being read: status and body. */
typedef struct reader {
  llhttp_t parser;
  unsigned status;
  char *body;
  size_t len, cap;
  char field[16], value[16]; /* the header being read (truncated: only X-Worker matters) */
  size_t flen, vlen;
  bool from_spare; /* X-Worker: spare */
} reader_t;

typedef struct lconn { /* a load connection */
  uv_tcp_t tcp;
  uv_connect_t connect;
  reader_t rd;
  pending_t *ring;
  unsigned head, count;
  bool closed;
} lconn_t;

typedef enum { PH_WARM, PH_PRE, PH_TRIGGERED, PH_STATS, PH_DRAIN, PH_DONE } phase_t;

typedef enum { EV_FAULT, EV_HANG, EV_KILL, EV_DOUBLE, EV_SECOND, EV_STOP, EV_STOP_KILL } ev_kind_t;
static const char *const kind_names[] = {"fault",       "hang", "kill",     "double-kill",
                                         "second-kill", "stop", "stop-kill"};

/* A stop's steps: its workers stopped, until what was in flight is answered; GET /stats read
 * while they still are; after SIGCONT, until their late replies were counted. */
typedef enum { STOP_HELD, STOP_CHECK, STOP_LATE } stop_step_t;

#define MAX_LOOPS 64

typedef struct event {
  ev_kind_t kind;
  uint64_t t0, marker_ns, answered_ns, first_correct_ns;
  unsigned inflight, left, ok, err;
  unsigned replaced;  /* workers this event replaces: 1, or every loop's for a kill */
  int debug_status;   /* the debug request's HTTP status */
  long restarts, promotions_before, promoted;
  unsigned window_ok; /* a hang: correct answers while it lasted (until its worker was killed) */
  unsigned window_spare;  /* of those, the ones the spare computed */
  uint64_t first_spare_ns, spare_max_ns; /* the first of those; their longest latency */
  uint64_t second_ns; /* a second kill: when its second kill went (0: not yet) */
  stop_step_t stop_step;
  uint64_t released_ns; /* a stop: when its workers got SIGCONT (or SIGKILL) */
  long stalls_before, moved_before, late_before; /* a stop: the counters before it */
  long moved, late_want; /* moves while it held; late replies to see after SIGCONT */
} event_t;

static struct {
  config_t cfg;
  uv_loop_t loop;
  uv_timer_t tick;
  struct sockaddr_in addr;
  lconn_t *conns;
  llhttp_settings_t settings, ctl_settings;
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
  uint64_t sent, correct, errors, status_counts[6];
  long pids[MAX_LOOPS];   /* the loops' active workers, from GET /stats */
  long spare_pids[MAX_LOOPS]; /* their spares */
  unsigned nloops;
  uint64_t spare_answers; /* answers marked X-Worker: spare */
  long restarts_expected; /* so far */
  bool repoll;            /* GET /stats again at repoll_at */
  uint64_t repoll_at;
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

static int on_headers(llhttp_t *p) {
  reader_t *r = p->data;
  r->status = p->status_code;
  r->len = 0;
  return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n) {
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

static int on_message_begin(llhttp_t *p) {
  reader_t *r = p->data;
  r->from_spare = false;
  r->flen = r->vlen = 0;
  return 0;
}

/* Appends a piece of a header's name or value, cut at the buffer's size (NUL-terminated). */
static void append(char *dst, size_t cap, size_t *len, const char *at, size_t n) {
  size_t room = cap - 1 - *len;
  n = n < room ? n : room;
  memcpy(dst + *len, at, n);
  *len += n;
  dst[*len] = '\0';
}

static int on_header_field(llhttp_t *p, const char *at, size_t n) {
  reader_t *r = p->data;
  append(r->field, sizeof r->field, &r->flen, at, n);
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n) {
  reader_t *r = p->data;
  append(r->value, sizeof r->value, &r->vlen, at, n);
  return 0;
}

static int on_header_value_complete(llhttp_t *p) {
  reader_t *r = p->data;
  r->from_spare |= r->flen && r->vlen && !strcasecmp(r->field, "x-worker") &&
                   !strcmp(r->value, "spare");
  r->flen = r->vlen = 0;
  r->field[0] = r->value[0] = '\0';
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

static bool is_stop(ev_kind_t kind) { return kind == EV_STOP || kind == EV_STOP_KILL; }

/* Whether the event still holds its worker: a hung kernel not killed yet, workers stopped. */
static bool window_open(const event_t *e) {
  return e->kind == EV_HANG ? e->debug_status < 0 : is_stop(e->kind) && !e->released_ns;
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
  else if (!ok) /* a worker lost in flight is replayed on the next one: no error may show */
    fail("an error (status %u) for an inference request%s: %.*s", st,
         p->mark >= 0 ? " in flight at an event" : "", (int)(c->rd.len < 120 ? c->rd.len : 120),
         c->rd.body ? c->rd.body : "");
  ok ? g.correct++ : g.errors++;
  g.spare_answers += ok && c->rd.from_spare;
  if (p->mark >= 0)
    mark_answered(p, ok, now);
  event_t *e = &g.events[g.ev];
  if (ok && g.phase == PH_TRIGGERED && window_open(e)) {
    e->window_ok++; /* answered while the hung kernel still ran, or the workers were stopped */
    if (c->rd.from_spare && !e->window_spare++) /* a request moved off the hung worker */
      e->first_spare_ns = now;
    if (c->rd.from_spare && now - p->sent_ns > e->spare_max_ns)
      e->spare_max_ns = now - p->sent_ns;
  }
  if (ok && g.phase == PH_TRIGGERED && !e->first_correct_ns && p->sent_ns > e->marker_ns)
    e->first_correct_ns = now;
  if (ok)
    g.correct_in_phase++;
}

static int on_load_complete(llhttp_t *parser) {
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
  llhttp_errno_t err = llhttp_execute(&c->rd.parser, buf->base, (size_t)nread);
  if (err != HPE_OK)
    fail("malformed response: %s (%s)", llhttp_errno_name(err),
         llhttp_get_error_reason(&c->rd.parser));
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

static int on_ctl_complete(llhttp_t *parser) {
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
    llhttp_execute(&g.ctl_rd.parser, buf->base, (size_t)nread);
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
  llhttp_init(&g.ctl_rd.parser, HTTP_RESPONSE, &g.ctl_settings);
  g.ctl_rd.parser.data = &g.ctl_rd;
  uv_tcp_init(&g.loop, &g.ctl);
  if (uv_tcp_connect(&g.ctl_connect, &g.ctl, (const struct sockaddr *)&g.addr,
                     on_ctl_connect) != 0) {
    fail("cannot open the control connection");
    uv_close((uv_handle_t *)&g.ctl, on_ctl_closed);
  }
}

/* The values of a metric's samples in the /stats body, in order (one per label set, as
 * cuv_infer_worker_pid{loop="N"}); how many there are (more than max are counted, not kept). */
static unsigned stat_values(const char *name, long *out, unsigned max) {
  if (!g.ctl_rd.body)
    return 0;
  unsigned count = 0;
  size_t n = strlen(name);
  for (const char *s = g.ctl_rd.body, *end = s + g.ctl_rd.len; s < end;) {
    const char *eol = memchr(s, '\n', (size_t)(end - s));
    if (!eol)
      eol = end;
    if ((size_t)(eol - s) > n && !strncmp(s, name, n) && (s[n] == ' ' || s[n] == '{')) {
      const char *v = memchr(s, ' ', (size_t)(eol - s));
      if (count < max)
        out[count] = v ? strtol(v + 1, NULL, 10) : 0;
      count++;
    }
    s = eol + 1;
  }
  return count;
}

/* A metric's value, summed over its label sets; -1 when absent. */
static long stat_value(const char *name) {
  long v[MAX_LOOPS], sum = 0;
  unsigned n = stat_values(name, v, MAX_LOOPS);
  for (unsigned i = 0; i < n && i < MAX_LOOPS; i++)
    sum += v[i];
  return n ? sum : -1;
}

/* GET /stats again in 10 ms (what it waits for is not there yet). */
static void repoll(void) {
  g.repoll_at = uv_hrtime() + 10000000u;
  g.repoll = true;
}

/* True while a /stats answer is awaited (a re-poll due is sent here). */
static bool stats_pending(void) {
  if (g.ctl_busy)
    return true;
  if (!g.repoll)
    return false;
  if (uv_hrtime() >= g.repoll_at) {
    g.repoll = false;
    control("GET", "/stats");
  }
  return true;
}

/* ---- the events ----------------------------------------------------------------------------- */

/* Marks every request in flight now with the current event (those it did not mark yet: a second
 * kill marks again); how many it marked. */
static unsigned mark_in_flight(void) {
  unsigned n = 0;
  for (unsigned i = 0; i < g.cfg.connections; i++) {
    lconn_t *c = &g.conns[i];
    for (unsigned k = 0; k < c->count; k++) {
      pending_t *p = &c->ring[(c->head + k) % g.cfg.depth];
      if (p->mark != (int)g.ev) {
        p->mark = (int)g.ev;
        n++;
      }
    }
  }
  return n;
}

static bool is_kill(ev_kind_t kind) {
  return kind == EV_KILL || kind == EV_DOUBLE || kind == EV_SECOND;
}

/* A signal to each loop's process in pids (its active worker, or its spare). */
static void signal_loops(const long *pids, int sig, const char *role) {
  for (unsigned i = 0; i < g.nloops; i++)
    if (pids[i] <= 0 || kill((pid_t)pids[i], sig) != 0)
      fail("cannot signal (%d) loop %u's %s (pid %ld)", sig, i, role, pids[i]);
}

static void kill_loops(const long *pids, const char *role) { signal_loops(pids, SIGKILL, role); }

/* Workers an event replaces per loop (a double kill: at least; a stop none, a stop-kill one). */
static unsigned replaced_per_loop(ev_kind_t kind) {
  return kind == EV_SECOND ? 2 : kind == EV_STOP ? 0 : 1;
}

static void trigger(void) {
  event_t *e = &g.events[g.ev];
  e->inflight = e->left = mark_in_flight();
  e->t0 = uv_hrtime();
  e->marker_ns = UINT64_MAX; /* a debug request: set when its reply comes (the old worker done) */
  e->debug_status = -1;
  e->replaced = is_kill(e->kind) || is_stop(e->kind) ? g.nloops * replaced_per_loop(e->kind) : 1;
  g.phase = PH_TRIGGERED;
  if (is_stop(e->kind)) {
    signal_loops(g.pids, SIGSTOP, "worker");
    e->marker_ns = e->t0;
    return;
  }
  if (!is_kill(e->kind)) {
    control("POST", e->kind == EV_HANG ? "/debug/hang" : "/debug/fault");
    return;
  }
  kill_loops(g.pids, "worker");
  if (e->kind == EV_DOUBLE)
    kill_loops(g.spare_pids, "spare");
  if (e->kind == EV_SECOND)
    control("GET", "/stats"); /* until the spares took over (step_second) */
  else
    e->marker_ns = e->t0;
}

/* A second kill: once GET /stats shows every loop's spare promoted, it is killed too (while it
 * replays what the first held); its answers after that count as the recovery. */
static void step_second(event_t *e) {
  if (stats_pending())
    return;
  long pids[MAX_LOOPS];
  unsigned n = stat_values("cuv_infer_worker_pid", pids, MAX_LOOPS);
  bool promoted = g.ctl_rd.status == 200 && n == g.nloops;
  for (unsigned i = 0; promoted && i < n; i++)
    promoted = pids[i] == g.spare_pids[i];
  if (!promoted) {
    repoll();
    return;
  }
  kill_loops(g.spare_pids, "promoted spare");
  e->second_ns = e->marker_ns = uv_hrtime();
  unsigned more = mark_in_flight();
  e->inflight += more;
  e->left += more;
}

static void report(const event_t *e, unsigned n) {
  printf("RESULT event=%s n=%u inflight=%u inflight_ok=%u inflight_err=%u answered_us=%llu "
         "first_correct_us=%llu debug_status=%d restarts=%ld promoted=%ld",
         kind_names[e->kind], n, e->inflight, e->ok, e->err,
         (unsigned long long)((e->answered_ns ? e->answered_ns : e->t0) - e->t0) / 1000u,
         (unsigned long long)(e->first_correct_ns - e->t0) / 1000u, e->debug_status,
         e->restarts, e->promoted);
  if (e->kind == EV_HANG) { /* the loop's rate while a kernel hung, until the watchdog's kill */
    double s = (double)(e->marker_ns - e->t0) / 1e9;
    printf(" window_us=%llu window_answers=%u window_rps=%.1f window_spare=%u first_spare_us=%llu "
           "spare_max_latency_us=%llu",
           (unsigned long long)(e->marker_ns - e->t0) / 1000u, e->window_ok,
           s > 0 ? e->window_ok / s : 0.0, e->window_spare,
           e->window_spare ? (unsigned long long)(e->first_spare_ns - e->t0) / 1000u : 0ull,
           (unsigned long long)e->spare_max_ns / 1000u);
  }
  if (e->kind == EV_SECOND)
    printf(" second_kill_us=%llu", (unsigned long long)(e->second_ns - e->t0) / 1000u);
  if (is_stop(e->kind)) /* what the spare answered while the workers were stopped */
    printf(" held_us=%llu held_answers=%u held_spare=%u first_spare_us=%llu moved=%ld",
           (unsigned long long)(e->released_ns - e->t0) / 1000u, e->window_ok, e->window_spare,
           e->window_spare ? (unsigned long long)(e->first_spare_ns - e->t0) / 1000u : 0ull,
           e->moved);
  putchar('\n');
}

static void next_phase(phase_t ph) {
  g.phase = ph;
  g.phase_deadline = uv_hrtime() + (uint64_t)(g.cfg.timeout * 1e9);
  g.correct_in_phase = 0;
}

/* A double kill's count is final once every loop has a ready worker that is neither of the two
 * killed (the spare may have been promoted before its death was seen, and replaced again). */
static bool double_settled(void) {
  long pids[MAX_LOOPS], ready[MAX_LOOPS];
  unsigned n = stat_values("cuv_infer_worker_pid", pids, MAX_LOOPS);
  if (n != g.nloops || stat_values("cuv_infer_worker_ready", ready, MAX_LOOPS) != n)
    return false;
  for (unsigned i = 0; i < n; i++)
    if (ready[i] != 1 || pids[i] <= 0 || pids[i] == g.pids[i] || pids[i] == g.spare_pids[i])
      return false;
  return true;
}

/* The event's answers are all in: the restart count must reach one per worker replaced (read
 * again while short: a loop may not have seen its worker's end yet), never more (a double kill:
 * one more per loop at most, read once settled). */
static void step_stats(void) {
  if (stats_pending())
    return;
  event_t *e = &g.events[g.ev];
  long want = g.restarts_expected + (long)e->replaced;
  long most = want + (e->kind == EV_DOUBLE ? (long)g.nloops : 0);
  e->restarts = stat_value("cuv_infer_worker_restarts_total");
  if (g.ctl_rd.status != 200 || e->restarts > most) {
    fail("GET /stats: cuv_infer_worker_restarts_total is %ld, want %ld to %ld", e->restarts, want,
         most);
    return;
  }
  if (e->restarts < want || (e->kind == EV_DOUBLE && !double_settled())) {
    repoll();
    return;
  }
  e->promoted = stat_value("cuv_infer_worker_promotions_total") - e->promotions_before;
  bool single = e->kind == EV_FAULT || e->kind == EV_HANG || e->kind == EV_KILL ||
                is_stop(e->kind); /* a stop: none (the stopped worker kept its role) */
  if ((g.cfg.spare && single && e->promoted != (long)e->replaced) ||
      (e->kind == EV_SECOND && e->promoted < (long)g.nloops)) {
    fail("%s %u: %ld of its %u replacements were spares' promotions", kind_names[e->kind],
         g.ev + 1, e->promoted, e->replaced);
    return;
  }
  g.restarts_expected = e->restarts;
  report(e, g.ev + 1);
  g.ev++;
  next_phase(g.ev == g.nev ? PH_DRAIN : PH_WARM);
}

/* The debug request's answer: a hang ends with its worker killed (503), a fault answers its
 * error (500, or 503); with --moves, the spare answered during the hang. */
static void debug_answered(event_t *e) {
  e->debug_status = (int)g.ctl_rd.status;
  e->marker_ns = uv_hrtime();
  if (e->debug_status != 503 && (e->kind == EV_HANG || e->debug_status != 500))
    fail("POST /debug/%s answered %d (want %s)", kind_names[e->kind], e->debug_status,
         e->kind == EV_HANG ? "503: its worker killed" : "an error status");
  if (g.cfg.moves && e->kind == EV_HANG && !e->window_spare)
    fail("hang %u: no answer came from the spare before the watchdog's kill (nothing stuck "
         "behind the hung kernel was moved)", g.ev + 1);
}

/* While the workers are stopped: the requests they held, and one sent after the stop, were
 * answered (nothing could see the workers end: they did not, their sockets are open), so by the
 * spare; GET /stats must show the same workers active (none replaced, none promoted), the stall
 * and the moves counted. */
static bool stop_held_checked(event_t *e) {
  long pids[MAX_LOOPS];
  unsigned n = stat_values("cuv_infer_worker_pid", pids, MAX_LOOPS);
  bool same = g.ctl_rd.status == 200 && n == g.nloops;
  for (unsigned i = 0; same && i < n; i++)
    same = pids[i] == g.pids[i];
  long restarts = stat_value("cuv_infer_worker_restarts_total");
  e->moved = stat_value("cuv_infer_worker_moved_total") - e->moved_before;
  if (!same || restarts != g.restarts_expected)
    fail("%s %u: a stopped worker was replaced (%ld restarts, want %ld): its requests were "
         "answered only after its end", kind_names[e->kind], g.ev + 1, restarts,
         g.restarts_expected);
  else if (stat_value("cuv_infer_worker_stalls_total") <= e->stalls_before || e->moved <= 0 ||
           !e->window_spare)
    fail("%s %u: no stall seen (%ld moves, %u answers from the spare)", kind_names[e->kind],
         g.ev + 1, e->moved, e->window_spare);
  e->late_want = e->late_before + e->moved;
  return !g.failure;
}

/* Releases the stopped workers: SIGCONT (then their late replies must be counted, and none
 * answered: a second answer would reach a connection as a response nobody asked for, or as
 * the wrong outputs of the next request), or SIGKILL (a stop-kill: then the restarts). */
static void stop_release(event_t *e) {
  e->released_ns = uv_hrtime();
  signal_loops(g.pids, e->kind == EV_STOP ? SIGCONT : SIGKILL, "stopped worker");
  e->stop_step = STOP_LATE;
  if (e->kind == EV_STOP) {
    repoll();
    return;
  }
  next_phase(PH_STATS);
  control("GET", "/stats");
}

static void step_stop(event_t *e) {
  if (e->stop_step == STOP_HELD) {
    if (e->left || !e->first_correct_ns || g.ctl_busy)
      return;
    e->stop_step = STOP_CHECK;
    control("GET", "/stats");
  } else if (stats_pending()) {
    return;
  } else if (e->stop_step == STOP_CHECK) {
    if (stop_held_checked(e))
      stop_release(e);
  } else if (stat_value("cuv_infer_worker_late_replies_total") < e->late_want) {
    repoll(); /* the continued workers still answer what was moved off them */
  } else {
    next_phase(PH_STATS);
    control("GET", "/stats");
  }
}

static void step_triggered(void) {
  event_t *e = &g.events[g.ev];
  if (e->kind == EV_SECOND && !e->second_ns) {
    step_second(e);
    return;
  }
  if (is_stop(e->kind)) {
    step_stop(e);
    return;
  }
  if (!is_kill(e->kind) && e->debug_status < 0 && g.ctl_done && !g.ctl_busy)
    debug_answered(e);
  bool debug_in = is_kill(e->kind) || e->debug_status >= 0;
  if (debug_in && e->left == 0 && e->first_correct_ns && !g.ctl_busy) {
    next_phase(PH_STATS);
    control("GET", "/stats");
  }
}

static void step_warm(void) {
  if (g.correct_in_phase < g.cfg.warmup || g.ctl_busy)
    return;
  next_phase(PH_PRE);
  control("GET", "/stats");
}

/* Before an event: the loops' workers (every one running), the counters so far; with --spare,
 * or for a double or second kill, every loop's spare ready (read again until they are). No wait
 * for the requests the last event caught: the server replays a request as often as it takes. */
static void step_pre(void) {
  if (stats_pending())
    return;
  long spares[MAX_LOOPS];
  unsigned n = stat_values("cuv_infer_worker_pid", g.pids, MAX_LOOPS);
  unsigned nspares = stat_values("cuv_infer_worker_spare_ready", spares, MAX_LOOPS);
  stat_values("cuv_infer_worker_spare_pid", g.spare_pids, MAX_LOOPS);
  event_t *e = &g.events[g.ev];
  bool spare = g.cfg.spare || e->kind == EV_DOUBLE || e->kind == EV_SECOND || is_stop(e->kind);
  long restarts = stat_value("cuv_infer_worker_restarts_total");
  if (g.ctl_rd.status != 200 || n == 0 || n > MAX_LOOPS || restarts != g.restarts_expected) {
    fail("GET /stats before event %u: %u worker pids, %ld restarts (want %ld)", g.ev + 1, n,
         restarts, g.restarts_expected);
    return;
  }
  bool waiting = false;
  for (unsigned i = 0; i < n; i++)
    waiting |= g.pids[i] <= 0 || (spare && (nspares != n || spares[i] != 1));
  if (waiting) {
    repoll();
    return;
  }
  g.nloops = n;
  e->promotions_before = stat_value("cuv_infer_worker_promotions_total");
  e->stalls_before = stat_value("cuv_infer_worker_stalls_total");
  e->moved_before = stat_value("cuv_infer_worker_moved_total");
  e->late_before = stat_value("cuv_infer_worker_late_replies_total");
  trigger();
}

static void finish(void) {
  static bool finished;
  if (finished)
    return;
  finished = true;
  const event_t *e = &g.events[g.ev];
  if (g.ev < g.nev && is_stop(e->kind) && e->t0 && !e->released_ns)
    signal_loops(g.pids, SIGCONT, "stopped worker"); /* after a failure: let the server stop */
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
  case PH_PRE: step_pre(); break;
  case PH_TRIGGERED: step_triggered(); break;
  case PH_STATS: step_stats(); break;
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

static void usage(FILE *f) {
  fprintf(f, "usage: tcp-infer-fault-client --port N [--connections C] [--depth D] "
             "[--batch MIN-MAX] [--faults F] [--hangs H] [--kills K] [--double-kills K] "
             "[--second-kills K] [--stops S] [--stop-kills S] [--spare] [--moves] [--warmup N] "
             "[--seed S] "
             "[--timeout SECONDS]\n"
             "  drives a tcp-infer --isolate --debug-fault server through worker faults, hangs and "
             "kills under\n  verified load; --help, --version\n");
}

/* One option; false after a usage error. */
static bool option(int ch, void *arg) {
  config_t *c = arg;
  uint64_t v;
  switch (ch) {
  case 'p': return cli_uint("--port", optarg, 1, 65535, &v) && (c->port = (int)v, true);
  case 'c': return cli_unsigned("--connections", optarg, 1, 100000, &c->connections);
  case 'd': return cli_unsigned("--depth", optarg, 1, 4096, &c->depth);
  case 'b': return cli_range("--batch", optarg, 1, MAX_BATCH, &c->batch_min, &c->batch_max);
  case 'f': return cli_unsigned("--faults", optarg, 0, MAX_EVENTS, &c->faults);
  case 'k': return cli_unsigned("--kills", optarg, 0, MAX_EVENTS, &c->kills);
  case 'H': return cli_unsigned("--hangs", optarg, 0, MAX_EVENTS, &c->hangs);
  case 'S': c->spare = true; return true;
  case 'M': c->moves = true; return true;
  case 'D': return cli_unsigned("--double-kills", optarg, 0, MAX_EVENTS, &c->double_kills);
  case '2': return cli_unsigned("--second-kills", optarg, 0, MAX_EVENTS, &c->second_kills);
  case 'o': return cli_unsigned("--stops", optarg, 0, MAX_EVENTS, &c->stops);
  case 'O': return cli_unsigned("--stop-kills", optarg, 0, MAX_EVENTS, &c->stop_kills);
  case 'w': return cli_unsigned("--warmup", optarg, 0, 1000000, &c->warmup);
  case 's': return cli_uint("--seed", optarg, 0, UINT64_MAX, &c->seed);
  case 't': return cli_seconds("--timeout", optarg, 0.001, 86400, &c->timeout);
  default: return false;
  }
}

/* 0, or CLI_USAGE after its message. */
static int parse(int argc, char **argv) {
  static const struct option longs[] = {
      {"port", required_argument, NULL, 'p'},  {"connections", required_argument, NULL, 'c'},
      {"depth", required_argument, NULL, 'd'}, {"batch", required_argument, NULL, 'b'},
      {"faults", required_argument, NULL, 'f'}, {"kills", required_argument, NULL, 'k'},
      {"hangs", required_argument, NULL, 'H'},  {"spare", no_argument, NULL, 'S'},
      {"moves", no_argument, NULL, 'M'},       {"double-kills", required_argument, NULL, 'D'},
      {"second-kills", required_argument, NULL, '2'},
      {"stops", required_argument, NULL, 'o'}, {"stop-kills", required_argument, NULL, 'O'},
      {"warmup", required_argument, NULL, 'w'}, {"seed", required_argument, NULL, 's'},
      {"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},      {NULL, 0, NULL, 0}};
  g.cfg = (config_t){.port = 8080, .connections = 8, .depth = 8, .batch_min = 1, .batch_max = 8,
                     .faults = 2, .kills = 1, .warmup = 200, .seed = MLP_DEFAULT_SEED,
                     .timeout = 60};
  if (cli_parse(argc, argv, "", longs, option, usage, &g.cfg) != 0)
    return CLI_USAGE;
  if (optind != argc)
    return cli_usage_error("unexpected argument '%s'", argv[optind]);
  if (g.cfg.faults + g.cfg.hangs + g.cfg.kills + g.cfg.double_kills + g.cfg.second_kills +
          g.cfg.stops + g.cfg.stop_kills >
      MAX_EVENTS)
    return cli_usage_error("--faults, --hangs, the kills and the stops: %d events at most",
                           MAX_EVENTS);
  return 0;
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
    llhttp_init(&c->rd.parser, HTTP_RESPONSE, &g.settings);
    c->rd.parser.data = &c->rd;
    if (uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&g.addr, on_load_connect))
      return -1;
  }
  return 0;
}

static void settings(llhttp_settings_t *s, llhttp_cb complete) {
  llhttp_settings_init(s);
  s->on_message_begin = on_message_begin;
  s->on_header_field = on_header_field;
  s->on_header_value = on_header_value;
  s->on_header_value_complete = on_header_value_complete;
  s->on_headers_complete = on_headers;
  s->on_body = on_body;
  s->on_message_complete = complete;
}

int main(int argc, char **argv) {
  int rc = parse(argc, argv);
  if (rc != 0)
    return rc;
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  make_pool();
  g.rng = 0x9e3779b97f4a7c15ull;
  const unsigned counts[] = {g.cfg.faults,       g.cfg.hangs, g.cfg.kills,     g.cfg.double_kills,
                             g.cfg.second_kills, g.cfg.stops, g.cfg.stop_kills}; /* ev_kind_t */
  for (unsigned k = 0; k < sizeof counts / sizeof counts[0]; k++)
    for (unsigned i = 0; i < counts[k]; i++)
      g.events[g.nev++].kind = (ev_kind_t)k;
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
  printf("RESULT summary events=%u sent=%llu correct=%llu errors=%llu 5xx=%llu "
         "spare_answers=%llu\n",
         g.ev, (unsigned long long)g.sent, (unsigned long long)g.correct,
         (unsigned long long)g.errors, (unsigned long long)g.status_counts[5],
         (unsigned long long)g.spare_answers);
  if (g.failure) {
    fprintf(stderr, "tcp-infer-fault-client: FAILED: %s\n", g.failure);
    return 1;
  }
  return 0;
}
