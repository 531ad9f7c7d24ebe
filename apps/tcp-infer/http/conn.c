/* tcp-infer: connections. HTTP/1.1 requests are parsed with llhttp; every request gets a place
 * in its connection's queue when its message begins, and responses are written from the head of
 * that queue only, so keep-alive and pipelined requests are answered in order however their GPU
 * work completes. What a request asks for is route.c's to decide, from the head gathered here.
 *
 * Lifetime. A connection is reference counted: one reference for each of its two handles (the
 * socket, the linger timer; dropped by their close callbacks) and one for each request that is
 * not freed yet. Closing it (peer reset, write error, shutdown) frees the requests that are not
 * running; a request whose GPU work is in flight is marked orphan instead and freed by its
 * completion, which never touches the socket. So the connection outlives every callback that
 * refers to it, and a client that goes away mid-request costs nothing but the dropped response.
 *
 * Parser callbacks only change state; the read callback flushes after llhttp_execute returns, so
 * nothing is written or closed while the parser runs.
 *
 * Writing. A read parses every request it holds (pipelined ones included). Ready responses at the
 * head of the queue are serialized, head and body, into the connection's output buffer, and the
 * request is freed; the buffer then goes to the socket in one write: uv_try_write first, which
 * needs no write request, no callback and no epoll_ctl when the socket takes it all (the common
 * case), and uv_write of what is left otherwise. GPU completions only mark their connection dirty:
 * a check handle of the loop (after the poll phase, where the bridge delivers, and after the idle
 * phase, where it polls) flushes each dirty connection once, so the responses that one loop
 * iteration completed on a connection leave in one write. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bodies.h"
#include "conn.h"
#include "backend.h"
#include "flow.h"
#include "kserve.h"
#include "metrics.h"
#include "route.h"
#include "server.h"

#define LINGER_MS 2000           /* after a closing response: wait this long for the peer's EOF */
#define HEAD_MAX RESPONSE_HEAD_MAX /* a response's status line and headers, at most */

/* Serialized responses on their way to the socket: accumulated in conn->out, then written; while
 * a uv_write holds one, the connection holds a reference. */
typedef struct outbuf {
  uv_write_t write;
  conn_t *conn;
  size_t len, cap;
  unsigned responses, by_status[6]; /* counted once written */
  char data[];
} outbuf_t;

struct conn {
  uv_tcp_t tcp;
  uv_timer_t linger;
  uv_shutdown_t shutdown;
  loop_t *lp;
  conn_t *prev, *next; /* the loop's list */
  llhttp_t parser;
  unsigned refs;
  bool closing;   /* uv_close was called */
  bool read_done; /* no more requests are parsed: EOF, closing response, or parse error */
  bool peer_eof;
  bool reading;
  bool lingering;
  bool parsing; /* inside llhttp_execute: no writes, no closing */
  /* flow control (flow.c): its serialized responses not yet taken by the socket; the parser
   * paused after a request with the input it did not parse kept; not read for want of room */
  size_t unsent;
  char *kept;
  size_t kept_len;
  bool parse_paused, resuming, flow_paused;
  request_t *head, *tail; /* requests in arrival order, not yet handed to a write */
  unsigned queued;
  unsigned writing; /* writes in flight */
  outbuf_t *out;    /* serialized, not handed to the socket yet; NULL or empty: nothing */
  outbuf_t *spare;  /* a written buffer kept for the next responses */
  conn_t *next_dirty; /* the loop's connections to flush at its check (lp->dirty) */
  bool dirty;
  request_t *cur;   /* the request being parsed */
  /* the head being parsed: the header being read, and what route.c is told */
  char field[32], value[64];
  size_t field_len, value_len;
  char field_last; /* the field name's last byte */
  bool field_done;
  uint8_t field_kind; /* field_kind_t, once the field is whole */
  char url[128];
  size_t url_len;
  http_head_t msg;
  bool expect_continue;
  /* timeouts.c: when the message being parsed began, and its body; the last read or write; the
   * head's bytes so far (--max-header-bytes) */
  uint64_t msg_start_ms, body_start_ms, active_ms;
  bool headers_done, head_too_large;
  size_t head_bytes;
};

/* ---- references --------------------------------------------------------------------------- */

static void conn_ref(conn_t *c) { c->refs++; }

static void conn_unref(conn_t *c) {
  if (--c->refs > 0)
    return;
  loop_t *lp = c->lp;
  lp->srv->connections--;
  if (c->prev)
    c->prev->next = c->next;
  else
    lp->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  lp->n.open_conns--;
  free(c);
}

static void on_handle_closed(uv_handle_t *handle) { conn_unref(handle->data); }

/* ---- flow control (flow.c decides) -------------------------------------------------------- */

static void on_flush_check(uv_check_t *check);
static void on_flush_idle(uv_idle_t *idle);

/* Bytes a connection of the loop let go of; when that brought the loop under its cap's low-water
 * mark, the connections it paused are resumed at the loop's check (not here: this may run inside
 * a parse or a close). */
static void loop_release(loop_t *lp, size_t bytes) {
  if (!flow_release(lp, bytes))
    return;
  lp->resume_all = true;
  if (lp->flush_check.loop && !uv_is_closing((uv_handle_t *)&lp->flush_check)) {
    uv_check_start(&lp->flush_check, on_flush_check);
    uv_idle_start(&lp->flush_idle, on_flush_idle);
  }
}

