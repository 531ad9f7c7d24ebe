/* tcp-infer: KServe v2 requests and responses from the client's side (v2-client.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kserve_json.h"
#include "mlp.h"
#include "v2-client.h"

#define ROW_IN (MLP_IN * sizeof(float))
#define ROW_OUT (MLP_OUT * sizeof(float))

bool v2_binary_out(const v2_request_opts_t *o) {
  return o->binary_out_per_output ? o->binary_out_per_output == 1 : o->binary_out;
}

static void put_data(FILE *f, const float *in, unsigned rows, bool nested) {
  fputs("\"data\":[", f);
  for (size_t i = 0; i < (size_t)rows * MLP_IN; i++) {
    bool row_start = i % MLP_IN == 0;
    if (i)
      fputc(',', f);
    if (nested && row_start)
      fputc('[', f);
    json_put_float(f, in[i]);
    if (nested && i % MLP_IN == MLP_IN - 1)
      fputc(']', f);
  }
  fputc(']', f);
}

char *v2_request(const float *in, unsigned rows, const v2_request_opts_t *o, size_t *len,
                 size_t *json_len) {
  char *text = NULL;
  FILE *f = open_memstream(&text, len);
  if (!f)
    return NULL;
  fputc('{', f);
  if (o->id) {
    fputs("\"id\":", f);
    json_put_string(f, o->id, strlen(o->id));
    fputc(',', f);
  }
  fprintf(f, "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[%u,%u],", rows,
          MLP_IN);
  if (o->binary_in)
    fprintf(f, "\"parameters\":{\"binary_data_size\":%zu}", rows * ROW_IN);
  else
    put_data(f, in, rows, o->nested);
  fputs("}]", f);
  if (o->binary_out || o->parameters)
    fprintf(f, ",\"parameters\":{%s%s%s}", o->binary_out ? "\"binary_data_output\":true" : "",
            o->binary_out && o->parameters ? "," : "", o->parameters ? o->parameters : "");
  if (o->binary_out_per_output)
    fprintf(f, ",\"outputs\":[{\"name\":\"OUTPUT0\",\"parameters\":{\"binary_data\":%s}}]",
            o->binary_out_per_output == 1 ? "true" : "false");
  fputc('}', f);
  fflush(f);
  *json_len = *len;
  if (o->binary_in)
    fwrite(in, 1, rows * ROW_IN, f);
  if (fclose(f) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

__attribute__((format(printf, 3, 4))) static int why_not(char *why, size_t n, const char *fmt,
                                                         ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, n, fmt, ap);
  va_end(ap);
  return -1;
}

/* OUTPUT0's values, from its data or from the binary part. */
static int output_values(const json_t *out, const char *binary, size_t binary_len,
                         unsigned rows, float *values, char *why, size_t n) {
  size_t want = (size_t)rows * MLP_OUT;
  const json_t *data = json_object_get(out, "data");
  if (binary_len || !data) {
    const json_t *size = json_object_get(json_object_get(out, "parameters"), "binary_data_size");
    if (!json_is_number(size) || json_number_value(size) != (double)(want * sizeof(float)) ||
        binary_len != want * 4)
      return why_not(why, n, "binary output: %zu bytes, binary_data_size %g (want %zu)",
                     binary_len, size ? json_number_value(size) : -1.0, want * sizeof(float));
    memcpy(values, binary, binary_len);
    return 0;
  }
  size_t count = json_array_size(data);
  for (size_t i = 0; i < count; i++) {
    const json_t *v = json_array_get(data, i);
    if (!json_is_number(v) || i >= want)
      return why_not(why, n, "data: more than %zu numbers, or not numbers", want);
    values[i] = (float)json_number_value(v);
  }
  return count == want ? 0 : why_not(why, n, "data: %zu numbers, want %zu", count, want);
}

/* The response's own fields: the model, the id, one output OUTPUT0 FP32 [rows, MLP_OUT]. */
static const json_t *check_fields(const json_t *root, unsigned rows, const char *id, char *why,
                                  size_t n) {
  const json_t *idn = json_object_get(root, "id"), *outs = json_object_get(root, "outputs");
  if (!json_string_is(json_object_get(root, "model_name"), "mlp") ||
      !json_string_is(json_object_get(root, "model_version"), "1"))
    return why_not(why, n, "model_name and model_version must be mlp and 1"), NULL;
  if (id ? !json_string_is(idn, id) : idn != NULL)
    return why_not(why, n, "id: not the request's"), NULL;
  if (!json_is_array(outs) || json_array_size(outs) != 1)
    return why_not(why, n, "outputs: one tensor wanted"), NULL;
  const json_t *out = json_array_get(outs, 0);
  const json_t *shape = json_object_get(out, "shape");
  if (!json_string_is(json_object_get(out, "name"), "OUTPUT0") ||
      !json_string_is(json_object_get(out, "datatype"), "FP32") ||
      json_array_size(shape) != 2 || json_number_value(json_array_get(shape, 0)) != rows ||
      json_number_value(json_array_get(shape, 1)) != MLP_OUT)
    return why_not(why, n, "output: OUTPUT0 FP32 [%u, %u] wanted", rows, MLP_OUT), NULL;
  return out;
}

int v2_response_outputs(const char *body, size_t len, long header_len, unsigned rows,
                        const char *id, float *out, char *why, size_t why_len) {
  size_t json_len = header_len >= 0 ? (size_t)header_len : len;
  if (json_len > len)
    return why_not(why, why_len, "Inference-Header-Content-Length %zu past the body", json_len);
  char reason[JSON_WHY_LEN];
  json_t *doc = json_read(body ? body : "", json_len, reason);
  if (!doc)
    return why_not(why, why_len, "not JSON: %s", reason);
  const json_t *tensor = check_fields(doc, rows, id, why, why_len);
  int rc = tensor ? output_values(tensor, body + json_len, len - json_len, rows, out, why,
                                  why_len)
                  : -1;
  json_decref(doc);
  return rc;
}
