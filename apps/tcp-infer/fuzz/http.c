/* apps/tcp-infer/fuzz/http.c: bytes to tcp-infer's request handling (conn.c and route.c:
 * llhttp, routing, body validation, pipelining, responses in order, closing), without a network.
 *
 * The server adopts one end of a socketpair as a connection (conn_open); the harness writes the
 * request bytes to the other end in reads of the sizes the input chooses, runs the loop after
 * each, and reads back everything the server writes. The GPU is this file's stand-in for the
 * backends (backend.h's table): requests start at once while a workspace is free and wait
 * otherwise, some are refused, and the input says when the running ones complete, in which order,
 * and which fail; so pipelined responses waiting for earlier ones, orphans of a closed connection
 * and the refused path all run.
 *
 * Input: byte 0 sets the run (workspaces 1-4, refusals, how it ends); byte 1 is the number of
 * control bytes that follow; each control byte is one read (its low 6 bits: the read's size,
 * 0-63 bytes) and what happens after it (high 2 bits: nothing, the oldest running request
 * completes, the newest fails, the peer shuts its side down); the rest of the input is the byte
 * stream, whatever the control bytes did not read is written as one last read.
 *
 * The oracle: no crash and no leak (the sanitizers); a request the server starts has a complete
 * body of `batch` whole rows, batch within the maximum; everything the server writes parses as
 * HTTP/1.1 responses with a status the protocol names (the peer parses the bytes it sends too,
 * so that it knows which responses answer a HEAD and have no body); once the connection is gone,
 * nothing of it is left (requests, waiting queue, counters of open connections). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend.h"
#include "batch.h"
#include "conn.h"
#include "fuzz.h"
#include "isolate-metrics.h"
#include "server.h"

#define MAX_BATCH 4
#define MAX_RUNNING 64

#define CHECK(cond)                                                                               \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "http.c:%d: check failed: %s\n", __LINE__, #cond);                    \
      abort();                                                                                    \
    }                                                                                             \
  } while (0)

/* CUV_FUZZ_TRACE=1: the responses and the end state on stderr, to read what an input does. */
static bool tracing;

static server_t srv;
static loop_t lp; /* one loop, driven by the harness */

/* ---- the GPU's stand-in (a backend, backend.h) ---- */

static struct {
  request_t *running[MAX_RUNNING]; /* in start order */
  size_t nrunning;
  size_t workspaces;
  unsigned refuse_every, starts; /* every refuse_every-th start is refused (0: none) */
} gpu;

static void gpu_run(request_t *req) {
  req->state = REQ_RUNNING;
  lp.n.gpu_submitted++;
  if (gpu.refuse_every && ++gpu.starts % gpu.refuse_every == 0) {
    req->gpu_status = CUV_ECLOSED; /* as a closing bridge refuses: answered 503 at once */
    lp.n.refused++;
    req->done(req);
    return;
  }
  CHECK(gpu.nrunning < MAX_RUNNING);
  gpu.running[gpu.nrunning++] = req;
}

static void gpu_submit(loop_t *l, request_t *req) {
  CHECK(l == &lp && req->lp == &lp);
  CHECK(route_runs_model(req->route) && req->status == 0);
  CHECK(req->batch >= 1 && req->batch <= MAX_BATCH);
  /* a chunked body's buffer may be larger than the body (it doubles as chunks come) */
  CHECK(req->body && req->body_len <= req->body_cap);
  CHECK(req->body_len == (size_t)req->batch * MLP_IN * sizeof(float));
  if (gpu.nrunning >= gpu.workspaces) {
    req->state = REQ_WAITING;
    req->next_wait = NULL;
    if (lp.wait.tail)
      lp.wait.tail->next_wait = req;
    else
      lp.wait.head = req;
    lp.wait.tail = req;
    lp.n.waiting++;
    return;
  }
  gpu_run(req);
}

static void gpu_forget(loop_t *l, request_t *req) {
  request_t **p = &lp.wait.head, *prev = NULL;
  while (*p && *p != req) {
    prev = *p;
    p = &(*p)->next_wait;
  }
  CHECK(*p); /* only waiting requests are forgotten */
  *p = req->next_wait;
  if (lp.wait.tail == req)
    lp.wait.tail = prev;
  lp.n.waiting--;
}

