/* The package's exports: the table naming every binding, and the set-up of one Node environment
 * (the main thread, every worker) that comes with it (instance.c). addon.c, the module's entry,
 * calls it; the bench's addon (bench/src/addon.c of the repository) does too, and adds its own
 * comparison bindings beside them. */
#include "addon.h"
#include "arrays.h"
#include "builtins.h"
#include "device_buffer.h"
#include "errors.h"
#include "exports.h"
#include "info.h"
#include "jobs.h"
#include "kernels.h"
#include "pinned.h"
#include "ptx.h"
#include "sim.h"
#include "transfers.h"

/* ---- exports ------------------------------------------------------------------------------ */

#define FN(name, fn)                                                                               \
  { name, NULL, fn, NULL, NULL, NULL, napi_enumerable, NULL }
#define VALUE(name, v)                                                                             \
  { name, NULL, NULL, NULL, NULL, v, napi_enumerable, NULL }

/* The symbol DeviceBuffers' numbers are under (handles.h), with their table. */
static napi_value handle_key(napi_env env, cuv_node_addon_t *a) {
  napi_value name, key;
  if (!(a->handles = cuv_node_handles_new()) ||
      napi_create_string_utf8(env, "cuv.handle", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_symbol(env, name, &key) != napi_ok ||
      napi_create_reference(env, key, 1, &a->handle_key) != napi_ok)
    return NULL;
  return key;
}

static napi_status define_exports(napi_env env, cuv_node_addon_t *a, napi_value exports) {
  const napi_property_descriptor props[] = {
      FN("alloc", cuv_node_js_alloc),
      FN("upload", cuv_node_js_upload),
      FN("write", cuv_node_js_write),
      FN("download", cuv_node_js_download),
      FN("pinned", cuv_node_js_pinned),
      FN("isPinned", cuv_node_js_is_pinned),
      FN("saxpy", cuv_node_js_saxpy),
      FN("mlp", cuv_node_js_mlp),
      FN("nop", cuv_node_js_nop),
      FN("loadModule", cuv_node_js_load_module),
      FN("launch", cuv_node_js_launch),
      FN("cancel", cuv_node_js_cancel),
      FN("driver", cuv_node_js_driver),
      FN("config", cuv_node_js_config),
      FN("device", cuv_node_js_device),
      FN("stats", cuv_node_js_stats),
      FN("pending", cuv_node_js_pending),
      FN("liveBuffers", cuv_node_js_live_buffers),
      VALUE("DeviceBuffer", cuv_node_buffer_class(env, a)),
      VALUE("Module", cuv_node_module_class(env, a)),
      VALUE("Kernel", cuv_node_kernel_class(env, a)),
      VALUE("sim", cuv_node_sim_exports(env)),
      VALUE("uvVersion", cuv_node_uv_version(env)),
      VALUE("ptx", cuv_node_ptx_table(env, false)),
      VALUE("ptxOrigin", cuv_node_ptx_table(env, true)),
      VALUE("handleKey", handle_key(env, a)),
  };
  for (size_t i = 0; i < sizeof props / sizeof props[0]; i++) {
    if (!props[i].method && !props[i].value)
      return napi_generic_failure;
  }
  return napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
}

#undef FN
#undef VALUE

napi_value cuv_node_exports(napi_env env, napi_value exports) {
  static const cuv_node_instance_hooks_t hooks = {cuv_node_sim_attach};
  cuv_node_addon_t *a = cuv_node_instance_new(env, &hooks);
  if (!a)
    return NULL;
  if (define_exports(env, a, exports) != napi_ok) {
    napi_throw_error(env, NULL, "cuv: cannot define the exports");
    return NULL;
  }
  return exports;
}
