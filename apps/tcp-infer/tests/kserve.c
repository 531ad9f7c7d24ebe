/* tcp-infer-kserve: the KServe v2 endpoints' conformance, as cmocka cases (TAP). Run by
 * tcp-infer-run, which starts the server and adds "--port PORT":
 *
 *   tcp-infer-run tcp-infer -- tcp-infer-kserve
 *
 * Every endpoint: the server's and the model's metadata, liveness and readiness (HEAD too),
 * inference with JSON tensors (flat and nested data, an id echoed) and with the binary tensor
 * data extension (binary inputs, binary outputs asked for the whole request or per output), each
 * answer checked against the host computation on fresh random rows; then invalid requests (wrong
 * shapes, datatypes, names, value counts, truncated binary parts, huge declared sizes, malformed
 * JSON, what the JSON reader refuses, wrong methods and paths), each a clear 4xx in the
 * protocol's JSON error form on a connection that then serves a correct answer, and pipelined
 * mixtures answered in order. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kserve_json.h"
#include "v2-client.h"
#include "wire.h"

#define ROW_IN (MLP_IN * sizeof(float))
#define ROW_OUT (MLP_OUT * sizeof(float))

/* ---- requests ------------------------------------------------------------------------------- */

static void send_v2(client_t *c, const char *path, const char *body, size_t len,
                    long header_len) {
  char head[256];
  char extra[64] = "";
  if (header_len >= 0)
    snprintf(extra, sizeof extra, "Inference-Header-Content-Length: %ld\r\n", header_len);
  snprintf(head, sizeof head,
           "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: %zu\r\n%s\r\n", path, len, extra);
  send_str(c, head);
  send_all(c, body, len);
}

static void send_infer_v2(client_t *c, const batch_t *b, const v2_request_opts_t *o) {
  size_t len, json_len;
  char *body = v2_request(b->in, b->rows, o, &len, &json_len);
  assert_non_null(body);
  send_v2(c, V2_INFER_PATH, body, len, o->binary_in ? (long)json_len : -1);
  free(body);
}

/* ---- responses ------------------------------------------------------------------------------ */

/* The response's JSON part, parsed (the caller json_decref's it). */
static json_t *parse_json(const response_t *r, size_t len) {
  char why[JSON_WHY_LEN];
  json_t *doc = json_read(r->body ? r->body : "", len, why);
  if (!doc)
    fail_msg("not JSON (%s): %.*s", why, (int)(len < 200 ? len : 200), r->body);
  return doc;
}

/* An inference's answer: 200, the model, the id, OUTPUT0 [rows, 16] FP32 equal to the host's,
 * in JSON data or after the JSON part (binary) as the request asked. */
static void expect_outputs(client_t *c, const batch_t *b, const char *id, bool binary) {
  response_t r;
  assert_true(read_response(c, &r));
  if (r.status != 200)
    fail_msg("status %u: %.*s", r.status, (int)r.len, r.body ? r.body : "");
  assert_true(r.keep_alive);
  assert_string_equal(r.content_type, binary ? "application/octet-stream" : "application/json");
  assert_true(binary ? r.infer_header_len > 0 : r.infer_header_len == -1);
  float *got = malloc(b->rows * ROW_OUT);
  assert_non_null(got);
  char why[160];
  if (v2_response_outputs(r.body, r.len, r.infer_header_len, b->rows, id, got, why,
                          sizeof why) != 0)
    fail_msg("%s", why);
  assert_true(mlp_close_enough(got, b->want, (size_t)b->rows * MLP_OUT));
  free(got);
  free_response(&r);
}

/* An error in the protocol's form: that status, {"error": "<a reason>"}; whether the connection
 * stays open. */
static bool expect_error(client_t *c, unsigned status) {
  response_t r;
  assert_true(read_response(c, &r));
  if (r.status != status)
    fail_msg("status %u, want %u: %.*s", r.status, status, (int)r.len, r.body ? r.body : "");
  assert_string_equal(r.content_type, "application/json");
  json_t *root = parse_json(&r, r.len);
  assert_true(json_is_object(root));
  const json_t *error = json_object_get(root, "error");
  assert_true(json_is_string(error));
  assert_true(json_string_length(error) > 5);
  print_message("#   %u %s\n", status, json_string_value(error));
  json_decref(root);
  bool keep_alive = r.keep_alive;
  free_response(&r);
  return keep_alive;
}

