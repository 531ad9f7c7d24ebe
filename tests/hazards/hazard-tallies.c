/* The hazard tracker's counts (lib/hazard.c), from inside: what a buffer records about the
 * accesses in flight once they retire in an order other than their stream's. Reaches into
 * lib/buffer.h, so it links with the static archive; the public behaviour is
 * tests/hazards/hazards.c's. */
#include <string.h>

#include "internal.h"
#include "buffer.h"
#include "queue.h"

#define N 4099 /* after the driver's headers, whose parameters are called N too */
#include "hazard-fixture.h"

/* Fresh random data into f->buf. */
static void fresh_buffer(fixture_t *f) {
  cuvt_random_ints(f->data, N);
  cuvt_upload(f->buf, 0, f->data, N * sizeof(float));
}

/* Reads of one buffer on one stream, retired out of order: three submissions, each on a queue
 * of its own, drained newest first. Counting a read out without the buffer's lock (lib/hazard.c)
 * must let go of the latest access when that one retires, and leave the emptying of the count
 * to the lock: once all three retired, the buffer tracks nothing (no tally holds the stream).
 * The buffer's internals are read once every retirement ran, on this thread. */
static void test_reads_retired_out_of_order(void **state) {
  fixture_t *f = *state;
  enum { READS = 3 };
  cuv_queue_t *qs[READS];
  done_rec_t recs[READS] = {{0}};
  cuv_buffer_t *outs[READS];
  fresh_buffer(f);
  for (int i = 0; i < READS; i++) {
    assert_cuv_ok(cuv_queue_create(&qs[i], NULL, NULL));
    outs[i] = cuvt_buffer(N * sizeof(float));
    cuv_submit_opts_t opts = {.stream = f->a};
    assert_cuv_ok(cuv_submit(qs[i], cuvt_copy_f32(outs[i], f->buf, N), record_done, &recs[i],
                             &opts));
  }
  for (int i = 0; i < READS; i++) {
    while (!cuv__queue_ready(qs[i]))
      assert_true(cuv_queue_wait(qs[i], 1000) == 0 || cuv__queue_ready(qs[i]));
  }
  assert_true(atomic_load(&f->buf->latest) != NULL);
  assert_int_equal(cuv_queue_drain(qs[READS - 1]), 1); /* the latest read, with two more counted */
  assert_null(atomic_load(&f->buf->latest));
  assert_non_null(f->buf->tallies);
  for (int i = 0; i < READS - 1; i++)
    assert_int_equal(cuv_queue_drain(qs[i]), 1);
  assert_null(f->buf->tallies);
  for (int i = 0; i < READS; i++) {
    assert_int_equal(atomic_load(&recs[i].calls), 1);
    assert_cuv_ok(recs[i].status);
    cuvt_read(f->got, outs[i], 0, N * sizeof(float));
    cuvt_assert_floats_equal(f->got, f->data, N);
    cuv_buffer_unref(outs[i]);
    assert_cuv_ok(cuv_queue_destroy(qs[i]));
  }
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_reads_retired_out_of_order, setup, teardown),
  };
  return cuvt_run(tests);
}