static void gpu_release(loop_t *l, request_t *req) {
  size_t i = 0;
  while (i < gpu.nrunning && gpu.running[i] != req)
    i++;
  if (i == gpu.nrunning)
    return; /* refused: it never ran */
  memmove(&gpu.running[i], &gpu.running[i + 1], (gpu.nrunning - i - 1) * sizeof gpu.running[0]);
  gpu.nrunning--;
  request_t *next = lp.wait.head;
  if (next && !lp.stopping) {
    lp.wait.head = next->next_wait;
    if (!lp.wait.head)
      lp.wait.tail = NULL;
    lp.n.waiting--;
    gpu_run(next);
  }
}

/* The harness's backend (backend.h): the stand-in above, set up with the loop. */
static const backend_t gpu_backend = {
    .name = "fuzz", .submit = gpu_submit, .forget = gpu_forget, .release = gpu_release};

/* GET /stats: the harness has no worker process (isolate-metrics.c) and does not batch
 * (batch.c), so it has none of their metrics. */
void isolate_metrics(const server_t *s, FILE *f) {}
bool isolate_report(const server_t *s, union report_words *words) { return false; }
void batch_metrics(const server_t *s, FILE *f) {}

/* The GPU finished running request i: with its outputs, or failed. */
static void gpu_complete(size_t i, bool ok) {
  request_t *req = gpu.running[i];
  req->gpu_status = ok ? 0 : CUV_ECUDA(1 /* CUDA_ERROR_INVALID_VALUE */);
  if (ok) {
    size_t bytes = (size_t)req->batch * MLP_OUT * sizeof(float);
    float *out = calloc(1, bytes);
    CHECK(out);
    req->out = (cuv_output_t){out, free, out};
  }
  req->done(req);
}

/* ---- the peer: writes requests, reads and checks responses ---- */

#define MAX_SENT 4096 /* requests whose head the peer sent, HEAD or not, in order */

static struct {
  int fd;
  llhttp_t parser, sent; /* the responses read; the requests written */
  llhttp_settings_t settings, sent_settings;
  bool head[MAX_SENT]; /* per request whose head is complete: a HEAD */
  unsigned heads, responses;
  bool eof;
} peer;

/* The requests the peer writes, parsed as the server parses them: the n-th final response
 * answers the n-th request whose head was complete (or the one a parse error cut short). */
static int on_sent_head(llhttp_t *p) {
  if (peer.heads < MAX_SENT)
    peer.head[peer.heads++] = p->method == HTTP_HEAD;
  return 0;
}

static int on_response_headers(llhttp_t *p) {
  if (tracing)
    fprintf(stderr, "response %u\n", p->status_code);
  switch (p->status_code) {
  case 100:
    return 0; /* not a final response */
  case 200: case 400: case 404: case 405: case 411: case 413: case 431: case 500: case 503:
    break;
  default:
    fprintf(stderr, "http.c: response status %u\n", p->status_code);
    abort();
  }
  unsigned n = peer.responses;
  return n < peer.heads && n < MAX_SENT && peer.head[n] ? 1 : 0; /* 1: no body */
}

static int on_response_complete(llhttp_t *p) {
  if (p->status_code != 100)
    peer.responses++;
  return 0;
}

