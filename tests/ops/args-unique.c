/* Unique storage for writable kernel arguments (cuda-async's rule for mutable arguments): two
 * writable arguments naming overlapping bytes of one buffer are refused with CUV_EARGS when the
 * launch is built, and the buffer is left untouched; disjoint ranges of one buffer are accepted
 * and written as asked; a read may overlap a write (an in-place kernel); CUV_ARG_MAY_ALIAS lets a
 * kernel alias on purpose; a range past the buffer is CUV_ERANGE. Random ranges are judged
 * against an overlap computed on the host. */
#include "counted.h"

/* fill_two_u32(n, a, x, b, y): x[i] = a, then y[i] = b. */
static cuv_op_t *fill_two(unsigned n, unsigned *a, cuv_arg_t x, unsigned *b, cuv_arg_t y) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_SCALAR(a, sizeof *a), x,
                      CUV_ARG_SCALAR(b, sizeof *b), y};
  return cuv_launch(cuvt_kernel_ok("fill_two_u32"), CUVT_GRID(n ? n : 1), CUVT_BLOCK, 0, args, 5);
}

static cuv_arg_t writable(bool rw, cuv_buffer_t *buf, size_t offset, size_t length) {
  return rw ? CUV_ARG_RW_RANGE(buf, offset, length) : CUV_ARG_WRITE_RANGE(buf, offset, length);
}

/* Two random word ranges of one buffer, each writable (WRITE or RW, length 0 meaning to the end
 * now and then): refused exactly when the ranges share a word, else both are written. */
static void test_random_writable_ranges(void **state) {
  enum { WORDS = 512, TRIALS = 200 };
  uint32_t *want;
  cuv_buffer_t *buf = cuvt_random_words(WORDS, &want);
  unsigned refused = 0, accepted = 0;
  for (int t = 0; t < TRIALS; t++) {
    size_t off[2], len[2];
    for (int k = 0; k < 2; k++) {
      off[k] = cuvt_random_u32() % WORDS;
      len[k] = 1 + cuvt_random_u32() % (WORDS - off[k]);
    }
    bool to_end = cuvt_random_u32() % 4 == 0; /* the second range given as length 0 */
    if (to_end)
      len[1] = WORDS - off[1];
    bool overlap = off[0] < off[1] + len[1] && off[1] < off[0] + len[0];
    unsigned n = (unsigned)(len[0] < len[1] ? len[0] : len[1]);
    unsigned a = cuvt_random_u32(), b = cuvt_random_u32();
    cuv_op_t *op = fill_two(n, &a, writable(t % 2, buf, off[0] * 4, len[0] * 4), &b,
                            writable(t % 3 == 0, buf, off[1] * 4, to_end ? 0 : len[1] * 4));
    assert_int_equal(cuv_op_error(op), overlap ? CUV_EARGS : 0);
    assert_int_equal(cuv_sync(op, NULL), overlap ? CUV_EARGS : 0);
    if (overlap) {
      refused++;
      continue;
    }
    accepted++;
    for (size_t i = 0; i < n; i++) {
      want[off[0] + i] = a;
      want[off[1] + i] = b;
    }
  }
  cuvt_expect_words(buf, want, WORDS); /* refused launches wrote nothing */
  printf("# %u refused, %u accepted\n", refused, accepted);
  assert_true(refused > 0 && accepted > 0);
  cuv_buffer_unref(buf);
  free(want);
}

/* The same buffer, or overlapping offsets to its end, twice: refused with every writable kind. */
static void test_whole_buffer_twice_refused(void **state) {
  uint32_t *want;
  size_t words = 64 + cuvt_random_u32() % 1024;
  cuv_buffer_t *buf = cuvt_random_words(words, &want);
  unsigned a = 1, b = 2, n = (unsigned)words / 2;
  cuv_arg_t kinds[] = {CUV_ARG_WRITE(buf), CUV_ARG_RW(buf), CUV_ARG_WRITE_AT(buf, 4),
                       CUV_ARG_RW_AT(buf, (words - 1) * 4)};
  for (size_t i = 0; i < 4; i++)
    for (size_t j = 0; j < 4; j++)
      assert_int_equal(cuv_sync(fill_two(n, &a, kinds[i], &b, kinds[j]), NULL), CUV_EARGS);
  cuvt_expect_words(buf, want, words);
  cuv_buffer_unref(buf);
  free(want);
}