/* A GET (or HEAD) with an empty body expected on success. */
static response_t get(client_t *c, const char *method, const char *path) {
  char line[256];
  snprintf(line, sizeof line, "%s %s HTTP/1.1\r\nHost: x\r\n\r\n", method, path);
  send_str(c, line);
  c->head = !strcmp(method, "HEAD");
  response_t r;
  assert_true(read_response(c, &r));
  return r;
}

/* One correct JSON inference on c: the connection (and the server) still serves. */
static void assert_serves(client_t *c) {
  batch_t b = make_batch(5);
  v2_request_opts_t o = {.id = "check"};
  send_infer_v2(c, &b, &o);
  expect_outputs(c, &b, "check", false);
  free_batch(&b);
}

static void pause_ms(unsigned ms) {
  struct timespec ts = {0, (long)ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- metadata and health -------------------------------------------------------------------- */

/* Readiness first: with --isolate the workers may still be starting when the test begins (the
 * probe polls without a time limit of its own; the runner's timeout bounds it). */
static void test_health(void **state) {
  client_t *c = dial();
  for (;;) {
    response_t r = get(c, "GET", "/v2/health/ready");
    unsigned status = r.status;
    free_response(&r);
    if (status == 200)
      break;
    assert_int_equal(status, 400); /* not ready: the protocol's 4xx */
    pause_ms(10);
  }
  static const char *const paths[] = {"/v2/health/live", "/v2/health/ready",
                                      "/v2/models/mlp/ready", "/v2/models/mlp/versions/1/ready"};
  for (size_t i = 0; i < 4; i++)
    for (int head = 0; head < 2; head++) {
      response_t r = get(c, head ? "HEAD" : "GET", paths[i]);
      assert_int_equal(r.status, 200);
      assert_int_equal(r.len, 0);
      free_response(&r);
    }
  hang_up(c);
}

static void test_server_metadata(void **state) {
  client_t *c = dial();
  response_t r = get(c, "GET", "/v2");
  assert_int_equal(r.status, 200);
  assert_string_equal(r.content_type, "application/json");
  json_t *root = parse_json(&r, r.len);
  assert_true(json_string_is(json_object_get(root, "name"), "tcp-infer"));
  assert_true(json_is_string(json_object_get(root, "version")));
  const json_t *ext = json_object_get(root, "extensions");
  bool binary = false;
  for (size_t i = 0; i < json_array_size(ext); i++)
    binary |= json_string_is(json_array_get(ext, i), "binary_tensor_data");
  assert_true(binary);
  json_decref(root);
  long len = (long)r.len;
  free_response(&r);
  r = get(c, "HEAD", "/v2");
  assert_int_equal(r.status, 200);
  assert_int_equal(r.content_length, len);
  assert_int_equal(r.len, 0);
  free_response(&r);
  hang_up(c);
}

static void check_tensor(const json_t *list, const char *name, unsigned dim) {
  assert_true(json_is_array(list));
  assert_int_equal(json_array_size(list), 1);
  const json_t *t = json_array_get(list, 0);
  assert_true(json_string_is(json_object_get(t, "name"), name));
  assert_true(json_string_is(json_object_get(t, "datatype"), "FP32"));
  const json_t *shape = json_object_get(t, "shape");
  assert_int_equal(json_array_size(shape), 2);
  assert_true(json_is_number(json_array_get(shape, 0)));
  assert_true(json_number_value(json_array_get(shape, 0)) == -1);
  assert_true(json_is_number(json_array_get(shape, 1)));
  assert_true(json_number_value(json_array_get(shape, 1)) == dim);
}

static void test_model_metadata(void **state) {
  client_t *c = dial();
  static const char *const paths[] = {"/v2/models/mlp", "/v2/models/mlp/versions/1"};
  for (size_t i = 0; i < 2; i++) {
    response_t r = get(c, "GET", paths[i]);
    assert_int_equal(r.status, 200);
    json_t *root = parse_json(&r, r.len);
    assert_true(json_string_is(json_object_get(root, "name"), "mlp"));
    const json_t *versions = json_object_get(root, "versions");
    assert_true(json_is_array(versions));
    assert_int_equal(json_array_size(versions), 1);
    assert_true(json_string_is(json_array_get(versions, 0), "1"));
    check_tensor(json_object_get(root, "inputs"), "INPUT0", MLP_IN);
    check_tensor(json_object_get(root, "outputs"), "OUTPUT0", MLP_OUT);
    json_decref(root);
    free_response(&r);
  }
  /* models, versions and paths that are not there: 404 in the JSON form */
  static const char *const missing[] = {"/v2/models/other", "/v2/models/mlp/versions/2",
                                        "/v2/models/mlp/versions/2/infer", "/v2/models/mlp/x",
                                        "/v2/health", "/v2/nope", "/v2/models"};
  for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
    char line[256];
    snprintf(line, sizeof line, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", missing[i]);
    send_str(c, line);
    assert_true(expect_error(c, 404));
  }
  assert_serves(c);
  hang_up(c);
}

/* ---- inference ------------------------------------------------------------------------------ */

static void test_infer_json(void **state) {
  client_t *c = dial();
  const unsigned sizes[] = {1, 7, 64, MLP_DEFAULT_MAX_BATCH};
  for (size_t i = 0; i < 4; i++)
    for (int nested = 0; nested < 2; nested++) {
      batch_t b = make_batch(sizes[i]);
      v2_request_opts_t o = {.id = nested ? "nested-rows" : NULL, .nested = nested};
      send_infer_v2(c, &b, &o);
      expect_outputs(c, &b, o.id, false);
      free_batch(&b);
    }
  hang_up(c);
}

static void test_infer_binary(void **state) {
  client_t *c = dial();
  const v2_request_opts_t opts[] = {
      {.binary_in = true},                                        /* binary in, JSON out */
      {.binary_out = true, .id = "a"},                            /* JSON in, binary out */
      {.binary_in = true, .binary_out = true},                    /* both */
      {.binary_in = true, .binary_out_per_output = 1, .id = "b"}, /* per output */
      {.binary_out = true, .binary_out_per_output = 2},           /* the output says no */
  };
  const unsigned sizes[] = {1, 13, MLP_DEFAULT_MAX_BATCH};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    for (size_t k = 0; k < 3; k++) {
      batch_t b = make_batch(sizes[k]);
      send_infer_v2(c, &b, &opts[i]);
      expect_outputs(c, &b, opts[i].id, v2_binary_out(&opts[i]));
      free_batch(&b);
    }
  hang_up(c);
}

/* Several kinds in one write: KServe JSON and binary, POST /infer, an invalid one, metadata. */
static void test_pipelined_mixed(void **state) {
  client_t *c = dial();
  batch_t b1 = make_batch(3), b2 = make_batch(9), b3 = make_batch(2);
  v2_request_opts_t json = {.id = "p1"}, binary = {.binary_in = true, .binary_out = true};
  send_infer_v2(c, &b1, &json);
  send_infer_v2(c, &b2, &binary);
  char head[128];
  snprintf(head, sizeof head, "POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
           b3.rows * ROW_IN);
  send_str(c, head);
  send_all(c, b3.in, b3.rows * ROW_IN);
  send_v2(c, V2_INFER_PATH, "{\"inputs\":[]}", 13, -1);
  send_str(c, "GET /v2/models/mlp/ready HTTP/1.1\r\nHost: x\r\n\r\n");
  expect_outputs(c, &b1, "p1", false);
  expect_outputs(c, &b2, NULL, true);
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 200);
  assert_int_equal(r.len, b3.rows * ROW_OUT);
  assert_true(mlp_close_enough((const float *)(const void *)r.body, b3.want, b3.rows * MLP_OUT));
  free_response(&r);
  assert_true(expect_error(c, 400));
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 200);
  free_response(&r);
  free_batch(&b1);
  free_batch(&b2);
  free_batch(&b3);
  hang_up(c);
}

