/* tcp-infer: KServe v2 requests and responses from the client's side (v2-client.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
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
  if (o->binary_out)
    fputs(",\"parameters\":{\"binary_data_output\":true}", f);
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
static int output_values(const json_doc_t *doc, const json_node_t *out, const char *binary,
                         size_t binary_len, unsigned rows, float *values, char *why, size_t n) {
  size_t want = (size_t)rows * MLP_OUT;
  const json_node_t *data = json_get(doc, out, "data");
  if (binary_len || !data) {
    const json_node_t *size = json_get(doc, json_get(doc, out, "parameters"),
                                       "binary_data_size");
    if (!size || size->num != (double)(want * sizeof(float)) || binary_len != want * 4)
      return why_not(why, n, "binary output: %zu bytes, binary_data_size %g (want %zu)",
                     binary_len, size ? size->num : -1.0, want * sizeof(float));
    memcpy(values, binary, binary_len);
    return 0;
  }
  size_t i = 0;
  for (const json_node_t *v = json_first(doc, data); v; v = json_next(doc, v), i++)
    if (v->type != JSON_NUMBER || i >= want)
      return why_not(why, n, "data: more than %zu numbers, or not numbers", want);
    else
      values[i] = (float)v->num;
  return i == want ? 0 : why_not(why, n, "data: %zu numbers, want %zu", i, want);
}

/* The response's own fields: the model, the id, one output OUTPUT0 FP32 [rows, MLP_OUT]. */
static const json_node_t *check_fields(const json_doc_t *doc, unsigned rows, const char *id,
                                       char *why, size_t n) {
  const json_node_t *root = json_root(doc);
  const json_node_t *idn = json_get(doc, root, "id"), *outs = json_get(doc, root, "outputs");
  if (!json_is_string(json_get(doc, root, "model_name"), "mlp") ||
      !json_is_string(json_get(doc, root, "model_version"), "1"))
    return why_not(why, n, "model_name and model_version must be mlp and 1"), NULL;
  if (id ? !json_is_string(idn, id) : idn != NULL)
    return why_not(why, n, "id: not the request's"), NULL;
  if (!outs || outs->type != JSON_ARRAY || outs->count != 1)
    return why_not(why, n, "outputs: one tensor wanted"), NULL;
  const json_node_t *out = json_first(doc, outs);
  const json_node_t *shape = json_get(doc, out, "shape"), *d0 = json_first(doc, shape);
  if (!json_is_string(json_get(doc, out, "name"), "OUTPUT0") ||
      !json_is_string(json_get(doc, out, "datatype"), "FP32") || !shape || shape->count != 2 ||
      d0->num != rows || json_next(doc, d0)->num != MLP_OUT)
    return why_not(why, n, "output: OUTPUT0 FP32 [%u, %u] wanted", rows, MLP_OUT), NULL;
  return out;
}

int v2_response_outputs(const char *body, size_t len, long header_len, unsigned rows,
                        const char *id, float *out, char *why, size_t why_len) {
  size_t json_len = header_len >= 0 ? (size_t)header_len : len;
  if (json_len > len)
    return why_not(why, why_len, "Inference-Header-Content-Length %zu past the body", json_len);
  json_doc_t doc;
  int rc = json_parse(&doc, body ? body : "", json_len);
  if (rc != 0)
    why_not(why, why_len, "not JSON: %s", doc.error);
  const json_node_t *tensor = rc == 0 ? check_fields(&doc, rows, id, why, why_len) : NULL;
  if (rc == 0 && !tensor)
    rc = -1;
  if (rc == 0)
    rc = output_values(&doc, tensor, body + json_len, len - json_len, rows, out, why, why_len);
  json_doc_free(&doc);
  return rc;
}
