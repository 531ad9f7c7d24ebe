/* tcp-infer-prom: the tests' Prometheus text parser (prom.c) accepts the format's valid forms
 * and refuses each of a list of broken ones, so that "GET /metrics parses" means something. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "cli.h"
#include "prom.h"

static const char valid[] =
    "# HELP a_total A counter, with \\\\ and \\n escaped.\n"
    "# TYPE a_total counter\n"
    "a_total 3\n"
    "# a comment\n"
    "\n"
    "# TYPE g gauge\n"
    "g{x=\"1\",y=\"q\\\"\\\\\\n\",} -2.5e3 1700000000000\n"
    "g{x=\"2\"} NaN\n"
    "g{x=\"3\"} +Inf\n"
    "# TYPE h histogram\n"
    "h_bucket{m=\"a\",le=\"0.5\"} 1\n"
    "h_bucket{m=\"a\",le=\"1\"} 3\n"
    "h_bucket{m=\"a\",le=\"+Inf\"} 4\n"
    "h_sum{m=\"a\"} 2.75\n"
    "h_count{m=\"a\"} 4\n"
    "untyped_one 0x10\n";

static void test_valid(void **state) {
  prom_t p;
  if (prom_parse(&p, valid, sizeof valid - 1) != 0)
    fail_msg("%s", p.error);
  assert_int_equal(p.n, 10);
  assert_true(prom_find(&p, "a_total", "")->value == 3);
  assert_true(prom_find(&p, "g", "x=\"2\"") != NULL);
  assert_true(prom_find(&p, "h_count", "m=\"a\"")->value == 4);
  assert_true(prom_find(&p, "untyped_one", "")->value == 16);
  assert_null(prom_find(&p, "nope", ""));
  prom_free(&p);
}

static void test_invalid(void **state) {
  static const char *const bad[] = {
      "a 1",                                            /* no final newline */
      "1a 1\n",                                         /* a name's first character */
      "a{b=1} 1\n",                                     /* an unquoted label value */
      "a{b=\"1\" 1\n",                                  /* no closing brace */
      "a{b=\"1\",b=\"2\"} 1\n",                         /* a label twice */
      "a{b=\"\\x\"} 1\n",                               /* a bad escape */
      "a x\n",                                          /* not a value */
      "a\n",                                            /* no value */
      "a 1 1.5\n",                                      /* a timestamp that is no integer */
      "a 1\na 2\n",                                     /* a series twice */
      "a 1\nb 1\na{x=\"1\"} 1\n",                       /* a family in two groups */
      "# TYPE a counter\n# TYPE a counter\na 1\n",      /* two TYPEs */
      "a 1\n# TYPE a counter\n",                        /* TYPE after the samples */
      "# TYPE a widget\na 1\n",                         /* an unknown type */
      "# HELP a x\n# HELP a y\na 1\n",                  /* two HELPs */
      "# TYPE a counter\na -1\n",                       /* a negative counter */
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", /* no +Inf */
      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
      "# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\n"
      "h_sum 1\nh_count 1\n",                           /* le decreasing */
      "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n", /* count not +Inf */
      "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n",          /* no sum */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    prom_t p;
    if (prom_parse(&p, bad[i], strlen(bad[i])) == 0)
      fail_msg("accepted: %s", bad[i]);
    assert_true(p.error[0] != '\0');
    prom_free(&p);
  }
}

int main(int argc, char **argv) {
  cli_no_options(argc, argv, "the Prometheus text parser's cases (cmocka)");
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_valid), cmocka_unit_test(test_invalid)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
