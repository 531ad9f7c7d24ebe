/* tcp-infer: the KServe v2 protocol (the Open Inference Protocol over HTTP/REST, as Triton serves
 * it): its paths, the server's and the model's metadata, and inference requests in JSON or with
 * the binary tensor data extension, turned into the rows the pipeline runs (the same as
 * POST /infer's) and their outputs back into the protocol's response. route.c decides when each
 * runs; this file knows the protocol, not the connection or the GPU.
 *
 * The models: the server's (server_t.models: the seeded "mlp", or a repository's, repo.c), each
 * version "1", one input INPUT0 (FP32, [N, its inputs]) and one output OUTPUT0 (FP32, [N, its
 * outputs]), N from 1 to its max batch (--max-batch for the seeded one); a model that failed to
 * load is listed with its state and reason, not ready, and runs nothing. Every error is the
 * protocol's JSON error form, {"error": "..."}, with the status that fits (400 for a request that
 * cannot run). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bodies.h"
#include "kserve_json.h"
#include "kserve.h"
#include "server.h"

#define VERSION "1"
#define INPUT "INPUT0"
#define OUTPUT "OUTPUT0"
#define JSON_TYPE "application/json"
/* The least double that float32's round-to-nearest makes infinite: halfway between FLT_MAX
 * (2^128 - 2^104) and 2^128, a tie that goes to the even neighbour, 2^128. Every value below it
 * rounds to a finite float: 3.4028235e38, FLT_MAX as numpy, Go and Rust print it (9 digits, the
 * shortest that reads back), is a little above FLT_MAX and reads back as FLT_MAX. */
#define FP32_OVERFLOW 0x1.ffffffp127

/* What a parsed inference request asks of its response. */
struct kserve_req {
  char *id; /* echoed back; NULL: none was sent */
  bool binary_out;
};

void kserve_req_free(struct kserve_req *ks) {
  if (!ks)
    return;
  free(ks->id);
  free(ks);
}

/* ---- the model ---------------------------------------------------------------------------- */

static unsigned in_dim(const model_t *m) { return m->dims[0]; }
static unsigned out_dim(const model_t *m) { return m->dims[m->nlayers]; }
static size_t row_in(const model_t *m) { return in_dim(m) * sizeof(float); }
static size_t row_out(const model_t *m) { return out_dim(m) * sizeof(float); }

/* ---- paths -------------------------------------------------------------------------------- */

static bool eat(const char **p, const char *end, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(end - *p) < n || memcmp(*p, word, n) != 0)
    return false;
  *p += n;
  return true;
}

/* "/{segment}": its text in [*start, *p) once *p moved past it; false when there is none. */
static bool segment(const char **p, const char *end, const char **start) {
  if (*p >= end || **p != '/')
    return false;
  *start = *p + 1;
  const char *stop = memchr(*start, '/', (size_t)(end - *start));
  *p = stop ? stop : end;
  return true;
}

/* "/{segment}" equal to want (the version). */
static bool segment_is(const char **p, const char *end, const char *want) {
  const char *start;
  return segment(p, end, &start) && (size_t)(*p - start) == strlen(want) &&
         !memcmp(start, want, strlen(want));
}

/* /v2/models/{name}[/versions/{version}][/ready|/infer], name one of the server's models */
static route_t model_route(const server_t *s, const char *p, const char *end,
                           const model_t **model) {
  const char *name;
  if (!segment(&p, end, &name) ||
      !(*model = repo_find(s->models, s->nmodels, name, (size_t)(p - name))))
    return ROUTE_V2_NO_MODEL;
  if (eat(&p, end, "/versions") && !segment_is(&p, end, VERSION))
    return ROUTE_V2_NO_MODEL;
  if (p == end)
    return ROUTE_V2_MODEL;
  if (eat(&p, end, "/ready") && p == end)
    return ROUTE_V2_MODEL_READY;
  if (eat(&p, end, "/infer") && p == end)
    return ROUTE_V2_INFER;
  return ROUTE_V2_UNKNOWN;
}

