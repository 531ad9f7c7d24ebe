/* tcp-infer-safetensors: safetensors.c on files written here byte by byte: random values read
 * back exactly (also from data that is not 4-byte aligned in the file, and past a
 * "__metadata__"), then each way a file can be wrong, refused with its reason and nothing
 * loaded: the file or the header cut short, a header that is no JSON object or repeats a key,
 * an unexpected or a missing tensor, a tensor given twice, a dtype, a shape or data_offsets
 * that do not fit, overlap, a hole, bytes after the last tensor. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"

#define W_ROWS 3
#define W_COLS 5
#define B_LEN 3
#define DATA_BYTES ((W_ROWS * W_COLS + B_LEN) * 4)

typedef struct fixture {
  char path[64];
  float w[W_ROWS * W_COLS], b[B_LEN]; /* what the file holds */
  float got_w[W_ROWS * W_COLS], got_b[B_LEN];
  st_want_t want[2];
  char why[320];
} fixture_t;

static uint64_t rng_state;

static float random_float(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)(int32_t)(rng_state >> 32) / 2147483648.0f;
}

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  if (!f)
    return -1;
  snprintf(f->path, sizeof f->path, "/tmp/tcp-infer-st-XXXXXX");
  int fd = mkstemp(f->path);
  if (fd < 0) {
    free(f);
    return -1;
  }
  close(fd);
  for (size_t i = 0; i < W_ROWS * W_COLS; i++)
    f->w[i] = random_float();
  for (size_t i = 0; i < B_LEN; i++)
    f->b[i] = random_float();
  memset(f->got_w, 0xff, sizeof f->got_w);
  memset(f->got_b, 0xff, sizeof f->got_b);
  f->want[0] =
      (st_want_t){.name = "layers.0.weight", .ndim = 2, .shape = {W_ROWS, W_COLS}, .dst = f->got_w};
  f->want[1] = (st_want_t){.name = "layers.0.bias", .ndim = 1, .shape = {B_LEN}, .dst = f->got_b};
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  unlink(f->path);
  free(f);
  return 0;
}

/* The file: the header's length (declared: its true length unless given), the header, and
 * `data_len` bytes of data: w then b, then zeros. */
static void write_file(fixture_t *f, const char *header, int64_t declared, size_t data_len) {
  FILE *out = fopen(f->path, "wb");
  assert_non_null(out);
  uint64_t len = declared >= 0 ? (uint64_t)declared : strlen(header);
  unsigned char le[8];
  for (unsigned i = 0; i < 8; i++)
    le[i] = (unsigned char)(len >> (8 * i));
  assert_int_equal(fwrite(le, 1, 8, out), 8);
  assert_int_equal(fwrite(header, 1, strlen(header), out), strlen(header));
  unsigned char data[4 * DATA_BYTES] = {0};
  memcpy(data, f->w, sizeof f->w);
  memcpy(data + sizeof f->w, f->b, sizeof f->b);
  assert_true(data_len <= sizeof data);
  assert_int_equal(fwrite(data, 1, data_len, out), data_len);
  fclose(out);
}

#define GOOD_W "\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[3,5],\"data_offsets\":[0,60]}"
#define GOOD_B "\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[60,72]}"

static void loads(fixture_t *f) {
  assert_int_equal(safetensors_load(f->path, f->want, 2, f->why, sizeof f->why), 0);
  assert_memory_equal(f->got_w, f->w, sizeof f->w);
  assert_memory_equal(f->got_b, f->b, sizeof f->b);
}

static void test_good(void **state) {
  fixture_t *f = *state;
  write_file(f, "{" GOOD_W "," GOOD_B "}", -1, DATA_BYTES); /* 125 bytes: data unaligned */
  loads(f);
  memset(f->got_w, 0, sizeof f->got_w);
  write_file(f, "{\"__metadata__\":{\"format\":\"pt\"}," GOOD_B "," GOOD_W "}    ", -1, DATA_BYTES);
  loads(f);
}

/* The file is refused with a reason holding `words`, and no value was copied. */
static void refused(fixture_t *f, const char *words) {
  float before_w[W_ROWS * W_COLS];
  memcpy(before_w, f->got_w, sizeof before_w);
  f->why[0] = 0;
  assert_int_equal(safetensors_load(f->path, f->want, 2, f->why, sizeof f->why), -1);
  if (!strstr(f->why, words))
    fail_msg("reason \"%s\" lacks \"%s\"", f->why, words);
  assert_memory_equal(f->got_w, before_w, sizeof before_w);
}

