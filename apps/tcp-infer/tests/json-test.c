/* tcp-infer-json: the JSON reading (jansson, kserve_json.c) and writing that KServe's
 * requests go through: a document of every kind of value read back value by value, strings'
 * escapes decoded, every malformed document of a list refused with a reason, every prefix of a
 * valid document refused (no read past the end), what kserve_json.c's flags decide (duplicate keys,
 * numbers as reals, NaN and overflow refused, UTF-8 checked, NULs refused), the depth bound on
 * arrays and objects, big arrays, and float32 values written and read back exactly. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kserve_json.h"

/* text (a C string) read, or the test fails with the reason. */
static json_t *read_ok(const char *text) {
  char why[JSON_WHY_LEN];
  json_t *v = json_read(text, strlen(text), why);
  if (!v)
    fail_msg("refused (%s): %s", why, text);
  return v;
}

/* text[0, len) refused with a reason; the reason, into why. */
static void read_refused(const char *text, size_t len, char why[JSON_WHY_LEN]) {
  why[0] = '\0';
  json_t *v = json_read(text, len, why);
  if (v)
    fail_msg("accepted: %.*s", (int)len, text);
  assert_true(why[0] != '\0');
}

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/* A random finite float32 (NaN and the infinities have no JSON spelling). */
static float random_float(uint64_t *x) {
  for (;;) {
    uint32_t bits = (uint32_t)xorshift(x);
    float v;
    memcpy(&v, &bits, sizeof v);
    if (v == v && v - v == 0)
      return v;
  }
}

static void test_values(void **state) {
  json_t *root = read_ok(
      " {\"a\": [1, 2.5, -3e2, {\"b\": null}], \"s\": \"q\\\"b\\\\s\\/\\n\\u00e9\\ud83d\\ude00\","
      " \"t\": true, \"f\": false, \"e\": {}, \"z\": [], \"n\": -0.125E+1} ");
  assert_true(json_is_object(root));
  assert_int_equal(json_object_size(root), 7);
  const json_t *a = json_object_get(root, "a");
  assert_true(json_is_array(a));
  assert_int_equal(json_array_size(a), 4);
  const double want_a[] = {1.0, 2.5, -300.0};
  for (size_t i = 0; i < 3; i++) {
    assert_true(json_is_real(json_array_get(a, i))); /* JSON_DECODE_INT_AS_REAL: 1 too */
    assert_true(json_real_value(json_array_get(a, i)) == want_a[i]);
  }
  assert_true(json_is_null(json_object_get(json_array_get(a, 3), "b")));
  assert_null(json_array_get(a, 4));
  const json_t *s = json_object_get(root, "s");
  static const char want[] = "q\"b\\s/\n\xc3\xa9\xf0\x9f\x98\x80";
  assert_int_equal(json_string_length(s), sizeof want - 1);
  assert_memory_equal(json_string_value(s), want, sizeof want);
  assert_true(json_string_is(s, want));
  assert_false(json_string_is(s, "q"));
  assert_false(json_string_is(a, want)); /* not a string */
  assert_true(json_is_true(json_object_get(root, "t")));
  assert_true(json_is_false(json_object_get(root, "f")));
  assert_int_equal(json_object_size(json_object_get(root, "e")), 0);
  assert_int_equal(json_array_size(json_object_get(root, "z")), 0);
  assert_true(json_number_value(json_object_get(root, "n")) == -1.25);
  assert_null(json_object_get(root, "missing"));
  assert_null(json_object_get(a, "a")); /* not an object */
  json_decref(root);
}

