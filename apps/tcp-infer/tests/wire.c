/* tcp-infer's tests: the blocking HTTP client and the batches (wire.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "tools/v2-client.h"
#include "wire.h"

int wire_port;
mlp_weights_t wire_weights;
uint64_t wire_rng = 0x2545f4914f6cdd1dull;

/* The command line's state for the option callback and the usage. */
static struct {
  const char *what, **cases;
  uint64_t port;
} cmdline;

static void usage(FILE *f) {
  fprintf(f, "usage: %s --port N%s (run it through tcp-infer-run, which adds the port)\n  %s\n"
             "  --help, --version\n",
          cli_name(), cmdline.cases ? " --cases NAME" : "", cmdline.what);
}

static bool option(int ch, void *arg) {
  (void)arg;
  if (ch == 'c' && cmdline.cases)
    return *cmdline.cases = optarg, true;
  if (ch == 'p')
    return cli_uint("--port", optarg, 1, 65535, &cmdline.port);
  cli_usage_error("--cases: no such option here");
  return false;
}

void wire_init(int argc, char **argv, const char *what, const char **cases) {
  static const struct option longs[] = {{"port", required_argument, NULL, 'p'},
                                        {"cases", required_argument, NULL, 'c'},
                                        {"help", no_argument, NULL, 'h'},
                                        {"version", no_argument, NULL, 'V'},
                                        {NULL, 0, NULL, 0}};
  cmdline.what = what;
  cmdline.cases = cases;
  if (cli_parse(argc, argv, "", longs, option, usage, NULL) != 0)
    exit(CLI_USAGE);
  if (optind != argc)
    exit(cli_usage_error("unexpected argument '%s'", argv[optind]));
  if (!cmdline.port || (cases && !*cases))
    exit(cli_usage_error(cases ? "--port and --cases are required" : "--port is required"));
  wire_port = (int)cmdline.port;
  mlp_weights_init(&wire_weights, MLP_DEFAULT_SEED);
}

static void append(char *dst, size_t cap, const char *at, size_t n) {
  size_t len = strlen(dst);
  snprintf(dst + len, cap - len, "%.*s", (int)n, at);
}

static int on_header_field(llhttp_t *p, const char *at, size_t n) {
  response_t *r = ((client_t *)p->data)->cur;
  if (r->value[0]) /* a new header */
    r->field[0] = r->value[0] = '\0';
  append(r->field, sizeof r->field, at, n);
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n) {
  response_t *r = ((client_t *)p->data)->cur;
  append(r->value, sizeof r->value, at, n);
  return 0;
}

static int on_header_value_complete(llhttp_t *p) {
  response_t *r = ((client_t *)p->data)->cur;
  if (!strcasecmp(r->field, "X-Batch"))
    r->x_batch = strtol(r->value, NULL, 10);
  else if (!strcasecmp(r->field, "Content-Length"))
    r->content_length = strtol(r->value, NULL, 10);
  else if (!strcasecmp(r->field, "Date"))
    snprintf(r->date, sizeof r->date, "%s", r->value);
  else if (!strcasecmp(r->field, "Allow"))
    snprintf(r->allow, sizeof r->allow, "%s", r->value);
  else if (!strcasecmp(r->field, "Retry-After"))
    snprintf(r->retry_after, sizeof r->retry_after, "%s", r->value);
  else if (!strcasecmp(r->field, "Content-Type"))
    snprintf(r->content_type, sizeof r->content_type, "%s", r->value);
  else if (!strcasecmp(r->field, "Inference-Header-Content-Length"))
    r->infer_header_len = strtol(r->value, NULL, 10);
  r->field[0] = '\0';
  r->value[0] = 'x'; /* the next field starts a new header */
  return 0;
}

/* A response to HEAD has the headers of GET's, Content-Length included, and no body. */
static int on_headers_complete(llhttp_t *p) { return ((client_t *)p->data)->head ? 1 : 0; }

static int on_body(llhttp_t *p, const char *at, size_t n) {
  response_t *r = ((client_t *)p->data)->cur;
  r->body = realloc(r->body, r->len + n + 1);
  memcpy(r->body + r->len, at, n);
  r->len += n;
  r->body[r->len] = '\0';
  return 0;
}

static int on_message_complete(llhttp_t *p) {
  response_t *r = ((client_t *)p->data)->cur;
  r->status = p->status_code;
  r->keep_alive = llhttp_should_keep_alive(p);
  r->done = true;
  return HPE_PAUSED; /* one response per read_response */
}

static llhttp_settings_t settings = {
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

client_t *dial(void) {
  client_t *c = calloc(1, sizeof *c);
  assert_non_null(c);
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(c->fd >= 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)wire_port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(c->fd, (struct sockaddr *)&addr, sizeof addr), 0);
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  llhttp_init(&c->parser, HTTP_RESPONSE, &settings);
  c->parser.data = c;
  return c;
}

