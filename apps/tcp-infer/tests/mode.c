/* tcp-infer-mode: which path the server's inferences take, as the options chose it (options.c:
 * graphs by default where the mode can replay them). Run by tcp-infer-run with the mode the
 * server must report:
 *
 *   tcp-infer-run tcp-infer [OPTIONS] -- tcp-infer-mode --cases graph|cuv|baseline|offload
 *
 * Requests of rows in each bucket of a graph (1, 2, 4 .. 256 rows: one per power of two), one at
 * a time, then pipelined, each answer checked against the host computation of the same rows;
 * then GET /metrics: cuv_infer_mode names the expected mode alone, and cuv_infer_graphs proves
 * the path: "graph" captured a graph for each of the buckets used (they live until the server
 * stops), the others none. With --isolate the counts are the workers' (their reports): read
 * once the reports count every reply the front has read. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire.h"

#define BUCKETS 9 /* the graphs of 1, 2, 4 .. 256 rows: the default --max-batch's buckets */
#define PIPELINED 24

static const char *expected; /* --cases: the mode GET /metrics must name */
static uint64_t rows_rng;    /* the pipelined requests' sizes (xorshift64), seeded per run */

static unsigned random_rows(void) {
  rows_rng ^= rows_rng << 13;
  rows_rng ^= rows_rng >> 7;
  rows_rng ^= rows_rng << 17;
  return 1 + (unsigned)(rows_rng % MLP_DEFAULT_MAX_BATCH);
}

/* One request of `rows` rows on c, answered right. */
static void one(client_t *c, unsigned rows) {
  batch_t b = make_batch(rows);
  wire_send_infer(c, &b);
  wire_expect_ok(c, &b);
  free_batch(&b);
}

/* A request in each bucket (its rows just past the bucket below: 1, 2, 3, 5, 9 .. 129), one at a
 * time so that each is its own execution (a batch of one with --coalesce); then PIPELINED more
 * of random rows on one connection, in order. */
static void serve(void) {
  client_t *c = dial();
  for (unsigned k = 0; k < BUCKETS; k++)
    one(c, k == 0 ? 1 : (1u << (k - 1)) + 1);
  batch_t b[PIPELINED];
  for (unsigned i = 0; i < PIPELINED; i++) {
    b[i] = make_batch(random_rows());
    wire_send_infer(c, &b[i]);
  }
  for (unsigned i = 0; i < PIPELINED; i++) {
    wire_expect_ok(c, &b[i]);
    free_batch(&b[i]);
  }
  hang_up(c);
}

/* --isolate's reports lagging behind the replies read (0 without --isolate: no such gauge). */
static double reports_behind(const prom_t *p) {
  double behind = 0;
  for (size_t i = 0; i < p->n; i++)
    if (!strcmp(p->samples[i].name, "cuv_infer_worker_reports_behind"))
      behind += p->samples[i].value;
  return behind;
}

/* GET /metrics once it counts all the work answered (no time limit of its own: the test's
 * timeout is the bound; a worker reports every 100 ms). */
static void settled_metrics(prom_t *p) {
  for (;;) {
    wire_metrics(p, "/metrics", NULL);
    if (!reports_behind(p))
      return;
    prom_free(p);
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
  }
}

static void test_mode(void **state) {
  serve();
  prom_t p;
  settled_metrics(&p);
  unsigned modes = 0;
  for (size_t i = 0; i < p.n; i++)
    if (!strcmp(p.samples[i].name, "cuv_infer_mode")) {
      print_message("# %s {%s}\n", p.samples[i].name, p.samples[i].labels);
      modes++;
    }
  assert_int_equal(modes, 1);
  char label[64];
  snprintf(label, sizeof label, "mode=\"%s\"", expected);
  assert_true(wire_value(&p, "cuv_infer_mode", label) == 1);
  double graphs = wire_value(&p, "cuv_infer_graphs", "");
  print_message("# cuv_infer_graphs %.0f\n", graphs);
  if (!strcmp(expected, "graph"))
    assert_true(graphs >= BUCKETS);
  else
    assert_true(graphs == 0);
  assert_true(wire_value(&p, "cuv_infer_gpu_failed_total", "") == 0);
  prom_free(&p);
}

int main(int argc, char **argv) {
  wire_init(argc, argv, "which path the inferences take (--cases: the mode expected)", &expected);
  uint64_t seed = (uint64_t)time(NULL);
  wire_rng ^= seed * 0x9e3779b97f4a7c15ull; /* fresh inputs each run; nonzero: xorshift's state */
  rows_rng = seed | 1;
  printf("# seed %llu\n", (unsigned long long)seed);
  static const char *const modes[] = {"graph", "cuv", "baseline", "offload"};
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
    if (!strcmp(expected, modes[i])) {
      const struct CMUnitTest tests[] = {cmocka_unit_test(test_mode)};
      return cmocka_run_group_tests_name(expected, tests, NULL, NULL);
    }
  fprintf(stderr, "tcp-infer-mode: --cases: graph, cuv, baseline or offload\n");
  return 2;
}
