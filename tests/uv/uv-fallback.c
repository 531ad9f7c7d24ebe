/* The reactor takes any amount of work, and the host-callback path takes what it cannot: 200
 * submissions in flight on one stream's timeline word, none falling back; and (on the simulator)
 * every cuStreamWriteValue64 failing, as on a driver without stream memory operations. Every
 * callback still runs once, on the loop thread, with its own result, and cuv_stats() counts the
 * fallbacks. */
#include <cuda.h>

#include "uvt.h"

#define SUBS 200
#define GATE_MS 300 /* the first submission holds its stream this long: the rest queue behind */

static void test_many_on_one_word(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  cuv_submit_opts_t one_stream = {.stream = stream};
  uvt_call_t *calls = calloc(SUBS, sizeof *calls);
  unsigned *values = calloc(SUBS, sizeof *values);
  cuv_stats_t before;
  cuv_stats(&before);
  /* All on one stream behind a slow kernel: all 200 are in flight together, whatever the speed
   * of this machine. */
  for (size_t i = 0; i < SUBS; i++) {
    values[i] = cuvt_random_u32() | 1u;
    cuv_buffer_t *buf = uvt_buffer(sizeof(unsigned));
    calls[i].loop = &l;
    assert_cuv_ok(cuv_uv_submit(l.bridge,
                                uvt_slow_write_then_read(i == 0 ? GATE_MS : 0, values[i], buf),
                                uvt_done, &calls[i], &one_stream));
    cuv_buffer_unref(buf);
  }
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(calls, SUBS);
  for (size_t i = 0; i < SUBS; i++)
    assert_int_equal((unsigned)calls[i].payload, values[i]);
  cuv_stats_t d = uvt_stats_delta(&before);
  print_message("# reactor %llu, hostfn %llu, fallbacks %llu\n",
                (unsigned long long)d.completed_reactor, (unsigned long long)d.completed_hostfn,
                (unsigned long long)d.fallbacks);
  assert_int_equal(d.fallbacks, 0);
  assert_int_equal(d.completed_hostfn, 0);
  assert_int_equal(d.completed_reactor + d.completed_spin, SUBS);
  uvt_release_outputs(calls, SUBS);
  free(calls);
  free(values);
  cuv_stream_destroy(stream);
  uvt_close(&l);
}

/* Stream memory operations failing (a driver or device without them): the host callback takes
 * every submission. */
static void test_write_value_failure_falls_back(void **state) {
  if (!cuvt_is_sim())
    skip(); /* failure injection is the simulator's */
  enum { M = 40 };
  uvt_loop_t l;
  uvt_open(&l);
  uvt_call_t calls[M] = {0};
  unsigned values[M];
  cuv_stats_t before;
  cuv_stats(&before);
  unsigned long writes = cuv_sim_calls("cuStreamWriteValue64");
  cuv_sim_fail("cuStreamWriteValue64", 0, CUDA_ERROR_NOT_SUPPORTED);
  for (size_t i = 0; i < M; i++) {
    values[i] = cuvt_random_u32() | 1u;
    cuv_buffer_t *buf = uvt_buffer(sizeof(unsigned));
    calls[i].loop = &l;
    assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_slow_write_then_read(1, values[i], buf), uvt_done,
                                &calls[i], NULL));
    cuv_buffer_unref(buf);
  }
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  cuv_sim_fail_clear();
  uvt_assert_all_ok(calls, M);
  for (size_t i = 0; i < M; i++)
    assert_int_equal((unsigned)calls[i].payload, values[i]);
  cuv_stats_t d = uvt_stats_delta(&before);
  assert_true(cuv_sim_calls("cuStreamWriteValue64") - writes >= M); /* each one was tried */
  assert_int_equal(d.fallbacks, M);
  assert_int_equal(d.completed_hostfn, M);
  assert_int_equal(d.completed_reactor, 0);
  uvt_release_outputs(calls, M);
  uvt_close(&l);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_many_on_one_word),
      cmocka_unit_test(test_write_value_failure_falls_back),
  };
  return cuvt_run(tests);
}
