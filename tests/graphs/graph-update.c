/* cuv_graph_update consumes its op and gives no output back: whatever the op outputs is released
 * by cuv_graph_update itself, exactly once, by the time it returns (the op is enqueued with
 * cuv_enqueue_on, which hands the output over at once). Counted values (tests/counted.h) show
 * it, alone and behind a copy into the captured buffer, and the replays after the updates still
 * compute the right data. */
#include "counted.h"

#define N 1000

static void test_update_releases_output_once(void **state) {
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  cuv_buffer_t *buf = cuvt_buffer(N * sizeof(float));
  float host[N], want[N];
  cuvt_random_ints(host, N);
  cuvt_upload(buf, 0, host, sizeof host);
  cuv_graph_t *g;
  assert_cuv_ok(cuv_graph_capture(&g, cuvt_add_one(buf, N), s, NULL));

  /* A value alone: its only owner is the update. */
  atomic_int releases = 0;
  assert_cuv_ok(cuv_graph_update(g, cuvt_counted_value(1, &releases)));
  assert_int_equal(atomic_load(&releases), 1);

  /* New inputs copied in, with a value as the output of the chain. */
  for (int r = 0; r < 3; r++) {
    cuvt_random_ints(host, N);
    cuv_op_t *update = cuv_seq(cuv_memcpy_htod(buf, 0, host, sizeof host, CUV_COPY_STAGE),
                               cuvt_counted_value(2 + r, &releases));
    assert_cuv_ok(cuv_graph_update(g, update));
    assert_int_equal(atomic_load(&releases), 2 + r);
    assert_cuv_ok(cuv_sync_on(cuv_graph_stream(g), cuv_graph_launch(g), NULL));
    for (size_t i = 0; i < N; i++)
      want[i] = host[i] + 1.0f;
    float got[N];
    cuvt_read(got, buf, 0, sizeof got);
    cuvt_assert_floats_equal(got, want, N);
  }
  assert_int_equal(atomic_load(&releases), 4);
  cuv_graph_unref(g);
  assert_int_equal(atomic_load(&releases), 4); /* nothing of it was left for the release */
  cuv_buffer_unref(buf);
  cuv_stream_destroy(s);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_update_releases_output_once),
  };
  return cuvt_run(tests);
}