static void test_malformed(void **state) {
  static const char *const bad[] = {
      "",        " ",          "{",           "}",         "[1,]",       "{\"a\":1,}",
      "01",      "1.",         ".5",          "-",         "1e",         "1e+",
      "+1",      "0x10",       "NaN",         "Infinity",  "nul",        "tru",
      "\"abc",   "\"\\x\"",    "\"\x01\"",    "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"",
      "\"\\ud800\\u0041\"",    "[1 2]",       "{\"a\" 1}", "{1:2}",      "[1]x",
      "{\"a\":}", "[,1]",      "{,}",         "'a'",       "[1] [2]",    "/* c */ 1",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char why[JSON_WHY_LEN];
    read_refused(bad[i], strlen(bad[i]), why);
    assert_non_null(strstr(why, " at byte ")); /* a reason, with the offset */
  }
  char why[JSON_WHY_LEN];
  assert_null(json_read(NULL, 0, why));
  assert_string_equal(why, "no document");
  /* no room for the reason: refused all the same, or read */
  assert_null(json_read(NULL, 0, NULL));
  assert_null(json_read("[1,", 3, NULL));
  json_t *v = json_read("[1]", 3, NULL);
  assert_int_equal(json_array_size(v), 1);
  json_decref(v);
}

/* Every proper prefix of a document is refused: the reader never looks past the length (ASan
 * sees each prefix in a block of its own size). */
static void test_prefixes(void **state) {
  static const char text[] = "{\"k\":[1.5e3,\"\\u00e9\",true,null,{\"x\":-2}]}";
  for (size_t n = 0; n < sizeof text - 1; n++) {
    char *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, text, n);
    char why[JSON_WHY_LEN];
    read_refused(copy, n, why);
    free(copy);
  }
  json_decref(read_ok(text));
}

/* A key twice in one object is refused (JSON_REJECT_DUPLICATES), at any depth; the same key in
 * two objects is not. */
static void test_duplicate_keys(void **state) {
  static const char *const twice[] = {
      "{\"a\":1,\"a\":1}",
      "{\"a\":1,\"b\":2,\"a\":3}",
      "{\"inputs\":[{\"name\":\"INPUT0\",\"name\":\"INPUT0\"}]}",
      "{\"a\":1,\"\\u0061\":2}", /* the same key, spelled with an escape */
  };
  for (size_t i = 0; i < sizeof twice / sizeof twice[0]; i++) {
    char why[JSON_WHY_LEN];
    read_refused(twice[i], strlen(twice[i]), why);
    assert_non_null(strstr(why, "duplicate"));
  }
  json_t *v = read_ok("{\"a\":{\"k\":1},\"b\":{\"k\":2},\"A\":3}");
  assert_true(json_number_value(json_object_get(json_object_get(v, "b"), "k")) == 2);
  assert_int_equal(json_object_size(v), 3);
  json_decref(v);
}

/* Containers nested `depth` levels, alternating between the kinds of open[] and close[] (an
 * array's [ ], an object's {"k": }), around an innermost container at depth `depth`: empty, or
 * holding a number (at depth + 1). */
static char *nested(unsigned depth, const char *const open[2], const char *const close[2],
                    bool number) {
  size_t cap = (depth + 1) * 8 + 16, n = 0;
  char *text = malloc(cap);
  assert_non_null(text);
  for (unsigned i = 0; i < depth; i++)
    n += (size_t)snprintf(text + n, cap - n, "%s", open[i % 2]);
  bool array = open[depth % 2][0] == '[';
  n += (size_t)snprintf(text + n, cap - n, "%s", array ? (number ? "[7]" : "[]")
                                                       : (number ? "{\"n\":7}" : "{}"));
  for (unsigned i = depth; i-- > 0;)
    n += (size_t)snprintf(text + n, cap - n, "%s", close[i % 2]);
  return text;
}

/* Values as deep as JSON_MAX_DEPTH (the root at 0) are read, one level more is refused: arrays,
 * objects, both in turn, an empty innermost container or a number in it. */