/* The connection stops reading for want of room (counted once until it reads again). */
static void conn_pause(conn_t *c, flow_reason_t why) {
  if (c->flow_paused)
    return;
  c->flow_paused = true;
  c->lp->n.paused_conns++;
  c->lp->n.read_pauses[why]++;
}

static void conn_unpause(conn_t *c) {
  if (!c->flow_paused)
    return;
  c->flow_paused = false;
  c->lp->n.paused_conns--;
}

/* ---- requests ----------------------------------------------------------------------------- */

static void request_gpu_done(request_t *req);

static request_t *request_new(conn_t *c) {
  request_t *req = request_take(c->lp);
  if (!req)
    return NULL;
  req->lp = c->lp;
  req->done = request_gpu_done;
  req->conn = c;
  conn_ref(c);
  req->state = REQ_PARSING;
  req->keep_alive = true;
  if (c->tail)
    c->tail->next = req;
  else
    c->head = req;
  c->tail = req;
  c->queued++;
  return req;
}

static void request_free(request_t *req) {
  conn_t *c = req->conn;
  loop_release(c->lp, req->held);
  body_free(c->lp, req->body, req->body_cap);
  kserve_req_free(req->kserve);
  free(req->text);
  cuv_output_release(&req->out);
  stages_discard(req->stage);
  request_give(c->lp, req);
  conn_unref(c);
}

static void queue_remove(conn_t *c, request_t *req) {
  request_t **p = &c->head, *prev = NULL;
  while (*p && *p != req) {
    prev = *p;
    p = &(*p)->next;
  }
  if (!*p)
    return;
  *p = req->next;
  if (c->tail == req)
    c->tail = prev;
  req->next = NULL;
  c->queued--;
}

/* ---- writing responses -------------------------------------------------------------------- */

static void conn_close(conn_t *c);
static void conn_maybe_finish(conn_t *c);
static void conn_resume_reading(conn_t *c);
static void conn_resume(conn_t *c);

/* The buffer's responses were written (status 0) or lost; the buffer is kept as the spare. */
static void outbuf_done(conn_t *c, outbuf_t *ob, int status) {
  loop_t *lp = c->lp;
  if (status < 0)
    lp->n.responses_dropped += ob->responses;
  else
    for (int i = 0; i < 6; i++)
      lp->n.responses_by_status[i] += ob->by_status[i];
  c->active_ms = uv_now(&lp->loop);
  c->unsent -= ob->len;
  loop_release(lp, ob->len);
  ob->len = ob->responses = 0;
  memset(ob->by_status, 0, sizeof ob->by_status);
  if (!c->spare && !c->closing && ob != c->out) {
    c->spare = ob;
  } else if (ob != c->out) {
    free(ob);
  }
}

static void on_write(uv_write_t *w, int status) {
  outbuf_t *ob = w->data;
  conn_t *c = ob->conn;
  c->writing--;
  outbuf_done(c, ob, status);
  if (status < 0)
    conn_close(c);
  else {
    conn_resume(c);
    conn_maybe_finish(c);
  }
  conn_unref(c); /* the write's */
}

/* Room for `more` bytes at the end of the connection's output buffer; NULL without memory. */
static outbuf_t *outbuf_reserve(conn_t *c, size_t more) {
  outbuf_t *ob = c->out;
  if (!ob) {
    ob = c->spare;
    c->spare = NULL;
  }
  size_t need = (ob ? ob->len : 0) + more;
  if (!ob || need > ob->cap) {
    size_t cap = ob && ob->cap ? ob->cap : 4096;
    while (cap < need)
      cap *= 2;
    outbuf_t *grown = realloc(ob, sizeof *grown + cap); /* not in a write: it may move */
    if (!grown) {
      c->out = ob;
      return NULL;
    }
    if (!ob)
      *grown = (outbuf_t){.conn = c};
    grown->cap = cap;
    ob = grown;
  }
  c->out = ob;
  return ob;
}

static char *put(char *p, const char *s, size_t n) {
  memcpy(p, s, n);
  return p + n;
}

#define PUT_LITERAL(p, s) put(p, s, sizeof s - 1)

static char *put_str(char *p, const char *s) { return put(p, s, strlen(s)); }

static char *put_uint(char *p, size_t v) {
  char digits[24];
  size_t n = 0;
  do
    digits[sizeof digits - ++n] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  return put(p, digits + sizeof digits - n, n);
}

#define DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */

/* The Date header's value (RFC 9110's IMF-fixdate), formatted again when the second changed. */
static const char *http_date(loop_t *lp) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  if (ts.tv_sec != lp->date_sec) {
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    strftime(lp->date, sizeof lp->date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    lp->date_sec = ts.tv_sec;
  }
  return lp->date;
}

/* The status line and headers (at most HEAD_MAX bytes), written by hand: snprintf cost the loop
 * about 2,900 instructions per response (bench/tcp-infer-callgrind.sh). */
/* An HTTP status's reason phrase. */
static const char *status_reason(unsigned status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 411: return "Length Required";
  case 413: return "Content Too Large";
  case 408: return "Request Timeout";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 503: return "Service Unavailable";
  default: return "Unknown";
  }
}

