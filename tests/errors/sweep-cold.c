/* The cold half of the failure-injection sweep (suite sim; tests/errors/sweep.c is the warm half):
 * the entry points cuv calls only while it starts (the driver, a device's context, the event and
 * pinned pools, the reactor's flags) fail at each of their calls in a process of their own, from
 * its first call on. Each child process runs a small cold workload (cuv_init, device 0, a module,
 * a launch chain with cuv_sync, a cuv_submit completed by the reactor, a host-buffer round trip)
 * with call k of one entry point failing, then clears the injection and runs it again. The parent
 * asserts, per child: it exited normally (no crash; ASan/UBSan watch the rest); no step reported
 * success with wrong results; a failure surfaced as an error of the step that made the call, or
 * was absorbed (every step right); and the second run succeeded, except after a failed cuv_init
 * (the driver load is cached per process, and says so with the same error every time). */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "counted.h"
#include "twins.h"

extern char **environ;

#define N 777     /* floats: not a multiple of the block size */
#define MAX_K 4   /* calls injected per entry point: the first ones, and the last */

static const char *const cold_entries[] = {
    "cuInit",         "cuDriverGetVersion",        "cuDeviceGet",
    "cuDeviceGetName", "cuDevicePrimaryCtxRetain", "cuEventCreate",
    "cuMemHostAlloc", "cuMemHostGetDevicePointer",
};
#define NCOLD (sizeof cold_entries / sizeof cold_entries[0])

static const char *const step_names[] = {"init", "open", "module", "sync", "submit", "host-buffer"};
enum { NSTEPS = sizeof step_names / sizeof step_names[0] };

/* ---- the child: one cold workload, twice ---- */

typedef struct outcome {
  int failed_step; /* index into step_names, or -1 */
  int status;      /* that step's error */
  int wrong;       /* a step reported success with wrong results */
} outcome_t;

typedef struct cold {
  cuv_device_t *dev;
  cuv_kernel_t *saxpy;
  float x[N], y[N], want[N];
} cold_t;

static int step_open(cold_t *c) { return cuv_device_open(&c->dev, 0); }

static int step_module(cold_t *c) {
  cuv_module_t *mod = NULL;
  int rc = cuv_module_load_file(&mod, c->dev, cuvt_ptx_path());
  if (rc == 0)
    rc = cuv_kernel_get(&c->saxpy, mod, "saxpy");
  if (mod)
    cuv_module_unref(mod); /* the kernel holds it */
  return rc;
}

/* Two new buffers and the op: x, y up; y = 2x + y; y down (the output). */
static int saxpy_op(cold_t *c, cuv_buffer_t **bx, cuv_buffer_t **by, cuv_op_t **op) {
  size_t bytes = N * sizeof(float);
  int rc = cuv_buffer_create(bx, c->dev, bytes);
  if (rc == 0)
    rc = cuv_buffer_create(by, c->dev, bytes);
  if (rc < 0)
    return rc;
  unsigned n = N;
  float a = 2.0f;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_READ(*bx), CUV_ARG_RW(*by)};
  cuv_op_t *up[] = {cuv_memcpy_htod(*bx, 0, c->x, bytes, CUV_COPY_STAGE),
                    cuv_memcpy_htod(*by, 0, c->y, bytes, CUV_COPY_STAGE)};
  *op = cuv_seq(cuv_seq(cuv_zip(up, 2), cuv_launch(c->saxpy, CUVT_GRID(N), CUVT_BLOCK, 0, args, 4)),
                cuv_download(*by, 0, bytes));
  return 0;
}

/* The GPU may fuse the multiply-add; with these values (multiples of 1/64 below 16) both ways
 * are exact, so the comparison can be exact too. */
static void check(const cold_t *c, const cuv_output_t *out, int *wrong) {
  const float *got = out->data;
  for (int i = 0; i < N; i++)
    if (!got || got[i] != c->want[i]) {
      *wrong = 1;
      break;
    }
}

static int step_sync(cold_t *c, int *wrong) {
  cuv_buffer_t *bx = NULL, *by = NULL;
  cuv_op_t *op = NULL;
  int rc = saxpy_op(c, &bx, &by, &op);
  cuv_output_t out = {0};
  if (rc == 0 && (rc = cuv_sync(op, &out)) == 0)
    check(c, &out, wrong);
  cuv_output_release(&out);
  cuv_buffer_unref(bx);
  cuv_buffer_unref(by);
  return rc;
}

