/* cuv_node_bench: the bench's addon. It is the package's addon, linked from the very objects an
 * install of the package compiled (build.js), with this entry in place of the package's own
 * (src/addon.c of the package): the package's exports, and beside them `baseline`, the bindings
 * the bench compares its Promises with (baseline.h). The package never carries these. */

#include "baseline.h"
#include "exports.h"

#define FN(name, fn)                                                                               \
  { name, NULL, fn, NULL, NULL, NULL, napi_enumerable, NULL }

/* The comparison bindings, as one object; NULL where Node refused one. */
static napi_value baseline_exports(napi_env env) {
  napi_value obj;
  const napi_property_descriptor props[] = {
      FN("saxpySync", cuv_node_js_saxpy_sync),
      FN("mlpSync", cuv_node_js_mlp_sync),
      FN("launchSync", cuv_node_js_launch_sync),
      FN("nopSync", cuv_node_js_nop_sync),
      FN("saxpyWork", cuv_node_js_saxpy_work),
      FN("mlpWork", cuv_node_js_mlp_work),
      FN("launchWork", cuv_node_js_launch_work),
      FN("nopWork", cuv_node_js_nop_work),
  };
  if (napi_create_object(env, &obj) != napi_ok ||
      napi_define_properties(env, obj, sizeof props / sizeof props[0], props) != napi_ok)
    return NULL;
  return obj;
}

#undef FN

/* Once per environment, as the package's entry: its exports first (its state set up), then the
 * bench's. node_api.h's macro defines functions it declares nowhere else. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
NAPI_MODULE_INIT() {
  napi_value baseline;
  if (!cuv_node_exports(env, exports))
    return NULL;
  if (!(baseline = baseline_exports(env)) ||
      napi_set_named_property(env, exports, "baseline", baseline) != napi_ok) {
    napi_throw_error(env, NULL, "cuv bench: cannot define the baseline bindings");
    return NULL;
  }
  return exports;
}