static char *put_head(char *p, const request_t *req, size_t body_len, const char *date) {
  p = PUT_LITERAL(p, "HTTP/1.1 ");
  p = put_uint(p, req->status);
  *p++ = ' ';
  p = put_str(p, status_reason(req->status));
  p = PUT_LITERAL(p, "\r\nServer: tcp-infer\r\nDate: ");
  p = put(p, date, DATE_LEN);
  p = PUT_LITERAL(p, "\r\nContent-Type: ");
  p = put_str(p, req->content_type);
  p = PUT_LITERAL(p, "\r\nContent-Length: ");
  p = put_uint(p, body_len);
  p = PUT_LITERAL(p, "\r\n");
  if (req->route == ROUTE_INFER && req->status == 200) {
    p = PUT_LITERAL(p, "X-Batch: ");
    p = put_uint(p, req->batch);
    p = PUT_LITERAL(p, "\r\nX-Out-Dim: ");
    p = put_uint(p, MLP_OUT);
    p = PUT_LITERAL(p, "\r\n");
  }
  if (req->reply_json_len) { /* KServe's binary output: where its JSON part ends */
    p = PUT_LITERAL(p, "Inference-Header-Content-Length: ");
    p = put_uint(p, req->reply_json_len);
    p = PUT_LITERAL(p, "\r\n");
  }
  if (req->extra_header)
    p = put_str(p, req->extra_header);
  if (!req->keep_alive)
    p = PUT_LITERAL(p, "Connection: close\r\n");
  else if (req->http10)
    p = PUT_LITERAL(p, "Connection: keep-alive\r\n");
  return PUT_LITERAL(p, "\r\n");
}

/* Whether the loop's last head was made of a response like req's, in the same second. */
static bool head_cached(const head_cache_t *h, const request_t *req, size_t body_len,
                        int64_t date_sec) {
  return h->len && h->date_sec == date_sec && h->status == req->status &&
         h->route == req->route && h->batch == req->batch && h->body_len == body_len &&
         h->content_type == req->content_type && h->extra_header == req->extra_header &&
         h->reply_json_len == req->reply_json_len && h->keep_alive == req->keep_alive &&
         h->http10 == req->http10;
}

/* The response's head at p, a copy of the loop's last one when it is alike (put_head's numbers
 * and pieces cost the loop about 250 instructions per response; the copy, a tenth of it). */
static char *put_head_cached(loop_t *lp, char *p, const request_t *req, size_t body_len) {
  const char *date = http_date(lp);
  head_cache_t *h = &lp->last_head;
  if (!head_cached(h, req, body_len, lp->date_sec)) {
    h->len = (size_t)(put_head(h->bytes, req, body_len, date) - h->bytes);
    h->status = req->status;
    h->route = req->route;
    h->batch = req->batch;
    h->keep_alive = req->keep_alive;
    h->http10 = req->http10;
    h->content_type = req->content_type;
    h->extra_header = req->extra_header;
    h->body_len = body_len;
    h->reply_json_len = req->reply_json_len;
    h->date_sec = lp->date_sec;
  }
  return put(p, h->bytes, h->len);
}

/* The response's body: the outputs of POST /infer, or the text. */
static const char *response_body(const request_t *req, size_t *len) {
  if (req->route == ROUTE_INFER && req->status == 200) {
    *len = (size_t)req->batch * MLP_OUT * sizeof(float);
    return req->out.data;
  }
  *len = req->text_len;
  return req->text_len ? req->text : NULL;
}

/* Bytes appended to the output buffer: unsent, held by the loop. */
static void hold_unsent(conn_t *c, size_t bytes) {
  c->unsent += bytes;
  flow_hold(c->lp, bytes);
}

/* A request's answer is ready: its bytes are held until the request is freed. */
static void hold_answer(request_t *req) {
  size_t len;
  response_body(req, &len);
  req->held += len;
  flow_hold(req->lp, len);
}

/* Appends the response to the output buffer; false without memory. */
static bool serialize(conn_t *c, const request_t *req) {
  size_t body_len;
  const char *body = response_body(req, &body_len);
  outbuf_t *ob = outbuf_reserve(c, HEAD_MAX + body_len);
  if (!ob)
    return false;
  char *p = put_head_cached(c->lp, ob->data + ob->len, req, body_len);
  if (body_len && !req->head_only) /* HEAD: the head GET would have, no body */
    p = put(p, body, body_len);
  hold_unsent(c, (size_t)(p - ob->data) - ob->len);
  ob->len = (size_t)(p - ob->data);
  ob->responses++;
  ob->by_status[req->status / 100 % 6]++;
  return true;
}

/* Hands the output buffer to the socket: written at once when the socket takes it all (no write
 * request, callback or epoll_ctl), else what is left through uv_write. */