route_t kserve_route_of(const server_t *s, const char *path, size_t len, const model_t **model) {
  const char *p = path, *end = path + len;
  *model = NULL;
  if (!eat(&p, end, "/v2"))
    return ROUTE_NONE;
  if (p == end)
    return ROUTE_V2_SERVER;
  if (eat(&p, end, "/health/")) {
    if (end - p == 4 && !memcmp(p, "live", 4))
      return ROUTE_V2_LIVE;
    if (end - p == 5 && !memcmp(p, "ready", 5))
      return ROUTE_V2_READY;
    return ROUTE_V2_UNKNOWN;
  }
  if (eat(&p, end, "/models"))
    return model_route(s, p, end, model);
  return ROUTE_V2_UNKNOWN;
}

/* ---- errors and metadata ------------------------------------------------------------------ */

/* A body written with stdio into a malloc'd text; NULL without memory. */
typedef struct text {
  FILE *f;
  char *data;
  size_t len;
} text_t;

static bool text_open(text_t *t) {
  *t = (text_t){0};
  t->f = open_memstream(&t->data, &t->len);
  return t->f != NULL;
}

static char *text_close(text_t *t) {
  if (fclose(t->f) != 0) {
    free(t->data);
    return NULL;
  }
  return t->data;
}

void kserve_error(request_t *req, unsigned status, const char *message) {
  text_t t;
  char *body = NULL;
  if (text_open(&t)) {
    fputs("{\"error\":", t.f);
    json_put_string(t.f, message, strlen(message));
    fputs("}", t.f);
    body = text_close(&t);
  }
  respond_text(req, status, JSON_TYPE, body);
}

static void tensor_meta(FILE *f, const char *name, unsigned dim) {
  fprintf(f, "{\"name\":\"%s\",\"datatype\":\"FP32\",\"shape\":[-1,%u]}", name, dim);
}

/* A model's metadata: its tensors when it loaded, its load state (Triton's repository index
 * says READY or UNAVAILABLE) and, when it did not load, why. */
static void model_meta(FILE *f, const model_t *m) {
  fputs("{\"name\":", f);
  json_put_string(f, m->name, strlen(m->name));
  fputs(",\"versions\":[\"" VERSION "\"],\"platform\":\"cuv\",\"inputs\":[", f);
  if (m->ready)
    tensor_meta(f, INPUT, in_dim(m));
  fputs("],\"outputs\":[", f);
  if (m->ready)
    tensor_meta(f, OUTPUT, out_dim(m));
  fprintf(f, "],\"state\":\"%s\"", m->ready ? "READY" : "UNAVAILABLE");
  if (m->ready)
    fprintf(f, ",\"max_batch_size\":%u", m->max_batch);
  else {
    fputs(",\"reason\":", f);
    json_put_string(f, m->why, strlen(m->why));
  }
  fputs("}", f);
}

/* GET /v2, GET /v2/models/{name}[/versions/1]: what the server and the model are. */
static void metadata(request_t *req, bool model) {
  text_t t;
  if (!text_open(&t)) {
    kserve_error(req, 503, "out of memory");
    return;
  }
  if (!model) {
    fprintf(t.f, "{\"name\":\"tcp-infer\",\"version\":\"%s\",\"extensions\":"
                 "[\"binary_tensor_data\"]}", CUV_VERSION_STRING);
  } else {
    model_meta(t.f, req->model);
  }
  char *body = text_close(&t);
  if (body)
    respond_text(req, 200, JSON_TYPE, body);
  else
    kserve_error(req, 503, "out of memory");
}

/* A model that failed to load: its reason, with that status. */
static void model_not_ready(request_t *req, unsigned status) {
  char message[sizeof req->model->why + MODEL_NAME_MAX + 64];
  snprintf(message, sizeof message, "model \"%s\" is not ready (UNAVAILABLE): %s",
           req->model->name, req->model->why);
  kserve_error(req, status, message);
}