/* ---- invalid requests ----------------------------------------------------------------------- */

/* Bodies that are JSON headers only, each a 400 with its reason. */
static const char *const bad_json[] = {
    "{",
    "[]",
    "{\"inputs\":5}",
    "{\"inputs\":[]}",
    "not json at all",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":[1,]}]}",
    /* shapes */
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,63],\"data\":[1]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[0,64],\"data\":[]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[257,64],\"data\":[]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[64],\"data\":[]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,64,1],\"data\":[]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[-1,64],\"data\":[]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1.5,64],\"data\":[]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[\"1\",64],\"data\":[]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1e300,64],\"data\":[]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"data\":[1]}]}",
    /* datatypes and names */
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP16\",\"shape\":[1,64],\"data\":[]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[1,64],\"data\":[]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,64],\"data\":[]}]}",
    "{\"inputs\":[{\"name\":\"INPUT1\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":[]}]}",
    "{\"inputs\":[{\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":[]}]}",
    /* values: too few, of the wrong kind, out of FP32's range */
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":[1,2]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":[\"x\"]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":[null]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":[1e39]}]}",
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,64]}]}",
    /* outputs, parameters, id */
    "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,64],"
    "\"parameters\":{\"binary_data_size\":256}}]}",
    "{\"id\":5,\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,64],"
    "\"data\":[]}]}",
};