static void conn_send(conn_t *c) {
  outbuf_t *ob = c->out;
  if (!ob || !ob->len || c->closing)
    return;
  uv_buf_t buf = uv_buf_init(ob->data, (unsigned)ob->len);
  int n = c->writing ? UV_EAGAIN : uv_try_write((uv_stream_t *)&c->tcp, &buf, 1);
  if (n == (int)ob->len) {
    outbuf_done(c, ob, 0);
    return;
  }
  if (n < 0 && n != UV_EAGAIN) {
    outbuf_done(c, ob, n);
    conn_close(c);
    return;
  }
  size_t sent = n > 0 ? (size_t)n : 0;
  buf = uv_buf_init(ob->data + sent, (unsigned)(ob->len - sent));
  c->out = NULL;
  ob->write.data = ob;
  if (uv_write(&ob->write, (uv_stream_t *)&c->tcp, &buf, 1, on_write) != 0) {
    outbuf_done(c, ob, UV_EPIPE);
    conn_close(c);
    return;
  }
  c->writing++;
  conn_ref(c); /* until on_write */
}

/* Serializes every ready response at the head of the queue (in order, stopping at the first that
 * is not ready), then writes them. */
static void conn_flush(conn_t *c) {
  if (c->parsing)
    return; /* on_read flushes once the parser returned */
  conn_ref(c);
  while (!c->closing && c->head && c->head->state == REQ_READY) {
    request_t *req = c->head;
    c->head = req->next;
    if (!c->head)
      c->tail = NULL;
    req->next = NULL;
    c->queued--;
    req->state = REQ_WRITING;
    if (!serialize(c, req)) {
      c->lp->n.responses_dropped++;
      request_free(req);
      conn_close(c);
      break;
    }
    stages_written(c->lp, req->stage);
    req->stage = NULL;
    request_free(req);
  }
  conn_send(c);
  conn_resume(c); /* what it sent may make room */
  conn_maybe_finish(c);
  conn_unref(c);
}

/* The loop's check handle: flushes the connections that completions made ready this iteration,
 * once each. The idle handle only keeps the next poll from blocking when a connection became
 * dirty after this iteration's check (in a later check callback). */
static void on_flush_check(uv_check_t *check) {
  loop_t *lp = check->data;
  uv_check_stop(&lp->flush_check);
  uv_idle_stop(&lp->flush_idle);
  conn_t *c = lp->dirty;
  lp->dirty = NULL;
  while (c) {
    conn_t *next = c->next_dirty;
    c->next_dirty = NULL;
    c->dirty = false;
    conn_flush(c);
    conn_unref(c); /* the dirty list's */
    c = next;
  }
  if (!lp->resume_all)
    return;
  lp->resume_all = false; /* the cap's low-water mark: the connections it paused read again */
  for (c = lp->conns; c; c = c->next)
    if (c->flow_paused)
      conn_resume(c); /* a closed one stays listed until its handles' callbacks */
}

static void on_flush_idle(uv_idle_t *idle) { (void)idle; }

/* A response of c became ready outside its read: flushed at the loop's check. */
static void conn_schedule_flush(conn_t *c) {
  loop_t *lp = c->lp;
  if (!lp->flush_check.loop || uv_is_closing((uv_handle_t *)&lp->flush_check)) {
    conn_flush(c); /* the loop is closing its handles: at once */
    return;
  }
  if (c->dirty)
    return;
  c->dirty = true;
  conn_ref(c);
  c->next_dirty = lp->dirty;
  lp->dirty = c;
  uv_check_start(&lp->flush_check, on_flush_check);
  uv_idle_start(&lp->flush_idle, on_flush_idle);
}

/* ---- closing ------------------------------------------------------------------------------ */

/* Closes now: requests not running are freed; running ones become orphans. */
static void conn_close(conn_t *c) {
  if (c->closing)
    return;
  loop_t *lp = c->lp;
  c->closing = true;
  c->read_done = true;
  uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
  uv_close((uv_handle_t *)&c->linger, on_handle_closed);
  if (c->out) { /* serialized, never handed to the socket */
    lp->n.responses_dropped += c->out->responses;
    c->unsent -= c->out->len;
    loop_release(lp, c->out->len);
    free(c->out);
    c->out = NULL;
  }
  loop_release(lp, c->kept_len);
  free(c->kept);
  c->kept = NULL;
  c->kept_len = 0;
  c->parse_paused = false;
  conn_unpause(c);
  free(c->spare);
  c->spare = NULL;
  request_t *req = c->head;
  c->head = c->tail = c->cur = NULL;
  c->queued = 0;
  while (req) {
    request_t *next = req->next;
    req->next = NULL;
    if (req->state != REQ_PARSING)
      lp->n.responses_dropped++;
    if (req->state == REQ_RUNNING) {
      req->orphan = true; /* its completion frees it */
    } else {
      if (req->state == REQ_WAITING) {
        lp->backend->forget(lp, req);
        metrics_request_canceled(lp, req);
      }
      request_free(req);
    }
    req = next;
  }
}

static void on_linger_timeout(uv_timer_t *timer) { conn_close(timer->data); }

static void on_shutdown(uv_shutdown_t *sh, int status) {
  conn_t *c = sh->data;
  if (status < 0)
    conn_close(c);
}

/* Once nothing more will be parsed and every response is written: close. If the peer has not
 * finished sending, shut our side down first and read (discarding) until its EOF or a timeout, so
 * that unread input does not make the kernel reset the connection before it read our response. */
static void conn_maybe_finish(conn_t *c) {
  if (c->closing || !c->read_done || c->head || c->writing || (c->out && c->out->len))
    return;
  if (c->peer_eof || c->lp->stopping) {
    conn_close(c);
    return;
  }
  if (c->lingering)
    return;
  c->lingering = true;
  c->shutdown.data = c;
  if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
    conn_close(c);
    return;
  }
  uv_timer_start(&c->linger, on_linger_timeout, LINGER_MS, 0);
  conn_resume_reading(c);
}

