/* Unique storage of copies and custom ops (cuda-async's rule for memcpy destinations and mutable
 * storage): a device-to-device copy whose destination range overlaps its source range, and a
 * custom op whose WRITE or RW access overlaps another of its declared accesses, are refused with
 * CUV_EOVERLAP when the op is built, leaving the buffer untouched and (custom ops) running drop
 * once and never execute. Ranges are compared by device address, so two buffers adopted over one
 * allocation overlap too. Random ranges are judged against an overlap computed on the host, with
 * the buffer strict (CUV_HAZARD_STRICT) for half the trials: the answer does not depend on it. */
#include "counted.h"

enum { WORDS = 256, TRIALS = 200 };

static bool words_overlap(size_t a, size_t a_len, size_t b, size_t b_len) {
  return a_len && b_len && a < b + b_len && b < a + a_len;
}

static void set_strict(cuv_buffer_t *buf, bool strict) {
  assert_cuv_ok(cuv_buffer_set_hazard_mode(buf, strict ? CUV_HAZARD_STRICT : CUV_HAZARD_ORDER));
}

/* Random copies within one buffer: refused exactly when the ranges share a word, else copied. */
static void test_random_copies_in_one_buffer(void **state) {
  uint32_t *want;
  cuv_buffer_t *buf = cuvt_random_words(WORDS, &want);
  unsigned refused = 0, copied = 0;
  for (int t = 0; t < TRIALS; t++) {
    set_strict(buf, t % 2);
    size_t len = cuvt_random_u32() % (WORDS / 2 + 1); /* 0 now and then */
    size_t src = cuvt_random_u32() % (WORDS - len + 1), dst = cuvt_random_u32() % (WORDS - len + 1);
    bool overlap = words_overlap(dst, len, src, len);
    cuv_op_t *op = t % 3 == 0 ? cuv_memcpy_peer(buf, dst * 4, buf, src * 4, len * 4)
                              : cuv_memcpy_dtod(buf, dst * 4, buf, src * 4, len * 4);
    assert_int_equal(cuv_op_error(op), overlap ? CUV_EOVERLAP : 0);
    assert_int_equal(cuv_sync(op, NULL), overlap ? CUV_EOVERLAP : 0);
    if (overlap) {
      refused++;
      continue;
    }
    copied++;
    memmove(&want[dst], &want[src], len * 4);
  }
  cuvt_expect_words(buf, want, WORDS); /* refused copies wrote nothing */
  printf("# %u refused, %u copied\n", refused, copied);
  assert_true(refused > 0 && copied > 0);
  cuv_buffer_unref(buf);
  free(want);
}

/* Two buffers adopted over overlapping parts of one allocation: a copy from one to the other is
 * refused when the device addresses overlap, though the buffers differ. */
static void test_copies_between_adopted_aliases(void **state) {
  uint32_t *want;
  cuv_buffer_t *base = cuvt_random_words(WORDS, &want);
  size_t shift = 1 + cuvt_random_u32() % (WORDS / 2); /* b starts `shift` words into a */
  cuv_buffer_t *a = NULL, *b = NULL;
  assert_cuv_ok(cuv_buffer_adopt(&a, cuvt_device(), cuv_buffer_ptr(base), WORDS * 4, NULL, NULL));
  assert_cuv_ok(cuv_buffer_adopt(&b, cuvt_device(), cuv_buffer_ptr(base) + shift * 4,
                                 (WORDS - shift) * 4, NULL, NULL));
  unsigned refused = 0, copied = 0;
  for (int t = 0; t < TRIALS; t++) {
    size_t len = 1 + cuvt_random_u32() % (WORDS / 4);
    size_t in_b = cuvt_random_u32() % (WORDS - shift - len + 1);
    size_t in_a = cuvt_random_u32() % (WORDS - len + 1);
    bool to_b = t % 2; /* copy a -> b, or b -> a */
    bool overlap = words_overlap(in_a, len, shift + in_b, len);
    cuv_op_t *op = to_b ? cuv_memcpy_dtod(b, in_b * 4, a, in_a * 4, len * 4)
                        : cuv_memcpy_dtod(a, in_a * 4, b, in_b * 4, len * 4);
    assert_int_equal(cuv_sync(op, NULL), overlap ? CUV_EOVERLAP : 0);
    refused += overlap;
    copied += !overlap;
    if (!overlap && to_b)
      memmove(&want[shift + in_b], &want[in_a], len * 4);
    else if (!overlap)
      memmove(&want[in_a], &want[shift + in_b], len * 4);
  }
  cuvt_expect_words(base, want, WORDS);
  printf("# %u refused, %u copied\n", refused, copied);
  assert_true(refused > 0 && copied > 0);
  cuv_buffer_unref(a);
  cuv_buffer_unref(b);
  cuv_buffer_unref(base);
  free(want);
}

