/* Reaping: cuv_enqueue_on work (and cuv_graph_update's copies, which go through it) is retired
 * only when cuv finds its event complete, which happens at the next cuv_enqueue_on on that stream,
 * a cuv_stream_synchronize, the stream's destruction, or the graph's release (lib/exec.c
 * cuv__stream_reap, lib/stream.c, lib/graph.c). What retiring frees is made visible here through
 * the public API:
 * - a host buffer the work uploads from: its pinned block goes back to cuv's pool (lib/staging.c,
 *   a LIFO per size class), so the next cuv_host_buffer_create of that size gets the same memory
 *   once the work was reaped, and different memory while it is held;
 * - the buffer access it recorded: until reaped, a conflicting access on another stream gets an
 *   event wait (cuv_stats().waits_inserted), after it none;
 * - cuv_stream_in_flight, cuv_stats().completed_event and .in_flight, with exact deltas.
 * And that it is freed only after the GPU finished: a block handed out again while the upload
 * still had to read it would be overwritten here, and the uploaded data would come out wrong. */
#include "counted.h"

#define N (1u << 18) /* floats: 1 MiB, a staging class nothing else in this file uses */
#define BYTES ((size_t)N * sizeof(float))
#define SLOW_MS 200

typedef struct fixture {
  cuv_stream_t *a, *b;
  cuv_buffer_t *dev;
  float *data, *got;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  if (!f || cuv_stream_create(&f->a, cuvt_device()) || cuv_stream_create(&f->b, cuvt_device()))
    return -1;
  f->dev = cuvt_buffer(BYTES);
  f->data = malloc(BYTES);
  f->got = malloc(BYTES);
  *state = f;
  return f->data && f->got ? 0 : -1;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  cuv_stream_destroy(f->a);
  cuv_stream_destroy(f->b);
  cuv_buffer_unref(f->dev);
  free(f->data);
  free(f->got);
  free(f);
  return 0;
}

/* A host buffer of BYTES holding fresh random data (also in f->data); *block is its memory. */
static cuv_host_buffer_t *fresh_host(fixture_t *f, void **block) {
  cuv_host_buffer_t *h;
  assert_cuv_ok(cuv_host_buffer_create(&h, cuvt_device(), BYTES));
  cuvt_random_ints(f->data, N);
  memcpy(cuv_host_buffer_data(h), f->data, BYTES);
  *block = cuv_host_buffer_data(h);
  return h;
}

/* The memory the pool hands out next for BYTES (the buffer is released again at once). */
static void *next_block(void) {
  cuv_host_buffer_t *h;
  assert_cuv_ok(cuv_host_buffer_create(&h, cuvt_device(), BYTES));
  void *p = cuv_host_buffer_data(h);
  cuv_host_buffer_unref(h);
  return p;
}

/* A unit op with no GPU work: executing it on a stream waits for (cuv_sync_on) or reaps
 * (cuv_enqueue_on) what is already there, and nothing else. */
static cuv_op_t *unit(void) { return cuv_value(NULL, NULL); }

/* Finished enqueue_on work stays held until reaped: by the next cuv_enqueue_on on the stream,
 * then by cuv_stream_synchronize; each reap retires exactly the finished submissions. */
static void test_enqueue_on_held_until_reaped(void **state) {
  fixture_t *f = *state;
  void *p;
  cuv_host_buffer_t *h = fresh_host(f, &p);
  cuv_stats_t s0 = cuvt_stats();
  assert_cuv_ok(cuv_enqueue_on(f->a, cuv_seq(cuvt_sleep(5), cuv_upload(f->dev, 0, h, 0, BYTES)),
                               NULL));
  cuv_host_buffer_unref(h); /* the submission holds the block now */
  assert_int_equal(cuv_stream_in_flight(f->a), 1);
  /* The GPU is done with it once this returns (same stream, after it); nothing reaps here. */
  assert_cuv_ok(cuv_sync_on(f->a, unit(), NULL));
  assert_int_equal(cuv_stream_in_flight(f->a), 1);
  assert_ptr_not_equal(next_block(), p);
  cuv_stats_t s1 = cuvt_stats();
  assert_int_equal(s1.completed_event - s0.completed_event, 0);
  assert_int_equal(s1.submitted - s0.submitted, 2);
  assert_int_equal(s1.completed - s0.completed, 1); /* the cuv_sync_on only */
  assert_int_equal(s1.in_flight - s0.in_flight, 1);
  /* The next enqueue_on on the stream reaps it: the block is back on top of the pool. */
  assert_cuv_ok(cuv_enqueue_on(f->a, unit(), NULL));
  cuv_stats_t s2 = cuvt_stats();
  assert_int_equal(s2.completed_event - s1.completed_event, 1);
  assert_int_equal(s2.completed - s1.completed, 1);
  assert_int_equal(s2.in_flight, s1.in_flight); /* one retired, one detached */
  assert_int_equal(cuv_stream_in_flight(f->a), 1);
  assert_ptr_equal(next_block(), p);
  /* cuv_stream_synchronize reaps the second one. */
  assert_cuv_ok(cuv_stream_synchronize(f->a));
  cuv_stats_t s3 = cuvt_stats();
  assert_int_equal(s3.completed_event - s2.completed_event, 1);
  assert_int_equal(s3.in_flight - s0.in_flight, 0);
  assert_int_equal(cuv_stream_in_flight(f->a), 0);
  /* Reaping twice retires nothing twice. */
  assert_cuv_ok(cuv_stream_synchronize(f->a));
  assert_int_equal(cuvt_stats().completed_event, s3.completed_event);
  cuvt_read(f->got, f->dev, 0, BYTES);
  cuvt_assert_floats_equal(f->got, f->data, N);
}