void hang_up(client_t *c) {
  close(c->fd);
  free(c);
}

/* Closes with a reset (SO_LINGER 0): the abrupt disconnect of a crashed client. */
void reset(client_t *c) {
  struct linger lg = {1, 0};
  setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  hang_up(c);
}

void send_all(client_t *c, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
    assert_true(n > 0);
    p += n;
    len -= (size_t)n;
  }
}

void send_str(client_t *c, const char *s) { send_all(c, s, strlen(s)); }

void send_chunked(client_t *c, const char *head, const void *body, size_t len, size_t piece) {
  send_str(c, head);
  const char *p = body;
  for (size_t off = 0; off < len; off += piece) {
    size_t n = len - off < piece ? len - off : piece;
    char line[48];
    snprintf(line, sizeof line, off ? "%zx\r\n" : "%zX;piece=first\r\n", n);
    send_str(c, line);
    send_all(c, p + off, n);
    send_str(c, "\r\n");
  }
  send_str(c, "0\r\nX-Trailer: end\r\n\r\n");
}

/* Reads one response; false when the connection ended first. */
bool read_response(client_t *c, response_t *r) {
  memset(r, 0, sizeof *r);
  r->x_batch = r->content_length = r->infer_header_len = -1;
  c->cur = r;
  for (;;) {
    if (c->off < c->len) {
      llhttp_errno_t err = llhttp_execute(&c->parser, c->buf + c->off, c->len - c->off);
      if (err == HPE_PAUSED) { /* at the end of a response: the rest is the next one's */
        c->off = (size_t)(llhttp_get_error_pos(&c->parser) - c->buf);
        llhttp_resume(&c->parser);
      } else {
        c->off = c->len;
      }
      if (r->done) {
        c->head = false;
        return true;
      }
      if (err != HPE_OK)
        return false;
    }
    c->off = c->len = 0;
    ssize_t n = recv(c->fd, c->buf, sizeof c->buf, 0);
    if (n <= 0)
      return false;
    c->len = (size_t)n;
  }
}

void free_response(response_t *r) {
  free(r->body);
  r->body = NULL;
}

/* After a closing response, the server closes: EOF (or a reset), nothing else. */
void assert_closed(client_t *c) {
  assert_int_equal(c->off, c->len); /* nothing after the last response */
  char byte;
  ssize_t n = recv(c->fd, &byte, 1, 0);
  assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
}

batch_t make_batch(unsigned rows) {
  batch_t b = {rows, malloc((size_t)rows * MLP_IN * sizeof(float)),
               malloc((size_t)rows * MLP_OUT * sizeof(float))};
  assert_non_null(b.in);
  assert_non_null(b.want);
  mlp_random_inputs(b.in, (size_t)rows * MLP_IN, &wire_rng);
  mlp_forward(&wire_weights, rows, b.in, b.want);
  return b;
}

void free_batch(batch_t *b) {
  free(b->in);
  free(b->want);
}


void wire_metrics(prom_t *p, const char *path, char **text) {
  client_t *c = dial();
  char line[128];
  snprintf(line, sizeof line, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
  send_str(c, line);
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 200);
  assert_string_equal(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  hang_up(c);
  if (prom_parse(p, r.body, r.len) != 0)
    fail_msg("%s does not parse: %s", path, p->error);
  if (text)
    *text = r.body;
  else
    free(r.body);
}

double wire_value(const prom_t *p, const char *name, const char *labels) {
  const prom_sample_t *x = prom_find(p, name, labels);
  if (!x)
    fail_msg("%s{%s} missing", name, labels);
  return x ? x->value : 0;
}

double wire_metric(const char *name, const char *labels) {
  prom_t p;
  wire_metrics(&p, "/metrics", NULL);
  double v = wire_value(&p, name, labels);
  prom_free(&p);
  return v;
}

void wire_send_infer(client_t *c, const batch_t *b) {
  char head[128];
  size_t bytes = (size_t)b->rows * MLP_IN * sizeof(float);
  snprintf(head, sizeof head, "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
           bytes);
  send_str(c, head);
  send_all(c, b->in, bytes);
}

void wire_expect_ok(client_t *c, const batch_t *b) {
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 200);
  assert_int_equal(r.len, (size_t)b->rows * MLP_OUT * sizeof(float));
  assert_true(mlp_close_enough((const float *)(const void *)r.body, b->want,
                               (size_t)b->rows * MLP_OUT));
  free_response(&r);
}

void wire_expect_v2_ok(client_t *c, const batch_t *b) {
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 200);
  float out[MLP_OUT];
  char why[128];
  if (v2_response_outputs(r.body, r.len, r.infer_header_len, 1, NULL, out, why, sizeof why) != 0)
    fail_msg("%s", why);
  assert_true(mlp_close_enough(out, b->want, MLP_OUT));
  free_response(&r);
}