static void test_depth(void **state) {
  static const char *const kinds[][2][2] = {
      {{"[", "["}, {"]", "]"}},
      {{"{\"k\":", "{\"k\":"}, {"}", "}"}},
      {{"[", "{\"k\":"}, {"]", "}"}},
  };
  for (size_t k = 0; k < 3; k++)
    for (unsigned depth = JSON_MAX_DEPTH - 1; depth <= JSON_MAX_DEPTH + 1; depth++)
      for (int number = 0; number < 2; number++) {
        char *text = nested(depth, kinds[k][0], kinds[k][1], number);
        char why[JSON_WHY_LEN];
        json_t *v = json_read(text, strlen(text), why);
        bool fits = depth + (unsigned)number <= JSON_MAX_DEPTH;
        if (fits != (v != NULL))
          fail_msg("depth %u + %d: %s", depth, number, v ? "accepted" : why);
        if (!fits) {
          assert_string_equal(why, "nested deeper than 32");
          assert_null(json_read(text, strlen(text), NULL)); /* no room for the reason */
        }
        json_decref(v);
        free(text);
      }
  /* deeper than jansson's own bound (2048): refused too, without exhausting the stack */
  char *text = nested(5000, kinds[0][0], kinds[0][1], false);
  char why[JSON_WHY_LEN];
  read_refused(text, strlen(text), why);
  free(text);
}

/* Numbers: every one a real (JSON_DECODE_INT_AS_REAL), integers past json_int_t included; NaN,
 * the infinities and values past double's range refused; an underflow reads as zero. */
static void test_numbers(void **state) {
  json_t *v = read_ok("[123456789012345678901234567890, -0, 1e308, 1e-400, 1000000000000000000]");
  assert_true(json_real_value(json_array_get(v, 0)) == 123456789012345678901234567890.0);
  assert_true(json_is_real(json_array_get(v, 1)) && json_real_value(json_array_get(v, 1)) == 0);
  assert_true(json_real_value(json_array_get(v, 2)) == 1e308);
  assert_true(json_real_value(json_array_get(v, 3)) == 0);
  assert_true(json_number_value(json_array_get(v, 4)) == 1e18);
  json_decref(v);
  static const char *const refused[] = {
      "NaN",  "-NaN", "nan",     "Infinity", "-Infinity", "inf",       "1e999",
      "-1e999", "[1e400]", "{\"x\":-1.8e308}", "[1, Infinity]",
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    char why[JSON_WHY_LEN];
    read_refused(refused[i], strlen(refused[i]), why);
  }
}

/* Strings must be valid UTF-8 (jansson checks): truncated, overlong, surrogate, past U+10FFFF
 * and stray bytes refused, in values and in keys; a \u0000 is refused (no JSON_ALLOW_NUL). */
static void test_utf8(void **state) {
  static const char *const invalid[] = {
      "\xff",         "\x80",         "\xc3",             "\xe2\x82",         "\xc0\xaf",
      "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80", "a\xfe",
  };
  for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
    for (int key = 0; key < 2; key++) {
      char text[64], why[JSON_WHY_LEN];
      snprintf(text, sizeof text, key ? "{\"%s\":1}" : "[\"%s\"]", invalid[i]);
      read_refused(text, strlen(text), why);
    }
  char why[JSON_WHY_LEN];
  read_refused("\"a\\u0000b\"", 10, why);
  read_refused("{\"\\u0000\":1}", 12, why);
  static const char valid[] = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\x7f";
  char text[64];
  snprintf(text, sizeof text, "\"%s\"", valid);
  json_t *v = read_ok(text);
  assert_true(json_string_is(v, valid));
  json_decref(v);
}

/* Big arrays of random float32s, flat and nested, read back to the same bits, every one. */
static void test_big_arrays(void **state) {
  enum { N = 200000, ROW = 64 };
  uint64_t x = 0x2545f4914f6cdd1dull ^ (uint64_t)(uintptr_t)&x;
  float *want = malloc(N * sizeof *want);
  assert_non_null(want);
  for (size_t i = 0; i < N; i++)
    want[i] = random_float(&x);
  for (int rows = 0; rows < 2; rows++) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    fputc('[', f);
    for (size_t i = 0; i < N; i++) {
      fputs(i ? "," : "", f);
      fputs(rows && i % ROW == 0 ? "[" : "", f);
      json_put_float(f, want[i]);
      fputs(rows && i % ROW == ROW - 1 ? "]" : "", f);
    }
    fputc(']', f);
    assert_int_equal(fclose(f), 0);
    char why[JSON_WHY_LEN];
    json_t *v = json_read(text, len, why);
    if (!v)
      fail_msg("%s", why);
    assert_int_equal(json_array_size(v), rows ? N / ROW : N);
    for (size_t i = 0; i < N; i++) {
      const json_t *e = rows ? json_array_get(json_array_get(v, i / ROW), i % ROW)
                             : json_array_get(v, i);
      float back = (float)json_number_value(e);
      if (memcmp(&back, &want[i], sizeof back) != 0)
        fail_msg("value %zu: %.9g read back as %.9g", i, (double)want[i], (double)back);
    }
    json_decref(v);
    free(text);
  }
  free(want);
}

