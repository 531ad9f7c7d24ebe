/* A captured graph that writes a buffer and then reads it is a writer of that buffer: each replay
 * holds it for writing (lib/hazard.c, the capture's noted uses), so a read of it on another
 * stream, issued while the replay still runs, is ordered after the replay and sees what it wrote.
 * Were the later read inside the graph to downgrade the noted access, reads on other streams
 * would run beside the replay and see the old contents. Checked on random data behind a slow
 * kernel at the head of the graph, as tests/hazards/hazards.c does for plain submissions. */
#include "counted.h"

#define N 4099 /* not a multiple of the block size */
#define REPS 10
#define SLOW_MS 20

static void test_replay_writing_then_reading_orders_readers(void **state) {
  cuv_stream_t *a, *b;
  assert_cuv_ok(cuv_stream_create(&a, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&b, cuvt_device()));
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_buffer_t *src = cuvt_buffer(N * sizeof(float)), *x = cuvt_buffer(N * sizeof(float)),
               *y = cuvt_buffer(N * sizeof(float));
  float *data = malloc(N * sizeof *data);
  assert_non_null(data);

  /* x = src after SLOW_MS (the write), then y = x (the read of the same buffer). */
  cuv_op_t *op = cuv_seq(cuv_seq(cuvt_sleep(SLOW_MS), cuvt_copy_f32(x, src, N)),
                         cuvt_copy_f32(y, x, N));
  cuv_graph_t *g;
  assert_cuv_ok(cuv_graph_capture(&g, op, a, NULL));

  for (int r = 0; r < REPS; r++) {
    cuvt_random_ints(data, N);
    cuvt_upload(src, 0, data, N * sizeof(float));
    /* Cleared, so a read that overtakes the replay sees zeros (the data is never all zero). */
    assert_cuv_ok(cuv_sync(cuv_memset32(x, 0, 0, N), NULL));
    assert_cuv_ok(cuv_sync(cuv_memset32(y, 0, 0, N), NULL));
    bool nonzero = false;
    for (size_t i = 0; i < N; i++)
      nonzero = nonzero || data[i] != 0.0f;
    assert_true(nonzero);

    cuvt_seen_t replay = {0};
    cuv_submit_opts_t on_a = {.stream = a};
    assert_cuv_ok(cuv_submit(q, cuv_graph_launch(g), cuvt_record_seen, &replay, &on_a));
    uint64_t waits = cuvt_waits_inserted();
    cuv_output_t got;
    assert_cuv_ok(cuv_sync_on(b, cuv_download(x, 0, N * sizeof(float)), &got));
    assert_true(cuvt_waits_inserted() > waits); /* b waited for the replay on a */
    cuvt_assert_floats_equal(got.data, data, N);
    cuv_output_release(&got);

    for (int spins = 0; replay.calls < 1; spins++) { /* the callback runs in this drain */
      int rc = cuv_queue_wait(q, 1000);
      assert_true(rc == 0 || rc == CUV_EBUSY);
      cuv_queue_drain(q);
      if (spins > 120) /* a watchdog, not a timing assertion */
        fail_msg("the replay's callback did not arrive");
    }
    assert_int_equal(replay.calls, 1);
    assert_cuv_ok(replay.status);
    /* The graph's own read saw its write. */
    float *y_host = malloc(N * sizeof *y_host);
    assert_non_null(y_host);
    cuvt_read(y_host, y, 0, N * sizeof(float));
    cuvt_assert_floats_equal(y_host, data, N);
    free(y_host);
  }
  assert_cuv_ok(cuv_stream_synchronize(a));
  assert_cuv_ok(cuv_stream_synchronize(b));
  assert_int_equal(cuv_stream_in_flight(b), 0);
  cuv_graph_unref(g);
  cuv_buffer_unref(src);
  cuv_buffer_unref(x);
  cuv_buffer_unref(y);
  free(data);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_stream_destroy(a);
  cuv_stream_destroy(b);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replay_writing_then_reading_orders_readers),
  };
  return cuvt_run(tests);
}
