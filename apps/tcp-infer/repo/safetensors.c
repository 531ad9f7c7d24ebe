/* tcp-infer: safetensors, the weights format of Hugging Face's safetensors library: an unsigned
 * 64-bit little-endian N, N bytes of a JSON object (per tensor: "dtype", "shape",
 * "data_offsets" [begin, end) relative to the data; an optional "__metadata__" of strings),
 * then the data. A file is read whole and checked before a value is copied: a file from
 * anywhere is refused with the reason rather than half-loaded. Only F32 is served (the kernels'
 * type); the values are copied out, since the data need not be 4-byte aligned in the file. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

#define HEADER_MAX (100u << 20) /* the reference implementation's bound on the header */
#define FILE_MAX ((size_t)16 << 30)

typedef struct reader {
  char *why;
  size_t why_len;
  const unsigned char *data; /* after the header */
  size_t data_len;
} reader_t;

/* A tensor found in the header: its bytes in the data and which wanted tensor it is. */
typedef struct span {
  const char *name;
  size_t begin, end;
  size_t want;
} span_t;

__attribute__((format(printf, 2, 3))) static int bad(reader_t *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->why, r->why_len, fmt, ap);
  va_end(ap);
  return -1;
}

/* The whole file; NULL and why when it cannot be read. */
static unsigned char *read_file(reader_t *r, const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    bad(r, "%s: cannot open", path);
    return NULL;
  }
  unsigned char *buf = NULL;
  long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (size < 0 || (size_t)size > FILE_MAX)
    bad(r, "%s: cannot tell its size, or larger than %zu bytes", path, FILE_MAX);
  else if (fseek(f, 0, SEEK_SET) != 0 || !(buf = malloc((size_t)size + 1)))
    bad(r, "%s: out of memory", path);
  else if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
    bad(r, "%s: read error", path);
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = size > 0 ? (size_t)size : 0;
  return buf;
}

static bool is_size(const json_t *v) { return json_is_integer(v) && json_integer_value(v) >= 0; }

/* "shape": non-negative integers; their product in *count (elements). */
static int read_shape(reader_t *r, const char *name, const json_t *shape, size_t dims[],
                      unsigned *ndim, size_t *count) {
  if (!json_is_array(shape) || json_array_size(shape) > SAFETENSORS_MAX_DIMS)
    return bad(r, "tensor %s: shape must be an array of at most %u sizes", name,
               SAFETENSORS_MAX_DIMS);
  *ndim = (unsigned)json_array_size(shape);
  *count = 1;
  for (unsigned i = 0; i < *ndim; i++) {
    const json_t *d = json_array_get(shape, i);
    if (!is_size(d) || (uint64_t)json_integer_value(d) > (1u << 30))
      return bad(r, "tensor %s: shape[%u] is not a size", name, i);
    dims[i] = (size_t)json_integer_value(d);
    *count *= dims[i];
    if (*count > (size_t)1 << 36) /* more than any file read here holds; no overflow below */
      return bad(r, "tensor %s: shape of more than 2^36 values", name);
  }
  return 0;
}

static void shape_text(char *out, size_t len, const size_t dims[], unsigned ndim) {
  size_t used = (size_t)snprintf(out, len, "[");
  for (unsigned i = 0; i < ndim && used < len; i++)
    used += (size_t)snprintf(out + used, len - used, "%s%zu", i ? ", " : "", dims[i]);
  if (used < len)
    snprintf(out + used, len - used, "]");
}

/* Which wanted tensor name is; n when none. */
static size_t wanted(const st_want_t *want, size_t n, const char *name) {
  size_t i = 0;
  while (i < n && strcmp(want[i].name, name) != 0)
    i++;
  return i;
}

static int check_shape(reader_t *r, const st_want_t *w, const size_t dims[], unsigned ndim) {
  bool same = ndim == w->ndim;
  for (unsigned i = 0; same && i < ndim; i++)
    same = dims[i] == w->shape[i];
  if (same)
    return 0;
  char got[96], exp[96];
  shape_text(got, sizeof got, dims, ndim);
  shape_text(exp, sizeof exp, w->shape, w->ndim);
  return bad(r, "tensor %s: shape %s, the config wants %s", w->name, got, exp);
}

/* One entry of the header: an F32 tensor of a wanted name and shape, inside the data. */
static int read_tensor(reader_t *r, const char *name, const json_t *t, const st_want_t *want,
                       size_t n, span_t *span) {
  const json_t *dtype = json_object_get(t, "dtype"), *offs = json_object_get(t, "data_offsets");
  size_t dims[SAFETENSORS_MAX_DIMS] = {0}, count = 0;
  unsigned ndim = 0;
  if (!json_is_object(t) || !json_is_string(dtype))
    return bad(r, "tensor %s: no dtype", name);
  if (strcmp(json_string_value(dtype), "F32") != 0)
    return bad(r, "tensor %s: dtype %s, only F32 is served", name, json_string_value(dtype));
  if (read_shape(r, name, json_object_get(t, "shape"), dims, &ndim, &count) != 0)
    return -1;
  if (!json_is_array(offs) || json_array_size(offs) != 2 || !is_size(json_array_get(offs, 0)) ||
      !is_size(json_array_get(offs, 1)))
    return bad(r, "tensor %s: data_offsets must be [begin, end], two sizes", name);
  uint64_t begin = (uint64_t)json_integer_value(json_array_get(offs, 0));
  uint64_t end = (uint64_t)json_integer_value(json_array_get(offs, 1));
  if (begin > end || end > r->data_len)
    return bad(r,
               "tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] out of range: the data "
               "holds %zu bytes (a truncated or corrupt file)",
               name, begin, end, r->data_len);
  if (end - begin != (uint64_t)count * sizeof(float))
    return bad(r, "tensor %s: its shape is %zu bytes of F32, its data_offsets span %" PRIu64, name,
               count * sizeof(float), end - begin);
  *span = (span_t){
      .name = name, .begin = (size_t)begin, .end = (size_t)end, .want = wanted(want, n, name)};
  if (span->want == n)
    return bad(r, "unexpected tensor %s", name);
  return check_shape(r, &want[span->want], dims, ndim);
}

