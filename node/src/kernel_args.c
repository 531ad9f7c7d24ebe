/* Typed kernel arguments from JavaScript (kernel_args.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device_buffer.h"
#include "kernel_args.h"

enum { I8, U8, I16, U16, I32, U32, I64, U64, F32, F64, READ, WRITE, RW, NKINDS };

static const struct {
  const char *name;
  size_t size;     /* scalars: bytes */
  double min, max; /* integers: the range a JavaScript number may take */
} kinds_info[NKINDS] = {
    [I8] = {"i8", 1, INT8_MIN, INT8_MAX},
    [U8] = {"u8", 1, 0, UINT8_MAX},
    [I16] = {"i16", 2, INT16_MIN, INT16_MAX},
    [U16] = {"u16", 2, 0, UINT16_MAX},
    [I32] = {"i32", 4, INT32_MIN, INT32_MAX},
    [U32] = {"u32", 4, 0, UINT32_MAX},
    [I64] = {"i64", 8, -9007199254740991.0, 9007199254740991.0}, /* safe integers; BigInt too */
    [U64] = {"u64", 8, 0, 9007199254740991.0},
    [F32] = {"f32", 4, 0, 0},
    [F64] = {"f64", 8, 0, 0},
    [READ] = {"read", 0, 0, 0},
    [WRITE] = {"write", 0, 0, 0},
    [RW] = {"rw", 0, 0, 0},
};

int cuv_node_signature_parse(cuv_node_call_t *c, size_t i, unsigned char **kinds, size_t *n) {
  bool is_array = false;
  uint32_t len = 0;
  *kinds = NULL;
  if (napi_is_array(c->env, c->argv[i], &is_array) != napi_ok || !is_array ||
      napi_get_array_length(c->env, c->argv[i], &len) != napi_ok)
    return cuv_node_bad(c, "the signature must be an array of parameter kinds");
  if (len && !(*kinds = malloc(len)))
    return CUV_ENOMEM;
  for (uint32_t k = 0; k < len; k++) {
    napi_value item;
    char name[8] = "";
    napi_get_element(c->env, c->argv[i], k, &item);
    napi_get_value_string_utf8(c->env, item, name, sizeof name, NULL);
    unsigned kind = 0;
    while (kind < NKINDS && strcmp(name, kinds_info[kind].name) != 0)
      kind++;
    if (kind == NKINDS) {
      free(*kinds);
      *kinds = NULL;
      return cuv_node_bad(c,
                          "signature[%u] is not a kind (i8 u8 i16 u16 i32 u32 i64 u64 f32 f64 "
                          "read write rw)",
                          k);
    }
    (*kinds)[k] = (unsigned char)kind;
  }
  *n = len;
  return 0;
}

/* A 64-bit integer from a BigInt (lossless) or a safe-integer number. */
static bool get_int64(napi_env env, napi_value value, unsigned kind, cuv_node_scalar_t *out) {
  napi_valuetype type;
  bool lossless = false;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_bigint)
    return false;
  if (kind == I64)
    return napi_get_value_bigint_int64(env, value, &out->i64, &lossless) == napi_ok && lossless;
  return napi_get_value_bigint_uint64(env, value, &out->u64, &lossless) == napi_ok && lossless;
}

static void store_integer(unsigned kind, double v, cuv_node_scalar_t *out) {
  switch (kind) {
  case I8: out->i8 = (int8_t)v; break;
  case U8: out->u8 = (uint8_t)v; break;
  case I16: out->i16 = (int16_t)v; break;
  case U16: out->u16 = (uint16_t)v; break;
  case I32: out->i32 = (int32_t)v; break;
  case U32: out->u32 = (uint32_t)v; break;
  case I64: out->i64 = (int64_t)v; break;
  default: out->u64 = (uint64_t)v;
  }
}