/* ---- HTTP parsing ------------------------------------------------------------------------- */

static void append(char *dst, size_t cap, size_t *len, const char *at, size_t n) {
  size_t room = cap - 1 - *len;
  if (n > room)
    n = room;
  memcpy(dst + *len, at, n);
  *len += n;
  dst[*len] = '\0';
}

static int on_message_begin(llhttp_t *p) {
  conn_t *c = p->data;
  request_t *req = request_new(c);
  if (!req)
    return -1; /* out of memory: a parse error, answered 400 if possible, then closed */
  c->lp->n.requests_total++;
  c->cur = req;
  c->url_len = c->field_len = c->value_len = 0;
  c->url[0] = c->field[0] = c->value[0] = '\0';
  c->field_done = c->expect_continue = false;
  c->field_kind = 0; /* FIELD_OTHER */
  c->msg = (http_head_t){.url = c->url, .x_in_dim = -1, .x_batch = -1, .infer_header_len = -1};
  c->msg_start_ms = uv_now(&c->lp->loop);
  c->headers_done = false;
  c->head_bytes = 0;
  return 0;
}

/* The head's bytes (request line and headers) against --max-header-bytes: over it, the parse
 * stops and the request is answered 431. */
static int count_head(conn_t *c, size_t n) {
  c->head_bytes += n;
  if (c->head_bytes <= c->lp->srv->max_header_bytes)
    return 0;
  c->head_too_large = true;
  return -1;
}

static int on_url(llhttp_t *p, const char *at, size_t n) {
  conn_t *c = p->data;
  if (count_head(c, n) != 0)
    return -1;
  if (c->url_len + n >= sizeof c->url)
    c->msg.url_long = true;
  append(c->url, sizeof c->url, &c->url_len, at, n);
  return 0;
}

static long parse_long(const char *s) {
  char *end;
  long v = strtol(s, &end, 10);
  return end != s && *end == '\0' && v >= 0 ? v : -2;
}

/* The headers route.c is told of; the others' values are not kept. */
typedef enum {
  FIELD_OTHER,
  FIELD_X_IN_DIM,
  FIELD_X_BATCH,
  FIELD_EXPECT,
  FIELD_INFER_HEADER_LEN,
  FIELD_HOST,
} field_kind_t;

/* Whether the field (len bytes) is the header `name` (in lower case), in any case: strcasecmp
 * less its call. */
static bool field_is(const char *field, size_t len, const char *name, size_t name_len) {
  if (len != name_len)
    return false;
  for (size_t i = 0; i < len; i++) {
    char ch = field[i] >= 'A' && field[i] <= 'Z' ? (char)(field[i] - 'A' + 'a') : field[i];
    if (ch != name[i])
      return false;
  }
  return true;
}

#define FIELD_IS(field, len, name) field_is(field, len, name, sizeof name - 1)

/* The field's length first: most headers (Content-Type, Content-Length) are none of these. */
static field_kind_t field_kind(const char *field, size_t len) {
  if (FIELD_IS(field, len, "x-in-dim"))
    return FIELD_X_IN_DIM;
  if (FIELD_IS(field, len, "x-batch"))
    return FIELD_X_BATCH;
  if (FIELD_IS(field, len, "expect"))
    return FIELD_EXPECT;
  if (FIELD_IS(field, len, "inference-header-content-length"))
    return FIELD_INFER_HEADER_LEN;
  if (FIELD_IS(field, len, "host"))
    return FIELD_HOST;
  return FIELD_OTHER;
}

static int on_header_value_complete(llhttp_t *p) {
  conn_t *c = p->data;
  switch ((field_kind_t)c->field_kind) {
  case FIELD_X_IN_DIM: c->msg.x_in_dim = parse_long(c->value); break;
  case FIELD_X_BATCH: c->msg.x_batch = parse_long(c->value); break;
  case FIELD_EXPECT: c->expect_continue = !strcasecmp(c->value, "100-continue"); break;
  case FIELD_INFER_HEADER_LEN: c->msg.infer_header_len = parse_long(c->value); break;
  case FIELD_HOST: c->msg.hosts++; break;
  case FIELD_OTHER: break;
  }
  return 0;
}

/* llhttp takes "Host : x" with the space in the field's name ("Host "), which RFC 9112 refuses:
 * noted for route.c's 400. The field is whole: which header it is, and so whether its value is
 * kept (copying every value cost the loop about 100 instructions per request). */
static int on_header_field_complete(llhttp_t *p) {
  conn_t *c = p->data;
  c->field_done = true;
  if (c->field_last == ' ' || c->field_last == '\t')
    c->msg.field_space = true;
  c->field_kind = (uint8_t)field_kind(c->field, c->field_len);
  return 0;
}

