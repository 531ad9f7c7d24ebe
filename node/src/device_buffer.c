/* DeviceBuffer objects (device_buffer.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "arrays.h"
#include "device_buffer.h"
#include "errors.h"
#include "objects.h"
#include "releaser.h"

static atomic_uint live;

static void drop(napi_env env, void *native) {
  cuv_node_buffer_t *b = native;
  if (!b->buf)
    return;
  int64_t ignored;
  napi_adjust_external_memory(env, -b->external, &ignored);
  cuv_node_release_buffer(b->buf); /* not here: the last reference may wait for the device */
  b->buf = NULL;
}

static void finalize(napi_env env, void *data, void *hint) {
  drop(env, data);
  cuv_node_handles_remove(data);
  free(data);
  atomic_fetch_sub(&live, 1);
}

static const cuv_node_class_t buffer_class = {"DeviceBuffer",
                                              "cuv.upload or cuv.alloc",
                                              {0x6375765f6e6f6465ull, 0x4465766963654266ull},
                                              finalize,
                                              drop};

cuv_node_buffer_t *cuv_node_buffer_of(napi_env env, napi_value value) {
  return cuv_node_object_get(env, value, &buffer_class);
}

int cuv_node_buffer_arg(cuv_node_call_t *c, size_t i, const char *what, cuv_node_buffer_t **out) {
  *out = cuv_node_handles_find(c->addon->handles, c->env, c->argv[i]);
  if (!*out)
    *out = cuv_node_buffer_of(c->env, c->argv[i]);
  if (!*out)
    return cuv_node_bad(c, "%s must be a DeviceBuffer", what);
  return (*out)->buf ? 0 : cuv_node_bad(c, "%s was disposed", what);
}

/* Numbers b and puts its number on obj under the addon's symbol, read-only and not enumerable.
 * Without memory it stays unnumbered: index.js then passes the object itself. */
static void give_number(cuv_node_addon_t *a, napi_value obj, cuv_node_buffer_t *b) {
  napi_value key, number;
  if (!a->handles || napi_get_reference_value(a->env, a->handle_key, &key) != napi_ok ||
      !cuv_node_handles_add(a->handles, b))
    return;
  napi_property_descriptor prop = {NULL, key, NULL, NULL, NULL, NULL, napi_default, NULL};
  if (napi_create_uint32(a->env, b->number, &number) == napi_ok) {
    prop.value = number;
    napi_define_properties(a->env, obj, 1, &prop);
  }
}

napi_value cuv_node_buffer_new(cuv_node_addon_t *a, cuv_buffer_t *buf, napi_typedarray_type type,
                               size_t length) {
  cuv_node_buffer_t *b = calloc(1, sizeof *b);
  napi_value obj = b ? cuv_node_object_new(a, a->buffer_class, b) : NULL;
  if (!obj) {
    free(b);
    cuv_node_release_buffer(buf);
    return NULL;
  }
  int64_t ignored;
  *b = (cuv_node_buffer_t){buf, type, length, (int64_t)cuv_buffer_size(buf), NULL, 0};
  napi_adjust_external_memory(a->env, b->external, &ignored);
  atomic_fetch_add(&live, 1);
  give_number(a, obj, b);
  return obj;
}

unsigned cuv_node_buffer_live(void) { return atomic_load(&live); }

/* ---- methods and accessors ---------------------------------------------------------------- */

static cuv_node_buffer_t *self(napi_env env, napi_callback_info info, cuv_node_call_t *c) {
  if (!cuv_node_call_get(env, info, c))
    return NULL;
  cuv_node_buffer_t *b = cuv_node_buffer_of(env, c->self);
  if (!b)
    cuv_node_throw(env, CUV_EINVAL, "`this` is not a DeviceBuffer");
  return b;
}

static const struct {
  const char *name;
  int mode;
} hazard_modes[] = {
    {"order", CUV_HAZARD_ORDER}, {"strict", CUV_HAZARD_STRICT}, {"none", CUV_HAZARD_NONE}};

/* setHazardMode("order" | "strict" | "none"): cuv_buffer_set_hazard_mode; returns this. */
static napi_value set_hazard_mode(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  char name[8] = "";
  cuv_node_buffer_t *b = self(env, info, &c);
  if (!b)
    return NULL;
  napi_get_value_string_utf8(env, c.argv[0], name, sizeof name, NULL);
  for (size_t i = 0; i < sizeof hazard_modes / sizeof hazard_modes[0]; i++) {
    if (strcmp(name, hazard_modes[i].name) == 0) {
      int rc = b->buf ? cuv_buffer_set_hazard_mode(b->buf, hazard_modes[i].mode) : CUV_EINVAL;
      return rc < 0 ? cuv_node_throw(env, rc, b->buf ? NULL : "the DeviceBuffer was disposed")
                    : c.self;
    }
  }
  return cuv_node_throw(env, CUV_EINVAL, "the mode must be \"order\", \"strict\" or \"none\"");
}

static napi_value number(napi_env env, double value) {
  napi_value v = NULL;
  napi_create_double(env, value, &v);
  return v;
}

static napi_value get_length(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  cuv_node_buffer_t *b = self(env, info, &c);
  return b ? number(env, (double)b->length) : NULL;
}

static napi_value get_byte_length(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  cuv_node_buffer_t *b = self(env, info, &c);
  return b ? number(env, (double)(b->length * cuv_node_type_size(b->type))) : NULL;
}

static napi_value get_type(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  napi_value v = NULL;
  cuv_node_buffer_t *b = self(env, info, &c);
  if (b)
    napi_create_string_utf8(env, cuv_node_type_name(b->type), NAPI_AUTO_LENGTH, &v);
  return v;
}

static napi_value get_disposed(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  napi_value v = NULL;
  cuv_node_buffer_t *b = self(env, info, &c);
  if (b)
    napi_get_boolean(env, b->buf == NULL, &v);
  return v;
}

napi_value cuv_node_buffer_class(napi_env env, cuv_node_addon_t *a) {
#define METHOD(name, fn)                                                                           \
  { name, NULL, fn, NULL, NULL, NULL, napi_default_method, NULL }
#define GETTER(name, fn)                                                                           \
  { name, NULL, NULL, fn, NULL, NULL, napi_configurable, NULL }
  const napi_property_descriptor props[] = {
      CUV_NODE_DISPOSE_PROPERTY(&buffer_class),
      METHOD("setHazardMode", set_hazard_mode),
      GETTER("length", get_length),
      GETTER("byteLength", get_byte_length),
      GETTER("type", get_type),
      GETTER("disposed", get_disposed),
  };
#undef METHOD
#undef GETTER
  return cuv_node_class_define(env, &buffer_class, props, sizeof props / sizeof props[0],
                               &a->buffer_class);
}