typedef struct delivered {
  int calls, status, wrong;
  const cold_t *c;
} delivered_t;

static void on_done(int status, cuv_output_t *out, void *arg) {
  delivered_t *d = arg;
  d->calls++;
  d->status = status;
  if (status == 0)
    check(d->c, out, &d->wrong);
}

/* Through the reactor (no inline spin): its flags are allocated on this first arm. */
static int step_submit(cold_t *c, int *wrong) {
  cuv_queue_t *q = NULL;
  cuv_buffer_t *bx = NULL, *by = NULL;
  cuv_op_t *op = NULL;
  int rc = cuv_queue_create(&q, NULL, NULL);
  if (rc == 0)
    rc = saxpy_op(c, &bx, &by, &op);
  delivered_t d = {.c = c};
  cuv_submit_opts_t opts = {.flags = CUV_SUBMIT_NO_SPIN};
  if (rc == 0 && (rc = cuv_submit(q, op, on_done, &d, &opts)) == 0) {
    while (d.calls == 0) {
      cuv_queue_wait(q, 1000);
      cuv_queue_drain(q);
    }
    rc = d.calls == 1 ? d.status : CUV_EINVAL;
    *wrong |= d.wrong;
  }
  cuv_buffer_unref(bx);
  cuv_buffer_unref(by);
  if (q)
    cuv_queue_destroy(q);
  return rc;
}

static int step_host_buffer(cold_t *c, int *wrong) {
  size_t bytes = N * sizeof(float);
  cuv_host_buffer_t *in = NULL, *out = NULL;
  cuv_buffer_t *dev = NULL;
  int rc = cuv_host_buffer_create(&in, c->dev, bytes);
  if (rc == 0)
    rc = cuv_host_buffer_create(&out, c->dev, bytes);
  if (rc == 0)
    rc = cuv_buffer_create(&dev, c->dev, bytes);
  if (rc == 0) {
    memcpy(cuv_host_buffer_data(in), c->x, bytes);
    rc = cuv_sync(
        cuv_seq(cuv_upload(dev, 0, in, 0, bytes), cuv_download_into(out, 0, dev, 0, bytes)), NULL);
  }
  if (rc == 0 && memcmp(cuv_host_buffer_data(out), c->x, bytes) != 0)
    *wrong = 1;
  cuv_host_buffer_unref(in);
  cuv_host_buffer_unref(out);
  cuv_buffer_unref(dev);
  return rc;
}

static int run_step(int s, cold_t *c, int *wrong) {
  switch (s) {
  case 0: return cuv_init();
  case 1: return step_open(c);
  case 2: return step_module(c);
  case 3: return step_sync(c, wrong);
  case 4: return step_submit(c, wrong);
  default: return step_host_buffer(c, wrong);
  }
}

/* Every step in order; the first failure ends the run (later steps need what it made). */
static outcome_t run_workload(cold_t *c) {
  outcome_t o = {-1, 0, 0};
  for (int s = 0; s < NSTEPS && o.failed_step < 0; s++) {
    int rc = run_step(s, c, &o.wrong);
    if (rc < 0) {
      o.failed_step = s;
      o.status = rc;
    }
  }
  if (c->saxpy)
    cuv_kernel_unref(c->saxpy);
  if (c->dev)
    cuv_device_unref(c->dev);
  c->saxpy = NULL;
  c->dev = NULL;
  return o;
}

static int child(const char *spec) {
  char entry[64];
  unsigned k = 0;
  if (sscanf(spec, "%63[^:]:%u", entry, &k) != 2)
    return 2;
  cuvt_register_twins();
  if (k > 0)
    cuv_sim_fail(entry, k, strcmp(entry, "cuMemHostAlloc") == 0 ? CUDA_ERROR_OUT_OF_MEMORY
                                                                : CUDA_ERROR_UNKNOWN);
  cold_t *c = calloc(1, sizeof *c);
  if (!c)
    return 2;
  unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL); /* fresh data, no cuv needed */
  for (int i = 0; i < N; i++) {
    c->x[i] = (float)(rand_r(&seed) % 2001 - 1000) / 64.0f; /* exact in float: sums are exact */
    c->y[i] = (float)(rand_r(&seed) % 2001 - 1000) / 64.0f;
  }
  for (int i = 0; i < N; i++)
    c->want[i] = 2.0f * c->x[i] + c->y[i];
  outcome_t first = run_workload(c);
  unsigned long calls = cuv_sim_calls(entry);
  cuv_sim_fail_clear();
  outcome_t again = run_workload(c);
  printf("RESULT first=%d status=%d wrong=%d again=%d again_status=%d again_wrong=%d calls=%lu\n",
         first.failed_step, first.status, first.wrong, again.failed_step, again.status,
         again.wrong, calls);
  free(c);
  return 0;
}