/* A field's first piece starts a new header (its value, if any, was handled). */
static int on_header_field(llhttp_t *p, const char *at, size_t n) {
  conn_t *c = p->data;
  if (count_head(c, n + 4) != 0) /* ": " and CRLF */
    return -1;
  if (c->field_done) {
    c->field_len = c->value_len = 0;
    c->field[0] = c->value[0] = '\0';
    c->field_done = false;
    c->field_kind = FIELD_OTHER;
  }
  append(c->field, sizeof c->field, &c->field_len, at, n);
  c->field_last = n ? at[n - 1] : c->field_last; /* past what field keeps, if long */
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n) {
  conn_t *c = p->data;
  if (count_head(c, n) != 0)
    return -1;
  if (c->field_kind != FIELD_OTHER && c->field_kind != FIELD_HOST)
    append(c->value, sizeof c->value, &c->value_len, at, n);
  return 0;
}

/* "Expect: 100-continue" (curl sends it for larger bodies): answered only when no earlier
 * response is pending, so it can never overtake one; it goes out with the read's flush. */
static void send_continue(conn_t *c) {
  static const char line[] = "HTTP/1.1 100 Continue\r\n\r\n";
  if (c->head != c->cur)
    return;
  outbuf_t *ob = outbuf_reserve(c, sizeof line - 1);
  if (!ob)
    return;
  memcpy(ob->data + ob->len, line, sizeof line - 1);
  ob->len += sizeof line - 1;
  hold_unsent(c, sizeof line - 1);
}

/* route.c decides the request's fate from its head: a body to read (into a buffer of the loop's
 * cache), an error status (its body, if any, is parsed and dropped), or an answer now (413). */
static int on_headers_complete(llhttp_t *p) {
  conn_t *c = p->data;
  request_t *req = c->cur;
  c->msg.method = p->method;
  c->msg.http_major = p->http_major;
  c->msg.http_minor = p->http_minor;
  c->msg.chunked = (p->flags & F_CHUNKED) != 0;
  c->msg.has_length = (p->flags & F_CONTENT_LENGTH) != 0;
  c->msg.content_length = p->content_length;
  c->headers_done = true;
  c->body_start_ms = uv_now(&c->lp->loop);
  if (!route_head(c->lp, req, &c->msg)) {
    c->cur = NULL;
    c->read_done = true;
    return HPE_PAUSED;
  }
  if (req->status || !req->body_cap)
    return 0;
  req->body = body_alloc(c->lp, req->body_cap);
  if (!req->body) {
    req->status = 503;
    return 0;
  }
  req->held += req->body_cap;
  flow_hold(c->lp, req->body_cap);
  if (c->expect_continue)
    send_continue(c);
  return 0;
}

/* A chunked body's next n bytes: room made for them up to the route's limit (req->body_max);
 * past it 413 at once, and the connection stops reading (true: the parse stops). */
static bool chunked_over(conn_t *c, request_t *req, size_t n) {
  if (!req->body_max || !req->body || req->status || n <= req->body_cap - req->body_len)
    return false;
  size_t need = req->body_len + n;
  if (need > req->body_max) {
    route_too_large(c->lp, req, need);
    c->cur = NULL;
    c->read_done = true;
    return true;
  }
  char *grown = body_grow(c->lp, req->body, req->body_len, &req->body_cap, need, req->body_max);
  if (grown)
    req->body = grown;
  else
    req->status = 503; /* out of memory: the rest is read and dropped */
  return false;
}

static int on_body(llhttp_t *p, const char *at, size_t n) {
  conn_t *c = p->data;
  request_t *req = c->cur;
  if (chunked_over(c, req, n))
    return HPE_PAUSED;
  if (req->body && req->status == 0) {
    if (n > req->body_cap - req->body_len)
      n = req->body_cap - req->body_len;
    memcpy(req->body + req->body_len, at, n);
    req->body_len += n;
  }
  return 0;
}

static int on_message_complete(llhttp_t *p) {
  conn_t *c = p->data;
  request_t *req = c->cur;
  c->cur = NULL;
  req->keep_alive = llhttp_should_keep_alive(p);
  req->http10 = p->http_major == 1 && p->http_minor == 0;
  route_message(c->lp, req);
  if (req->state == REQ_READY)
    hold_answer(req);
  if (!req->keep_alive) {
    c->read_done = true;
    return HPE_PAUSED;
  }
  /* Flow control while parsing: one read may hold many requests (1 600 GET /metrics in 64 KiB) */
  flow_reason_t why = flow_over(c->lp, c->queued, c->unsent);
  if (why == FLOW_OK)
    return 0;
  conn_pause(c, why);
  c->parse_paused = true; /* on_read keeps the rest of its input */
  return HPE_PAUSED;
}

void conn_settings_init(llhttp_settings_t *st) {
  llhttp_settings_init(st);
  st->on_message_begin = on_message_begin;
  st->on_url = on_url;
  st->on_header_field = on_header_field;
  st->on_header_field_complete = on_header_field_complete;
  st->on_header_value = on_header_value;
  st->on_header_value_complete = on_header_value_complete;
  st->on_headers_complete = on_headers_complete;
  st->on_body = on_body;
  st->on_message_complete = on_message_complete;
}

/* ---- reading ------------------------------------------------------------------------------ */

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  conn_t *c = handle->data;
  *buf = uv_buf_init(c->lp->read_buf, sizeof c->lp->read_buf);
}

