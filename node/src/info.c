/* What the addon tells about itself and cuv (info.h). */
#include <stdio.h>
#include <uv.h>

#include "addon.h"
#include "device_buffer.h"
#include "errors.h"
#include "info.h"
#include "ptx.h"
#include "releaser.h"

static napi_value string(napi_env env, const char *text) {
  napi_value v = NULL;
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &v);
  return v;
}

napi_value cuv_node_js_driver(napi_env env, napi_callback_info info) {
  napi_value result = NULL;
  if (cuv_node_init() < 0)
    napi_get_null(env, &result);
  else
    result = string(env, cuv_driver_name());
  return result;
}

static void set_number(napi_env env, napi_value obj, const char *name, double value) {
  napi_value v;
  if (napi_create_double(env, value, &v) == napi_ok)
    napi_set_named_property(env, obj, name, v);
}

static void set_string(napi_env env, napi_value obj, const char *name, const char *value) {
  napi_value v = value ? string(env, value) : NULL;
  if (v || napi_get_null(env, &v) == napi_ok)
    napi_set_named_property(env, obj, name, v);
}

napi_value cuv_node_js_config(napi_env env, napi_callback_info info) {
  static const char *const host_sync[] = {"off", "spin", "block"};
  static const char *const submit_inline[] = {"idle", "never", "always"};
  cuv_config_t c;
  napi_value obj, yes;
  int rc = cuv_node_init(); /* a driver that did not load still leaves its configuration */
  if (cuv_config_get(&c) < 0)
    return cuv_node_throw(env, rc < 0 ? rc : CUV_EINVAL, cuv_init_error());
  if (napi_create_object(env, &obj) != napi_ok ||
      napi_get_boolean(env, c.strict_hazards, &yes) != napi_ok)
    return cuv_node_throw(env, CUV_ENOMEM, NULL);
  set_string(env, obj, "driver", c.driver);
  set_number(env, obj, "streams", c.streams);
  set_number(env, obj, "submitThreads", c.submit_threads);
  set_string(env, obj, "submitInline", submit_inline[c.submit_inline]);
  set_number(env, obj, "submitRing", c.submit_ring);
  set_number(env, obj, "spinBudgetUs", c.spin_budget_us);
  set_string(env, obj, "hostSync", host_sync[c.host_sync]);
  napi_set_named_property(env, obj, "strictHazards", yes);
  set_number(env, obj, "uvPollMaxUs", c.uv_poll_max_us);
  set_string(env, obj, "nccl", *c.nccl ? c.nccl : NULL);
  return obj;
}

napi_value cuv_node_js_device(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = cuv_node_setup(c.addon);
  return rc < 0 ? cuv_node_throw(env, rc, NULL) : string(env, cuv_device_name(c.addon->dev));
}

napi_value cuv_node_js_pending(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  napi_value result = NULL;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  napi_create_uint32(env, c.addon->bridge ? cuv_uv_pending(c.addon->bridge) : 0, &result);
  return result;
}

napi_value cuv_node_js_live_buffers(napi_env env, napi_callback_info info) {
  napi_value result = NULL;
  napi_create_uint32(env, cuv_node_buffer_live(), &result);
  return result;
}

napi_value cuv_node_js_stats(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  cuv_stats_t s;
  napi_value obj;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  cuv_stats(&s);
  const struct {
    const char *name;
    uint64_t value;
  } fields[] = {
      {"submitted", s.submitted},
      {"completed", s.completed},
      {"completedSpin", s.completed_spin},
      {"completedReactor", s.completed_reactor},
      {"completedPolled", s.completed_polled},
      {"completedHostfn", s.completed_hostfn},
      {"completedSync", s.completed_sync},
      {"fallbacks", s.fallbacks},
      {"faults", s.faults},
      {"waitsInserted", s.waits_inserted},
      {"leaked", s.leaked},
      {"inFlight", s.in_flight},
      {"engineInline", s.engine_inline},
      {"engineQueued", s.engine_queued},
      {"engineHelped", s.engine_helped},
      {"releasing", cuv_node_releasing()},
  };
  if (napi_create_object(env, &obj) != napi_ok)
    return NULL;
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    napi_value v;
    napi_create_double(env, (double)fields[i].value, &v);
    napi_set_named_property(env, obj, fields[i].name, v);
  }
  return obj;
}

napi_value cuv_node_uv_version(napi_env env) {
  char header[32];
  napi_value obj;
  snprintf(header, sizeof header, "%d.%d.%d", UV_VERSION_MAJOR, UV_VERSION_MINOR, UV_VERSION_PATCH);
  if (napi_create_object(env, &obj) != napi_ok)
    return NULL;
  napi_set_named_property(env, obj, "header", string(env, header));
  napi_set_named_property(env, obj, "runtime", string(env, uv_version_string()));
  return obj;
}

/* {module name: its text} or {module name: its origin}. */
napi_value cuv_node_ptx_table(napi_env env, bool origins) {
  napi_value obj;
  if (napi_create_object(env, &obj) != napi_ok)
    return NULL;
  for (size_t i = 0; i < cuv_node_ptx_count; i++) {
    const cuv_node_ptx_t *p = &cuv_node_ptx[i];
    napi_set_named_property(env, obj, p->name, string(env, origins ? p->origin : p->text));
  }
  return obj;
}
