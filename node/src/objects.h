/* JavaScript classes whose instances wrap a native object (DeviceBuffer, Module, Kernel): made by
 * the addon only (`new` from JavaScript throws), recognized by a type tag, and finalized when
 * collected. */
#ifndef CUV_NODE_OBJECTS_H
#define CUV_NODE_OBJECTS_H

#include "addon.h"

typedef struct cuv_node_class {
  const char *name;   /* "DeviceBuffer" */
  const char *origin; /* where instances come from ("cuv.upload or cuv.alloc"), for the error */
  napi_type_tag tag;
  napi_finalize finalize; /* frees the native object; runs also at the environment's end */
  void (*dispose)(napi_env env, void *native); /* drops what it holds; the object stays */
} cuv_node_class_t;

/* Defines the class with the methods and accessors `props`; *ref keeps its constructor. */
napi_value cuv_node_class_define(napi_env env, const cuv_node_class_t *cls,
                                 const napi_property_descriptor *props, size_t n, napi_ref *ref);
/* A new instance wrapping `native`, which its finalizer owns from then on; NULL on failure, when
 * `native` is still the caller's. */
napi_value cuv_node_object_new(cuv_node_addon_t *a, napi_ref class_ref, void *native);
/* The native object behind `value`, or NULL when value is no instance of the class. */
void *cuv_node_object_get(napi_env env, napi_value value, const cuv_node_class_t *cls);
/* The classes' dispose() method: cls->dispose on this; the property's data is the class. */
napi_value cuv_node_object_dispose(napi_env env, napi_callback_info info);
/* Its property, for a class's descriptors. */
#define CUV_NODE_DISPOSE_PROPERTY(cls)                                                             \
  { "dispose", NULL, cuv_node_object_dispose, NULL, NULL, NULL, napi_default_method, (void *)(cls) }

#endif