static int scalar(cuv_node_call_t *c, size_t k, napi_value value, unsigned kind,
                  cuv_node_scalar_t *out) {
  double v;
  if ((kind == I64 || kind == U64) && get_int64(c->env, value, kind, out))
    return 0;
  if (napi_get_value_double(c->env, value, &v) != napi_ok)
    return cuv_node_bad(c, "args[%zu] (%s) must be a number", k, kinds_info[kind].name);
  if (kind == F32 || kind == F64) {
    if (kind == F32)
      out->f32 = (float)v;
    else
      out->f64 = v;
    return 0;
  }
  if (!(v >= kinds_info[kind].min && v <= kinds_info[kind].max) || v != trunc(v))
    return cuv_node_bad(c, "args[%zu] (%s) must be an integer from %.0f to %.0f%s", k,
                        kinds_info[kind].name, kinds_info[kind].min, kinds_info[kind].max,
                        kind == I64 || kind == U64 ? " (or a BigInt)" : "");
  store_integer(kind, v, out);
  return 0;
}

/* {buffer, byteOffset}: the DeviceBuffer at `buffer` (NULL when it is none) and the offset
 * (0 when absent; -1 when it is not a non-negative integer). */
static cuv_node_buffer_t *buffer_view(napi_env env, napi_value value, int64_t *offset) {
  napi_value inner, off;
  napi_valuetype type = napi_undefined;
  cuv_node_buffer_t *b = NULL;
  *offset = 0;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_object ||
      napi_get_named_property(env, value, "buffer", &inner) != napi_ok ||
      !(b = cuv_node_buffer_of(env, inner)) ||
      napi_get_named_property(env, value, "byteOffset", &off) != napi_ok ||
      napi_typeof(env, off, &type) != napi_ok || type == napi_undefined)
    return b;
  if (napi_get_value_int64(env, off, offset) != napi_ok || *offset < 0)
    *offset = -1;
  return b;
}

/* A buffer argument: a DeviceBuffer, or {buffer, byteOffset}. */
static int buffer(cuv_node_call_t *c, size_t k, napi_value value, unsigned kind, cuv_arg_t *arg) {
  int64_t offset = 0;
  cuv_node_buffer_t *b = cuv_node_buffer_of(c->env, value);
  if (!b && (b = buffer_view(c->env, value, &offset)) && offset < 0)
    return cuv_node_bad(c, "args[%zu].byteOffset must be a non-negative integer", k);
  if (!b)
    return cuv_node_bad(c, "args[%zu] (%s) must be a DeviceBuffer or {buffer, byteOffset}", k,
                        kinds_info[kind].name);
  if (!b->buf)
    return cuv_node_bad(c, "args[%zu] was disposed", k);
  static const enum cuv_arg_kind access[] = {
      [READ] = CUV_ARG_KIND_READ, [WRITE] = CUV_ARG_KIND_WRITE, [RW] = CUV_ARG_KIND_RW};
  *arg = CUV_ARG_READ_AT(b->buf, (size_t)offset);
  arg->kind = access[kind];
  return 0;
}

int cuv_node_args_convert(cuv_node_call_t *c, size_t i, const unsigned char *kinds, size_t n,
                          cuv_arg_t *args, cuv_node_scalar_t *values) {
  bool is_array = false;
  uint32_t len = 0;
  if (napi_is_array(c->env, c->argv[i], &is_array) != napi_ok || !is_array ||
      napi_get_array_length(c->env, c->argv[i], &len) != napi_ok)
    return cuv_node_bad(c, "the arguments must be an array");
  if (len != n) /* as cuv_launch answers a wrong count */
    return cuv_node_fail(c, CUV_EARGS, "%u arguments for a signature of %zu", len, n);
  for (size_t k = 0; k < n; k++) {
    napi_value value;
    int rc = napi_get_element(c->env, c->argv[i], (uint32_t)k, &value) == napi_ok ? 0 : CUV_EINVAL;
    if (rc == 0 && kinds[k] >= READ)
      rc = buffer(c, k, value, kinds[k], &args[k]);
    else if (rc == 0 && (rc = scalar(c, k, value, kinds[k], &values[k])) == 0)
      args[k] = (cuv_arg_t)CUV_ARG_SCALAR(&values[k], kinds_info[kinds[k]].size);
    if (rc < 0)
      return rc;
  }
  return 0;
}
