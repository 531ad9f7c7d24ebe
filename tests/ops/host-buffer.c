/* Host buffers (pinned, reference counted): uploads from and downloads into them at offsets,
 * checked byte for byte on fresh random data; the submission holds the host buffer until its work
 * completed (the caller's reference dropped at once, and the pool tempted to hand the block out
 * again while a slow kernel still delays the copy); bad arguments. */
#include "counted.h"

#define N 4096 /* floats */

typedef struct done {
  atomic_int calls;
  int status;
} done_t;

static void record_done(int status, cuv_output_t *output, void *arg) {
  done_t *d = arg;
  (void)output;
  d->status = status;
  atomic_fetch_add(&d->calls, 1);
}

static cuv_host_buffer_t *host_buffer(size_t bytes) {
  cuv_host_buffer_t *hb = NULL;
  assert_cuv_ok(cuv_host_buffer_create(&hb, cuvt_device(), bytes));
  assert_non_null(cuv_host_buffer_data(hb));
  assert_int_equal(cuv_host_buffer_size(hb), bytes);
  return hb;
}

static cuv_buffer_t *device_buffer(size_t bytes) {
  cuv_buffer_t *buf;
  assert_cuv_ok(cuv_buffer_create(&buf, cuvt_device(), bytes));
  return buf;
}

/* Up from one host buffer at an offset, through the device, down into another at another offset. */
static void test_round_trip_at_offsets(void **state) {
  (void)state;
  const size_t bytes = N * sizeof(float), in_off = 256, out_off = 1024, dev_off = 512;
  cuv_host_buffer_t *in = host_buffer(bytes + in_off), *out = host_buffer(bytes + out_off);
  cuv_buffer_t *dev = device_buffer(bytes + dev_off);
  float *src = (float *)((char *)cuv_host_buffer_data(in) + in_off);
  cuvt_random_floats(src, N);
  memset(cuv_host_buffer_data(out), 0xab, bytes + out_off);
  assert_cuv_ok(cuv_sync(cuv_seq(cuv_upload(dev, dev_off, in, in_off, bytes),
                                 cuv_download_into(out, out_off, dev, dev_off, bytes)),
                         NULL));
  const unsigned char *got = cuv_host_buffer_data(out);
  assert_memory_equal(got + out_off, src, bytes);
  for (size_t i = 0; i < out_off; i++) /* nothing before the offset was touched */
    assert_int_equal(got[i], 0xab);
  cuv_host_buffer_unref(in);
  cuv_host_buffer_unref(out);
  cuv_buffer_unref(dev);
}

/* The caller drops its reference right after submitting; a slow kernel ahead on the same stream
 * keeps the upload pending while new host buffers of the same size (from the same pool) are
 * taken and scribbled over. The upload must still read the caller's data. */
static void test_submission_holds_the_host_buffer(void **state) {
  (void)state;
  const size_t bytes = N * sizeof(float);
  cuv_host_buffer_t *in = host_buffer(bytes);
  float *want = malloc(bytes);
  assert_non_null(want);
  cuvt_random_floats(want, N);
  memcpy(cuv_host_buffer_data(in), want, bytes);
  cuv_buffer_t *dev = device_buffer(bytes);
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  done_t done = {0};
  assert_cuv_ok(cuv_submit(q, cuv_seq(cuvt_sleep(30), cuv_upload(dev, 0, in, 0, bytes)),
                           record_done, &done, NULL));
  cuv_host_buffer_unref(in); /* the submission's reference keeps it */
  cuv_host_buffer_t *others[8];
  for (int i = 0; i < 8; i++) {
    others[i] = host_buffer(bytes);
    memset(cuv_host_buffer_data(others[i]), 0x5a, bytes);
  }
  cuvt_drain_until(q, &done.calls, 1);
  assert_int_equal(atomic_load(&done.calls), 1);
  assert_int_equal(done.status, 0);
  float *got = malloc(bytes);
  assert_non_null(got);
  cuvt_read(got, dev, 0, bytes);
  assert_memory_equal(got, want, bytes);
  for (int i = 0; i < 8; i++)
    cuv_host_buffer_unref(others[i]);
  free(got);
  free(want);
  cuv_buffer_unref(dev);
  assert_cuv_ok(cuv_queue_destroy(q));
}

static void test_bad_arguments(void **state) {
  (void)state;
  cuv_host_buffer_t *hb = (cuv_host_buffer_t *)1;
  assert_int_equal(cuv_host_buffer_create(NULL, cuvt_device(), 16), CUV_EINVAL);
  assert_int_equal(cuv_host_buffer_create(&hb, NULL, 16), CUV_EINVAL);
  assert_null(hb);
  assert_int_equal(cuv_host_buffer_create(&hb, cuvt_device(), 0), CUV_EINVAL);
  assert_null(cuv_host_buffer_data(NULL));
  assert_int_equal(cuv_host_buffer_size(NULL), 0);
  assert_null(cuv_host_buffer_ref(NULL));
  cuv_host_buffer_unref(NULL);
  hb = host_buffer(64);
  cuv_buffer_t *dev = device_buffer(64);
  struct {
    cuv_op_t *op;
    int want;
  } cases[] = {
      {cuv_upload(NULL, 0, hb, 0, 16), CUV_EINVAL},
      {cuv_upload(dev, 0, NULL, 0, 16), CUV_EINVAL},
      {cuv_upload(dev, 0, hb, 60, 16), CUV_ERANGE},
      {cuv_upload(dev, 0, hb, 65, 0), CUV_ERANGE},
      {cuv_upload(dev, 60, hb, 0, 16), CUV_ERANGE},
      {cuv_upload(dev, 0, hb, 0, SIZE_MAX), CUV_ERANGE},
      {cuv_download_into(NULL, 0, dev, 0, 16), CUV_EINVAL},
      {cuv_download_into(hb, 0, NULL, 0, 16), CUV_EINVAL},
      {cuv_download_into(hb, 56, dev, 0, 16), CUV_ERANGE},
      {cuv_download_into(hb, 0, dev, 56, 16), CUV_ERANGE},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_int_equal(cuv_op_error(cases[i].op), cases[i].want);
    assert_int_equal(cuv_sync(cases[i].op, NULL), cases[i].want);
  }
  /* A refused or dropped op gives its reference back: the caller's is the last. */
  cuv_op_destroy(cuv_upload(dev, 0, hb, 0, 16));
  cuv_host_buffer_unref(hb);
  cuv_buffer_unref(dev);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_at_offsets),
      cmocka_unit_test(test_submission_holds_the_host_buffer),
      cmocka_unit_test(test_bad_arguments),
  };
  return cuvt_run(tests);
}