/* Random float32 bit patterns (finite ones) written as JSON numbers read back to the same bits. */
static void test_float_round_trip(void **state) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 20000; i++) {
    float v = random_float(&x);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    json_put_float(f, v);
    assert_int_equal(fclose(f), 0);
    char why[JSON_WHY_LEN];
    json_t *doc = json_read(text, len, why);
    if (!doc)
      fail_msg("%s: %s", text, why);
    float back = (float)json_number_value(doc);
    assert_memory_equal(&back, &v, sizeof v);
    json_decref(doc);
    free(text);
  }
}

/* json_put_string's output reads back as the same bytes; a NUL it escapes is refused on the way
 * back (kserve_json.c: no JSON_ALLOW_NUL). */
static void test_string_round_trip(void **state) {
  char raw[64];
  for (int i = 0; i < 64; i++)
    raw[i] = (char)(i < 32 ? i : "\"\\/abc\xc3\xa9"[i % 8]);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  json_put_string(f, raw + 1, sizeof raw - 1); /* not the NUL */
  assert_int_equal(fclose(f), 0);
  char why[JSON_WHY_LEN];
  json_t *doc = json_read(text, len, why);
  if (!doc)
    fail_msg("%s", why);
  assert_int_equal(json_string_length(doc), sizeof raw - 1);
  assert_memory_equal(json_string_value(doc), raw + 1, sizeof raw - 1);
  json_decref(doc);
  free(text);
  f = open_memstream(&text, &len);
  assert_non_null(f);
  json_put_string(f, raw, 2); /* the NUL and \x01 */
  assert_int_equal(fclose(f), 0);
  assert_string_equal(text, "\"\\u0000\\u0001\"");
  read_refused(text, len, why);
  free(text);
}

/* Bytes that are no UTF-8 (a stray continuation, a lone lead, overlong, a surrogate, past
 * U+10FFFF, cut short at the end) are written as U+FFFD, one per byte, so that the text reads
 * back as JSON; the valid sequences around them are kept as they are. */
static void test_string_invalid_utf8(void **state) {
  static const struct {
    const char *raw, *want;
  } cases[] = {
      {"a\x80" "b", "a\xef\xbf\xbd" "b"},
      {"\xff", "\xef\xbf\xbd"},
      {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xc3\xa9\xe2\x82", "\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xf0\x9f\x98\x80\xe2\x82\xac\xf4\x8f\xbf\xbf",
       "\xf0\x9f\x98\x80\xe2\x82\xac\xf4\x8f\xbf\xbf"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    json_put_string(f, cases[i].raw, strlen(cases[i].raw));
    assert_int_equal(fclose(f), 0);
    char why[JSON_WHY_LEN];
    json_t *doc = json_read(text, len, why);
    if (!doc)
      fail_msg("case %zu: %s: %s", i, text, why);
    assert_string_equal(json_string_value(doc), cases[i].want);
    json_decref(doc);
    free(text);
  }
}

int main(int argc, char **argv) {
  cli_no_options(argc, argv, "the JSON reader and writer's cases (cmocka)");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values),         cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_prefixes),       cmocka_unit_test(test_duplicate_keys),
      cmocka_unit_test(test_depth),          cmocka_unit_test(test_numbers),
      cmocka_unit_test(test_utf8),           cmocka_unit_test(test_big_arrays),
      cmocka_unit_test(test_float_round_trip), cmocka_unit_test(test_string_round_trip),
      cmocka_unit_test(test_string_invalid_utf8),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