/* Two halves of one buffer, and ranges that only touch (one ends where the other begins). */
static void test_disjoint_halves_written(void **state) {
  uint32_t *want;
  size_t half = 1 + cuvt_random_u32() % 2048;
  cuv_buffer_t *buf = cuvt_random_words(2 * half, &want);
  unsigned a = cuvt_random_u32(), b = cuvt_random_u32(), n = (unsigned)half;
  assert_cuv_ok(cuv_sync(
      fill_two(n, &a, CUV_ARG_WRITE_RANGE(buf, 0, half * 4), &b, CUV_ARG_RW_AT(buf, half * 4)),
      NULL));
  for (size_t i = 0; i < half; i++) {
    want[i] = a;
    want[half + i] = b;
  }
  cuvt_expect_words(buf, want, 2 * half);
  /* The second half first, the first as a range of its own. */
  assert_cuv_ok(cuv_sync(
      fill_two(n, &b, CUV_ARG_RW_AT(buf, half * 4), &a, CUV_ARG_RW_RANGE(buf, 0, half * 4)), NULL));
  for (size_t i = 0; i < half; i++) {
    want[i] = a;
    want[half + i] = b;
  }
  cuvt_expect_words(buf, want, 2 * half);
  cuv_buffer_unref(buf);
  free(want);
}

/* saxpy(n, a, x, y) with x and y the same floats: y = a * y + y, in place. */
static void test_read_overlapping_write_accepted(void **state) {
  unsigned n = 1 + cuvt_random_u32() % 4096;
  float *host = malloc(n * sizeof *host), *want = malloc(n * sizeof *want);
  cuvt_random_ints(host, n);
  float a = (float)(int)(cuvt_random_u32() % 19) - 9.0f;
  for (unsigned i = 0; i < n; i++)
    want[i] = a * host[i] + host[i];
  cuv_buffer_t *buf = cuvt_buffer_of(host, n);
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_READ(buf), CUV_ARG_RW(buf)};
  assert_cuv_ok(
      cuv_sync(cuv_launch(cuvt_kernel_ok("saxpy"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 4), NULL));
  cuvt_read(host, buf, 0, n * sizeof *host);
  cuvt_assert_floats_equal(host, want, n);
  cuv_buffer_unref(buf);
  free(host);
  free(want);
}

/* CUV_ARG_MAY_ALIAS on either of two writable arguments lets them name the same words: each
 * thread writes a, then b, to one word, so b is what stays. */
static void test_may_alias_opts_out(void **state) {
  uint32_t *want;
  size_t words = 1 + cuvt_random_u32() % 4096;
  cuv_buffer_t *buf = cuvt_random_words(words, &want);
  unsigned n = (unsigned)words;
  for (int which = 0; which < 2; which++) {
    unsigned a = cuvt_random_u32(), b = cuvt_random_u32();
    cuv_arg_t x = CUV_ARG_WRITE(buf), y = CUV_ARG_RW(buf);
    if (which == 0)
      x = CUV_ARG_MAY_ALIAS(x);
    else
      y = CUV_ARG_MAY_ALIAS(y);
    assert_int_equal(y.flags | x.flags, CUV_ARG_FLAG_MAY_ALIAS);
    assert_cuv_ok(cuv_sync(fill_two(n, &a, x, &b, y), NULL));
    for (size_t i = 0; i < words; i++)
      want[i] = b;
    cuvt_expect_words(buf, want, words);
  }
  cuv_buffer_unref(buf);
  free(want);
}

/* A range past the buffer, or one whose end overflows: CUV_ERANGE; an empty range at the end is
 * fine. */
static void test_ranges_past_the_buffer(void **state) {
  size_t bytes = 4 * (1 + cuvt_random_u32() % 1024);
  cuv_buffer_t *buf = cuvt_buffer(bytes), *other = cuvt_buffer(bytes);
  unsigned a = 1, b = 2, n = 1;
  cuv_arg_t ok = CUV_ARG_WRITE(other);
  cuv_arg_t bad[] = {CUV_ARG_WRITE_RANGE(buf, 0, bytes + 1), CUV_ARG_RW_RANGE(buf, bytes, 1),
                     CUV_ARG_READ_RANGE(buf, 4, SIZE_MAX), CUV_ARG_READ_RANGE(buf, bytes + 4, 0),
                     CUV_ARG_WRITE_RANGE(buf, SIZE_MAX, 2)};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cuv_op_t *op = fill_two(n, &a, ok, &b, bad[i]);
    assert_int_equal(cuv_op_error(op), CUV_ERANGE);
    assert_int_equal(cuv_sync(op, NULL), CUV_ERANGE);
  }
  /* Nothing at the end: a valid pointer for a kernel that writes nothing there (n = 0). */
  assert_cuv_ok(cuv_sync(fill_two(0, &a, ok, &b, CUV_ARG_WRITE_RANGE(buf, bytes, 0)), NULL));
  cuv_buffer_unref(buf);
  cuv_buffer_unref(other);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_writable_ranges),
      cmocka_unit_test(test_whole_buffer_twice_refused),
      cmocka_unit_test(test_disjoint_halves_written),
      cmocka_unit_test(test_read_overlapping_write_accepted),
      cmocka_unit_test(test_may_alias_opts_out),
      cmocka_unit_test(test_ranges_past_the_buffer),
  };
  return cuvt_run(tests);
}
