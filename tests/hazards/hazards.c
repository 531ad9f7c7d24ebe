/* Cross-stream hazards through the public API. A slow writer on one stream and a reader of the
 * same buffer submitted on another stream right after: the reader sees the written data, every
 * time, because cuv inserts an event wait (cuv_stats().waits_inserted grows). Reads on two
 * streams insert nothing. CUV_HAZARD_STRICT (per buffer, or for every buffer with
 * CUV_STRICT_HAZARDS=1: the same binary runs the strict-env group then) refuses the conflicting op
 * with CUV_ECONFLICT and leaves both buffers intact; CUV_HAZARD_NONE inserts nothing. */
#include <string.h>

#define N 4099 /* not a multiple of the block size */
#include "hazard-fixture.h"

#define REPS 20
#define SLOW_MS 20

/* Drains until both records were called. */
static void drain_both(cuv_queue_t *q, done_rec_t *a, done_rec_t *b) {
  for (int spins = 0; atomic_load(&a->calls) + atomic_load(&b->calls) < 2; spins++) {
    int rc = cuv_queue_wait(q, 1000);
    assert_true(rc == 0 || rc == CUV_EBUSY);
    cuv_queue_drain(q);
    if (spins > 120) /* a watchdog, not a timing assertion */
      fail_msg("callbacks did not arrive");
  }
  assert_int_equal(atomic_load(&a->calls), 1);
  assert_int_equal(atomic_load(&b->calls), 1);
}

/* Fresh random data into f->src (and f->data); buf is cleared to zeros so a stale read shows. */
static void fresh_source(fixture_t *f) {
  cuvt_random_ints(f->data, N);
  cuvt_upload(f->src, 0, f->data, N * sizeof(float));
  assert_cuv_ok(cuv_sync(cuv_memset32(f->buf, 0, 0, N), NULL));
}

/* ---- ordering: the reader sees the slow writer's data ---- */

/* Writer through cuv_submit on stream a, reader through cuv_sync_on (a download) on stream b. */
static void test_submit_writer_then_reader(void **state) {
  fixture_t *f = *state;
  for (int r = 0; r < REPS; r++) {
    fresh_source(f);
    uint64_t waits = cuvt_waits_inserted();
    done_rec_t writer = {0};
    submit_on(f, f->a, slow_copy(f->buf, f->src, SLOW_MS), &writer);
    cuv_output_t out;
    assert_cuv_ok(cuv_sync_on(f->b, cuv_download(f->buf, 0, N * sizeof(float)), &out));
    assert_true(cuvt_waits_inserted() > waits);
    cuvt_drain_until(f->q, &writer.calls, 1);
    assert_int_equal(atomic_load(&writer.calls), 1);
    assert_cuv_ok(writer.status);
    cuvt_assert_floats_equal(out.data, f->data, N);
    cuv_output_release(&out);
  }
}

/* Both through cuv_submit: the reader's callback may come first or second, its data is right. */
static void test_submit_writer_submit_reader(void **state) {
  fixture_t *f = *state;
  for (int r = 0; r < REPS; r++) {
    fresh_source(f);
    uint64_t waits = cuvt_waits_inserted();
    done_rec_t writer = {0}, reader = {0};
    submit_on(f, f->a, slow_copy(f->buf, f->src, SLOW_MS), &writer);
    submit_on(f, f->b, cuvt_copy_f32(f->out, f->buf, N), &reader); /* a kernel: out = buf */
    assert_true(cuvt_waits_inserted() > waits);
    drain_both(f->q, &writer, &reader);
    assert_cuv_ok(writer.status);
    assert_cuv_ok(reader.status);
    cuvt_read(f->got, f->out, 0, N * sizeof(float));
    cuvt_assert_floats_equal(f->got, f->data, N);
  }
}

/* Both through cuv_enqueue_on (the caller synchronizes): still ordered by cuv. */
static void test_enqueue_writer_enqueue_reader(void **state) {
  fixture_t *f = *state;
  for (int r = 0; r < REPS; r++) {
    fresh_source(f);
    uint64_t waits = cuvt_waits_inserted();
    cuv_output_t unit;
    assert_cuv_ok(cuv_enqueue_on(f->a, slow_copy(f->buf, f->src, SLOW_MS), &unit));
    assert_cuv_ok(cuv_enqueue_on(f->b, cuv_memcpy_dtoh(f->got, f->buf, 0, N * sizeof(float)),
                                 &unit));
    assert_true(cuvt_waits_inserted() > waits);
    assert_cuv_ok(cuv_stream_synchronize(f->b)); /* only the reader's stream */
    cuvt_assert_floats_equal(f->got, f->data, N);
    assert_cuv_ok(cuv_stream_synchronize(f->a));
  }
}

