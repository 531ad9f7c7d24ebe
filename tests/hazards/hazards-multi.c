/* Cross-stream hazards when one submission touches a buffer more than once (tests/hazards/hazards.c
 * has one access per submission). lib/hazard.c records an access per (submission, stream, read or
 * write) and skips a new one when the buffer's latest access is this submission's, on this stream
 * and at least as strong (already_held). These tests prove each of those three conditions: a
 * read then a write on one stream must leave the write tracked, a write on one fork branch and a
 * read on another must be ordered, and a second submission on the same stream must track its own
 * access. Every check is a result against a host reference on fresh random data, behind slow
 * kernels, so a missing wait shows up as stale data rather than as luck. */
#include <string.h>

#define N 4099 /* not a multiple of the block size */
#include "hazard-fixture.h"

#define REPS 6
#define SLOW_MS 40

static void wait_done(fixture_t *f, done_rec_t *rec) {
  cuvt_drain_until(f->q, &rec->calls, 1);
  assert_int_equal(atomic_load(&rec->calls), 1);
  assert_cuv_ok(rec->status);
}

/* Fresh random data in src (data, and data + 1 in plus_one); buf and out cleared to zeros, so a
 * read that overtakes a writer shows. */
static void fresh(fixture_t *f) {
  cuvt_random_ints(f->data, N);
  for (size_t i = 0; i < N; i++)
    f->plus_one[i] = f->data[i] + 1.0f;
  cuvt_upload(f->src, 0, f->data, N * sizeof(float));
  assert_cuv_ok(cuv_sync(cuv_memset32(f->buf, 0, 0, N), NULL));
  assert_cuv_ok(cuv_sync(cuv_memset32(f->out, 0, 0, N), NULL));
}

static void assert_buffer(cuv_buffer_t *buf, float *got, const float *want) {
  cuvt_read(got, buf, 0, N * sizeof(float));
  cuvt_assert_floats_equal(got, want, N);
}

/* One submission on a reads buf (slowly) and then writes it; a reader on b must wait for the
 * write, not only for the read: the write must be recorded although the submission's read of buf
 * on that stream is already there (a read does not cover a later write). */
static void test_read_then_write_on_one_stream(void **state) {
  fixture_t *f = *state;
  for (int r = 0; r < REPS; r++) {
    fresh(f);
    assert_cuv_ok(cuv_sync(cuvt_copy_f32(f->buf, f->src, N), NULL)); /* buf = data */
    uint64_t waits = cuvt_waits_inserted();
    done_rec_t rw = {0};
    /* out = buf after SLOW_MS, then buf += 1: on a. */
    submit_on(f, f->a, cuv_seq(slow_copy(f->out, f->buf, SLOW_MS), cuvt_add_one(f->buf, N)), &rw);
    cuv_output_t seen;
    assert_cuv_ok(cuv_sync_on(f->b, cuv_download(f->buf, 0, N * sizeof(float)), &seen));
    assert_true(cuvt_waits_inserted() > waits);
    wait_done(f, &rw);
    cuvt_assert_floats_equal(seen.data, f->plus_one, N); /* after the write, not before it */
    cuv_output_release(&seen);
    assert_buffer(f->out, f->got, f->data); /* the read came before the write on a */
  }
}

/* The same with the write inside a fork branch: out = buf (slowly) on a, then a fork whose
 * second branch (another stream) adds one. A reader on b sees the branch's write. */
static void test_read_then_write_in_a_fork_branch(void **state) {
  fixture_t *f = *state;
  for (int r = 0; r < REPS; r++) {
    fresh(f);
    assert_cuv_ok(cuv_sync(cuvt_copy_f32(f->buf, f->src, N), NULL));
    atomic_int releases = 0;
    cuv_op_t *branches[] = {cuvt_counted_value(7, &releases), cuvt_add_one(f->buf, N)};
    done_rec_t rw = {0};
    submit_on(f, f->a, cuv_seq(slow_copy(f->out, f->buf, SLOW_MS), cuv_fork(branches, 2)), &rw);
    cuv_output_t seen;
    assert_cuv_ok(cuv_sync_on(f->b, cuv_download(f->buf, 0, N * sizeof(float)), &seen));
    wait_done(f, &rw);
    assert_int_equal(atomic_load(&releases), 1); /* the fork's tuple, released with the output */
    cuvt_assert_floats_equal(seen.data, f->plus_one, N);
    cuv_output_release(&seen);
    assert_buffer(f->out, f->got, f->data);
  }
}

/* One submission on a writes buf (slowly) and then reads it; a writer on b must wait for both:
 * the read on a sees the first write's data, never b's. */
static void test_write_then_read_then_other_writer(void **state) {
  fixture_t *f = *state;
  for (int r = 0; r < REPS; r++) {
    fresh(f);
    uint64_t waits = cuvt_waits_inserted();
    done_rec_t wr = {0};
    /* buf = src after SLOW_MS, then out = buf: on a. */
    submit_on(f, f->a,
              cuv_seq(slow_copy(f->buf, f->src, SLOW_MS), cuvt_copy_f32(f->out, f->buf, N)), &wr);
    assert_cuv_ok(cuv_sync_on(f->b, cuvt_add_one(f->buf, N), NULL)); /* buf += 1 on b */
    assert_true(cuvt_waits_inserted() > waits);
    wait_done(f, &wr);
    assert_buffer(f->out, f->got, f->data);
    assert_buffer(f->buf, f->got, f->plus_one);
  }
}

/* A write (slowly) on a, then a fork whose second branch reads buf on another stream; a writer
 * on b after it: the branch read sees the first write, the final contents are b's. */
