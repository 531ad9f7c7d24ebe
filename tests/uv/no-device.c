/* Every executor in a process that never opened a device. An op with no device object in it
 * (cuv_value, a then over one) runs on device 0's default policy, which the executor opens for
 * the run: the device, its policy and the stream must stay alive until the submission holds them
 * (a use-after-free of the policy before the fix, seen under ASan). The other suites never see
 * it: their fixtures keep device 0 open. Each case runs in a child process of its own, forked
 * before anything of cuv's was initialized in this one, and runs its executor twice (the device
 * is created and goes away each time). The child's exit status is the verdict: ASan's report
 * makes it non-zero. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuv/uv.h>

#include "common.h"

#define CHILD_SKIP 77
#define RUNS 2

static int released;

static void count_release(void *arg) {
  (void)arg;
  released++;
}

/* The value every case computes: a then over a value, so the executor runs a callback too. */
static cuv_op_t *add_one(cuv_output_t *in, void *arg) {
  int *v = arg;
  *v = *(int *)in->data + 1;
  return cuv_value(v, count_release);
}

static cuv_op_t *make_op(int *in, int *out) {
  return cuv_then(cuv_value(in, count_release), add_one, out);
}

/* 0 when out holds the expected value and both values were released once per run. */
static int check_run(int run, const cuv_output_t *got, const int *want_ptr, int want, int rc) {
  if (rc != 0 || !got || got->data != want_ptr || *want_ptr != want) {
    fprintf(stderr, "run %d: rc %d (%s), data %p, value %d (want %d)\n", run, rc, cuv_err_name(rc),
            got ? got->data : NULL, *want_ptr, want);
    return 1;
  }
  return 0;
}

static int run_sync(void) {
  for (int run = 0; run < RUNS; run++) {
    int in = (int)(cuvt_random_u32() % 1000), out = 0;
    cuv_output_t got = {0};
    int rc = cuv_sync(make_op(&in, &out), &got);
    if (check_run(run, &got, &out, in + 1, rc))
      return 1;
    cuv_output_release(&got);
  }
  return released == 2 * RUNS ? 0 : 1;
}

static int done_calls;
static cuv_output_t done_output;

static void on_done(int status, cuv_output_t *output, void *arg) {
  *(int *)arg = status;
  done_calls++;
  done_output = cuv_output_take(output);
}

static int run_submit(void) {
  cuv_queue_t *q;
  if (cuv_queue_create(&q, NULL, NULL) != 0)
    return 1;
  for (int run = 0; run < RUNS; run++) {
    int in = (int)(cuvt_random_u32() % 1000), out = 0, status = 1;
    int rc = cuv_submit(q, make_op(&in, &out), on_done, &status, NULL);
    while (rc == 0 && done_calls == run && (rc = cuv_queue_wait(q, 1000)) >= 0)
      rc = cuv_queue_drain(q) < 0 ? -1 : 0;
    if (done_calls != run + 1 || check_run(run, &done_output, &out, in + 1, status))
      return 1;
    cuv_output_release(&done_output);
  }
  return cuv_queue_destroy(q) == 0 && released == 2 * RUNS ? 0 : 1;
}

static int run_uv_submit(void) {
  uv_loop_t loop;
  cuv_uv_t *bridge;
  if (uv_loop_init(&loop) != 0 || cuv_uv_open(&bridge, &loop) != 0)
    return 1;
  int in[RUNS], out[RUNS], status[RUNS];
  for (int run = 0; run < RUNS; run++) {
    in[run] = (int)(cuvt_random_u32() % 1000);
    status[run] = 1;
    /* One at a time: done_output keeps only the last output. */
    if (cuv_uv_submit(bridge, make_op(&in[run], &out[run]), on_done, &status[run], NULL) != 0)
      return 1;
    uv_run(&loop, UV_RUN_DEFAULT);
    if (done_calls != run + 1 || check_run(run, &done_output, &out[run], in[run] + 1, status[run]))
      return 1;
    cuv_output_release(&done_output);
  }
  if (cuv_uv_close(bridge, NULL, NULL) != 0)
    return 1;
  uv_run(&loop, UV_RUN_DEFAULT);
  return uv_loop_close(&loop) == 0 && released == 2 * RUNS ? 0 : 1;
}

/* Capture on the default policy's stream, then replay the graph; the capture's then ran once. */
static int run_graph(void) {
  for (int run = 0; run < RUNS; run++) {
    int in = (int)(cuvt_random_u32() % 1000), out = 0;
    cuv_graph_t *g;
    cuv_output_t got = {0};
    int rc = cuv_graph_capture(&g, make_op(&in, &out), NULL, &got);
    if (check_run(run, &got, &out, in + 1, rc))
      return 1;
    cuv_output_release(&got);
    rc = cuv_sync(cuv_graph_launch(g), NULL);
    cuv_graph_unref(g);
    if (rc != 0)
      return 1;
  }
  return released == 2 * RUNS ? 0 : 1;
}

/* In the child: nothing of cuv ran in this process before. */
static int child_main(int (*executor)(void)) {
  if (cuv_init() != 0)
    return strcmp(cuvt_suite_name(), "gpu") == 0 ? CHILD_SKIP : 1;
  return executor();
}

static void run_in_child(int (*executor)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    _exit(child_main(executor));
  int wstatus;
  assert_int_equal(waitpid(pid, &wstatus, 0), pid);
  assert_true(WIFEXITED(wstatus));
  if (WEXITSTATUS(wstatus) == CHILD_SKIP)
    skip();
  assert_int_equal(WEXITSTATUS(wstatus), 0);
}

static void test_sync(void **state) {
  (void)state;
  run_in_child(run_sync);
}

static void test_submit(void **state) {
  (void)state;
  run_in_child(run_submit);
}

static void test_uv_submit(void **state) {
  (void)state;
  run_in_child(run_uv_submit);
}

static void test_graph_capture(void **state) {
  (void)state;
  run_in_child(run_graph);
}

int main(void) {
  /* No cuvt_init: it opens device 0, which is what this file must not do. */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sync),
      cmocka_unit_test(test_submit),
      cmocka_unit_test(test_uv_submit),
      cmocka_unit_test(test_graph_capture),
  };
  return cuvt_run(tests);
}