/* The writer is the slow kernel itself: sleep_then_write stores a random word after 20 ms. */
static void test_slow_kernel_write_then_download(void **state) {
  fixture_t *f = *state;
  cuv_buffer_t *word = cuvt_buffer(sizeof(unsigned));
  for (int r = 0; r < REPS; r++) {
    assert_cuv_ok(cuv_sync(cuv_memset32(word, 0, 0, 1), NULL));
    unsigned value = cuvt_nonzero_u32();
    uint64_t waits = cuvt_waits_inserted();
    done_rec_t writer = {0};
    submit_on(f, f->a, cuvt_slow_write(SLOW_MS, value, word), &writer);
    unsigned got = 0;
    assert_cuv_ok(cuv_sync_on(f->b, cuv_memcpy_dtoh(&got, word, 0, sizeof got), NULL));
    assert_true(cuvt_waits_inserted() > waits);
    cuvt_drain_until(f->q, &writer.calls, 1);
    assert_cuv_ok(writer.status);
    assert_int_equal(got, value);
  }
  cuv_buffer_unref(word);
}

/* A writer after a slow reader on another stream waits for the read (write-after-read): the
 * reader sees the old data, never the new. */
static void test_write_after_read_is_ordered(void **state) {
  fixture_t *f = *state;
  for (int r = 0; r < REPS / 2; r++) {
    fresh_source(f);
    assert_cuv_ok(cuv_sync(cuvt_copy_f32(f->buf, f->src, N), NULL)); /* buf = data */
    uint64_t waits = cuvt_waits_inserted();
    done_rec_t reader = {0};
    /* out = buf after 20 ms on a; then buf += 1 on b, submitted right away. */
    submit_on(f, f->a, slow_copy(f->out, f->buf, SLOW_MS), &reader);
    assert_cuv_ok(cuv_sync_on(f->b, cuvt_add_one(f->buf, N), NULL));
    assert_true(cuvt_waits_inserted() > waits);
    cuvt_drain_until(f->q, &reader.calls, 1);
    assert_cuv_ok(reader.status);
    cuvt_read(f->got, f->out, 0, N * sizeof(float));
    cuvt_assert_floats_equal(f->got, f->data, N);
    cuvt_read(f->got, f->buf, 0, N * sizeof(float));
    for (size_t i = 0; i < N; i++)
      f->data[i] += 1.0f;
    cuvt_assert_floats_equal(f->got, f->data, N);
  }
}

/* Reads of one buffer on two streams run concurrently: no wait. */
static void test_reads_insert_no_wait(void **state) {
  fixture_t *f = *state;
  cuv_buffer_t *out2 = cuvt_buffer(N * sizeof(float));
  for (int r = 0; r < 4; r++) {
    fresh_source(f);
    assert_cuv_ok(cuv_sync(cuvt_copy_f32(f->buf, f->src, N), NULL));
    uint64_t waits = cuvt_waits_inserted();
    done_rec_t reader = {0};
    submit_on(f, f->a, slow_copy(f->out, f->buf, SLOW_MS), &reader);
    assert_cuv_ok(cuv_sync_on(f->b, cuvt_copy_f32(out2, f->buf, N), NULL));
    assert_cuv_ok(cuv_sync_on(f->b, cuv_memcpy_dtoh(f->got, f->buf, 0, N * sizeof(float)), NULL));
    assert_int_equal(cuvt_waits_inserted(), waits);
    cuvt_drain_until(f->q, &reader.calls, 1);
    assert_cuv_ok(reader.status);
    cuvt_assert_floats_equal(f->got, f->data, N);
    cuvt_read(f->got, f->out, 0, N * sizeof(float));
    cuvt_assert_floats_equal(f->got, f->data, N);
    cuvt_read(f->got, out2, 0, N * sizeof(float));
    cuvt_assert_floats_equal(f->got, f->data, N);
  }
  cuv_buffer_unref(out2);
}

