#ifndef CUVT_COMMON_H
#define CUVT_COMMON_H

/* Shared by the test suites. A scenario file is built once and run twice: in suite `sim`
 * (CUV_DRIVER=sim) and in suite `gpu` (the real driver; the whole file is reported skipped where
 * no GPU is found). Only the public API is used here, so API tests can link the shared library. */

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cuv.h>
#include <cuv/sim.h>

/* Loads the suite's driver and the test kernels. In the gpu suite without a GPU it prints the
 * TAP plan "1..0 # SKIP" and exits 0, so the file counts as skipped. Call first in main(). */
void cuvt_init(void);
int cuvt_is_sim(void);
cuv_device_t *cuvt_device(void);
/* A test kernel by name (loaded once per process). */
cuv_kernel_t *cuvt_kernel(const char *name);
/* A stream's private copy of the test module (for tests that need their own). */
const char *cuvt_ptx_path(void);
/* Runs the cmocka group and returns its status (main returns it). */
#define cuvt_run(tests) cmocka_run_group_tests_name(cuvt_suite_name(), (tests), NULL, NULL)
const char *cuvt_suite_name(void);

/* Runs child() in a process of its own (a fault, or an initialization, that must not reach the
 * test's process) and returns its exit status; -1 when it did not exit. */
int cuvt_child_status(int (*child)(void));
/* Drains q until nothing of it is pending: every submission delivered and retired (a cancelled
 * one's callback may have run long before its work finished). Fails after 120 idle seconds. */
void cuvt_drain_until_retired(cuv_queue_t *q);
/* Waits until *flag is non-zero, 1 ms at a time; false after 20 s (a watchdog, not a timing
 * assertion: the caller says what never happened). */
bool cuvt_wait_flag(atomic_int *flag);

/* Whether fd polls readable within timeout_ms (0: now), as an event loop waiting on it sees it
 * (a queue's cuv_queue_fd descriptor). */
bool cuvt_readable(int fd, int timeout_ms);
/* The inline spin budget the process runs with, in microseconds (cuv_config_get's spin_budget_us:
 * the defaults and the environment before initialization, the configuration in force after). */
unsigned cuvt_spin_budget_us(void);

/* Fresh random data (seeded from the clock, seed printed so a failure can be replayed with
 * CUVT_SEED). */
void cuvt_random_floats(float *out, size_t n);
uint32_t cuvt_random_u32(void);

/* assert_int_equal with the cuv error text printed on failure. */
#define assert_cuv_ok(expr)                                                                       \
  do {                                                                                            \
    int cuvt_rc_ = (expr);                                                                        \
    if (cuvt_rc_ != 0)                                                                            \
      print_error("%s -> %d %s (%s)\n", #expr, cuvt_rc_, cuv_err_name(cuvt_rc_),                 \
                  cuv_strerror(cuvt_rc_));                                                        \
    assert_int_equal(cuvt_rc_, 0);                                                                \
  } while (0)

/* |a - b| within a relative tolerance of float arithmetic on two different machines. */
#define assert_float_close(a, b)                                                                  \
  assert_true(fabsf((a) - (b)) <= 1e-4f * (1.0f + fabsf(b)))

/* Grid for n threads of 256. */
#define CUVT_GRID(n) CUV_DIM1(((unsigned)(n) + 255u) / 256u)
#define CUVT_BLOCK CUV_DIM1(256)

#endif