/* The peer sent something the parser refused: answer 400 in turn, then close. */
static void parse_error(conn_t *c, llhttp_errno_t err) {
  request_t *req = c->cur ? c->cur : request_new(c);
  c->cur = NULL;
  c->read_done = true;
  c->lp->n.parse_errors++;
  if (!req) {
    conn_close(c);
    return;
  }
  char message[160];
  req->keep_alive = false;
  if (c->head_too_large) {
    snprintf(message, sizeof message, "request head over %u bytes (request line and headers)",
             c->lp->srv->max_header_bytes);
    respond_error(req, 431, message);
    return;
  }
  snprintf(message, sizeof message, "malformed request: %s (%s)", llhttp_errno_name(err),
           llhttp_get_error_reason(&c->parser));
  respond_error(req, 400, message);
}

/* No protocol switch: the request that asked for one is answered as any other, and nothing
 * after it is read. */
static void upgrade_refused(conn_t *c) {
  c->read_done = true;
  if (c->tail)
    c->tail->keep_alive = false;
}

/* Parses input; returns the bytes parsed: all of them, unless flow control paused the parser
 * after a request (c->parse_paused). */
static size_t conn_parse(conn_t *c, const char *data, size_t len) {
  c->parsing = true;
  llhttp_errno_t err = llhttp_execute(&c->parser, data, len);
  c->parsing = false;
  if (err == HPE_PAUSED && c->parse_paused)
    return (size_t)(llhttp_get_error_pos(&c->parser) - data);
  if (err == HPE_PAUSED_UPGRADE) /* an Upgrade or CONNECT request: answered, then closed */
    upgrade_refused(c);
  else if (err != HPE_OK && err != HPE_PAUSED)
    parse_error(c, err);
  return len;
}

/* The parser paused with input left: kept (the loop's read buffer is the next read's) until the
 * connection has room again. */
static void keep_input(conn_t *c, const char *at, size_t n) {
  if (!n)
    return;
  c->kept = malloc(n);
  if (!c->kept) {
    conn_close(c);
    return;
  }
  memcpy(c->kept, at, n);
  c->kept_len = n;
  flow_hold(c->lp, n);
}

/* The kept input parsed, as far as flow control lets it go this time; what is left stays kept. */
static void parse_kept(conn_t *c) {
  size_t n = c->kept_len, used = n ? conn_parse(c, c->kept, n) : 0;
  if (!c->kept) /* closed meanwhile: freed */
    return;
  if (c->parse_paused && used < n) {
    memmove(c->kept, c->kept + used, n - used);
    c->kept_len = n - used;
    loop_release(c->lp, used);
    return;
  }
  free(c->kept); /* all parsed, or after a closing request: the rest is not read */
  c->kept = NULL;
  c->kept_len = 0;
  loop_release(c->lp, n);
}

/* After a read: a connection over a limit (the request being parsed not counted: one request of
 * each connection always gets in) stops reading until it has room. */
static void stop_if_over(conn_t *c) {
  flow_reason_t why = FLOW_OK;
  if (!c->parse_paused && !c->read_done)
    why = flow_over(c->lp, c->queued - (c->cur != NULL), c->unsent);
  if (!c->parse_paused && why == FLOW_OK)
    return;
  if (why != FLOW_OK)
    conn_pause(c, why);
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->reading = false;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  conn_t *c = stream->data;
  if (c->closing)
    return;
  conn_ref(c);
  c->active_ms = uv_now(&c->lp->loop);
  if (nread > 0 && !c->read_done) {
    size_t used = conn_parse(c, buf->base, (size_t)nread);
    if (c->parse_paused)
      keep_input(c, buf->base + used, (size_t)nread - used);
    if (!c->closing)
      stop_if_over(c);
    conn_flush(c);
  } else if (nread == UV_EOF) {
    c->peer_eof = true;
    if (!c->read_done && c->cur) { /* the peer went away in the middle of a request */
      request_t *req = c->cur;
      c->cur = NULL;
      c->lp->n.truncated++;
      queue_remove(c, req);
      request_free(req);
    }
    c->read_done = true;
    uv_read_stop(stream);
    c->reading = false;
    conn_flush(c);
  } else if (nread < 0) {
    conn_close(c);
  }
  /* nread > 0 after read_done: input after a closing response or a parse error, discarded. */
  conn_unref(c);
}

/* Reads again unless something holds it back: its parser paused, or (when it still parses) the
 * connection over its low-water marks. */
static void conn_resume_reading(conn_t *c) {
  if (c->reading || c->closing || c->peer_eof)
    return;
  if (!c->read_done &&
      (c->parse_paused || !flow_under(c->lp, c->queued - (c->cur != NULL), c->unsent)))
    return;
  conn_unpause(c);
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
    c->reading = true;
}

/* The connection may have room again: its kept input parsed (each request flushed as it goes)
 * while it stays under its low-water marks, then its socket read. Not reentered: conn_flush,
 * which it calls, calls it. */
static void conn_resume(conn_t *c) {
  if (c->resuming || c->parsing || c->closing)
    return;
  c->resuming = true;
  conn_ref(c);
  while (c->parse_paused && !c->closing && !c->read_done &&
         flow_under(c->lp, c->queued, c->unsent)) {
    c->parse_paused = false;
    llhttp_resume(&c->parser);
    parse_kept(c);
    conn_flush(c);
  }
  c->resuming = false;
  conn_resume_reading(c);
  conn_unref(c);
}