void kserve_answer(request_t *req, bool ready) {
  switch (req->route) {
  case ROUTE_V2_SERVER: metadata(req, false); break;
  case ROUTE_V2_MODEL: metadata(req, true); break;
  case ROUTE_V2_LIVE: respond_text(req, 200, JSON_TYPE, NULL); break;
  /* the protocol: 200 when ready, a 4xx when not (Triton's is 400) */
  case ROUTE_V2_MODEL_READY:
    if (!req->model->ready) {
      model_not_ready(req, 400);
      break;
    }
    __attribute__((fallthrough)); /* a loaded model is ready when the server is */
  case ROUTE_V2_READY:
    if (ready)
      respond_text(req, 200, JSON_TYPE, NULL);
    else
      kserve_error(req, 400, "not ready: no GPU worker can take work now");
    break;
  default: kserve_error(req, 404, "unknown route"); break;
  }
}

const char *kserve_status_message(route_t route, unsigned status) {
  switch (status) {
  case 404:
    return route == ROUTE_V2_NO_MODEL ? "unknown model or version: no model of that name is "
                                        "served (each is version \"" VERSION "\")"
                                      : "unknown route under /v2";
  case 405: return "method not allowed (Allow says which)";
  case 400: return "bad request: a body of 1 byte or more, and Inference-Header-Content-Length, "
                   "if sent, a number no larger than the body";
  case 411: return "an inference request needs a Content-Length";
  case 413: return "request body too large";
  default: return "server busy";
  }
}

/* ---- the head of an inference request ----------------------------------------------------- */

size_t kserve_body_max(const model_t *m) {
  /* JSON spells a float in up to about 16 characters, its comma included; 32 leaves room for
   * spaces and the rest of the document */
  return (m && m->ready ? (size_t)m->max_batch * in_dim(m) * 32 : 0) + (64u << 10);
}

unsigned kserve_head(request_t *req, const http_head_t *h) {
  if (h->chunked) { /* its size is known once it is in (kserve_infer_parse checks the rest) */
    if (h->infer_header_len == -2)
      return 400;
    req->infer_header_len = h->infer_header_len;
    req->body_max = kserve_body_max(req->model);
    req->body_cap = 4096;
    return 0;
  }
  if (!h->has_length)
    return 411;
  if (h->content_length > kserve_body_max(req->model))
    return 413;
  if (h->content_length == 0 || h->infer_header_len == -2 ||
      (h->infer_header_len >= 0 && (uint64_t)h->infer_header_len > h->content_length))
    return 400;
  req->infer_header_len = h->infer_header_len;
  req->body_cap = (size_t)h->content_length;
  return 0;
}

/* ---- parsing an inference request --------------------------------------------------------- */

typedef struct parse {
  const model_t *m;
  json_t *doc;
  char *why;
  size_t why_len;
  unsigned rows;
  const json_t *data; /* the input's "data", or NULL with binary data */
  size_t binary_size; /* the input's binary_data_size */
  bool binary_in, binary_out;
  unsigned levels;     /* --priority-levels */
  unsigned priority;   /* parameters.priority: 0 (the default level), or 1 to levels */
  uint64_t timeout_us; /* parameters.timeout: 0, none */
} parse_t;

__attribute__((format(printf, 2, 3))) static int bad(parse_t *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->why, p->why_len, fmt, ap);
  va_end(ap);
  return -1;
}

static bool is_uint(const json_t *n) {
  double v = json_number_value(n);
  return json_is_number(n) && v >= 0 && v <= 9007199254740992.0 && v == floor(v);
}