static void test_write_then_read_in_a_fork_then_other_writer(void **state) {
  fixture_t *f = *state;
  for (int r = 0; r < REPS; r++) {
    fresh(f);
    atomic_int releases = 0;
    cuv_op_t *branches[] = {cuvt_counted_value(7, &releases), cuvt_copy_f32(f->out, f->buf, N)};
    done_rec_t wr = {0};
    submit_on(f, f->a, cuv_seq(slow_copy(f->buf, f->src, SLOW_MS), cuv_fork(branches, 2)), &wr);
    assert_cuv_ok(cuv_sync_on(f->b, cuvt_add_one(f->buf, N), NULL));
    wait_done(f, &wr);
    assert_int_equal(atomic_load(&releases), 1);
    assert_buffer(f->out, f->got, f->data);
    assert_buffer(f->buf, f->got, f->plus_one);
  }
}

/* Inside one fork, branch 1 writes buf slowly on its stream and branch 2 reads it on a third
 * stream. Branch 2 waits only for the executing stream when it starts, so only the hazard
 * tracking orders it after branch 1: the buffer's latest access is this submission's, but on
 * another stream, which does not make the read safe. */
static void test_fork_branches_write_then_read(void **state) {
  fixture_t *f = *state;
  for (int r = 0; r < REPS; r++) {
    fresh(f);
    atomic_int releases = 0;
    cuv_op_t *branches[] = {cuvt_counted_value(7, &releases), slow_copy(f->buf, f->src, SLOW_MS),
                            cuvt_copy_f32(f->out, f->buf, N)};
    uint64_t waits = cuvt_waits_inserted();
    cuv_output_t tuple;
    assert_cuv_ok(cuv_sync_on(f->a, cuv_fork(branches, 3), &tuple));
    assert_true(cuvt_waits_inserted() > waits);
    assert_int_equal(cuvt_payload(cuv_tuple_get(&tuple, 0)), 7);
    cuv_output_release(&tuple);
    assert_int_equal(atomic_load(&releases), 1);
    assert_buffer(f->out, f->got, f->data);
  }
}

/* Two submissions on a, each writing buf: the first a quick fill, the second a slow copy. The
 * second's access must be its own (the latest access on the stream being another submission's
 * does not hold the buffer for this one): once the first is drained and retired, a reader on b
 * still waits for the second. */
static void test_second_submission_on_one_stream_is_tracked(void **state) {
  fixture_t *f = *state;
  for (int r = 0; r < REPS; r++) {
    fresh(f);
    unsigned word = cuvt_nonzero_u32();
    done_rec_t first = {0}, second = {0};
    submit_on(f, f->a, cuvt_fill_u32(f->buf, N, word), &first);
    submit_on(f, f->a, slow_copy(f->buf, f->src, 4 * SLOW_MS), &second);
    wait_done(f, &first); /* retired: its access is gone */
    cuv_output_t seen;
    assert_cuv_ok(cuv_sync_on(f->b, cuv_download(f->buf, 0, N * sizeof(float)), &seen));
    cuvt_assert_floats_equal(seen.data, f->data, N);
    cuv_output_release(&seen);
    wait_done(f, &second);
  }
}

/* A copy's destination is written: a download of it on another stream waits for the copy, which
 * its stream reaches only after a slow kernel (an unordered download would read the cleared
 * contents). A host-to-device and a device-to-device copy, each behind its own slow kernel. */
static void test_copy_destination_orders_readers(void **state) {
  enum { COPY_N = 1024, COPY_BYTES = COPY_N * sizeof(unsigned) };
  unsigned *fresh = malloc(COPY_BYTES);
  assert_non_null(fresh);
  for (int i = 0; i < COPY_N; i++)
    fresh[i] = cuvt_nonzero_u32();
  cuv_stream_t *a, *b;
  assert_cuv_ok(cuv_stream_create(&a, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&b, cuvt_device()));
  cuv_buffer_t *x = cuvt_buffer(COPY_BYTES), *src = cuvt_buffer(COPY_BYTES);
  cuvt_upload(src, 0, fresh, COPY_BYTES);
  for (int device_source = 0; device_source < 2; device_source++) {
    assert_cuv_ok(cuv_sync(cuv_memset32(x, 0, 0, COPY_N), NULL));
    cuv_op_t *copy = device_source ? cuv_memcpy_dtod(x, 0, src, 0, COPY_BYTES)
                                   : cuv_memcpy_htod(x, 0, fresh, COPY_BYTES, 0);
    assert_cuv_ok(cuv_enqueue_on(a, cuv_seq(cuvt_sleep(SLOW_MS), copy), NULL));
    cuv_output_t out;
    assert_cuv_ok(cuv_sync_on(b, cuv_download(x, 0, COPY_BYTES), &out));
    assert_memory_equal(out.data, fresh, COPY_BYTES);
    cuv_output_release(&out);
    assert_cuv_ok(cuv_stream_synchronize(a));
  }
  cuv_buffer_unref(x);
  cuv_buffer_unref(src);
  cuv_stream_destroy(a);
  cuv_stream_destroy(b);
  free(fresh);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_read_then_write_on_one_stream, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_then_write_in_a_fork_branch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_then_read_then_other_writer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_then_read_in_a_fork_then_other_writer, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_fork_branches_write_then_read, setup, teardown),
      cmocka_unit_test(test_copy_destination_orders_readers),
      cmocka_unit_test_setup_teardown(test_second_submission_on_one_stream_is_tracked, setup,
                                      teardown),
  };
  return cuvt_run(tests);
}