/* ---- the parent ---- */

typedef struct report {
  int first, status, wrong, again, again_status, again_wrong;
  unsigned long calls;
} report_t;

/* Runs this program as a child with CUVT_COLD=entry:k; its RESULT line. */
static report_t run_child(const char *entry, unsigned k) {
  char spec[96], self[4096];
  snprintf(spec, sizeof spec, "CUVT_COLD=%s:%u", entry, k);
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(len > 0);
  self[len] = '\0';
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = calloc(n + 2, sizeof *env);
  assert_non_null(env);
  memcpy(env, environ, n * sizeof *env);
  env[n] = spec;
  char *argv[] = {self, NULL};
  pid_t pid;
  assert_int_equal(posix_spawn(&pid, self, &fa, NULL, argv, env), 0);
  close(fds[1]);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  FILE *out = fdopen(fds[0], "r");
  char line[512];
  report_t r = {0};
  int got = 0;
  while (out && fgets(line, sizeof line, out))
    if (sscanf(line, "RESULT first=%d status=%d wrong=%d again=%d again_status=%d again_wrong=%d "
                     "calls=%lu", &r.first, &r.status, &r.wrong, &r.again, &r.again_status,
               &r.again_wrong, &r.calls) == 7)
      got = 1;
  fclose(out);
  int wstatus;
  assert_int_equal(waitpid(pid, &wstatus, 0), pid);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0 || !got)
    fail_msg("%s call %u: the child ended badly (status 0x%x, result line %s)", entry, k, wstatus,
             got ? "read" : "missing");
  return r;
}

static void check_injected(const char *entry, unsigned k, const report_t *r, unsigned *surfaced,
                           unsigned *absorbed) {
  const char *step = r->first >= 0 ? step_names[r->first] : "none";
  print_message("# %-26s call %u: %s %s (%s), then %s\n", entry, k,
                r->first >= 0 ? "error in step" : "absorbed", r->first >= 0 ? step : "",
                r->first >= 0 ? cuv_err_name(r->status) : "every step right",
                r->again < 0 ? "a clean run" : "an error again");
  if (r->wrong || r->again_wrong)
    fail_msg("%s call %u: a step reported success with wrong results", entry, k);
  if (r->first >= 0) {
    assert_true(r->status < 0);
    ++*surfaced;
  } else {
    ++*absorbed;
  }
  if (r->first == 0 && r->again == 0) {
    /* cuv_init keeps a failed driver load as the process's answer: the same error again */
    assert_int_equal(r->again_status, r->status);
  } else if (r->again >= 0) {
    fail_msg("%s call %u: the run after the failure failed in step %s (%s)", entry, k,
             step_names[r->again], cuv_err_name(r->again_status));
  }
}

static void test_cold_sweep(void **state) {
  (void)state;
  unsigned surfaced = 0, absorbed = 0, sites = 0, entries_hit = 0;
  for (size_t e = 0; e < NCOLD; e++) {
    report_t clean = run_child(cold_entries[e], 0);
    assert_int_equal(clean.first, -1); /* the workload itself is right */
    assert_int_equal(clean.wrong, 0);
    if (clean.calls == 0) {
      print_message("# %-26s not called by the cold workload\n", cold_entries[e]);
      continue;
    }
    entries_hit++;
    for (unsigned k = 1; k <= clean.calls; k++) {
      if (k > MAX_K && k != clean.calls)
        continue;
      report_t r = run_child(cold_entries[e], k);
      check_injected(cold_entries[e], k, &r, &surfaced, &absorbed);
      sites++;
    }
  }
  print_message("# cold sweep: %u of %zu entry points, %u call sites: %u surfaced as an error "
                "of their step, %u absorbed\n", entries_hit, NCOLD, sites, surfaced, absorbed);
  assert_true(entries_hit > 0);
}

int main(void) {
  const char *spec = getenv("CUVT_COLD");
  if (spec)
    return child(spec);
  cuv_init(); /* only so that cuv_err_name can ask the driver for its names in the messages */
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_cold_sweep)};
  return cmocka_run_group_tests_name("sim", tests, NULL, NULL);
}