/* An input tensor's JSON of shape [1, 64] with `values` values (64: valid), the rest of the
 * request after it. */
static char *one_row(unsigned values, const char *rest) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  fputs("{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":[", f);
  for (unsigned i = 0; i < values; i++)
    fprintf(f, "%s0.5", i ? "," : "");
  fprintf(f, "]}]%s}", rest);
  assert_int_equal(fclose(f), 0);
  return text;
}

static double failed_other(void) {
  return wire_metric("nv_inference_request_failure",
                     "model=\"mlp\",reason=\"OTHER\",version=\"1\"");
}

/* Every body refused here counts as a failure of Triton's reason OTHER (and only those: the
 * correct answer at the end counts none). */
static void test_invalid_json(void **state) {
  double other = failed_other();
  size_t refused = 0;
  client_t *c = dial();
  for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
    send_v2(c, V2_INFER_PATH, bad_json[i], strlen(bad_json[i]), -1);
    assert_true(expect_error(c, 400));
    refused++;
  }
  /* a valid input with bad outputs or parameters, and 65 values where 64 go */
  static const char *const rests[] = {
      ",\"outputs\":[{\"name\":\"OUTPUT1\"}]",
      ",\"outputs\":[{\"name\":\"OUTPUT0\",\"parameters\":{\"binary_data\":1}}]",
      ",\"outputs\":{}",
      ",\"parameters\":{\"binary_data_output\":\"yes\"}",
  };
  for (size_t i = 0; i < sizeof rests / sizeof rests[0]; i++) {
    char *body = one_row(MLP_IN, rests[i]);
    send_v2(c, V2_INFER_PATH, body, strlen(body), -1);
    free(body);
    assert_true(expect_error(c, 400));
    refused++;
  }
  char *body = one_row(MLP_IN + 1, ""); /* 65 values */
  send_v2(c, V2_INFER_PATH, body, strlen(body), -1);
  free(body);
  assert_true(expect_error(c, 400));
  refused++;
  assert_serves(c);
  hang_up(c);
  assert_true(failed_other() == other + (double)refused);
}

/* An inference of b's rows in JSON: `id` the id member's JSON text (NULL: none), the first
 * `values` of the rows' values, then `extra` (JSON text), inside `wrap` arrays more than data's
 * own. */
static char *json_request(const batch_t *b, const char *id, unsigned wrap, size_t values,
                          const char *extra) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  fputc('{', f);
  if (id)
    fprintf(f, "\"id\":%s,", id);
  fprintf(f, "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[%u,%u],"
          "\"data\":[", b->rows, MLP_IN);
  for (unsigned i = 0; i < wrap; i++)
    fputc('[', f);
  for (size_t i = 0; i < values; i++) {
    fputs(i ? "," : "", f);
    json_put_float(f, b->in[i]);
  }
  fputs(extra, f);
  for (unsigned i = 0; i < wrap; i++)
    fputc(']', f);
  fputs("]}]}", f);
  assert_int_equal(fclose(f), 0);
  return text;
}

static void send_text(client_t *c, char *body) {
  send_v2(c, V2_INFER_PATH, body, strlen(body), -1);
  free(body);
}

/* What the JSON reader (kserve_json.c) decides, seen from the protocol: values as deep as 32
 * levels answered and 33 refused, duplicate keys, NaN, the infinities and overflow, invalid
 * UTF-8 and NULs in the id refused while valid UTF-8 is echoed back, and a data array one value
 * longer than the largest batch's; each refusal a 400 on a connection that then serves. */