/* Unfinished work is never reaped: an upload behind a slow kernel, a reap attempt right after
 * (another enqueue_on), then whatever block the pool hands out is overwritten. Had the reap
 * retired the upload before it ran, that block would be the upload's source, and the device
 * would receive the overwrite instead of the data. */
static void test_unfinished_enqueue_on_is_not_reaped(void **state) {
  fixture_t *f = *state;
  for (int r = 0; r < 3; r++) {
    void *p;
    cuv_host_buffer_t *h = fresh_host(f, &p);
    assert_cuv_ok(cuv_sync(cuv_memset32(f->dev, 0, 0, N), NULL));
    assert_cuv_ok(cuv_enqueue_on(
        f->a, cuv_seq(cuvt_sleep(SLOW_MS), cuv_upload(f->dev, 0, h, 0, BYTES)), NULL));
    cuv_host_buffer_unref(h);
    assert_cuv_ok(cuv_enqueue_on(f->a, unit(), NULL)); /* reaps what finished: not the upload */
    cuv_host_buffer_t *other;
    assert_cuv_ok(cuv_host_buffer_create(&other, cuvt_device(), BYTES));
    memset(cuv_host_buffer_data(other), 0x7f, BYTES);
    assert_cuv_ok(cuv_stream_synchronize(f->a));
    assert_int_equal(cuv_stream_in_flight(f->a), 0);
    cuvt_read(f->got, f->dev, 0, BYTES);
    cuvt_assert_floats_equal(f->got, f->data, N);
    cuv_host_buffer_unref(other);
  }
}

/* The access enqueue_on work recorded stays until reaped, also after the GPU finished it: a
 * conflicting reader on another stream is ordered after it (a wait inserted) until then, and
 * not after. */
static void test_enqueue_on_access_tracked_until_reaped(void **state) {
  fixture_t *f = *state;
  unsigned value = cuvt_nonzero_u32();
  assert_cuv_ok(cuv_enqueue_on(f->a, cuvt_fill_u32(f->dev, N, value), NULL));
  assert_cuv_ok(cuv_sync_on(f->a, unit(), NULL)); /* done on the GPU, not reaped */
  uint64_t waits = cuvt_waits_inserted();
  unsigned got[4];
  assert_cuv_ok(cuv_sync_on(f->b, cuv_memcpy_dtoh(got, f->dev, 0, sizeof got), NULL));
  assert_int_equal(cuvt_waits_inserted() - waits, 1);
  for (int i = 0; i < 4; i++)
    assert_int_equal(got[i], value);
  assert_cuv_ok(cuv_stream_synchronize(f->a)); /* reaped: the access is gone */
  waits = cuvt_waits_inserted();
  assert_cuv_ok(cuv_sync_on(f->b, cuvt_fill_u32(f->dev, N, value + 1), NULL));
  assert_int_equal(cuvt_waits_inserted() - waits, 0);
  assert_cuv_ok(cuv_sync_on(f->b, cuv_memcpy_dtoh(got, f->dev, 0, sizeof got), NULL));
  for (int i = 0; i < 4; i++)
    assert_int_equal(got[i], value + 1);
}

/* cuv_graph_update's copy goes through enqueue_on on the graph's stream: it is held past the
 * replay that follows it (nothing reaps there) and retired when the graph is released, also when
 * the stream is the caller's and lives on. */
static void test_graph_update_reaped_at_release(void **state) {
  fixture_t *f = *state;
  cuv_buffer_t *out = cuvt_buffer(BYTES);
  cuv_graph_t *g;
  assert_cuv_ok(cuv_graph_capture(&g, cuvt_copy_f32(out, f->dev, N), f->a, NULL));
  void *p;
  cuv_host_buffer_t *h = fresh_host(f, &p);
  cuv_stats_t s0 = cuvt_stats();
  assert_cuv_ok(cuv_graph_update(g, cuv_upload(f->dev, 0, h, 0, BYTES)));
  cuv_host_buffer_unref(h);
  assert_cuv_ok(cuv_sync_on(cuv_graph_stream(g), cuv_graph_launch(g), NULL));
  cuvt_read(f->got, out, 0, BYTES);
  cuvt_assert_floats_equal(f->got, f->data, N); /* the replay saw the update */
  assert_ptr_not_equal(next_block(), p);
  assert_int_equal(cuvt_stats().completed_event - s0.completed_event, 0);
  assert_int_equal(cuv_stream_in_flight(f->a), 2); /* the graph's capture holder and the copy */
  cuv_graph_unref(g);
  assert_int_equal(cuvt_stats().completed_event - s0.completed_event, 1);
  assert_int_equal(cuv_stream_in_flight(f->a), 0);
  assert_ptr_equal(next_block(), p);
  cuv_buffer_unref(out);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_enqueue_on_held_until_reaped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unfinished_enqueue_on_is_not_reaped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_enqueue_on_access_tracked_until_reaped, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_graph_update_reaped_at_release, setup, teardown),
  };
  return cuvt_run(tests);
}
