/* Host functions with the host-task mode CUV_HOST_SYNC asks for (tests/meson.build runs this
 * file once per setting, on the simulator also with cuLaunchHostFunc_v2 hidden): submissions
 * through a queue and blocking waits give right results, each callback once; where the driver
 * resolves cuLaunchHostFunc_v2 (cuv_driver_has_host_task_modes) spin launches every host function
 * with CU_HOST_TASK_SPINWAIT and block with CU_HOST_TASK_BLOCKING, and cuLaunchHostFunc is not
 * called; where it does not, and with CUV_HOST_SYNC=off, cuLaunchHostFunc is today's path. The
 * simulator counts the calls and modes; on a GPU the results and the detection are checked (the
 * driver of CUDA 13.0 has no cuLaunchHostFunc_v2: cuv_driver_has_host_task_modes is then false). */
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "counted.h"

#define N 2048
#define SUBMISSIONS 16

static cuv_host_sync_t host_sync(void) {
  cuv_config_t c;
  assert_cuv_ok(cuv_config_get(&c));
  return c.host_sync;
}

static bool v2_hidden(void) {
  const char *hide = getenv("CUV_SIM_HIDE");
  return hide && strstr(hide, "cuLaunchHostFunc_v2");
}

/* What the simulator counted: cuLaunchHostFunc calls, and host functions of each mode that ran. */
typedef struct counts {
  unsigned long plain, blocking, spinwait;
} counts_t;

static counts_t counted(void) {
  return (counts_t){cuv_sim_calls("cuLaunchHostFunc"), cuv_sim_host_funcs(0),
                    cuv_sim_host_funcs(1)};
}

/* `calls` host functions were launched and ran since `before`, each the way the setting and the
 * driver say (on the simulator; nothing to count on a GPU). */
static void expect_launched(counts_t before, unsigned long calls) {
  if (!cuvt_is_sim())
    return;
  counts_t now = counted();
  bool modes = cuv_driver_has_host_task_modes() && host_sync() != CUV_HOST_SYNC_OFF;
  bool spin = host_sync() == CUV_HOST_SYNC_SPIN;
  assert_int_equal(now.plain - before.plain, modes ? 0 : calls);
  assert_int_equal(now.spinwait - before.spinwait, modes && spin ? calls : 0);
  assert_int_equal(now.blocking - before.blocking, modes && !spin ? calls : 0);
}

/* The detection: once per load, true on the simulator unless hidden. */
static void test_detection(void **state) {
  bool has = cuv_driver_has_host_task_modes();
  print_message("# host-task modes: %s, CUV_HOST_SYNC %d\n", has ? "yes" : "no", host_sync());
  if (cuvt_is_sim())
    assert_int_equal(has, !v2_hidden());
  int version = 0;
  assert_cuv_ok(cuv_driver_version(&version));
  if (version < 13020)
    assert_false(has); /* the entry point is CUDA 13.2's */
}

typedef struct job {
  atomic_int *calls;
  int status;
  float *got;
} job_t;

static void job_done(int status, cuv_output_t *out, void *arg) {
  job_t *j = arg;
  j->status = status;
  if (status == 0 && out->data)
    memcpy(j->got, out->data, N * sizeof(float));
  cuv_output_release(out);
  atomic_fetch_add(j->calls, 1);
}

/* add_one then a download of the buffer, per submission, on fresh data. */
static cuv_op_t *add_one_and_read(cuv_buffer_t *buf) {
  return cuv_seq(cuvt_add_one(buf, N), cuv_download(buf, 0, N * sizeof(float)));
}

/* Submissions through a queue: with spin or block each completes through a host function. */
static void test_submissions(void **state) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_buffer_t *bufs[SUBMISSIONS];
  float *want = malloc(SUBMISSIONS * N * sizeof *want);
  float *got = malloc(SUBMISSIONS * N * sizeof *got);
  job_t jobs[SUBMISSIONS];
  atomic_int calls = 0;
  uint64_t hostfn_before = cuvt_stats().completed_hostfn;
  for (int i = 0; i < SUBMISSIONS; i++) {
    cuvt_random_ints(&want[i * N], N);
    bufs[i] = cuvt_buffer_of(&want[i * N], N);
    for (int k = 0; k < N; k++)
      want[i * N + k] += 1.0f;
  }
  counts_t before = counted();
  for (int i = 0; i < SUBMISSIONS; i++) {
    jobs[i] = (job_t){&calls, 1, &got[i * N]};
    assert_cuv_ok(cuv_submit(q, add_one_and_read(bufs[i]), job_done, &jobs[i], NULL));
  }
  cuvt_drain_until(q, &calls, SUBMISSIONS);
  assert_int_equal(atomic_load(&calls), SUBMISSIONS);
  for (int i = 0; i < SUBMISSIONS; i++) {
    assert_int_equal(jobs[i].status, 0);
    cuvt_assert_floats_equal(&got[i * N], &want[i * N], N);
    cuv_buffer_unref(bufs[i]);
  }
  bool forced = host_sync() != CUV_HOST_SYNC_OFF;
  uint64_t by_hostfn = cuvt_stats().completed_hostfn - hostfn_before;
  if (forced)
    assert_int_equal(by_hostfn, SUBMISSIONS);
  if (forced || cuvt_is_sim()) /* the simulator's streams have memory operations: no fallback */
    expect_launched(before, forced ? SUBMISSIONS : 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  free(want);
  free(got);
}

/* Blocking waits: with spin or block, each cuv_sync waits through one host function. */
static void test_blocking_waits(void **state) {
  float *host = malloc(N * sizeof *host), *want = malloc(N * sizeof *want);
  cuvt_random_ints(host, N);
  cuv_buffer_t *buf = cuvt_buffer_of(host, N);
  memcpy(want, host, N * sizeof *want);
  bool forced = host_sync() != CUV_HOST_SYNC_OFF;
  for (int r = 0; r < 8; r++) {
    counts_t before = counted();
    cuv_output_t out;
    assert_cuv_ok(cuv_sync(add_one_and_read(buf), &out));
    for (int k = 0; k < N; k++)
      want[k] += 1.0f;
    cuvt_assert_floats_equal(out.data, want, N);
    cuv_output_release(&out);
    expect_launched(before, forced ? 1 : 0);
  }
  cuv_buffer_unref(buf);
  free(host);
  free(want);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_detection),
      cmocka_unit_test(test_submissions),
      cmocka_unit_test(test_blocking_waits),
  };
  return cuvt_run(tests);
}