static int by_begin(const void *a, const void *b) {
  const span_t *x = a, *y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* The tensors tile the data: in order of their offsets, each begins where the one before ended
 * (none overlaps another, no byte belongs to none), the last ends with the data. */
static int check_tiling(reader_t *r, span_t *spans, size_t n) {
  qsort(spans, n, sizeof *spans, by_begin);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    if (spans[i].begin < at)
      return bad(r, "tensors %s and %s overlap", spans[i - 1].name, spans[i].name);
    if (spans[i].begin > at)
      return bad(r, "bytes %zu to %zu of the data belong to no tensor", at, spans[i].begin);
    at = spans[i].end;
  }
  if (at != r->data_len)
    return bad(r, "the data holds %zu bytes after the last tensor", r->data_len - at);
  return 0;
}

/* Every entry of the header read into spans (one per wanted tensor, each once). */
static int read_header(reader_t *r, const json_t *root, const st_want_t *want, size_t n,
                       span_t *spans) {
  const char *name;
  const json_t *t;
  size_t found = 0;
  bool *seen = calloc(n ? n : 1, sizeof *seen);
  if (!seen)
    return bad(r, "out of memory");
  int rc = json_is_object(root) ? 0 : bad(r, "the header is not a JSON object");
  json_object_foreach((json_t *)root, name, t) {
    if (rc != 0)
      break;
    if (!strcmp(name, "__metadata__"))
      continue;
    if (found == n) /* more entries than wanted: the one past them is unexpected */
      rc = wanted(want, n, name) == n ? bad(r, "unexpected tensor %s", name)
                                      : bad(r, "tensor %s given twice", name);
    else if ((rc = read_tensor(r, name, t, want, n, &spans[found])) == 0 && seen[spans[found].want])
      rc = bad(r, "tensor %s given twice", name);
    if (rc == 0)
      seen[spans[found++].want] = true;
  }
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (!seen[i])
      rc = bad(r, "missing tensor %s", want[i].name);
  free(seen);
  return rc == 0 ? check_tiling(r, spans, n) : rc;
}

/* The header's length and its JSON, checked against the file's size. */
static json_t *parse_header(reader_t *r, const unsigned char *buf, size_t len) {
  if (len < 8) {
    bad(r, "truncated: %zu bytes, not even the 8-byte header length", len);
    return NULL;
  }
  uint64_t hlen = 0;
  for (unsigned i = 0; i < 8; i++)
    hlen |= (uint64_t)buf[i] << (8 * i);
  if (hlen > len - 8 || hlen > HEADER_MAX) {
    bad(r,
        "truncated or corrupt: a header of %" PRIu64 " bytes, the file has %zu after the "
        "length (at most %u)",
        hlen, len - 8, HEADER_MAX);
    return NULL;
  }
  json_error_t err;
  json_t *root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &err);
  if (!root)
    bad(r, "bad JSON header: %s (at byte %d of the header)", err.text, err.position);
  r->data = buf + 8 + hlen;
  r->data_len = len - 8 - (size_t)hlen;
  return root;
}

/* A tensor's values into its dst; each must be finite (a NaN or an infinity in a weight would
 * make every answer through it one that JSON cannot carry). */
static int copy_finite(reader_t *r, const st_want_t *w, const unsigned char *from, size_t count) {
  memcpy(w->dst, from, count * sizeof(float));
  for (size_t i = 0; i < count; i++)
    if (!isfinite(w->dst[i]))
      return bad(r, "tensor %s: value %zu is not finite", w->name, i);
  return 0;
}

int safetensors_load(const char *path, const st_want_t *want, size_t n, char *why, size_t why_len) {
  reader_t r = {.why = why, .why_len = why_len};
  if (!path || (!want && n) || !why || !why_len)
    return -1;
  size_t len = 0;
  unsigned char *buf = read_file(&r, path, &len);
  if (!buf)
    return -1;
  json_t *root = parse_header(&r, buf, len);
  span_t *spans = calloc(n ? n : 1, sizeof *spans);
  int rc = root && spans ? read_header(&r, root, want, n, spans)
           : root        ? bad(&r, "out of memory")
                         : -1;
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = copy_finite(&r, &want[spans[i].want], r.data + spans[i].begin,
                     (spans[i].end - spans[i].begin) / sizeof(float));
  free(spans);
  json_decref(root);
  free(buf);
  return rc;
}
