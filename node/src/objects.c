/* Classes whose instances wrap a native object (objects.h). */
#include <stdio.h>

#include "errors.h"
#include "objects.h"

/* Every class's constructor: wraps what cuv_node_object_new is making, and throws for a `new`
 * from JavaScript (nothing native to wrap). */
static napi_value construct(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  void *data = NULL;
  if (!cuv_node_call_get(env, info, &c) ||
      napi_get_cb_info(env, info, NULL, NULL, NULL, &data) != napi_ok)
    return NULL;
  const cuv_node_class_t *cls = data;
  void *native = c.addon->constructing;
  c.addon->constructing = NULL;
  if (!native) {
    cuv_node_bad(&c, "%s objects come from %s", cls->name, cls->origin);
    return cuv_node_throw(env, CUV_EINVAL, c.detail);
  }
  if (napi_type_tag_object(env, c.self, &cls->tag) != napi_ok ||
      napi_wrap(env, c.self, native, cls->finalize, NULL, NULL) != napi_ok)
    return cuv_node_throw(env, CUV_ENOMEM, NULL);
  return c.self;
}

napi_value cuv_node_class_define(napi_env env, const cuv_node_class_t *cls,
                                 const napi_property_descriptor *props, size_t n, napi_ref *ref) {
  napi_value ctor;
  if (napi_define_class(env, cls->name, NAPI_AUTO_LENGTH, construct, (void *)cls, n, props,
                        &ctor) != napi_ok ||
      napi_create_reference(env, ctor, 1, ref) != napi_ok)
    return NULL;
  return ctor;
}

napi_value cuv_node_object_new(cuv_node_addon_t *a, napi_ref class_ref, void *native) {
  napi_value ctor, obj;
  a->constructing = native;
  bool made = napi_get_reference_value(a->env, class_ref, &ctor) == napi_ok &&
              napi_new_instance(a->env, ctor, 0, NULL, &obj) == napi_ok;
  a->constructing = NULL;
  return made ? obj : NULL;
}

void *cuv_node_object_get(napi_env env, napi_value value, const cuv_node_class_t *cls) {
  napi_valuetype type;
  bool tagged = false;
  void *native = NULL;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_object ||
      napi_check_object_type_tag(env, value, &cls->tag, &tagged) != napi_ok || !tagged ||
      napi_unwrap(env, value, &native) != napi_ok)
    return NULL;
  return native;
}

napi_value cuv_node_object_dispose(napi_env env, napi_callback_info info) {
  napi_value self;
  void *data = NULL;
  if (napi_get_cb_info(env, info, NULL, NULL, &self, &data) != napi_ok)
    return NULL;
  const cuv_node_class_t *cls = data;
  void *native = cuv_node_object_get(env, self, cls);
  if (!native) {
    char detail[CUV_NODE_DETAIL_MAX];
    snprintf(detail, sizeof detail, "`this` is not a %s", cls->name);
    return cuv_node_throw(env, CUV_EINVAL, detail);
  }
  cls->dispose(env, native);
  return NULL;
}
