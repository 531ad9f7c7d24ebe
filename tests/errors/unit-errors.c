/* The error table: names, texts, the CUDA range and its round trip, without any driver loaded. */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "driver.h"

#define ERR_ENTRY(name, value, text) {CUV_##name, "CUV_" #name},
static const struct {
  int code;
  const char *name;
} table[] = {CUV_ERRNO_MAP(ERR_ENTRY)};
#undef ERR_ENTRY
#define N_CODES (sizeof table / sizeof table[0])

static void test_every_code_has_its_name_and_a_text(void **state) {
  for (size_t i = 0; i < N_CODES; i++) {
    int code = table[i].code;
    const char *name = cuv_err_name(code), *text = cuv_strerror(code);
    assert_non_null(name);
    assert_non_null(text);
    assert_string_equal(name, table[i].name);
    assert_true(strlen(text) > 0);
    assert_string_not_equal(text, "unknown error");
    /* Codes are negative and stay clear of the CUDA range. */
    assert_true(code < 0);
    assert_false(CUV_IS_ECUDA(code));
    assert_int_equal(cuv_cuda_result(code), 0);
  }
}

static void test_codes_names_and_texts_are_distinct(void **state) {
  for (size_t i = 0; i < N_CODES; i++) {
    for (size_t j = i + 1; j < N_CODES; j++) {
      assert_int_not_equal(table[i].code, table[j].code);
      assert_string_not_equal(cuv_err_name(table[i].code), cuv_err_name(table[j].code));
      assert_string_not_equal(cuv_strerror(table[i].code), cuv_strerror(table[j].code));
    }
  }
}

static void test_success(void **state) {
  assert_string_equal(cuv_err_name(0), "CUV_OK");
  assert_non_null(cuv_strerror(0));
  assert_int_equal(cuv_cuda_result(0), 0);
}

/* CUresults from the small ones to the largest cuda.h defines, plus random ones. */
static void test_ecuda_round_trip(void **state) {
  int results[16] = {CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_NOT_READY,
                     CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_UNKNOWN};
  for (size_t i = 6; i < 16; i++)
    results[i] = 1 + (int)(cuvt_random_u32() % 100000u);
  for (size_t i = 0; i < 16; i++) {
    int status = CUV_ECUDA(results[i]);
    assert_true(status < 0);
    assert_true(CUV_IS_ECUDA(status));
    assert_int_equal(cuv_cuda_result(status), results[i]);
    /* lib/ converts driver results with cuv__cu: it must agree with the public macro. */
    assert_int_equal(cuv__cu((CUresult)results[i]), status);
  }
  assert_int_equal(cuv__cu(CUDA_SUCCESS), 0);
  assert_int_equal(CUV_ECUDA(CUDA_ERROR_ILLEGAL_ADDRESS), -10700); /* as errors.h documents */
}

/* No driver is loaded in this process: CUDA codes still get a usable name and text. */
static void test_cuda_status_without_driver(void **state) {
  assert_null(cuv__drv.handle);
  int status = CUV_ECUDA(CUDA_ERROR_ILLEGAL_ADDRESS);
  const char *text = cuv_strerror(status), *name = cuv_err_name(status);
  assert_non_null(text);
  assert_non_null(name);
  assert_true(strlen(text) > 0);
  assert_true(strlen(name) > 0);
}

static void test_unknown_codes(void **state) {
  int lowest = 0;
  for (size_t i = 0; i < N_CODES; i++)
    lowest = table[i].code < lowest ? table[i].code : lowest;
  const int unknown[] = {lowest - 1, CUV_ECUDA_BASE + 1, -5000, 1, 42, 1 << 30};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    assert_string_equal(cuv_strerror(unknown[i]), "unknown error");
    assert_string_equal(cuv_err_name(unknown[i]), "CUV_EUNKNOWN");
    assert_int_equal(cuv_cuda_result(unknown[i]), 0);
  }
}

/* The one thing a user without a GPU needs to read. */
static void test_enodriver_names_the_simulator(void **state) {
  assert_non_null(strstr(cuv_strerror(CUV_ENODRIVER), "CUV_DRIVER=sim"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_code_has_its_name_and_a_text),
      cmocka_unit_test(test_codes_names_and_texts_are_distinct),
      cmocka_unit_test(test_success),
      cmocka_unit_test(test_ecuda_round_trip),
      cmocka_unit_test(test_cuda_status_without_driver),
      cmocka_unit_test(test_unknown_codes),
      cmocka_unit_test(test_enodriver_names_the_simulator),
  };
  return cmocka_run_group_tests_name("unit-errors", tests, NULL, NULL);
}
