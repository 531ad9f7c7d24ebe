/* tcp-infer-devices: a server on several devices (--devices), as cmocka cases (TAP), one case
 * chosen with --cases:
 *
 *   connections  48 connections, a request each, every answer checked against the host; every
 *                device answered some (cuv_infer_device_requests_total{device="N"}), and the
 *                devices' counts add up to the answers
 *   pipelined    one connection, 16 requests pipelined, 8 times: one connection belongs to one
 *                loop, so every device answering some is work stealing (--balance steal, with
 *                --workspaces 1 and a slow simulated layer so that the loop's own is busy)
 *   fault        --isolate --debug-fault --loops 1: a connection on each device (told apart by
 *                the device's request count), a sticky fault in device 0's worker; device 1's
 *                worker (the same pid) answers at once and device 0's again after its failover
 *
 *   tcp-infer-run tcp-infer --devices 2 -- tcp-infer-devices --cases connections */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define DEVICES_MAX 16

static const char *which;

typedef struct counts {
  unsigned n;
  double requests[DEVICES_MAX], stolen, success;
} counts_t;

static double device_value(const prom_t *p, const char *name, unsigned d) {
  char labels[32];
  snprintf(labels, sizeof labels, "device=\"%u\"", d);
  return wire_value(p, name, labels);
}

static counts_t counts(void) {
  prom_t p;
  wire_metrics(&p, "/metrics", NULL);
  counts_t c = {.n = (unsigned)wire_value(&p, "cuv_infer_devices", ""),
                .success = wire_value(&p, "nv_inference_request_success", WIRE_MODEL)};
  assert_true(c.n >= 1 && c.n <= DEVICES_MAX);
  for (unsigned d = 0; d < c.n; d++) {
    c.requests[d] = device_value(&p, "cuv_infer_device_requests_total", d);
    c.stolen += device_value(&p, "cuv_infer_device_stolen_total", d);
  }
  prom_free(&p);
  return c;
}

/* One checked request on c. */
static void one(client_t *c, unsigned rows) {
  batch_t b = make_batch(rows);
  wire_send_infer(c, &b);
  wire_expect_ok(c, &b);
  free_batch(&b);
}

/* Every device answered some of what was sent between a and z, and they add up to it. */
static void every_device(const counts_t *a, const counts_t *z, double sent) {
  double sum = 0;
  for (unsigned d = 0; d < z->n; d++) {
    print_message("# device %u: %.0f requests\n", d, z->requests[d] - a->requests[d]);
    assert_true(z->requests[d] > a->requests[d]);
    sum += z->requests[d] - a->requests[d];
  }
  assert_true(sum == sent);
  assert_true(z->success - a->success == sent);
}

static void test_connections(void **state) {
  (void)state;
  enum { CONNS = 48 };
  counts_t a = counts();
  client_t *c[CONNS];
  for (unsigned i = 0; i < CONNS; i++)
    c[i] = dial();
  for (unsigned i = 0; i < CONNS; i++) {
    one(c[i], 1 + i % 16);
    hang_up(c[i]);
  }
  counts_t z = counts();
  assert_true(z.n >= 2);
  every_device(&a, &z, CONNS);
}

static void test_pipelined(void **state) {
  (void)state;
  enum { DEPTH = 16, ROUNDS = 8 };
  counts_t a = counts();
  client_t *c = dial();
  for (unsigned r = 0; r < ROUNDS; r++) {
    batch_t b[DEPTH];
    for (unsigned i = 0; i < DEPTH; i++) {
      b[i] = make_batch(1 + (r + i) % 8);
      wire_send_infer(c, &b[i]);
    }
    for (unsigned i = 0; i < DEPTH; i++) {
      wire_expect_ok(c, &b[i]);
      free_batch(&b[i]);
    }
  }
  hang_up(c);
  counts_t z = counts();
  assert_true(z.n >= 2);
  every_device(&a, &z, DEPTH * ROUNDS);
  print_message("# stolen executions: %.0f\n", z.stolen - a.stolen);
  assert_true(z.stolen > a.stolen);
}

/* The device whose count one checked request on c raised. */
static unsigned device_of(client_t *c) {
  counts_t a = counts();
  one(c, 4);
  counts_t z = counts();
  for (unsigned d = 0; d < z.n; d++)
    if (z.requests[d] > a.requests[d])
      return d;
  fail_msg("no device counted the request");
  return 0;
}

static double worker_pid(unsigned loop) {
  char labels[32];
  snprintf(labels, sizeof labels, "loop=\"%u\"", loop);
  return wire_metric("cuv_infer_worker_pid", labels);
}

static void test_fault(void **state) {
  (void)state;
  enum { TRIES = 64 };
  client_t *on[2] = {NULL, NULL}, *spare[TRIES];
  unsigned nspare = 0;
  while ((!on[0] || !on[1]) && nspare < TRIES) {
    client_t *c = dial();
    unsigned d = device_of(c);
    if (d < 2 && !on[d])
      on[d] = c;
    else
      spare[nspare++] = c;
  }
  assert_non_null(on[0]);
  assert_non_null(on[1]);
  double pid1 = worker_pid(1); /* --loops 1: loop d is device d's */
  send_str(on[0], "POST /debug/fault HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  response_t r;
  assert_true(read_response(on[0], &r));
  print_message("# device 0's fault answered %u\n", r.status);
  assert_true(r.status >= 500);
  free_response(&r);
  for (unsigned i = 0; i < 8; i++)
    one(on[1], 1 + i); /* device 1 serves on */
  assert_true(worker_pid(1) == pid1);
  one(on[0], 3); /* device 0 after its failover (a spare, or a new worker) */
  for (unsigned i = 0; i < nspare; i++)
    hang_up(spare[i]);
  hang_up(on[0]);
  hang_up(on[1]);
}

int main(int argc, char **argv) {
  wire_init(argc, argv, "a server on several devices (--devices), as cmocka cases", &which);
  const struct CMUnitTest all[] = {cmocka_unit_test(test_connections),
                                   cmocka_unit_test(test_pipelined), cmocka_unit_test(test_fault)};
  const char *names[] = {"connections", "pipelined", "fault"};
  for (size_t i = 0; i < 3; i++)
    if (!strcmp(which, names[i])) {
      const struct CMUnitTest chosen[] = {all[i]};
      return cmocka_run_group_tests_name(names[i], chosen, NULL, NULL);
    }
  fprintf(stderr, "tcp-infer-devices: --cases: connections, pipelined or fault\n");
  return 2;
}
