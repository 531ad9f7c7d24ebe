/* tcp-infer-batching: when a batch leaves, as cmocka cases (TAP), against a server with Triton's
 * dynamic batching set so that each rule shows on its own:
 *
 *   tcp-infer-run tcp-infer --max-batch 64 --coalesce 64 --max-queue-delay-us 1000000 \
 *     --preferred-batch 8,16 -- tcp-infer-batching
 *
 * Requests on several connections join one pending batch, which leaves when its rows equal a
 * preferred size, or reach the largest of them, or fill the batch, or else when its oldest
 * request waited the delay. Each case sends requests whose rows make one rule apply, checks every
 * answer against the host and, through GET /metrics, that exactly one execution of those rows
 * happened and why it left (cuv_infer_batches_by_trigger_total). The delay is long (1 s) so
 * that no batch can reach it by chance while a case sends; a lone request's answer takes at
 * least the delay (a lower bound: the batch cannot leave sooner). */
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

#define DELAY_US 1000000

typedef struct counts {
  double execs, rows, full, preferred, delay, iteration;
} counts_t;

static double trigger(const prom_t *p, const char *name) {
  char labels[64];
  snprintf(labels, sizeof labels, "trigger=\"%s\"", name);
  return wire_value(p, "cuv_infer_batches_by_trigger_total", labels);
}

static counts_t counts(void) {
  prom_t p;
  wire_metrics(&p, "/metrics", NULL);
  assert_true(wire_value(&p, "cuv_infer_batch_queue_delay_seconds", "") == DELAY_US / 1e6);
  counts_t c = {.execs = wire_value(&p, "nv_inference_exec_count", WIRE_MODEL),
                .rows = wire_value(&p, "cuv_infer_exec_rows_sum", WIRE_MODEL),
                .full = trigger(&p, "full"),
                .preferred = trigger(&p, "preferred"),
                .delay = trigger(&p, "delay"),
                .iteration = trigger(&p, "iteration")};
  prom_free(&p);
  return c;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* n requests of the given rows, each on a connection of its own, all sent before any answer is
 * read; every answer checked. Then exactly one execution of their rows, left for `why`. */
static void one_batch(unsigned n, const unsigned *rows, const char *why) {
  enum { MAX = 8 };
  assert_true(n <= MAX);
  counts_t a = counts();
  client_t *c[MAX];
  batch_t b[MAX];
  double total = 0;
  for (unsigned i = 0; i < n; i++) {
    c[i] = dial();
    b[i] = make_batch(rows[i]);
    total += rows[i];
    wire_send_infer(c[i], &b[i]);
  }
  for (unsigned i = 0; i < n; i++) {
    wire_expect_ok(c[i], &b[i]);
    free_batch(&b[i]);
    hang_up(c[i]);
  }
  counts_t z = counts();
  assert_true(z.execs - a.execs == 1);
  assert_true(z.rows - a.rows == total);
  double got[] = {z.full - a.full, z.preferred - a.preferred, z.delay - a.delay,
                  z.iteration - a.iteration};
  static const char *const names[] = {"full", "preferred", "delay", "iteration"};
  for (int t = 0; t < 4; t++)
    assert_true(got[t] == (strcmp(names[t], why) ? 0 : 1));
}

/* 2 + 2 + 2 + 2 rows: the batch leaves when it holds 8, a preferred size. */
static void test_preferred_size(void **state) {
  const unsigned rows[] = {2, 2, 2, 2};
  one_batch(4, rows, "preferred");
}

/* 6 + 6 + 6 rows: 12 is no preferred size, 18 is past the largest (16): it leaves then. */
static void test_largest_preferred(void **state) {
  const unsigned rows[] = {6, 6, 6};
  one_batch(3, rows, "preferred");
}

/* One request of 64 rows fills the batch. */
static void test_full(void **state) {
  const unsigned rows[] = {64};
  one_batch(1, rows, "full");
}

/* One request of 3 rows: nothing else comes, so it leaves when it waited the delay; its answer
 * cannot come sooner than that. */
static void test_delay(void **state) {
  const unsigned rows[] = {3};
  double start = now_s();
  one_batch(1, rows, "delay");
  double waited = now_s() - start;
  print_message("# a lone request answered after %.3f s (delay %.3f s)\n", waited,
                DELAY_US / 1e6);
  assert_true(waited >= DELAY_US / 1e6);
}

/* Triton's pending-request gauge and its CANCELED failures: requests waiting in the pending
 * batch (the delay is long) count as pending, one by one; a client that resets while its request
 * waits takes it out: no longer pending, counted CANCELED, never executed. The others are
 * answered once the delay passed, and nothing is pending after. */
static double pending(void) {
  return wire_metric("nv_inference_pending_request_count", WIRE_MODEL);
}

static double canceled(void) {
  return wire_metric("nv_inference_request_failure",
                     "model=\"mlp\",reason=\"CANCELED\",version=\"1\"");
}

static void wait_pending(double want) {
  while (pending() != want) {
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
}

static void test_pending_and_canceled(void **state) {
  counts_t a = counts();
  double canceled_before = canceled();
  assert_true(pending() == 0);
  client_t *c[3];
  batch_t b[3];
  for (unsigned i = 0; i < 3; i++) {
    c[i] = dial();
    b[i] = make_batch(2);
    wire_send_infer(c[i], &b[i]);
    wait_pending(i + 1);
  }
  reset(c[1]);
  wait_pending(2);
  assert_true(canceled() == canceled_before + 1);
  assert_true(counts().execs == a.execs);
  for (unsigned i = 0; i < 3; i += 2) {
    wire_expect_ok(c[i], &b[i]);
    hang_up(c[i]);
  }
  for (unsigned i = 0; i < 3; i++)
    free_batch(&b[i]);
  assert_true(pending() == 0);
  counts_t z = counts();
  assert_true(z.execs - a.execs == 1);
  assert_true(z.rows - a.rows == 4);
  assert_true(canceled() == canceled_before + 1);
}

int main(int argc, char **argv) {
  wire_init(argc, argv, "when a batch leaves (Triton's dynamic batching), as cmocka cases", NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_preferred_size), cmocka_unit_test(test_largest_preferred),
      cmocka_unit_test(test_full),           cmocka_unit_test(test_delay),
      cmocka_unit_test(test_pending_and_canceled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