/* shape [N, the model's inputs], 1 <= N <= its max batch */
static int check_shape(parse_t *p, const json_t *shape) {
  const json_t *n0 = json_array_get(shape, 0), *n1 = json_array_get(shape, 1);
  unsigned max = p->m->max_batch, in = in_dim(p->m);
  if (json_array_size(shape) != 2 || !is_uint(n0) || !is_uint(n1))
    return bad(p, "input " INPUT ": shape must be [N, %u], two non-negative integers", in);
  double rows = json_number_value(n0), cols = json_number_value(n1);
  if (cols != in || rows < 1 || rows > max)
    return bad(p, "input " INPUT ": shape [%.0f, %.0f]: this model takes [N, %u] with N from "
               "1 to %u", rows, cols, in, max);
  p->rows = (unsigned)rows;
  return 0;
}

/* The input's binary_data_size, or its data. */
static int check_data(parse_t *p, const json_t *in) {
  const json_t *size = json_object_get(json_object_get(in, "parameters"), "binary_data_size");
  p->data = json_object_get(in, "data");
  if (size) {
    if (!is_uint(size) || json_number_value(size) != (double)p->rows * row_in(p->m))
      return bad(p, "input " INPUT ": binary_data_size must be %zu bytes for %u rows",
                 p->rows * row_in(p->m), p->rows);
    if (p->data)
      return bad(p, "input " INPUT ": both data and binary_data_size");
    p->binary_in = true;
    p->binary_size = (size_t)json_number_value(size);
    return 0;
  }
  if (!p->data)
    return bad(p, "input " INPUT ": no data (nor binary_data_size)");
  return 0;
}

static int check_input(parse_t *p, const json_t *inputs) {
  if (!json_is_array(inputs) || json_array_size(inputs) != 1)
    return bad(p, "inputs must be an array of one tensor, " INPUT);
  const json_t *in = json_array_get(inputs, 0);
  if (!json_string_is(json_object_get(in, "name"), INPUT))
    return bad(p, "unknown input: this model's input is " INPUT);
  if (!json_string_is(json_object_get(in, "datatype"), "FP32"))
    return bad(p, "input " INPUT ": datatype must be FP32");
  if (check_shape(p, json_object_get(in, "shape")) != 0)
    return -1;
  return check_data(p, in);
}

static bool flag(const json_t *params, const char *name, bool *set) {
  const json_t *v = json_object_get(params, name);
  if (!v)
    return true;
  if (!json_is_boolean(v))
    return false;
  *set = json_is_true(v);
  return true;
}

/* Top-level binary_data_output, then each requested output's binary_data. */
static int check_outputs(parse_t *p, const json_t *root) {
  if (!flag(json_object_get(root, "parameters"), "binary_data_output", &p->binary_out))
    return bad(p, "parameters.binary_data_output must be true or false");
  const json_t *outputs = json_object_get(root, "outputs");
  if (!outputs)
    return 0;
  if (!json_is_array(outputs))
    return bad(p, "outputs must be an array");
  for (size_t i = 0; i < json_array_size(outputs); i++) {
    const json_t *o = json_array_get(outputs, i);
    if (!json_string_is(json_object_get(o, "name"), OUTPUT))
      return bad(p, "unknown output: this model's output is " OUTPUT);
    if (!flag(json_object_get(o, "parameters"), "binary_data", &p->binary_out))
      return bad(p, "output " OUTPUT ": parameters.binary_data must be true or false");
  }
  return 0;
}

/* The numbers of data (nested arrays flattened, row-major) as float32; how many were read. */
static int flatten(parse_t *p, const json_t *n, float *out, size_t want, size_t *got) {
  if (json_is_array(n)) {
    for (size_t i = 0; i < json_array_size(n); i++)
      if (flatten(p, json_array_get(n, i), out, want, got) != 0)
        return -1;
    return 0;
  }
  if (!json_is_number(n))
    return bad(p, "input " INPUT ": data must hold numbers only");
  double v = json_number_value(n);
  if (!(fabs(v) < FP32_OVERFLOW))
    return bad(p, "input " INPUT ": %.9g is not a finite FP32", v);
  if (*got < want)
    out[*got] = (float)v;
  (*got)++;
  return 0;
}

