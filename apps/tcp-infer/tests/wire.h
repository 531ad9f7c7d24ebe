/* tcp-infer's tests: a blocking HTTP/1.1 client on llhttp (one response read at a time, so that
 * pipelined answers are checked one by one), random batches with their host-computed outputs,
 * and GET /metrics read through the Prometheus parser (prom.h). Shared by the cmocka programs
 * (the probe, the KServe conformance, the batching test); cmocka's asserts report failures. */
#ifndef TCP_INFER_TESTS_WIRE_H
#define TCP_INFER_TESTS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "mlp.h"
#include "prom.h"

extern int wire_port;              /* the server's, on 127.0.0.1 */
extern mlp_weights_t wire_weights; /* the model's (the server's seed) */
extern uint64_t wire_rng;          /* the random inputs' state */

/* The test program's command line (getopt_long): --port N (which tcp-infer-run adds), and
 * --cases NAME when cases is not NULL; --help prints `what` and --version the version, both exit
 * 0; a usage error names the option and exits 2. Then the model's weights (the default seed). */
void wire_init(int argc, char **argv, const char *what, const char **cases);

typedef struct response {
  unsigned status;
  char *body;
  size_t len;
  bool keep_alive;
  bool done;
  long x_batch, content_length, infer_header_len;
  char date[64], allow[64], content_type[64], retry_after[64];
  char field[64], value[64]; /* the header being read (in pieces) */
} response_t;

typedef struct client {
  int fd;
  char buf[1 << 16];
  size_t off, len;
  llhttp_t parser;
  response_t *cur;
  bool head; /* the response read next answers a HEAD: it has no body */
} client_t;

/* A new connection to the server (Nagle off). */
client_t *dial(void);
void hang_up(client_t *c);
/* Closes with a reset (SO_LINGER 0): the abrupt disconnect of a crashed client. */
void reset(client_t *c);
void send_all(client_t *c, const void *data, size_t len);
void send_str(client_t *c, const char *s);
/* A request whose head (ending with its blank line) says Transfer-Encoding: chunked: the body in
 * chunks of `piece` bytes (the first with a chunk extension), then the last chunk and a
 * trailer field. */
void send_chunked(client_t *c, const char *head, const void *body, size_t len, size_t piece);
/* Reads one response; false when the connection ended first (or the bytes were not HTTP). */
bool read_response(client_t *c, response_t *r);
void free_response(response_t *r);
/* After a closing response, the server closes: EOF (or a reset), nothing else. */
void assert_closed(client_t *c);

/* `rows` random input rows and the outputs the host computes for them. */
typedef struct batch {
  unsigned rows;
  float *in, *want;
} batch_t;

batch_t make_batch(unsigned rows);
void free_batch(batch_t *b);
/* POST /infer of the batch's rows (compact form); then its answer: 200 with the host's outputs. */
void wire_send_infer(client_t *c, const batch_t *b);
void wire_expect_ok(client_t *c, const batch_t *b);
/* A KServe inference's answer for one row: 200, its outputs as the host computes them. */
void wire_expect_v2_ok(client_t *c, const batch_t *b);

/* Triton's labels of the model's metrics. */
#define WIRE_MODEL "model=\"mlp\",version=\"1\""

/* GET path (/metrics, /stats) parsed as Prometheus text into *p; the case fails when it does
 * not parse. *text (when not NULL) receives the page (malloc'd). */
void wire_metrics(prom_t *p, const char *path, char **text);
/* A sample's value; the case fails when it is missing. */
double wire_value(const prom_t *p, const char *name, const char *labels);
/* One sample of a fresh GET /metrics. */
double wire_metric(const char *name, const char *labels);

#endif