/* ---- custom ops ---- */

static atomic_int executed, dropped;

static int count_execute(cuv_custom_ctx_t *ctx, cuv_output_t *out, void *arg) {
  atomic_fetch_add(&executed, 1);
  return 0;
}

static void count_drop(void *arg) { atomic_fetch_add(&dropped, 1); }

static const enum cuv_arg_kind kinds[] = {CUV_ARG_KIND_READ, CUV_ARG_KIND_WRITE, CUV_ARG_KIND_RW};

/* A random access to a buffer of `words` words: its first word and length in *at, *len (bytes 0
 * now and then: to the buffer's end). */
static cuv_access_t random_access(cuv_buffer_t *buf, size_t words, size_t *at, size_t *len) {
  *at = cuvt_random_u32() % words;
  bool to_end = cuvt_random_u32() % 4 == 0;
  *len = to_end ? words - *at : 1 + cuvt_random_u32() % (words - *at);
  return (cuv_access_t){buf, kinds[cuvt_random_u32() % 3], *at * 4, to_end ? 0 : *len * 4};
}

/* Two random accesses to one buffer: refused exactly when one writes and they share a word;
 * execute runs for each accepted op and drop for each refused one, once. */
static void test_random_custom_accesses(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(WORDS * 4);
  unsigned refused = 0, accepted = 0;
  atomic_store(&executed, 0);
  atomic_store(&dropped, 0);
  for (int t = 0; t < TRIALS; t++) {
    set_strict(buf, t % 2);
    size_t at[2], len[2];
    cuv_access_t acc[2];
    for (int k = 0; k < 2; k++)
      acc[k] = random_access(buf, WORDS, &at[k], &len[k]);
    bool writes = acc[0].kind != CUV_ARG_KIND_READ || acc[1].kind != CUV_ARG_KIND_READ;
    bool refuse = writes && words_overlap(at[0], len[0], at[1], len[1]);
    cuv_op_t *op = cuv_custom(count_execute, NULL, count_drop, acc, 2);
    assert_int_equal(cuv_op_error(op), refuse ? CUV_EOVERLAP : 0);
    assert_int_equal(cuv_sync(op, NULL), refuse ? CUV_EOVERLAP : 0);
    refused += refuse;
    accepted += !refuse;
    assert_int_equal(atomic_load(&executed), accepted);
    assert_int_equal(atomic_load(&dropped), refused);
  }
  printf("# %u refused, %u accepted\n", refused, accepted);
  assert_true(refused > 0 && accepted > 0);
  cuv_buffer_unref(buf);
}

/* Among several accesses to several buffers, one write overlapping a read of the same buffer is
 * enough to refuse; the same accesses with the write moved past the read are accepted, and reads
 * may overlap each other. */
static void test_one_overlap_among_many(void **state) {
  cuv_buffer_t *x = cuvt_buffer(WORDS * 4), *y = cuvt_buffer(WORDS * 4);
  size_t cut = 4 * (1 + cuvt_random_u32() % (WORDS - 2));
  atomic_store(&executed, 0);
  atomic_store(&dropped, 0);
  cuv_access_t acc[] = {CUV_ACCESS_READ(x), CUV_ACCESS_READ_RANGE(y, 0, cut),
                        CUV_ACCESS_READ_RANGE(y, 0, cut), CUV_ACCESS_WRITE_RANGE(y, cut - 4, 0)};
  assert_int_equal(cuv_sync(cuv_custom(count_execute, NULL, count_drop, acc, 4), NULL),
                   CUV_EOVERLAP);
  acc[3] = CUV_ACCESS_WRITE_RANGE(y, cut, 0); /* touches the reads' end, shares no byte */
  assert_cuv_ok(cuv_sync(cuv_custom(count_execute, NULL, count_drop, acc, 4), NULL));
  acc[0] = CUV_ACCESS_RW(x);
  acc[1] = CUV_ACCESS_READ(x);
  assert_int_equal(cuv_sync(cuv_custom(count_execute, NULL, count_drop, acc, 4), NULL),
                   CUV_EOVERLAP);
  assert_int_equal(atomic_load(&executed), 1);
  assert_int_equal(atomic_load(&dropped), 2);
  cuv_buffer_unref(x);
  cuv_buffer_unref(y);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_copies_in_one_buffer),
      cmocka_unit_test(test_copies_between_adopted_aliases),
      cmocka_unit_test(test_random_custom_accesses),
      cmocka_unit_test(test_one_overlap_among_many),
  };
  return cuvt_run(tests);
}