static void test_json_reader(void **state) {
  client_t *c = dial();
  batch_t b = make_batch(3);
  size_t all = (size_t)b.rows * MLP_IN;
  /* root 0, inputs 1, the tensor 2, data 3: its values at 4 + wrap */
  send_text(c, json_request(&b, NULL, JSON_MAX_DEPTH - 4, all, ""));
  expect_outputs(c, &b, NULL, false);
  send_text(c, json_request(&b, NULL, JSON_MAX_DEPTH - 3, all, ""));
  assert_true(expect_error(c, 400));
  /* a key twice, each time one that a reader keeping either would run: the id, the inputs
   * (first an empty list), the parameters (binary output or not) */
  static const char *const twice[] = {
      "\"x\",\"id\":\"x\"",
      "\"x\",\"inputs\":[]",
      "\"x\",\"parameters\":{\"binary_data_output\":false,\"binary_data_output\":true}",
  };
  for (size_t i = 0; i < sizeof twice / sizeof twice[0]; i++) {
    send_text(c, json_request(&b, twice[i], 0, all, ""));
    assert_true(expect_error(c, 400));
  }
  /* the tensor's name twice */
  char *one = json_request(&b, NULL, 0, all, ""), *dup = malloc(strlen(one) + 32);
  assert_non_null(dup);
  const char *name = strstr(one, "\"name\":\"INPUT0\",");
  assert_non_null(name);
  snprintf(dup, strlen(one) + 32, "%.*s\"name\":\"INPUT0\",%s", (int)(name - one), one, name);
  free(one);
  send_text(c, dup);
  assert_true(expect_error(c, 400));
  /* as the last value: numbers that JSON cannot spell or a double cannot hold */
  static const char *const nonfinite[] = {",NaN", ",Infinity", ",-Infinity", ",1e999", ",-2e308"};
  for (size_t i = 0; i < sizeof nonfinite / sizeof nonfinite[0]; i++) {
    send_text(c, json_request(&b, NULL, 0, all - 1, nonfinite[i]));
    assert_true(expect_error(c, 400));
  }
  /* ids: invalid UTF-8 (a stray byte, overlong, a surrogate, past U+10FFFF, cut short) and a
   * NUL refused; valid UTF-8, raw and escaped, echoed back decoded */
  static const char *const bad_ids[] = {"\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"",
                                        "\"\xf4\x90\x80\x80\"", "\"a\xe2\x82\"", "\"a\\u0000b\""};
  for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
    send_text(c, json_request(&b, bad_ids[i], 0, all, ""));
    assert_true(expect_error(c, 400));
  }
  send_text(c,
            json_request(&b, "\"\xc3\xa9\\u00e9\xf0\x9f\x98\x80\\ud83d\\ude00\"", 0, all, ""));
  expect_outputs(c, &b, "\xc3\xa9\xc3\xa9\xf0\x9f\x98\x80\xf0\x9f\x98\x80", false);
  free_batch(&b);
  /* the largest batch's data and one value more */
  b = make_batch(MLP_DEFAULT_MAX_BATCH);
  all = (size_t)b.rows * MLP_IN;
  send_text(c, json_request(&b, "\"max\"", 1, all, ""));
  expect_outputs(c, &b, "max", false);
  send_text(c, json_request(&b, NULL, 0, all, ",0.5"));
  assert_true(expect_error(c, 400));
  free_batch(&b);
  assert_serves(c);
  hang_up(c);
}

/* An inference of `rows` random rows whose last value is spelled `last`, read as float32 `as`:
 * answered with the host's outputs, or 500 when those overflow (JSON has no infinity). */
static void send_last_value(client_t *c, unsigned rows, const char *last, float as) {
  batch_t b = make_batch(rows);
  size_t all = (size_t)b.rows * MLP_IN;
  char extra[64];
  snprintf(extra, sizeof extra, ",%s", last);
  b.in[all - 1] = as;
  mlp_forward(&wire_weights, b.rows, b.in, b.want);
  bool finite = true;
  for (size_t i = 0; i < (size_t)b.rows * MLP_OUT; i++)
    finite &= isfinite(b.want[i]) != 0;
  send_text(c, json_request(&b, "\"max\"", 0, all - 1, extra));
  if (finite)
    expect_outputs(c, &b, "max", false);
  else
    assert_true(expect_error(c, 500));
  free_batch(&b);
}

/* FP32's edge: what rounds to FLT_MAX under round-to-nearest is finite (3.4028235e38 is how
 * numpy, Go and Rust print FLT_MAX), what rounds past it is refused (from the midpoint between
 * FLT_MAX and 2^128 up, the midpoint itself a tie that goes to 2^128); outputs that overflow
 * are a 500 in JSON and their bits in binary. */