/* The rows, from data or from the binary part, into rows (rows x the model's inputs). */
static int fill_rows(parse_t *p, const char *binary, size_t binary_len, float *rows) {
  size_t want = (size_t)p->rows * in_dim(p->m), got = 0;
  if (p->binary_in) {
    if (binary_len != p->binary_size)
      return bad(p, "binary data of %zu bytes after the JSON header: the input declares %zu",
                 binary_len, p->binary_size);
    memcpy(rows, binary, binary_len);
    return 0;
  }
  if (binary_len)
    return bad(p, "%zu bytes of binary data that no input declares", binary_len);
  if (flatten(p, p->data, rows, want, &got) != 0)
    return -1;
  if (got != want)
    return bad(p, "input " INPUT ": %zu values in data, the shape says %zu", got, want);
  return 0;
}

/* The schedule policy's parameters, Triton's: "priority" (1 the highest level, 0 the default)
 * and "timeout" (microseconds it may wait for the GPU; 0 none), each a non-negative integer. */
static int check_schedule(parse_t *p, const json_t *params) {
  if (params && !json_is_object(params))
    return bad(p, "parameters must be an object");
  const json_t *prio = json_object_get(params, "priority");
  const json_t *timeout = json_object_get(params, "timeout");
  if (prio && (!is_uint(prio) || json_number_value(prio) > p->levels))
    return bad(p, "parameters.priority must be an integer from 0 (the default) to %u "
               "(--priority-levels)", p->levels);
  if (timeout && !is_uint(timeout))
    return bad(p, "parameters.timeout must be a non-negative integer (microseconds; 0: none)");
  p->priority = prio ? (unsigned)json_number_value(prio) : 0;
  p->timeout_us = timeout ? (uint64_t)json_number_value(timeout) : 0;
  return 0;
}

/* The JSON header's checks: everything but the values. */
static int check_request(parse_t *p, const char *json, size_t json_len, char **id) {
  char why[JSON_WHY_LEN];
  if (!(p->doc = json_read(json, json_len, why)))
    return bad(p, "malformed JSON: %s", why);
  if (!json_is_object(p->doc))
    return bad(p, "the request must be a JSON object");
  const json_t *idn = json_object_get(p->doc, "id");
  if (idn && !json_is_string(idn))
    return bad(p, "id must be a string");
  if (check_schedule(p, json_object_get(p->doc, "parameters")) != 0 ||
      check_input(p, json_object_get(p->doc, "inputs")) != 0 || check_outputs(p, p->doc) != 0)
    return -1;
  if (idn && !(*id = strdup(json_string_value(idn))))
    return bad(p, "out of memory");
  return 0;
}

int kserve_infer_parse(loop_t *lp, request_t *req, char *why, size_t why_len) {
  parse_t p = {.m = req->model, .why = why, .why_len = why_len,
               .levels = lp->srv->priority_levels};
  if (!p.m->ready)
    return bad(&p, "model \"%s\" is not ready (UNAVAILABLE): %s", p.m->name, p.m->why);
  size_t json_len = req->infer_header_len >= 0 ? (size_t)req->infer_header_len : req->body_len;
  if (json_len > req->body_len) /* a chunked body shorter than its header (else: kserve_head) */
    return bad(&p, "Inference-Header-Content-Length %zu: the body is %zu bytes", json_len,
               req->body_len);
  char *id = NULL, *rows = NULL;
  struct kserve_req *ks = NULL;
  int rc = check_request(&p, req->body, json_len, &id);
  if (rc == 0 && (!(ks = calloc(1, sizeof *ks)) ||
                  !(rows = body_alloc(lp, (size_t)p.rows * row_in(p.m)))))
    rc = bad(&p, "out of memory");
  if (rc == 0)
    rc = fill_rows(&p, req->body + json_len, req->body_len - json_len, (float *)(void *)rows);
  json_decref(p.doc);
  if (rc != 0) {
    free(id);
    free(ks);
    body_free(lp, rows, (size_t)p.rows * row_in(p.m));
    return -1;
  }
  *ks = (struct kserve_req){.id = id, .binary_out = p.binary_out};
  body_free(lp, req->body, req->body_cap); /* the HTTP body; the rows take its place */
  req->body = rows;
  req->body_cap = req->body_len = (size_t)p.rows * row_in(p.m);
  req->batch = p.rows;
  req->priority = p.priority;
  req->deadline = p.timeout_us ? req->t_begin + p.timeout_us * 1000 : 0;
  req->infer_header_len = -1;
  req->kserve = ks;
  return 0;
}

