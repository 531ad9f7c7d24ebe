/* cuv's error codes are libuv's: every cuv code with a POSIX meaning equals its UV_E* (uv.h, the
 * libuv this test is built with), cuv's own codes clash with none, and cuv_err_name and
 * cuv_strerror name every code of either library (libuv's with uv_strerror's text). cuv itself
 * does not link libuv: its copy of libuv's table (lib/error.c) is what is checked here. */
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "common.h"

/* The cuv codes that are libuv's. A code added to CUV_ERRNO_MAP with a POSIX meaning goes here
 * too: test_cuv_codes_are_libuv_or_own counts them. */
#define SHARED_CODES(XX)                                                                          \
  XX(EINVAL) XX(ENOMEM) XX(ENODEV) XX(ECANCELED) XX(EBUSY) XX(ERANGE) XX(ENOTSUP) XX(EIO)        \
  XX(ENOENT) XX(ETIMEDOUT)

#define UV_ENTRY(name, text) {UV_##name, #name, text},
static const struct {
  int code;
  const char *name, *text;
} uv_table[] = {UV_ERRNO_MAP(UV_ENTRY)};
#undef UV_ENTRY
#define N_UV (sizeof uv_table / sizeof uv_table[0])

#define CUV_ENTRY(name, value, text) {CUV_##name, "CUV_" #name},
static const struct {
  int code;
  const char *name;
} cuv_table[] = {CUV_ERRNO_MAP(CUV_ENTRY)};
#undef CUV_ENTRY
#define N_CUV (sizeof cuv_table / sizeof cuv_table[0])

static bool is_uv_code(int code) {
  for (size_t i = 0; i < N_UV; i++)
    if (uv_table[i].code == code)
      return true;
  return false;
}

static bool is_cuv_code(int code) {
  for (size_t i = 0; i < N_CUV; i++)
    if (cuv_table[i].code == code)
      return true;
  return false;
}

static void test_posix_codes_equal_libuv(void **state) {
  (void)state;
#define CHECK_SHARED(name)                                                                        \
  assert_int_equal(CUV_##name, UV_##name);                                                        \
  assert_string_equal(cuv_err_name(UV_##name), "CUV_" #name);                                     \
  assert_string_equal(cuv_strerror(CUV_##name), uv_strerror(UV_##name));
  SHARED_CODES(CHECK_SHARED)
#undef CHECK_SHARED
}

/* Each cuv code is either libuv's (one of the shared list) or in cuv's own range, which no libuv
 * code reaches and which stays above the CUDA range. */
static void test_cuv_codes_are_libuv_or_own(void **state) {
  (void)state;
  size_t shared = 0;
#define COUNT_SHARED(name) shared++;
  SHARED_CODES(COUNT_SHARED)
#undef COUNT_SHARED
  size_t seen_shared = 0;
  for (size_t i = 0; i < N_CUV; i++) {
    int code = cuv_table[i].code;
    if (is_uv_code(code)) {
      seen_shared++;
      continue;
    }
    if (code > -9001 || code < -9099)
      fail_msg("%s (%d) is neither libuv's nor in cuv's own range", cuv_table[i].name, code);
    assert_false(CUV_IS_ECUDA(code));
  }
  assert_int_equal(seen_shared, shared);
  for (size_t i = 0; i < N_UV; i++)
    assert_false(CUV_IS_ECUDA(uv_table[i].code));
}

/* Every libuv code has its name and libuv's text: CUV_E* where cuv defines the code, else UV_E*. */
static void test_every_libuv_code_is_named(void **state) {
  (void)state;
  char want[64];
  for (size_t i = 0; i < N_UV; i++) {
    int code = uv_table[i].code;
    snprintf(want, sizeof want, "%s%s", is_cuv_code(code) ? "CUV_" : "UV_", uv_table[i].name);
    assert_string_equal(cuv_err_name(code), want);
    assert_string_equal(uv_err_name(code), uv_table[i].name);
    assert_string_equal(cuv_strerror(code), uv_table[i].text);
    assert_string_equal(cuv_strerror(code), uv_strerror(code));
  }
}

/* cuv's own codes are named too. */
static void test_own_codes_are_named(void **state) {
  (void)state;
  for (size_t i = 0; i < N_CUV; i++) {
    int code = cuv_table[i].code;
    assert_string_equal(cuv_err_name(code), cuv_table[i].name);
    assert_string_not_equal(cuv_strerror(code), "unknown error");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_posix_codes_equal_libuv),
      cmocka_unit_test(test_cuv_codes_are_libuv_or_own),
      cmocka_unit_test(test_every_libuv_code_is_named),
      cmocka_unit_test(test_own_codes_are_named),
  };
  return cmocka_run_group_tests_name("errors-uv", tests, NULL, NULL);
}