static void test_fp32_limits(void **state) {
  client_t *c = dial();
  static const char *const finite[] = {"3.4028235e38", "-3.4028235e38", "3.40282356e38",
                                       "340282346638528859811704183484516925440",
                                       "3.4028235677973e38", "-3.4028235677973e+38"};
  for (size_t i = 0; i < sizeof finite / sizeof finite[0]; i++)
    send_last_value(c, 2, finite[i], finite[i][0] == '-' ? -FLT_MAX : FLT_MAX);
  static const char *const past[] = {"3.4028236e38", "-3.4028236e38",
                                     "340282356779733661637539395458142568448", "3.5e38"};
  batch_t b = make_batch(2);
  size_t all = (size_t)b.rows * MLP_IN;
  for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
    char extra[64];
    snprintf(extra, sizeof extra, ",%s", past[i]);
    send_text(c, json_request(&b, NULL, 0, all - 1, extra));
    assert_true(expect_error(c, 400));
  }
  /* a row of FLT_MAX overflows the first layer: no JSON answer, the bits in binary */
  for (size_t i = 0; i < MLP_IN; i++)
    b.in[i] = FLT_MAX;
  mlp_forward(&wire_weights, b.rows, b.in, b.want);
  send_text(c, json_request(&b, NULL, 0, all, ""));
  assert_true(expect_error(c, 500));
  v2_request_opts_t binary = {.binary_out = true};
  send_infer_v2(c, &b, &binary);
  response_t r;
  assert_true(read_response(c, &r));
  assert_int_equal(r.status, 200);
  assert_int_equal(r.len - (size_t)r.infer_header_len, b.rows * ROW_OUT);
  size_t overflowed = 0;
  for (size_t i = 0; i < (size_t)b.rows * MLP_OUT; i++) {
    float got; /* the binary data follows the JSON header at any byte: no aligned float there */
    memcpy(&got, r.body + r.infer_header_len + i * sizeof got, sizeof got);
    assert_int_equal(isfinite(got) != 0, isfinite(b.want[i]) != 0);
    overflowed += !isfinite(got);
  }
  assert_true(overflowed > 0);
  free_response(&r);
  free_batch(&b);
  assert_serves(c);
  hang_up(c);
}

/* The binary extension's framing: declared sizes that the bytes do not match. */
static void test_invalid_binary(void **state) {
  client_t *c = dial();
  batch_t b = make_batch(2);
  v2_request_opts_t o = {.binary_in = true};
  size_t len, json_len;
  char *body = v2_request(b.in, b.rows, &o, &len, &json_len);
  assert_non_null(body);
  /* the binary part cut short (its last 100 bytes missing), or one byte too long */
  send_v2(c, V2_INFER_PATH, body, len - 100, (long)json_len);
  assert_true(expect_error(c, 400));
  char *longer = malloc(len + 1);
  memcpy(longer, body, len);
  longer[len] = 0;
  send_v2(c, V2_INFER_PATH, longer, len + 1, (long)json_len);
  assert_true(expect_error(c, 400));
  free(longer);
  /* the header length past the body, not a number, or cutting the JSON short */
  send_v2(c, V2_INFER_PATH, body, len, (long)len + 1);
  assert_true(expect_error(c, 400));
  send_v2(c, V2_INFER_PATH, body, len, (long)json_len - 1);
  assert_true(expect_error(c, 400));
  char head[256];
  snprintf(head, sizeof head, "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\n"
           "Inference-Header-Content-Length: ten\r\nContent-Length: %zu\r\n\r\n", len);
  send_str(c, head);
  send_all(c, body, len);
  assert_true(expect_error(c, 400));
  /* binary rows without a header length: the JSON parser sees them as text after the document */
  send_v2(c, V2_INFER_PATH, body, len, -1);
  assert_true(expect_error(c, 400));
  free(body);
  /* a huge declared binary size, and binary bytes that no input declares */
  static const char huge[] = "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":"
                             "[2,64],\"parameters\":{\"binary_data_size\":1000000000000000000}}]}";
  send_v2(c, V2_INFER_PATH, huge, sizeof huge - 1, sizeof huge - 1);
  assert_true(expect_error(c, 400));
  char *json = one_row(MLP_IN, "");
  char *plus = malloc(strlen(json) + 8);
  memcpy(plus, json, strlen(json));
  memset(plus + strlen(json), 1, 8);
  send_v2(c, V2_INFER_PATH, plus, strlen(json) + 8, (long)strlen(json));
  assert_true(expect_error(c, 400));
  free(plus);
  free(json);
  free_batch(&b);
  assert_serves(c);
  hang_up(c);
}