/* ---- the response ------------------------------------------------------------------------- */

/* The JSON part: the model, the id, the output's shape and its data (or its binary size). */
static void result_json(FILE *f, const request_t *req, const float *out) {
  const struct kserve_req *ks = req->kserve;
  fputs("{\"model_name\":", f);
  json_put_string(f, req->model->name, strlen(req->model->name));
  fputs(",\"model_version\":\"" VERSION "\"", f);
  if (ks->id) {
    fputs(",\"id\":", f);
    json_put_string(f, ks->id, strlen(ks->id));
  }
  fprintf(f, ",\"outputs\":[{\"name\":\"" OUTPUT "\",\"datatype\":\"FP32\",\"shape\":[%u,%u]",
          req->batch, out_dim(req->model));
  if (ks->binary_out) {
    fprintf(f, ",\"parameters\":{\"binary_data_size\":%zu}}]}",
            req->batch * row_out(req->model));
    return;
  }
  fputs(",\"data\":[", f);
  for (size_t i = 0; i < (size_t)req->batch * out_dim(req->model); i++) {
    if (i)
      fputc(',', f);
    json_put_float(f, out[i]);
  }
  fputs("]}]}", f);
}

/* Whether every output is finite: JSON has no spelling for the infinities (FP32 inputs near
 * FLT_MAX can overflow the model), which binary outputs carry as they are. */
static bool outputs_finite(const request_t *req) {
  const float *out = req->out.data;
  for (size_t i = 0; i < (size_t)req->batch * out_dim(req->model); i++)
    if (!isfinite(out[i]))
      return false;
  return true;
}

void kserve_infer_result(request_t *req) {
  if (req->gpu_status == 0 && req->kserve && req->out.data && !req->kserve->binary_out &&
      !outputs_finite(req)) {
    cuv_output_release(&req->out);
    kserve_error(req, 500, "output " OUTPUT " holds a value that is not finite (the model "
                           "overflowed FP32), which JSON cannot spell: ask for binary_data");
    return;
  }
  if (req->gpu_status != 0 || !req->kserve || !req->out.data) {
    char message[160];
    unsigned status = gpu_failure_status(req->gpu_status);
    if (req->gpu_error)
      snprintf(message, sizeof message, "%s", req->gpu_error);
    else
      snprintf(message, sizeof message, "GPU work failed: %s (%s)",
               cuv_err_name(req->gpu_status), cuv_strerror(req->gpu_status));
    cuv_output_release(&req->out);
    kserve_error(req, status, message);
    return;
  }
  text_t t;
  char *body = NULL;
  size_t binary = req->kserve->binary_out ? req->batch * row_out(req->model) : 0, json_len = 0;
  if (text_open(&t)) {
    result_json(t.f, req, req->out.data);
    fflush(t.f);
    json_len = t.len;
    if (binary)
      fwrite(req->out.data, 1, binary, t.f);
    body = text_close(&t);
  }
  cuv_output_release(&req->out);
  if (!body) {
    kserve_error(req, 503, "out of memory");
    return;
  }
  respond_text(req, 200, binary ? "application/octet-stream" : JSON_TYPE, body);
  req->text_len = json_len + binary; /* the binary part may hold NULs */
  req->reply_json_len = binary ? json_len : 0;
}
