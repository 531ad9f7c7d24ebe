/* TypedArrays and their element types (arrays.h). */
#include <stdint.h>
#include <string.h>

#include "arrays.h"

static const struct {
  napi_typedarray_type type;
  const char *name;
  size_t size;
} types[] = {
    {napi_int8_array, "int8", 1},
    {napi_uint8_array, "uint8", 1},
    {napi_uint8_clamped_array, "uint8clamped", 1},
    {napi_int16_array, "int16", 2},
    {napi_uint16_array, "uint16", 2},
    {napi_int32_array, "int32", 4},
    {napi_uint32_array, "uint32", 4},
    {napi_float32_array, "float32", 4},
    {napi_float64_array, "float64", 8},
    {napi_bigint64_array, "bigint64", 8},
    {napi_biguint64_array, "biguint64", 8},
};
#define NTYPES (sizeof types / sizeof types[0])

static size_t find(napi_typedarray_type type) {
  size_t i = 0;
  while (i < NTYPES && types[i].type != type)
    i++;
  return i;
}

size_t cuv_node_type_size(napi_typedarray_type type) {
  size_t i = find(type);
  return i < NTYPES ? types[i].size : 1;
}

const char *cuv_node_type_name(napi_typedarray_type type) {
  size_t i = find(type);
  return i < NTYPES ? types[i].name : "unknown";
}

bool cuv_node_type_parse(napi_env env, napi_value name, napi_typedarray_type *type) {
  char text[16];
  size_t len;
  if (napi_get_value_string_utf8(env, name, text, sizeof text, &len) != napi_ok)
    return false;
  for (size_t i = 0; i < NTYPES; i++) {
    if (strcmp(text, types[i].name) == 0) {
      *type = types[i].type;
      return true;
    }
  }
  return false;
}

bool cuv_node_array_get(napi_env env, napi_value value, cuv_node_array_t *out) {
  bool is_typed = false;
  if (napi_is_typedarray(env, value, &is_typed) != napi_ok || !is_typed ||
      napi_get_typedarray_info(env, value, &out->type, &out->length, &out->data, &out->arraybuffer,
                               &out->byte_offset) != napi_ok)
    return false;
  out->bytes = out->length * cuv_node_type_size(out->type);
  return true;
}

napi_value cuv_node_array_new(napi_env env, napi_typedarray_type type, size_t length,
                              napi_value arraybuffer) {
  napi_value array;
  if (napi_create_typedarray(env, type, length, arraybuffer, 0, &array) != napi_ok)
    return NULL;
  return array;
}

int cuv_node_alloc_args(cuv_node_call_t *c, napi_typedarray_type *type, size_t *length,
                        size_t *bytes) {
  double n = 0;
  if (!cuv_node_type_parse(c->env, c->argv[0], type))
    return cuv_node_bad(c, "the type must be a TypedArray constructor");
  if (napi_get_value_double(c->env, c->argv[1], &n) != napi_ok || !(n >= 1) ||
      n > (double)(SIZE_MAX / 8) || n != (double)(size_t)n)
    return cuv_node_bad(c, "the length must be a positive integer");
  *length = (size_t)n;
  *bytes = *length * cuv_node_type_size(*type);
  return cuv_node_setup(c->addon);
}