/* Methods, lengths and sizes, decided from the head. */
static void test_invalid_head(void **state) {
  static const struct {
    const char *request;
    unsigned status;
  } cases[] = {
      {"GET /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\n\r\n", 405},
      {"POST /v2/health/ready HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405},
      {"DELETE /v2/models/mlp HTTP/1.1\r\nHost: x\r\n\r\n", 405},
      {"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 400},
      {"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\n\r\n", 411},
      {"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
       "\r\n2\r\n{}\r\n0\r\n\r\n", 400},
  };
  client_t *c = dial();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    send_str(c, cases[i].request);
    assert_true(expect_error(c, cases[i].status));
  }
  assert_serves(c);
  /* a huge declared body: refused before it is read, and the connection closes */
  send_str(c, "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\n"
              "Content-Length: 99999999999999\r\n\r\n");
  assert_false(expect_error(c, 413));
  assert_closed(c);
  hang_up(c);
  c = dial();
  assert_serves(c);
  hang_up(c);
}

/* Chunked bodies and absolute-form targets: a JSON inference of the largest batch in chunks
 * (its buffer grown past the first), a binary one with Inference-Header-Content-Length, one to
 * "http://host/v2/..." (RFC 9112 3.2.2); a header length past a chunked body 400, a chunked body
 * past the largest taken 413 at once and the connection closed. */
static void test_chunked_and_absolute(void **state) {
  client_t *c = dial();
  batch_t b = make_batch(MLP_DEFAULT_MAX_BATCH);
  v2_request_opts_t json = {.id = "chunks"}, binary = {.binary_in = true, .binary_out = true};
  size_t len, json_len;
  char *body = v2_request(b.in, b.rows, &json, &len, &json_len);
  assert_non_null(body);
  static const char chunked[] = "POST " V2_INFER_PATH " HTTP/1.1\r\nHost: x\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n";
  send_chunked(c, chunked, body, len, 10007);
  expect_outputs(c, &b, "chunks", false);
  send_v2(c, "http://x:8000" V2_INFER_PATH, body, len, -1);
  expect_outputs(c, &b, "chunks", false);
  free(body);
  body = v2_request(b.in, b.rows, &binary, &len, &json_len);
  assert_non_null(body);
  char head[256];
  snprintf(head, sizeof head, "POST " V2_INFER_PATH " HTTP/1.1\r\nHost: x\r\n"
           "Inference-Header-Content-Length: %zu\r\nTransfer-Encoding: chunked\r\n\r\n",
           json_len);
  send_chunked(c, head, body, len, 333);
  expect_outputs(c, &b, NULL, true);
  send_chunked(c, head, body, json_len - 1, 333);
  assert_true(expect_error(c, 400));
  free(body);
  size_t huge = (size_t)MLP_DEFAULT_MAX_BATCH * MLP_IN * 32 + (128u << 10);
  char *junk = malloc(huge);
  assert_non_null(junk);
  memset(junk, ' ', huge);
  send_chunked(c, chunked, junk, huge, 1 << 16);
  assert_false(expect_error(c, 413));
  assert_closed(c);
  free(junk);
  free_batch(&b);
  hang_up(c);
  c = dial();
  assert_serves(c);
  hang_up(c);
}

int main(int argc, char **argv) {
  wire_init(argc, argv, "the KServe v2 endpoints' conformance, as cmocka cases", NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_health),         cmocka_unit_test(test_server_metadata),
      cmocka_unit_test(test_model_metadata), cmocka_unit_test(test_infer_json),
      cmocka_unit_test(test_infer_binary),   cmocka_unit_test(test_pipelined_mixed),
      cmocka_unit_test(test_invalid_json),   cmocka_unit_test(test_json_reader),
      cmocka_unit_test(test_invalid_binary), cmocka_unit_test(test_invalid_head),
      cmocka_unit_test(test_fp32_limits),    cmocka_unit_test(test_chunked_and_absolute),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