/* A new connection of the loop: its handles initialized, its socket not open yet. */
static conn_t *conn_new(loop_t *lp) {
  conn_t *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->lp = lp;
  if (!lp->flush_check.loop && !lp->stopping) { /* the loop's first connection */
    uv_check_init(&lp->loop, &lp->flush_check);
    uv_idle_init(&lp->loop, &lp->flush_idle);
    lp->flush_check.data = lp->flush_idle.data = lp;
  }
  uv_tcp_init(&lp->loop, &c->tcp);
  uv_timer_init(&lp->loop, &c->linger);
  c->tcp.data = c->linger.data = c;
  c->refs = 2; /* the two handles */
  c->active_ms = uv_now(&lp->loop);
  lp->srv->connections++;
  c->next = lp->conns;
  if (lp->conns)
    lp->conns->prev = c;
  lp->conns = c;
  lp->n.open_conns++;
  return c;
}

/* Its socket is open: serve it. */
static void conn_start(conn_t *c) {
  c->lp->n.connections_total++;
  c->lp->gpu->connections++; /* the device's share of the kernel's hash */
  uv_tcp_nodelay(&c->tcp, 1);
  llhttp_init(&c->parser, HTTP_REQUEST, &c->lp->settings);
  c->parser.data = c;
  conn_resume_reading(c);
}

/* Over --max-connections: the connection gets 503 with Retry-After at once and is closed (after
 * the usual linger, so that the peer reads it); nothing it sends is parsed. */
static void conn_refuse(conn_t *c) {
  c->lp->n.connections_refused++;
  c->read_done = true;
  request_t *req = request_new(c);
  if (!req) {
    conn_close(c);
    return;
  }
  req->keep_alive = false;
  req->extra_header = "Retry-After: 1\r\n";
  respond_error(req, 503, "too many connections");
  conn_flush(c);
}

/* An accepted connection (accept.c; fuzz/http.c's socketpair): served, or over the connection
 * cap (server.c lowers it under the descriptor limit) answered 503. */
int conn_open(loop_t *lp, uv_os_sock_t sock) {
  conn_t *c = conn_new(lp);
  if (!c)
    return UV_ENOMEM;
  int rc = lp->stopping ? UV_ECANCELED : uv_tcp_open(&c->tcp, sock);
  if (rc != 0) {
    conn_close(c);
    return rc;
  }
  conn_start(c);
  if (lp->srv->connections > lp->srv->max_connections)
    conn_refuse(c);
  return 0;
}

void conn_close_all(loop_t *lp) {
  for (conn_t *c = lp->conns; c; c = c->next)
    conn_close(c);
}

void conn_loop_close(loop_t *lp) {
  conn_close_all(lp);
  while (lp->dirty) { /* closed: nothing left to flush */
    conn_t *c = lp->dirty;
    lp->dirty = c->next_dirty;
    c->next_dirty = NULL;
    c->dirty = false;
    conn_unref(c);
  }
  if (lp->flush_check.loop && !uv_is_closing((uv_handle_t *)&lp->flush_check)) {
    uv_close((uv_handle_t *)&lp->flush_check, NULL);
    uv_close((uv_handle_t *)&lp->flush_idle, NULL);
  }
  bodies_free(lp);
  requests_free(lp);
}

/* ---- limits (timeouts.c decides, from here) ------------------------------------------------ */

conn_t *conn_first(loop_t *lp) { return lp->conns; }
conn_t *conn_next(const conn_t *c) { return c->next; }

conn_stage_t conn_stage(const conn_t *c, uint64_t *since_ms) {
  if (c->closing || c->lingering || c->read_done)
    return CONN_CLOSING; /* its end is under way, on a clock of its own */
  if (c->cur) {
    *since_ms = c->headers_done ? c->body_start_ms : c->msg_start_ms;
    return c->headers_done ? CONN_BODY : CONN_HEAD;
  }
  if (c->head || c->writing || (c->out && c->out->len))
    return CONN_BUSY; /* answers owed: the GPU work's limits are its own */
  *since_ms = c->active_ms;
  return CONN_IDLE;
}

void conn_expire(conn_t *c) {
  request_t *req = c->cur;
  if (!req) { /* idle: closed quietly, as keep-alive allows */
    conn_close(c);
    return;
  }
  c->cur = NULL;
  c->read_done = true;
  req->keep_alive = false;
  respond_error(req, 408, c->headers_done ? "request timed out: its body came too slowly"
                                          : "request timed out: its head came too slowly");
  conn_flush(c); /* after the answers owed before it, then the connection closes */
}

/* ---- GPU completion ----------------------------------------------------------------------- */

/* A request's GPU work completed (loop thread), its done callback: respond, or free it if its
 * connection is gone. */
static void request_gpu_done(request_t *req) {
  conn_t *c = req->conn;
  loop_t *lp = c->lp;
  req->t_done = uv_hrtime();
  lp->backend->release(lp, req);
  if (req->gpu_status == 0)
    lp->n.gpu_completed++;
  else
    lp->n.gpu_failed++;
  if (req->orphan) { /* counted as dropped when its connection closed */
    metrics_request_done(lp, req);
    request_free(req);
    return;
  }
  route_gpu_result(req);
  hold_answer(req);
  metrics_request_done(lp, req);
  conn_schedule_flush(c); /* with the other responses of this loop iteration */
}