static void test_cut_short(void **state) {
  fixture_t *f = *state;
  FILE *out = fopen(f->path, "wb");
  assert_non_null(out);
  fputs("abc", out);
  fclose(out);
  refused(f, "not even the 8-byte header length");
  write_file(f, "{" GOOD_W "," GOOD_B "}", 4096, DATA_BYTES);
  refused(f, "truncated or corrupt: a header of 4096 bytes");
  write_file(f, "{" GOOD_W "," GOOD_B "}", -1, DATA_BYTES - 1);
  refused(f, "out of range");
  assert_int_equal(safetensors_load("/nonexistent/x", f->want, 2, f->why, sizeof f->why), -1);
  assert_non_null(strstr(f->why, "cannot open"));
  assert_int_equal(safetensors_load(NULL, f->want, 2, f->why, sizeof f->why), -1);
  assert_int_equal(safetensors_load(f->path, NULL, 2, f->why, sizeof f->why), -1);
  assert_int_equal(safetensors_load(f->path, f->want, 2, NULL, 0), -1);
}

static void test_header(void **state) {
  fixture_t *f = *state;
  write_file(f, "[" GOOD_W "]", -1, DATA_BYTES);
  refused(f, "bad JSON header");
  write_file(f, "[1, 2]", -1, DATA_BYTES);
  refused(f, "not a JSON object");
  write_file(f, "{" GOOD_W "," GOOD_W "," GOOD_B "}", -1, DATA_BYTES);
  refused(f, "bad JSON header"); /* a duplicate key */
  write_file(f, "{" GOOD_W "}", -1, 60);
  refused(f, "missing tensor layers.0.bias");
  write_file(f,
             "{" GOOD_W "," GOOD_B ",\"extra\":{\"dtype\":\"F32\",\"shape\":[0],"
             "\"data_offsets\":[72,72]}}",
             -1, DATA_BYTES);
  refused(f, "unexpected tensor extra");
  write_file(f, "{\"other\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[60,72]}," GOOD_W "}",
             -1, DATA_BYTES);
  refused(f, "unexpected tensor other");
}

static void test_tensor_fields(void **state) {
  fixture_t *f = *state;
  write_file(
      f,
      "{\"layers.0.weight\":{\"dtype\":\"BF16\",\"shape\":[3,5],\"data_offsets\":[0,60]}," GOOD_B
      "}",
      -1, DATA_BYTES);
  refused(f, "dtype BF16, only F32");
  write_file(
      f,
      "{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[5,3],\"data_offsets\":[0,60]}," GOOD_B
      "}",
      -1, DATA_BYTES);
  refused(f, "shape [5, 3], the config wants [3, 5]");
  write_file(
      f,
      "{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,60]}," GOOD_B
      "}",
      -1, DATA_BYTES);
  refused(f, "its shape is 48 bytes of F32, its data_offsets span 60");
  write_file(
      f,
      "{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[3,5],\"data_offsets\":[60,0]}," GOOD_B
      "}",
      -1, DATA_BYTES);
  refused(f, "out of range");
  write_file(f,
             "{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[3,5],\"data_offsets\":[0]}," GOOD_B
             "}",
             -1, DATA_BYTES);
  refused(f, "data_offsets must be [begin, end]");
  write_file(f,
             "{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1,1,3,5],"
             "\"data_offsets\":[0,60]}," GOOD_B "}",
             -1, DATA_BYTES);
  refused(f, "at most 4 sizes");
  write_file(f,
             "{\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[3,-5],"
             "\"data_offsets\":[0,60]}," GOOD_B "}",
             -1, DATA_BYTES);
  refused(f, "shape[1] is not a size");
}

static void test_tiling(void **state) {
  fixture_t *f = *state;
  write_file(f,
             "{" GOOD_W ",\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[3],"
             "\"data_offsets\":[48,60]}}",
             -1, DATA_BYTES);
  refused(f, "overlap");
  write_file(f,
             "{" GOOD_W ",\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[3],"
             "\"data_offsets\":[64,76]}}",
             -1, DATA_BYTES + 4);
  refused(f, "bytes 60 to 64 of the data belong to no tensor");
  write_file(f, "{" GOOD_W "," GOOD_B "}", -1, DATA_BYTES + 8);
  refused(f, "8 bytes after the last tensor");
}

static void test_not_finite(void **state) {
  fixture_t *f = *state;
  f->b[1] = 1.0f / 0.0f;
  write_file(f, "{" GOOD_W "," GOOD_B "}", -1, DATA_BYTES);
  f->why[0] = 0;
  assert_int_equal(safetensors_load(f->path, f->want, 2, f->why, sizeof f->why), -1);
  assert_non_null(strstr(f->why, "tensor layers.0.bias: value 1 is not finite"));
}

int main(void) {
  rng_state = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull; /* fresh values each run */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_good, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cut_short, setup, teardown),
      cmocka_unit_test_setup_teardown(test_header, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tensor_fields, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tiling, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_finite, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