/* Work on one stream needs no wait, whatever it does to the buffer. */
static void test_same_stream_inserts_no_wait(void **state) {
  fixture_t *f = *state;
  fresh_source(f);
  uint64_t waits = cuvt_waits_inserted();
  done_rec_t writer = {0};
  submit_on(f, f->a, slow_copy(f->buf, f->src, SLOW_MS), &writer);
  assert_cuv_ok(cuv_sync_on(f->a, cuv_memcpy_dtoh(f->got, f->buf, 0, N * sizeof(float)), NULL));
  assert_int_equal(cuvt_waits_inserted(), waits);
  cuvt_drain_until(f->q, &writer.calls, 1);
  cuvt_assert_floats_equal(f->got, f->data, N);
}

/* ---- strict mode ---- */

/* With a slow writer of buf in flight on a, conflicting ops on b are refused (a write of buf, a
 * read of buf; through cuv_sync_on and through cuv_submit), nothing is inserted, and neither
 * buffer is touched: buf ends with the writer's data, the refused op's source is unchanged. */
static void strict_conflicts_refused(fixture_t *f) {
  float *other = malloc(N * sizeof *other);
  assert_non_null(other);
  cuvt_random_ints(other, N);
  cuv_buffer_t *src2 = cuvt_buffer_of(other, N);
  fresh_source(f);
  uint64_t waits = cuvt_waits_inserted();
  done_rec_t writer = {0}, refused = {0};
  cuv_submit_opts_t on_b = {.stream = f->b};
  submit_on(f, f->a, slow_copy(f->buf, f->src, SLOW_MS), &writer);
  int rc_write = cuv_sync_on(f->b, cuvt_copy_f32(f->buf, src2, N), NULL);
  int rc_read = cuv_sync_on(f->b, cuv_memcpy_dtoh(f->got, f->buf, 0, N * sizeof(float)), NULL);
  int rc_submit = cuv_submit(f->q, cuvt_add_one(f->buf, N), record_done, &refused, &on_b);
  assert_int_equal(rc_write, CUV_ECONFLICT);
  assert_int_equal(rc_read, CUV_ECONFLICT);
  assert_cuv_ok(rc_submit); /* accepted: its callback reports the conflict */
  assert_int_equal(cuvt_waits_inserted(), waits);
  drain_both(f->q, &writer, &refused);
  assert_cuv_ok(writer.status);
  assert_int_equal(refused.status, CUV_ECONFLICT);
  /* Both intact: buf holds exactly the writer's data, src2 its own. */
  cuvt_read(f->got, f->buf, 0, N * sizeof(float));
  cuvt_assert_floats_equal(f->got, f->data, N);
  cuvt_read(f->got, src2, 0, N * sizeof(float));
  cuvt_assert_floats_equal(f->got, other, N);
  /* Once the writer retired there is nothing to conflict with: the same op runs. */
  assert_cuv_ok(cuv_sync_on(f->b, cuvt_copy_f32(f->buf, src2, N), NULL));
  cuvt_read(f->got, f->buf, 0, N * sizeof(float));
  cuvt_assert_floats_equal(f->got, other, N);
  cuv_buffer_unref(src2);
  free(other);
}

/* Reads on two streams do not conflict, in strict mode either. */
static void strict_reads_allowed(fixture_t *f) {
  fresh_source(f);
  assert_cuv_ok(cuv_sync(cuvt_copy_f32(f->buf, f->src, N), NULL));
  done_rec_t reader = {0};
  submit_on(f, f->a, slow_copy(f->out, f->buf, SLOW_MS), &reader);
  assert_cuv_ok(cuv_sync_on(f->b, cuv_memcpy_dtoh(f->got, f->buf, 0, N * sizeof(float)), NULL));
  cuvt_drain_until(f->q, &reader.calls, 1);
  assert_cuv_ok(reader.status);
  cuvt_assert_floats_equal(f->got, f->data, N);
}

static void test_strict_per_buffer(void **state) {
  fixture_t *f = *state;
  assert_cuv_ok(cuv_buffer_set_hazard_mode(f->buf, CUV_HAZARD_STRICT));
  strict_conflicts_refused(f);
  strict_reads_allowed(f);
  assert_cuv_ok(cuv_buffer_set_hazard_mode(f->buf, CUV_HAZARD_ORDER));
}

static void test_set_hazard_mode_checks(void **state) {
  fixture_t *f = *state;
  assert_int_equal(cuv_buffer_set_hazard_mode(NULL, CUV_HAZARD_STRICT), CUV_EINVAL);
  assert_int_equal(cuv_buffer_set_hazard_mode(f->buf, -1), CUV_EINVAL);
  assert_int_equal(cuv_buffer_set_hazard_mode(f->buf, CUV_HAZARD_NONE + 1), CUV_EINVAL);
}

