/* tcp-infer-json: the JSON reader and writer (json.c) that KServe's requests go through: a
 * document of every kind of value read back node by node, strings' escapes decoded, every
 * malformed document of a list refused with a reason, every prefix of a valid document refused
 * (no read past the end), the depth bound, and float32 values written and read back exactly. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

static void test_values(void **state) {
  static const char text[] =
      " {\"a\": [1, 2.5, -3e2, {\"b\": null}], \"s\": \"q\\\"b\\\\s\\/\\n\\u00e9\\ud83d\\ude00\","
      " \"t\": true, \"f\": false, \"e\": {}, \"z\": [], \"n\": -0.125E+1} ";
  json_doc_t doc;
  assert_int_equal(json_parse(&doc, text, sizeof text - 1), 0);
  const json_node_t *root = json_root(&doc);
  assert_int_equal(root->type, JSON_OBJECT);
  assert_int_equal(root->count, 7);
  const json_node_t *a = json_get(&doc, root, "a");
  assert_int_equal(a->type, JSON_ARRAY);
  assert_int_equal(a->count, 4);
  const json_node_t *e = json_first(&doc, a);
  assert_true(e->num == 1.0);
  assert_true((e = json_next(&doc, e))->num == 2.5);
  assert_true((e = json_next(&doc, e))->num == -300.0);
  e = json_next(&doc, e);
  assert_int_equal(json_get(&doc, e, "b")->type, JSON_NULL);
  assert_null(json_next(&doc, e));
  const json_node_t *s = json_get(&doc, root, "s");
  static const char want[] = "q\"b\\s/\n\xc3\xa9\xf0\x9f\x98\x80";
  assert_int_equal(s->str_len, sizeof want - 1);
  assert_memory_equal(s->str, want, sizeof want);
  assert_true(json_is_string(s, want));
  assert_int_equal(json_get(&doc, root, "t")->type, JSON_TRUE);
  assert_int_equal(json_get(&doc, root, "f")->type, JSON_FALSE);
  assert_int_equal(json_get(&doc, root, "e")->count, 0);
  assert_null(json_first(&doc, json_get(&doc, root, "z")));
  assert_true(json_get(&doc, root, "n")->num == -1.25);
  assert_null(json_get(&doc, root, "missing"));
  assert_null(json_get(&doc, a, "a")); /* not an object */
  json_doc_free(&doc);
}

static void test_malformed(void **state) {
  static const char *const bad[] = {
      "",        " ",          "{",           "}",         "[1,]",       "{\"a\":1,}",
      "01",      "1.",         ".5",          "-",         "1e",         "1e+",
      "+1",      "0x10",       "NaN",         "Infinity",  "nul",        "tru",
      "\"abc",   "\"\\x\"",    "\"\x01\"",    "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"",
      "\"\\ud800\\u0041\"",    "[1 2]",       "{\"a\" 1}", "{1:2}",      "[1]x",
      "{\"a\":}", "[,1]",      "{,}",         "'a'",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_doc_t doc;
    if (json_parse(&doc, bad[i], strlen(bad[i])) == 0)
      fail_msg("accepted: %s", bad[i]);
    assert_true(doc.error[0] != '\0'); /* a reason, with the offset */
    json_doc_free(&doc);
  }
}

/* Every proper prefix of a document is refused: the reader never looks past the length (ASan
 * sees each prefix in a block of its own size). */
static void test_prefixes(void **state) {
  static const char text[] = "{\"k\":[1.5e3,\"\\u00e9\",true,null,{\"x\":-2}]}";
  for (size_t n = 0; n < sizeof text - 1; n++) {
    char *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, text, n);
    json_doc_t doc;
    assert_int_equal(json_parse(&doc, copy, n), -1);
    json_doc_free(&doc);
    free(copy);
  }
}

static void test_depth(void **state) {
  char text[2 * (JSON_MAX_DEPTH + 2) + 1];
  for (unsigned depth = JSON_MAX_DEPTH; depth <= JSON_MAX_DEPTH + 1; depth++) {
    size_t n = 0;
    for (unsigned i = 0; i <= depth; i++)
      text[n++] = '[';
    for (unsigned i = 0; i <= depth; i++)
      text[n++] = ']';
    json_doc_t doc;
    assert_int_equal(json_parse(&doc, text, n), depth == JSON_MAX_DEPTH ? 0 : -1);
    json_doc_free(&doc);
  }
}

/* Random float32 bit patterns (finite ones) written as JSON numbers read back to the same bits. */
static void test_float_round_trip(void **state) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 20000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint32_t bits = (uint32_t)x;
    float v;
    memcpy(&v, &bits, sizeof v);
    if (v != v || v - v != 0) /* NaN, infinities: JSON has no spelling for them */
      continue;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    json_put_float(f, v);
    assert_int_equal(fclose(f), 0);
    json_doc_t doc;
    assert_int_equal(json_parse(&doc, text, len), 0);
    float back = (float)json_root(&doc)->num;
    assert_memory_equal(&back, &v, sizeof v);
    json_doc_free(&doc);
    free(text);
  }
}

/* json_put_string's output reads back as the same bytes. */
static void test_string_round_trip(void **state) {
  char raw[64];
  for (int i = 0; i < 64; i++)
    raw[i] = (char)(i < 32 ? i : "\"\\/abc\xc3\xa9"[i % 9]);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  json_put_string(f, raw + 1, sizeof raw - 1); /* not the NUL */
  assert_int_equal(fclose(f), 0);
  json_doc_t doc;
  assert_int_equal(json_parse(&doc, text, len), 0);
  assert_int_equal(json_root(&doc)->str_len, sizeof raw - 1);
  assert_memory_equal(json_root(&doc)->str, raw + 1, sizeof raw - 1);
  json_doc_free(&doc);
  free(text);
}

int main(int argc, char **argv) {
  cli_no_options(argc, argv, "the JSON reader and writer's cases (cmocka)");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values),           cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_prefixes),         cmocka_unit_test(test_depth),
      cmocka_unit_test(test_float_round_trip), cmocka_unit_test(test_string_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