/* Reads what the server wrote so far and parses it. */
static void peer_read(void) {
  char buf[16384];
  for (;;) {
    ssize_t n = recv(peer.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    if (n <= 0) { /* EOF, or reset by a server that closed with input unread */
      peer.eof = true;
      return;
    }
    llhttp_errno_t err = llhttp_execute(&peer.parser, buf, (size_t)n);
    if (err != HPE_OK) {
      fprintf(stderr, "http.c: the server wrote a malformed response: %s (%s)\n",
              llhttp_errno_name(err), llhttp_get_error_reason(&peer.parser));
      abort();
    }
  }
}

static void turn(void) {
  uv_run(&lp.loop, UV_RUN_NOWAIT);
  peer_read();
}

static void peer_write(const uint8_t *data, size_t len) {
  llhttp_execute(&peer.sent, (const char *)data, len); /* its errors are the server's to find */
  for (int tries = 0; len > 0 && !peer.eof; tries++) {
    CHECK(tries < 10000); /* a server that never reads again */
    ssize_t n = send(peer.fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      turn(); /* a server that stopped reading (back-pressure) reads on once it answered */
      if (gpu.nrunning)
        gpu_complete(0, true);
      continue;
    }
    if (n <= 0)
      return; /* the server closed its end */
    data += n;
    len -= (size_t)n;
  }
  turn();
}

/* ---- the target ---- */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  signal(SIGPIPE, SIG_IGN);
  tracing = getenv("CUV_FUZZ_TRACE") != NULL;
  CHECK(uv_loop_init(&lp.loop) == 0);
  lp.srv = &srv;
  lp.backend = &gpu_backend;
  srv.loops = &lp;
  srv.nloops = srv.ndevices = srv.loops_per_device = 1;
  srv.gpus[0] = (gpu_t){.srv = &srv};
  lp.gpu = &srv.gpus[0];
  srv.max_batch = MAX_BATCH;
  /* the seeded MLP's shape (no weights: the GPU part is this file's stand-in) */
  static model_t mlp = {.name = "mlp", .ready = true, .nlayers = 2, .relu = true,
                        .dims = {MLP_IN, MLP_HIDDEN, MLP_OUT}, .max_batch = MAX_BATCH};
  srv.models = &mlp;
  srv.nmodels = 1;
  srv.workspaces_per_loop = srv.front_workspaces = 4;
  srv.workspace_rows = MAX_BATCH;
  srv.mode_name = "cuv";
  srv.max_header_bytes = 512; /* small: heads over it (431) are within the inputs' reach */
  srv.max_connections = 16;
  srv.max_conn_requests = 8; /* small: flow control's pauses within the inputs' reach too */
  srv.max_conn_unsent = 16384;
  srv.max_buffered = 1u << 20;
  conn_settings_init(&lp.settings);
  llhttp_settings_init(&peer.settings);
  peer.settings.on_headers_complete = on_response_headers;
  peer.settings.on_message_complete = on_response_complete;
  llhttp_settings_init(&peer.sent_settings);
  peer.sent_settings.on_headers_complete = on_sent_head;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  uint8_t run = data[0];
  size_t ncontrol = data[1] % 32;
  if (size < 2 + ncontrol)
    return 0;
  const uint8_t *control = data + 2, *stream = data + 2 + ncontrol;
  size_t len = size - 2 - ncontrol;

  gpu.workspaces = 1 + (run & 3);
  gpu.refuse_every = (run >> 2) & 3;
  gpu.starts = 0;
  int fds[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  CHECK(conn_open(&lp, fds[0]) == 0);
  peer.fd = fds[1];
  peer.eof = false;
  peer.responses = peer.heads = 0;
  llhttp_init(&peer.parser, HTTP_RESPONSE, &peer.settings);
  llhttp_init(&peer.sent, HTTP_REQUEST, &peer.sent_settings);
  bool shut = false;

  for (size_t i = 0; i < ncontrol; i++) {
    size_t n = control[i] & 63;
    if (n > len)
      n = len;
    if (!shut)
      peer_write(stream, n);
    stream += n;
    len -= n;
    switch (control[i] >> 6) {
    case 1:
      if (gpu.nrunning)
        gpu_complete(0, true);
      break;
    case 2:
      if (gpu.nrunning)
        gpu_complete(gpu.nrunning - 1, false);
      break;
    case 3:
      if (!shut)
        shutdown(peer.fd, SHUT_WR);
      shut = true;
      break;
    default: break;
    }
    turn();
  }
  if (!shut)
    peer_write(stream, len);

  /* The end: the peer hangs up or not; the connection closes before or after the GPU is done. */
  if (run & 0x10)
    shutdown(peer.fd, SHUT_WR);
  turn();
  if (run & 0x20)
    conn_close_all(&lp); /* running requests become orphans, freed by their completion */
  while (gpu.nrunning) {
    gpu_complete(0, !(run & 0x40));
    turn();
  }
  conn_close_all(&lp);
  uv_run(&lp.loop, UV_RUN_DEFAULT);
  peer_read();
  close(peer.fd);
  if (tracing)
    fprintf(stderr, "%u responses; %llu requests, %llu parse errors so far\n", peer.responses,
            (unsigned long long)lp.n.requests_total, (unsigned long long)lp.n.parse_errors);

  CHECK(!lp.conns && lp.n.open_conns == 0);
  CHECK(!lp.wait.head && !lp.wait.tail && lp.n.waiting == 0);
  CHECK(gpu.nrunning == 0);
  CHECK(lp.n.buffered_bytes == 0 && lp.n.paused_conns == 0); /* flow control's counts */
  return 0;
}