/* ---- no tracking ---- */

/* CUV_HAZARD_NONE: the same conflict inserts no wait; the caller orders (here: by synchronizing
 * the writer's stream before reading). */
static void test_none_inserts_nothing(void **state) {
  fixture_t *f = *state;
  assert_cuv_ok(cuv_buffer_set_hazard_mode(f->buf, CUV_HAZARD_NONE));
  for (int r = 0; r < 4; r++) {
    fresh_source(f);
    uint64_t waits = cuvt_waits_inserted();
    cuv_output_t unit;
    assert_cuv_ok(cuv_enqueue_on(f->a, slow_copy(f->buf, f->src, 5), &unit));
    /* Not ordered (the caller's business): this read may see either contents; unchecked. */
    assert_cuv_ok(cuv_enqueue_on(f->b, cuv_memcpy_dtoh(f->got, f->buf, 0, N * sizeof(float)),
                                 &unit));
    assert_int_equal(cuvt_waits_inserted(), waits);
    assert_cuv_ok(cuv_stream_synchronize(f->a));
    assert_cuv_ok(cuv_stream_synchronize(f->b));
    /* Ordered by the caller now: this read sees the copy. */
    assert_cuv_ok(cuv_sync_on(f->a, cuvt_copy_f32(f->buf, f->src, N), NULL));
    assert_cuv_ok(cuv_sync_on(f->b, cuv_memcpy_dtoh(f->got, f->buf, 0, N * sizeof(float)), NULL));
    assert_int_equal(cuvt_waits_inserted(), waits);
    cuvt_assert_floats_equal(f->got, f->data, N);
  }
  assert_cuv_ok(cuv_buffer_set_hazard_mode(f->buf, CUV_HAZARD_ORDER));
}

/* ---- CUV_STRICT_HAZARDS=1 (its own test entry: the variable is read once per process) ---- */

static void test_env_strict_by_default(void **state) {
  fixture_t *f = *state;
  cuv_buffer_t *fresh = cuvt_buffer(N * sizeof(float));
  cuv_buffer_t *keep = f->buf;
  f->buf = fresh; /* a buffer made with the variable set, mode never touched */
  strict_conflicts_refused(f);
  strict_reads_allowed(f);
  f->buf = keep;
  cuv_buffer_unref(fresh);
}

/* A buffer may opt back into ordering. */
static void test_env_strict_opt_out(void **state) {
  fixture_t *f = *state;
  assert_cuv_ok(cuv_buffer_set_hazard_mode(f->buf, CUV_HAZARD_ORDER));
  fresh_source(f);
  uint64_t waits = cuvt_waits_inserted();
  done_rec_t writer = {0};
  submit_on(f, f->a, slow_copy(f->buf, f->src, SLOW_MS), &writer);
  /* buf is ordered now; out (strict) is not touched by the writer, so no conflict there. */
  assert_cuv_ok(cuv_sync_on(f->b, cuvt_copy_f32(f->out, f->buf, N), NULL));
  assert_true(cuvt_waits_inserted() > waits);
  cuvt_drain_until(f->q, &writer.calls, 1);
  assert_cuv_ok(writer.status);
  cuvt_read(f->got, f->out, 0, N * sizeof(float));
  cuvt_assert_floats_equal(f->got, f->data, N);
  assert_cuv_ok(cuv_buffer_set_hazard_mode(f->buf, CUV_HAZARD_STRICT));
}

int main(void) {
  cuvt_init();
  const char *strict = getenv("CUV_STRICT_HAZARDS");
  if (strict && strcmp(strict, "1") == 0) {
    const struct CMUnitTest env_tests[] = {
        cmocka_unit_test_setup_teardown(test_env_strict_by_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_strict_opt_out, setup, teardown),
    };
    return cuvt_run(env_tests);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_submit_writer_then_reader, setup, teardown),
      cmocka_unit_test_setup_teardown(test_submit_writer_submit_reader, setup, teardown),
      cmocka_unit_test_setup_teardown(test_enqueue_writer_enqueue_reader, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slow_kernel_write_then_download, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_after_read_is_ordered, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reads_insert_no_wait, setup, teardown),
      cmocka_unit_test_setup_teardown(test_same_stream_inserts_no_wait, setup, teardown),
      cmocka_unit_test_setup_teardown(test_strict_per_buffer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_set_hazard_mode_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_none_inserts_nothing, setup, teardown),
  };
  return cuvt_run(tests);
}
